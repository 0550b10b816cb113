"""A Hydra multirun gives every job a run_dir of its own, and Hydra writes nothing elsewhere.

The sweep goes through train.py's real Hydra entry point and conf/config.yaml, in a fresh
process, with the Trainer replaced by a stand-in that records the config it gets: no Ray, no
model, a few seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conf.config import job_run_dir

REPO = Path(__file__).resolve().parent.parent

# Run as a script in the test's directory: train.main() with the Trainer stubbed out.
_SWEEP = """
import json, sys
sys.path.insert(0, {repo!r})
import train
from conf import config

class Recorder:
    def __init__(self, cfg):
        self.run_dir = config.prepare_run_dir(cfg.run_dir)
        with open("jobs.jsonl", "a") as f:
            f.write(json.dumps({{"seed": cfg.seed, "run_dir": cfg.run_dir}}) + "\\n")
    def fit(self):
        pass
    def shutdown(self):
        pass

train.Trainer = Recorder
sys.argv = ["train.py", *sys.argv[1:]]
train.main()
"""


def _train(tmp_path: Path, *args: str) -> tuple[list[dict], subprocess.CompletedProcess]:
    script = tmp_path / "sweep.py"
    script.write_text(_SWEEP.format(repo=str(REPO)))
    proc = subprocess.run(
        [sys.executable, str(script), *args], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = [json.loads(line) for line in (tmp_path / "jobs.jsonl").read_text().splitlines()]
    return jobs, proc


def test_job_run_dir():
    assert job_run_dir("runs/default", None) == "runs/default"
    assert job_run_dir("runs/default", 0) == "runs/default/0"
    assert job_run_dir("/fsx/runs/p5_512", 12) == "/fsx/runs/p5_512/12"


def test_each_job_of_a_multirun_has_its_own_run_dir(tmp_path):
    jobs, proc = _train(tmp_path, "-m", "seed=0,1,2", "run_dir=runs/sweep")
    assert jobs == [{"seed": s, "run_dir": f"runs/sweep/{s}"} for s in (0, 1, 2)]
    assert "[setup] multirun job 1: run_dir=runs/sweep/1" in proc.stdout + proc.stderr
    # Each job's config is saved in its own directory, with its own run_dir.
    for s in (0, 1, 2):
        assert f"run_dir: runs/sweep/{s}\n" in (tmp_path / "runs" / "sweep" / str(s) / "config.yaml").read_text()
    # Hydra made no multirun/<date>/<time> folder in the working directory: its record of the
    # sweep is beside the jobs.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.jsonl", "runs", "sweep.py"]
    assert sorted(p.name for p in (tmp_path / "runs" / "sweep").iterdir()) == ["0", "1", "2", "multirun.yaml"]
    assert "- seed=0,1,2" in (tmp_path / "runs" / "sweep" / "multirun.yaml").read_text()


def test_a_single_run_keeps_its_run_dir(tmp_path):
    jobs, _ = _train(tmp_path, "seed=3")
    assert jobs == [{"seed": 3, "run_dir": "runs/default"}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.jsonl", "runs", "sweep.py"]
