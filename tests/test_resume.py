"""Nothing lost: a run stopped after 2 steps and started again with trainer.steps=3 consumes
exactly the instances of an uninterrupted 3-step run and ends with the same weights; a
half-written checkpoint is ignored; a config that cannot resume is refused by name."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file


def _instances(run_dir, step):
    """The step's instances in the order of its groups (a repeat would show twice)."""
    rows = [json.loads(line) for line in (run_dir / "rollouts" / f"step_{step:06d}.jsonl").read_text().splitlines()]
    return [r["instance_id"] for r in rows if r["sample"] == 0]


@pytest.fixture(scope="module")
def resumed(smoke_run, train_cli, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("resume") / "run"
    shutil.copytree(smoke_run.run_dir, run_dir, symlinks=True)
    # A driver SIGKILLed while writing checkpoint 3 leaves this behind: it must not be read.
    partial = run_dir / "checkpoints" / ".tmp-step_000003"
    (partial / "learner").mkdir(parents=True)
    torch.save({"step": 3, "policy_version": 99}, partial / "trainer.pt")
    # ... and, with checkpoint_every > 1, a driver killed after logging a step it never
    # checkpointed leaves that step's line: the step runs again and its new line says so.
    with open(run_dir / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 3, "lost": True}) + "\n")
    # The smoke run's loggers (TensorBoard and W&B where installed): resume continues their runs.
    proc = train_cli(run_dir, "trainer.steps=3", f"trainer.loggers=[{','.join(smoke_run.loggers)}]")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return run_dir, proc.stdout


def test_resume_continues_exactly_where_it_stopped(resumed, job_run):
    run_dir, out = resumed
    assert "[resume] from" in out and "step_000002" in out
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    # Appended, never rewritten: the lost line stays, the step's new line comes last.
    assert [(m["step"], m.get("lost"), m.get("rerun")) for m in metrics] == [
        (1, None, None),
        (2, None, None),
        (3, True, None),
        (3, None, True),
    ]
    assert "steps 3-3 were logged after the last checkpoint" in out
    uninterrupted = job_run.run_dir
    for step in (1, 2, 3):
        assert _instances(run_dir, step) == _instances(uninterrupted, step)
    a, b = load_file(run_dir / "hf" / "model.safetensors"), load_file(uninterrupted / "hf" / "model.safetensors")
    # Tolerance: float32 round-off. Observed: identical bits (same seeds, same batches, the
    # optimizer state restored from DeepSpeed's checkpoint).
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6
    assert not list((run_dir / "checkpoints").glob(".tmp-*"))  # the partial one was cleaned up


def test_a_resume_names_the_config_keys_that_changed(resumed, smoke_run):
    run_dir, out = resumed
    # Before anything starts, one line with both values of every changed key: the steps, and
    # the run_dir of the copy.
    [changed] = [line for line in out.splitlines() if "config key(s) changed since step_000002" in line]
    assert changed.endswith(
        f"2 config key(s) changed since step_000002: run_dir: '{smoke_run.run_dir}' -> "
        f"'{run_dir}'; trainer.steps: 2 -> 3"
    )


def test_a_config_that_cannot_resume_is_refused_by_name(resumed, train_cli):
    run_dir, _ = resumed
    proc = train_cli(run_dir, "trainer.steps=4", "group_size=8")
    assert proc.returncode != 0
    assert "group_size: 16 -> 8" in proc.stderr + proc.stdout


def test_resume_continues_the_tensorboard_and_wandb_runs(resumed, smoke_run):
    run_dir, _ = resumed
    last = {m["step"]: m for m in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())}
    if "tensorboard" in smoke_run.loggers:
        from actors.observe.loggers import read_scalars

        # One directory; each step once, step 3 with the value of its last metrics.jsonl line.
        shown = read_scalars(run_dir / "tensorboard")["timing/step_s"]
        assert shown == pytest.approx({s: last[s]["step_s"] for s in (1, 2, 3)}, rel=1e-6)
    if "wandb" in smoke_run.loggers:
        run_id = (run_dir / "wandb_id").read_text().strip()
        # Offline, each start writes a directory of its own under the same id (`wandb sync` joins them).
        assert [p.name.rsplit("-", 1)[1] for p in sorted((run_dir / "wandb").glob("offline-run-*"))] == [run_id] * 2
