"""Checkpoint store: atomic writes, partial checkpoints ignored, pruning, frozen-key check."""

import pytest
import torch

from learner.checkpoint import (
    ABSENT,
    Checkpointer,
    CheckpointStore,
    ResumeError,
    check_compatible,
    config_changes,
    describe_changes,
    rng_states,
    set_rng_states,
)


def _write(store, step, marker="x"):
    def write_learner(tmp):
        (tmp / "learner").mkdir()
        (tmp / "learner" / "w.txt").write_text(marker)

    return store.save(step, {"step": step, "policy_version": step, "metrics": {"step": step}}, write_learner)


def test_latest_is_the_newest_complete_checkpoint_and_old_ones_are_pruned(tmp_path):
    store = CheckpointStore(tmp_path, keep=1)
    assert store.latest() is None
    _write(store, 1)
    path = _write(store, 2, marker="two")
    latest = store.latest()
    assert latest.step == 2 and latest.path == path
    assert (path / "learner" / "w.txt").read_text() == "two"
    assert [p.name for p in store.complete()] == ["step_000002"]  # step 1 pruned after 2 completed
    assert (path / "trainer.json").is_file()


def test_a_partial_checkpoint_is_never_read_and_is_cleaned_up(tmp_path):
    store = CheckpointStore(tmp_path)
    _write(store, 1)
    # A driver killed while writing step 2 leaves this behind (no rename happened).
    partial = tmp_path / "checkpoints" / ".tmp-step_000002"
    (partial / "learner").mkdir(parents=True)
    torch.save({"step": 2}, partial / "trainer.pt")
    assert store.latest().step == 1

    def boom(tmp):
        raise KeyboardInterrupt  # killed mid-write: the temporary directory stays, unread

    with pytest.raises(KeyboardInterrupt):
        store.save(3, {"step": 3}, boom)
    assert store.latest().step == 1
    _write(store, 3)
    assert store.latest().step == 3
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))


def test_frozen_keys_are_named():
    saved = {
        "model": {"name": "a", "dtype": "float32"},
        "group_size": 16,
        "seed": 0,
        "data": {"path": "demo", "heldout_fraction": 0.0},
        "learner": {"num_ranks": 2, "zero_stage": 2, "lr": 1.0},
    }
    same = {**saved, "learner": {**saved["learner"], "lr": 2.0}}  # a learning-rate change may resume
    check_compatible(saved, same)
    other = {**saved, "group_size": 8, "model": {"name": "b", "dtype": "float32"}}
    with pytest.raises(ResumeError, match=r"model.name: 'a' -> 'b'.*group_size: 16 -> 8"):
        check_compatible(saved, other)
    # a config saved before model.revision existed resumes; once saved, the key is held
    pinned = {**saved, "model": {**saved["model"], "revision": "", "chat_template": ""}}
    check_compatible(saved, pinned)
    with pytest.raises(ResumeError, match=r"model.revision: '' -> 'v2'"):
        check_compatible(pinned, {**pinned, "model": {**pinned["model"], "revision": "v2"}})


SAVED = {
    "run_dir": "runs/a",
    "seed": 0,
    "model": {"name": "a", "dtype": "float32"},
    "reward": {"kind": "similarity", "execution": {"wall_s": 300.0}},
    "learner": {"num_ranks": 2, "lr": 1e-6, "old_knob": 3},
    "trainer": {"loggers": ["console", "jsonl"]},
}


def test_config_changes_names_every_key_whose_value_differs():
    current = {
        "run_dir": "runs/a",
        "seed": 0,
        "model": {"name": "a", "dtype": "float32"},
        "reward": {"kind": "tests", "execution": {"wall_s": 60.0}},
        "learner": {"num_ranks": 2, "lr": 1e-5, "new_knob": True},
        "trainer": {"loggers": ["console"]},
    }
    assert config_changes(SAVED, current) == [
        ("reward.kind", "similarity", "tests"),
        ("reward.execution.wall_s", 300.0, 60.0),
        ("learner.lr", 1e-6, 1e-5),
        ("learner.new_knob", ABSENT, True),  # a key added to the schema since the checkpoint
        ("trainer.loggers", ["console", "jsonl"], ["console"]),
        ("learner.old_knob", 3, ABSENT),  # ...and one removed from it
    ]
    assert config_changes(SAVED, SAVED) == []
    assert describe_changes(config_changes(SAVED, current)[:4]) == (
        "reward.kind: 'similarity' -> 'tests'; reward.execution.wall_s: 300.0 -> 60.0; "
        "learner.lr: 1e-06 -> 1e-05; learner.new_knob: (absent) -> True"
    )


def _checkpointed(run_dir, config):
    CheckpointStore(run_dir).save(
        4, {"step": 4, "policy_version": 4, "config": config}, lambda tmp: (tmp / "learner").mkdir()
    )


def test_a_resume_logs_the_changed_keys_and_refuses_frozen_ones(tmp_path, caplog):
    _checkpointed(tmp_path, SAVED)
    changed = {**SAVED, "learner": {**SAVED["learner"], "lr": 1e-5}, "reward": {**SAVED["reward"], "kind": "tests"}}
    with caplog.at_level("INFO", logger="learner.checkpoint"):
        ckpt = Checkpointer(tmp_path, changed)
    assert ckpt.latest is not None and ckpt.latest.step == 4
    assert [r.getMessage() for r in caplog.records] == [
        "[resume] 2 config key(s) changed since step_000004: reward.kind: 'similarity' -> 'tests'; "
        "learner.lr: 1e-06 -> 1e-05"
    ]
    caplog.clear()
    with caplog.at_level("INFO", logger="learner.checkpoint"):
        Checkpointer(tmp_path, SAVED)  # the same config: nothing to say
    assert caplog.records == []
    frozen = {**changed, "model": {"name": "b", "dtype": "float32"}}
    with pytest.raises(ResumeError, match=r"these keys changed: model.name: 'a' -> 'b'\. Use another run_dir"):
        Checkpointer(tmp_path, frozen)


def test_rng_states_roundtrip():
    state = rng_states()
    a = torch.rand(3)
    set_rng_states(state)
    assert torch.equal(a, torch.rand(3))


def test_a_damaged_newest_checkpoint_is_named_and_the_one_before_it_resumes(tmp_path, caplog):
    store = CheckpointStore(tmp_path)  # keeps 2 by default
    _write(store, 1)
    newest = _write(store, 2, marker="two")
    assert [p.name for p in store.complete()] == ["step_000001", "step_000002"]
    (newest / "learner" / "w.txt").write_text("tw")  # truncated
    with caplog.at_level("WARNING"):
        assert store.latest().step == 1
    assert "step_000002 is damaged" in caplog.text and "w.txt has 2 bytes, the manifest says 3" in caplog.text
    (newest / "learner" / "w.txt").write_text("TWO")  # same size, other bytes
    assert store.latest().step == 1 and "w.txt does not match its checksum" in caplog.text
    (tmp_path / "checkpoints" / "step_000001" / "trainer.json").unlink()  # deleted
    with pytest.raises(ResumeError, match="no intact checkpoint"):
        store.latest()
    assert "step_000001/trainer.json is missing" in caplog.text


def test_driver_state_is_json_with_every_rng(tmp_path):
    import json
    import random

    import numpy as np

    store = CheckpointStore(tmp_path)
    path = store.save(1, {"step": 1, "rng": rng_states()}, lambda tmp: None)
    state = json.loads((path / "trainer.json").read_text())  # no pickle: resuming runs no stored code
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    set_rng_states(state["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
    assert sorted(json.loads((path / "MANIFEST.json").read_text())["files"]) == ["trainer.json"]
