"""`python -m actors.evaluate mode=agent` (actors/eval/episodes.py) on the tiny model: one greedy
episode per validated demo instance in a sandbox session, on one engine in this process; the
files it writes and what they count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conf.config import ModelConfig
from conf.eval import parse_args
from learner.models import resolve
from reward.execution import sandbox

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}")


@pytest.fixture(scope="module")
def tiny() -> str:
    return resolve(ModelConfig(name="tiny"))


def test_the_tiny_model_as_an_agent_writes_episodes_predictions_and_a_summary(tiny, tmp_path):
    out = tmp_path / "eval"
    cmd = [sys.executable, "-m", "actors.evaluate", "mode=agent", f"model.name={tiny}", "data=demo", "limit=2"]
    cmd += [
        "max_turns=2",
        "rollout.max_new_tokens=32",
        "rollout.num_actors=0",
        "reward.execution.num_runners=0",
        f"out={out}",
    ]
    proc = subprocess.run(
        cmd, cwd=REPO, env=dict(os.environ, PYTHONUNBUFFERED="1"), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "agent" and summary["instances"] == 2 and summary["resolve_rate"] == 0.0
    # A random model writes no action: both episodes run out of turns, their patches empty.
    assert summary["episodes"]["ended_by"] == {"max_turns": 2} and summary["episodes"]["turns_max"] == 2
    assert summary["episodes"]["format_errors"] == 4 and summary["engines"]["where"] == "in-process"
    # No command ran: the episodes' time was the engine's, which was busy while they waited.
    assert summary["episodes"]["command_s_mean"] == 0.0 and summary["episodes"]["generation_s_mean"] > 0.0
    assert 0.0 < summary["episodes"]["engine_busy_fraction"] <= 1.0
    assert set(summary["seconds"]) == {"engine_start", "generate", "tests", "total"}
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [len(e["turns"]) for e in episodes] == [2, 2] and all(
        t["kind"] == "invalid" for e in episodes for t in e["turns"]
    )
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["model_patch"] for p in predictions] == ["", ""]
    assert json.loads((out / "report.json").read_text())["empty_patch"] == 2


def test_agent_arguments(tiny):
    cfg = parse_args(
        ["mode=agent", f"model.name={tiny}", "max_turns=5", "command_timeout_s=2", "reward.execution.num_runners=0"]
    )
    assert (cfg.mode, cfg.max_turns, cfg.command_timeout_s, cfg.reward.execution.num_runners) == ("agent", 5, 2.0, 0)
    with pytest.raises(ValueError, match="max_turns must be >= 1"):
        parse_args(["mode=agent", f"model.name={tiny}", "max_turns=0"])
