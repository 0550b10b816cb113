"""actors/observe/loggers.py with a fake run (no Ray): what each logger writes, resume, the groups, and
the one-line error for a logger whose package is missing."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from actors import plugins
from actors.observe.loggers import (
    LOGGERS,
    LoggerUnavailable,
    RunInfo,
    check_installed,
    metric_group,
    read_scalars,
    scalars,
)
from conf import config
from conf.errors import UserError

REPO = Path(__file__).resolve().parents[2]
GROUPS = {"reward", "learner", "timing", "fleet", "sync"}


def run_info(run_dir: Path, resumed_step: int = 0) -> RunInfo:
    return RunInfo(run_dir, run_dir.name, {"seed": 3, "learner": {"lr": 1e-6}}, 5, resumed_step, "swe-rl-test")


def line(step: int, **extra) -> dict:
    # Values exact in float32 (TensorBoard's scalar type), so the read-back compares equal.
    return {
        "step": step,
        "policy_version": step,
        "reward_mean": -1 + step / 4,
        "loss": 0.5 * step,
        "train_s": 2.0,
    } | extra


@pytest.mark.parametrize(
    "key, group",
    [
        ("reward_mean", "reward"),
        ("format_error_rate", "reward"),
        ("zero_signal_frac", "reward"),
        ("loss", "learner"),
        ("policy_version", "learner"),
        ("train_s", "timing"),
        ("step_s", "timing"),
        ("tests_s", "timing"),
        ("gen_tokens_per_s", "fleet"),  # a rate, not a phase time
        ("queue_depth", "fleet"),
        ("reward_timeouts", "fleet"),  # the reward pool's health, not the reward
        ("sync_mb_per_s", "sync"),
        ("sync_probe_diff_after", "sync"),
        ("params_changed", "sync"),
    ],
)
def test_metric_group(key, group):
    assert metric_group(key) == group


def test_every_documented_metric_has_one_of_the_five_groups():
    table = (REPO / "docs" / "metrics.md").read_text()
    keys = {
        k for row in table.splitlines() if row.startswith("| `") for k in re.findall(r"`([a-z_]+)`", row.split("|")[1])
    }
    assert len(keys) > 40
    assert {metric_group(k) for k in keys} == GROUPS


def test_scalars_skip_the_step_flags_and_missing_values():
    assert scalars({"step": 3, "rerun": True, "resolve_rate": None, "loss": 1, "queue_depth": 2.5}) == {
        "learner/loss": 1.0,
        "fleet/queue_depth": 2.5,
    }


def test_jsonl_appends_one_line_per_step(tmp_path):
    jsonl = LOGGERS.get("jsonl")(run_info(tmp_path))
    jsonl.write(line(1))
    jsonl.write(line(2, rerun=True))
    assert [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [
        line(1),
        line(2, rerun=True),
    ]


def test_console_prints_the_step_line(tmp_path, caplog):
    full = line(2) | dict.fromkeys(
        ("reward_std", "format_error_rate", "generate_s", "gen_tokens_per_s", "reward_s", "sync_s", "step_s"), 1.0
    )
    with caplog.at_level("INFO"):
        LOGGERS.get("console")(run_info(tmp_path)).write(full)
    assert caplog.messages[0].startswith("[step 2/5] v2 reward -0.500 (std 1.000, format errors 100%) loss +1.0000")


def test_tensorboard_scalars_equal_the_metrics_written(tmp_path):
    pytest.importorskip("tensorboardX", reason='the tensorboard extra: pip install -e ".[tensorboard]"')
    tb = LOGGERS.get("tensorboard")(run_info(tmp_path))
    lines = [line(s) for s in (1, 2, 3)]
    for m in lines:
        tb.write(m)
    tb.close()
    assert read_scalars(tmp_path / "tensorboard") == {
        tag: {m["step"]: scalars(m)[tag] for m in lines} for tag in scalars(lines[0])
    }
    assert set(read_scalars(tmp_path / "tensorboard")) == {
        "learner/policy_version",
        "reward/reward_mean",
        "learner/loss",
        "timing/train_s",
    }


def test_tensorboard_resume_continues_the_run_without_duplicate_steps(tmp_path):
    pytest.importorskip("tensorboardX", reason='the tensorboard extra: pip install -e ".[tensorboard]"')
    first = LOGGERS.get("tensorboard")(run_info(tmp_path))
    for s in (1, 2, 3, 4):
        first.write(line(s))
    first.close()  # a driver that logged step 4 and died; its last checkpoint is step 2
    again = LOGGERS.get("tensorboard")(run_info(tmp_path, resumed_step=2))
    again.write(line(3, loss=7.0, rerun=True))
    again.close()  # and died again, before step 4
    assert len(list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))) == 2  # one directory, two sessions
    # Step 3's rerun replaces its first value (as its last metrics.jsonl line does), and the
    # first session's step 4, which the resumed run has not reached, is hidden; 1 and 2 stay.
    assert read_scalars(tmp_path / "tensorboard")["learner/loss"] == {1: 0.5, 2: 1.0, 3: 7.0}


@pytest.fixture
def wandb_offline(monkeypatch):
    pytest.importorskip("wandb", reason='the wandb extra is not installed: pip install -e ".[wandb]"')
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")


def _wandb_runs(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "wandb").glob("offline-run-*"))


def test_wandb_offline_writes_its_run_and_reuses_the_id_on_resume(tmp_path, wandb_offline):
    wb = LOGGERS.get("wandb")(run_info(tmp_path))
    run_id = (tmp_path / "wandb_id").read_text().strip()
    assert wb.wb.id == run_id and wb.wb.name == tmp_path.name
    assert wb.wb.config["seed"] == 3 and wb.wb.config["learner"] == {"lr": 1e-6}
    wb.write(line(1))
    wb.close()
    (first,) = _wandb_runs(tmp_path)
    assert first.name.endswith(f"-{run_id}") and (first / f"run-{run_id}.wandb").stat().st_size > 0

    again = LOGGERS.get("wandb")(run_info(tmp_path, resumed_step=1))
    assert again.wb.id == run_id
    again.close()
    # Offline, each start is a directory of its own under the same id; `wandb sync` makes them one run.
    # (Two starts within one second share the timestamp: wandb then adds "-1" to the second's.)
    ids = [re.fullmatch(r"offline-run-\d{8}_\d{6}-(.+?)(?:-\d+)?", p.name) for p in _wandb_runs(tmp_path)]
    assert [m.group(1) if m else None for m in ids] == [run_id, run_id]


def test_wandb_skips_steps_run_again(tmp_path):
    logged = []

    class FakeRun:
        def log(self, data, step):
            logged.append((step, data))

    wb = object.__new__(LOGGERS.get("wandb"))  # the write rule alone, without wandb
    wb.wb = FakeRun()
    wb.write(line(3, rerun=True))
    wb.write(line(4))
    assert logged == [(4, scalars(line(4)))]


def test_a_missing_package_is_one_line_naming_the_extra(monkeypatch):
    for name, module in (("tensorboard", "tensorboardX"), ("wandb", "wandb")):
        assert LOGGERS.get(name).requires == module
        monkeypatch.setattr(LOGGERS.get(name), "requires", "no_such_package_for_swe_rl")
        with pytest.raises(LoggerUnavailable) as info:
            check_installed(["console", name])
        assert str(info.value) == (
            f'trainer.loggers: {name!r} needs the no_such_package_for_swe_rl package: pip install -e ".[{name}]"'
        )
    check_installed(["console", "jsonl"])  # the defaults need nothing


@pytest.mark.parametrize(
    "loggers, message",
    [
        (["console", "tb"], "trainer.loggers='tb': unknown logger; registered: console, jsonl, tensorboard, wandb"),
        (["jsonl", "jsonl"], "trainer.loggers=['jsonl', 'jsonl']: a logger is named twice"),
    ],
)
def test_config_refuses_unknown_or_repeated_loggers(loggers, message):
    cfg = config.TrainConfig()
    cfg.trainer.loggers = loggers
    with pytest.raises(UserError) as info:
        plugins.checked(cfg)
    assert str(info.value) == message


def test_the_driver_refuses_a_missing_logger_package_before_ray_starts(tmp_path):
    """Through train.py: the one line, exit code 2, no traceback, within seconds (no Ray)."""
    # A path entry whose `wandb` module is hidden: find_spec then reports the package missing.
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import importlib.util, sys\n"
        "_find = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'wandb' else _find(name, *a)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(hide))
    cmd = [
        sys.executable,
        "train.py",
        "experiment=smoke",
        f"run_dir={tmp_path / 'run'}",
        "trainer.loggers=[console,wandb]",
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "[error] trainer.loggers: 'wandb' needs the wandb package: pip install -e \".[wandb]\""
    )
    assert "Traceback" not in proc.stderr and "[setup]" not in proc.stdout
