"""Trainer checkpoints: everything a run needs to continue, written atomically.

Layout under `<run_dir>/checkpoints/`:

    step_000004/            a complete checkpoint (only complete ones carry this name)
        learner/            DeepSpeed's own format: model, optimizer, each rank's counters and RNG
        hf/                 Hugging Face export of the policy (evaluation, serving)
        trainer.pt          driver state: step, policy_version, loader cursor, driver RNG states,
                            the step's metrics line, the config
        trainer.json        the same minus the RNG states, for humans
    .tmp-step_000005/       being written: ignored on start, removed by the next save

A checkpoint is written under a temporary name and renamed into place (atomic on POSIX file
systems, shared ones included), so a driver killed at any moment leaves either the old
checkpoint or the new one, never half of one; older checkpoints are deleted only after the new
one is complete.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from data.loader import InstanceLoader
    from learner.group import LearnerGroup

_PREFIX, _TMP = "step_", ".tmp-"

# Changing any of these makes a checkpoint meaningless for the run (another model, another
# sampling scheme, another data order or sharding of the optimizer state).
FROZEN_KEYS = ("model.name", "model.dtype", "group_size", "seed", "data.path", "data.heldout_fraction",
               "learner.num_ranks", "learner.zero_stage")


class ResumeError(ValueError):
    """The checkpoint cannot continue this run; the message names the keys that differ."""


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    state: dict[str, Any]  # contents of trainer.pt

    @property
    def step(self) -> int:
        return int(self.state["step"])


def rng_states() -> dict[str, Any]:
    """Every RNG this process draws from (the driver's, or one learner rank's)."""
    states = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():  # capture whatever this process has, on either device
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: Mapping[str, Any]) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def check_compatible(saved: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Raise ResumeError naming every frozen key whose value changed."""
    a, b = _flatten(saved), _flatten(current)
    changed = [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in FROZEN_KEYS if a.get(k) != b.get(k)]
    if changed:
        raise ResumeError("the checkpoint cannot continue this run; these keys changed: " + "; ".join(changed)
                          + ". Use another run_dir to start a new run.")


class CheckpointStore:
    def __init__(self, run_dir: str | Path, keep: int = 1) -> None:
        self.root = Path(run_dir) / "checkpoints"
        self.keep = max(1, keep)

    def complete(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.name.startswith(_PREFIX) and (p / "trainer.pt").is_file())

    def latest(self) -> Checkpoint | None:
        done = self.complete()
        if not done:
            return None
        state = torch.load(done[-1] / "trainer.pt", weights_only=False)
        return Checkpoint(done[-1], state)

    def save(self, step: int, state: dict[str, Any], write_learner: Callable[[Path], None]) -> Path:
        """Write checkpoint `step`: `write_learner(dir)` fills dir (learner/ and hf/), then the
        driver state; then the rename makes it visible; then older ones are pruned."""
        self.root.mkdir(parents=True, exist_ok=True)
        for stale in self.root.glob(_TMP + "*"):  # left by a killed driver
            shutil.rmtree(stale, ignore_errors=True)
        final = self.root / f"{_PREFIX}{step:06d}"
        tmp = self.root / f"{_TMP}{final.name}"
        tmp.mkdir()
        write_learner(tmp)
        torch.save(state, tmp / "trainer.pt")
        readable = {k: v for k, v in state.items() if k != "rng"} | {"written_at": time.time()}
        (tmp / "trainer.json").write_text(json.dumps(readable, indent=1, default=str))
        if final.exists():  # the same step written again (resumed with a smaller checkpoint_every)
            shutil.rmtree(final)
        os.replace(tmp, final)
        for old in self.complete()[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        return final


class Checkpointer:
    """The run's checkpoints as the driver uses them: what goes in, and what a resume restores.

    A checkpoint holds the learner's state (every rank its DeepSpeed shards) and a Hugging Face
    export, the loader's cursor *before* the prompts of steps not yet trained (async mode
    fetches ahead), the driver's RNG states, the step, its policy_version, its metrics line and
    the config. The latest export is also at <run_dir>/hf.
    """

    def __init__(self, run_dir: Path, config: Mapping[str, Any]) -> None:
        self.run_dir, self.config = run_dir, dict(config)
        self.store = CheckpointStore(run_dir)
        self.latest = self.store.latest()
        if self.latest is not None:  # refuse an incompatible config before anything starts
            check_compatible(self.latest.state["config"], self.config)

    def restore(self, learner: LearnerGroup, loader: InstanceLoader) -> Checkpoint | None:
        """Load the latest checkpoint into the learner, the loader and this process's RNGs."""
        ckpt = self.latest
        if ckpt is not None:
            learner.load_state(str(ckpt.path / "learner"))
            loader.load_state_dict(ckpt.state["loader"])
            set_rng_states(ckpt.state["rng"])
        return ckpt

    def save(self, learner: LearnerGroup, *, step: int, policy_version: int, loader_state: dict[str, Any],
             metrics: dict[str, Any]) -> Path:
        state = {"step": step, "policy_version": policy_version, "loader": loader_state, "rng": rng_states(),
                 "metrics": metrics, "config": self.config}

        def write_learner(tmp: Path) -> None:
            learner.save_state(str(tmp / "learner"))
            learner.save_hf(str(tmp / "hf"))

        final = self.store.save(step, state, write_learner)
        link = self.run_dir / "hf"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(final.relative_to(self.run_dir) / "hf")
        return final
