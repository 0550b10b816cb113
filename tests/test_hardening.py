"""Nothing lost, nothing leaked: each defect of the fault-and-fuzz pass, as a test that failed
before its fix. The ones that need a running trainer are at the end; they share one run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conf.io import OutputError, atomic_write, check_output
from data.demo import demo_parquet_path
from data.loader import InstanceLoader
from data.schema import INSTANCE_SCHEMA, SchemaError
from data.shards import MANIFEST, check_shard
from reward.score import score_line
from reward.workers import LimitedPool

REPO = Path(__file__).resolve().parent.parent


def _run(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, **(env or {})),
    )


def _one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), proc.stderr


# -- 1. outputs: never the input, never half written ------------------------------------------------


def test_reward_score_refuses_to_write_over_its_input(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "oracle_patch": "", "pred_patch": ""}) + "\n")
    before = src.read_bytes()
    (tmp_path / "link.jsonl").symlink_to(src)
    for out in (src, tmp_path / "link.jsonl", Path(f"{tmp_path}/./in.jsonl")):
        proc = _run("-m", "reward.score", "--input", str(src), "--output", str(out))
        _one_line_error(proc, "is the input")
    assert src.read_bytes() == before  # it used to be emptied, exit 0
    _one_line_error(_run("-m", "reward.score", "--input", str(src), "--output", str(tmp_path)), "is a directory")
    _one_line_error(
        _run("-m", "reward.score", "--input", str(src), "--output", "/no/such/dir/o.jsonl"), "does not exist"
    )


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path):
    out = tmp_path / "summary.json"
    out.write_text("old")
    with pytest.raises(KeyboardInterrupt), atomic_write(out) as f:
        f.write("half of the new")
        raise KeyboardInterrupt
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
    with atomic_write(out) as f:
        f.write("new")
    assert out.read_text() == "new"
    with pytest.raises(OutputError, match="is the input"):
        check_output(out, [out])


# -- 2. one hostile line cannot stall the file -----------------------------------------------------


def _replace_whole_file_line(lines: int) -> str:
    old = "".join(f"x{j} = {j}\n" for j in range(lines))
    oracle = old.replace("x5 = 5\n", "x5 = 6\n")
    new = "\n".join(f"y{j} = {j * 7919 % 104729}" for j in range(lines))
    output = f"<think>t</think><solution>```python\n### a.py\n<<<<<<< SEARCH\n{old.rstrip()}\n=======\n{new}\n>>>>>>> REPLACE\n```</solution>"
    return json.dumps(
        {"id": "hostile", "code_context": {"a.py": old}, "oracle_new_content": {"a.py": oracle}, "output": output}
    )


def test_a_line_that_replaces_a_20k_line_file_does_not_stall_the_command(tmp_path):
    # 0.7 MB: without the trainer's time cap the similarity alone ran for minutes and every
    # later line waited behind it (results are written in order).
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(
        _replace_whole_file_line(20_000) + "\n" + json.dumps({"id": 2, "oracle_patch": "", "pred_patch": ""}) + "\n"
    )
    proc = _run("-m", "reward.score", "--input", str(src), "--output", str(out), timeout=120)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["hostile", 2] and 0.0 <= records[0]["reward"] < 0.01


def _sleepy(item: float) -> float:
    time.sleep(item)
    return item


def test_a_line_over_the_line_timeout_is_given_up_and_the_rest_scores():
    pool = LimitedPool(_sleepy, workers=2, timeout_s=1.0)
    try:
        out = list(pool.map([0.0, 60.0, 0.1, 0.0, 60.0, 0.2], on_limit=lambda item, why: f"{item} {why}"))
    finally:
        pool.close()
    late = "60.0 took longer than 1 s"
    assert out == [0.0, late, 0.1, 0.0, late, 0.2] and pool.timed_out == 2


def test_deeply_nested_json_is_bad_json_not_an_internal_error():
    record = score_line("[" * 100_000 + "]" * 100_000)
    assert record == {"id": None, "reward": None, "error": "line: bad JSON (nested too deeply)"}


# -- 3. unknown config keys, with + or not -------------------------------------------------------


@pytest.mark.parametrize(
    "override, message",
    [
        ("+trainer.bogus=1", "trainer.bogus: not a config key"),
        (
            "+trainer.step=10",
            "trainer.step: not a config key (conf/config.py lists them all); did you mean trainer.steps?",
        ),
        ("+nonsense=1", "nonsense: not a config key"),
    ],
)
def test_keys_added_with_plus_are_refused_with_the_closest_key(override, message):
    from hydra import compose, initialize

    from conf import config

    config.register()
    with initialize(config_path="../conf", version_base=None):
        composed = compose("config", overrides=[override])
    with pytest.raises(config.ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        config.load(composed)


# -- 5. bad data is found before anything starts ---------------------------------------------------


def _tokenizer():
    class Chars:
        def apply_chat_template(self, messages, add_generation_prompt, tokenize):
            return [ord(c) % 256 for m in messages for c in m["content"]]

    return Chars()


def test_truncated_wrong_type_and_null_shards_are_named_when_the_loader_is_built(tmp_path):
    good = demo_parquet_path().read_bytes()
    (tmp_path / "truncated.parquet").write_bytes(good[: len(good) // 2])
    with pytest.raises(SchemaError, match=r"truncated.parquet: not a readable Parquet file"):
        InstanceLoader(str(tmp_path / "truncated.parquet"), _tokenizer())
    table = pq.read_table(demo_parquet_path())
    retyped = table.set_column(
        table.schema.get_field_index("pr_number"),
        "pr_number",
        pa.array([str(v) for v in table["pr_number"].to_pylist()]),
    )
    pq.write_table(retyped, tmp_path / "retyped.parquet")
    with pytest.raises(SchemaError, match=r"retyped.parquet: field 'pr_number' has type string"):
        InstanceLoader(str(tmp_path / "retyped.parquet"), _tokenizer())
    loose = pa.schema([f.with_nullable(True) for f in INSTANCE_SCHEMA])
    rows = table.to_pylist()
    rows[3]["repo"] = None
    pq.write_table(pa.Table.from_pylist(rows, schema=loose), tmp_path / "nulls.parquet", row_group_size=5)
    with pytest.raises(SchemaError, match=r"nulls.parquet: rows 0-4: field 'repo' is null in 1 row"):
        check_shard(tmp_path / "nulls.parquet")


def test_a_data_directory_needs_a_manifest_that_lists_exactly_its_shards(tmp_path):
    from conf.config import DataConfig

    data = tmp_path / "ds"
    data.mkdir()
    pq.write_table(pq.read_table(demo_parquet_path()), data / "shard-00000.parquet")
    cfg = DataConfig(path=str(data))
    with pytest.raises(SchemaError, match=f"no {MANIFEST}.*data.require_manifest=false"):
        InstanceLoader.from_config(cfg, _tokenizer(), seed=0)
    (data / MANIFEST).write_text(
        json.dumps(
            {"shards": [{"name": "shard-00000.parquet", "rows": 17}, {"name": "shard-00001.parquet", "rows": 3}]}
        )
    )
    with pytest.raises(SchemaError, match=r"does not match the shards present.*listed but absent: \['shard-00001"):
        InstanceLoader.from_config(cfg, _tokenizer(), seed=0)
    InstanceLoader.from_config(DataConfig(path=str(data), require_manifest=False), _tokenizer(), seed=0)
    (data / MANIFEST).write_text(json.dumps({"shards": [{"name": "shard-00000.parquet", "rows": 17}]}))
    assert len(InstanceLoader.from_config(cfg, _tokenizer(), seed=0).next_batch(3)) == 3


# -- 6. one line, not a traceback --------------------------------------------------------------------


def test_bad_inputs_to_the_commands_are_one_line(tmp_path):
    good = demo_parquet_path().read_bytes()
    (tmp_path / "bad.parquet").write_bytes(good[:1000] + b"\0" * 500 + good[1500:])
    proc = _run("-m", "data.build", "--swebench", str(tmp_path / "bad.parquet"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "bad.parquet" in proc.stderr, proc.stderr
    (tmp_path / "afile").write_text("x")
    proc = _run("train.py", "experiment=smoke", f"run_dir={tmp_path / 'afile'}")
    _one_line_error(proc, "[error] run_dir=", "is a file")
    (tmp_path / "ray").mkdir()  # a Ray temp dir with no cluster in it: `auto` finds none
    proc = _run("-m", "actors.control", "--run", "x", env={"RAY_TMPDIR": str(tmp_path / "ray")}, timeout=120)
    # (Where another test's cluster runs on this machine, `auto` finds it and the job is missing.)
    _one_line_error(proc, "actors.control: error: ")
    assert "no Ray cluster" in proc.stderr or "--run x: no running job" in proc.stderr


def test_corrupt_training_data_stops_the_trainer_in_one_line_before_ray(tmp_path):
    good = demo_parquet_path().read_bytes()
    (tmp_path / "cut.parquet").write_bytes(good[: len(good) // 3])
    started = time.monotonic()
    proc = _run("train.py", "experiment=smoke", f"run_dir={tmp_path / 'run'}", f"data.path={tmp_path / 'cut.parquet'}")
    _one_line_error(proc, "[error]", "cut.parquet: not a readable Parquet file")
    assert not (tmp_path / "run" / "checkpoints").exists()
    print(f"refused after {time.monotonic() - started:.1f} s")  # was ~40 s of start-up, then 95-162 lines


# -- 7. exposure -------------------------------------------------------------------------------------


def test_the_ray_token_is_readable_by_its_owner_only(tmp_path, monkeypatch):
    from actors.cluster.join import auth_token, private_token

    monkeypatch.setenv("HOME", str(tmp_path))
    private_token()
    assert oct(auth_token().stat().st_mode & 0o777) == "0o600" and len(auth_token().read_text()) == 64
    auth_token().chmod(0o644)  # as Ray writes it
    token = auth_token().read_text()
    private_token()
    assert oct(auth_token().stat().st_mode & 0o777) == "0o600" and auth_token().read_text() == token


# -- 8. nothing left behind, even by a SIGKILLed driver --------------------------------------------


def _descendants(pid: int) -> list[tuple[int, str]]:
    from actors.cluster.reaper import _start_time
    from actors.cluster.reaper import descendants as tree

    return [(p, s) for p in tree([pid]) if (s := _start_time(p)) is not None]


@pytest.mark.slow
def test_a_killed_driver_leaves_no_process_and_no_temporary_files(tmp_path):
    from actors.cluster.reaper import _start_time

    # A short temporary root: Unix socket paths under it (multiprocessing's, Ray's) are limited to 107 bytes.
    tmp = Path(tempfile.mkdtemp(prefix="kill-", dir="/tmp"))
    env = dict(
        os.environ, TMPDIR=str(tmp), RAY_TMPDIR="/tmp", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", PYTHONUNBUFFERED="1"
    )
    cmd = [sys.executable, "train.py", "experiment=smoke", f"run_dir={tmp_path / 'run'}", "trainer.steps=50"]
    driver = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        assert driver.stdout is not None
        seen = []
        for line in driver.stdout:  # wait until the run is training: every actor is up
            seen.append(line)
            if line.startswith("[setup] ready") or time.monotonic() > deadline:
                break
        started = _descendants(driver.pid)
        # Ray's head processes, agents, engine, learner and reward actors
        assert len(started) > 5, "".join(seen)[-3000:]
        assert [p.name for p in tmp.iterdir()] == [f"swe_rl-{driver.pid}"]  # the run's temporary root
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        killed = time.monotonic()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(_start_time(p) == s for p, s in started):
            time.sleep(1)
        alive = [p for p, s in started if _start_time(p) == s]
        print(f"{len(started)} processes ended {time.monotonic() - killed:.1f} s after the driver was killed")
        assert not alive, f"still running after the driver was killed: {alive}"
        assert list(tmp.iterdir()) == []  # no pymp-*, vllm_dist_*, swe_rl-* left
    finally:
        if driver.poll() is None:
            driver.kill()
        shutil.rmtree(tmp, ignore_errors=True)
