"""Trainer checkpoints: everything a run needs to continue, written atomically and verified.

Layout under `<run_dir>/checkpoints/`:

    step_000004/            a complete checkpoint (only complete ones carry this name)
        learner/            DeepSpeed's own format: model, optimizer, each rank's counters and RNG
        hf/                 Hugging Face export of the policy (evaluation, serving)
        trainer.json        driver state: step, policy_version, loader cursor, driver RNG states
                            (learner/rng.py: JSON, no pickle), the step's metrics line, the config
        MANIFEST.json       size and sha256 of every other file; written last
    .tmp-step_000005/       being written: ignored on start, removed by the next save

Writing: every file and directory is fsynced, then the manifest, then the directory is renamed
into place (atomic on POSIX file systems, shared ones included) and its parent fsynced, so a
driver or machine that dies at any moment leaves either the old checkpoint or the new one,
never half of one. The newest `trainer.keep_checkpoints` are kept; older ones are deleted only
after the new one is complete.

Reading: before anything starts, the newest checkpoint's files are checked against its
manifest (sizes, then checksums). A damaged one (a truncated shard, a deleted file) is named,
file and all, and the run resumes from the newest intact one; steps logged after it run again
(actors/driver/run_log.py marks their lines rerun). The config is compared with the
checkpoint's: a change of a key in FROZEN_KEYS is refused by name, and every other changed key
is logged with both values, in the schema's order (`[resume] 2 config key(s) changed since
step_000004: reward.kind: 'similarity' -> 'tests'; learner.lr: 1e-06 -> 1e-05`). Checksums cost
one read of the checkpoint per resume (~1 GB/s per core here); a 70B run's 1.1 TB of ZeRO-3
state takes minutes on a shared file system, which is why the p5_512 preset checkpoints every
50 steps.

DeepSpeed's own shards are pickles that DeepSpeed loads with `weights_only=False`: resume only
run directories you trust (the checksums detect damage, not a malicious writer).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conf.errors import UserError
from conf.io import fsync_dir
from learner.rng import rng_states, set_rng_states

if TYPE_CHECKING:
    from data.loader import InstanceLoader
    from learner.group import LearnerGroup

log = logging.getLogger(__name__)

_PREFIX, _TMP = "step_", ".tmp-"

# Changing any of these makes a checkpoint meaningless for the run (another model, other
# prompts, another sampling scheme, another data order or sharding of the optimizer state).
FROZEN_KEYS = (
    "model.name",
    "model.revision",
    "model.chat_template",
    "model.dtype",
    "group_size",
    "seed",
    "data.path",
    "data.heldout_fraction",
    "learner.num_ranks",
    "learner.zero_stage",
)


class ResumeError(UserError, ValueError):
    """The checkpoint cannot continue this run; the message names the keys that differ."""


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    state: dict[str, Any]  # contents of trainer.pt

    @property
    def step(self) -> int:
        return int(self.state["step"])


def _flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


class _Absent:
    """A key one of two configs does not have (added to or removed from the schema since)."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT = _Absent()


def config_changes(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted key, saved value, current value) of every key whose value differs, in the current
    config's order, then keys only the saved one has; a missing side is ABSENT."""
    a, b = _flatten(saved), _flatten(current)
    keys = [*b, *(k for k in a if k not in b)]
    return [(k, a.get(k, ABSENT), b.get(k, ABSENT)) for k in keys if a.get(k, ABSENT) != b.get(k, ABSENT)]


def describe_changes(changes: list[tuple[str, Any, Any]]) -> str:
    """`key: old -> new` for each change, joined by "; " (values as Python writes them)."""
    return "; ".join(f"{key}: {old!r} -> {new!r}" for key, old, new in changes)


def check_compatible(saved: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Raise ResumeError naming every frozen key whose value changed. A key the saved config
    predates is not compared: the schema added it with a default that keeps the old behaviour
    (model.revision: a run before it had no hub ids)."""
    a, b = _flatten(saved), _flatten(current)
    changed = [f"{k}: {a[k]!r} -> {b.get(k)!r}" for k in FROZEN_KEYS if k in a and a[k] != b.get(k)]
    if changed:
        raise ResumeError(
            "the checkpoint cannot continue this run; these keys changed: "
            + "; ".join(changed)
            + ". Use another run_dir to start a new run."
        )


_MANIFEST, _STATE = "MANIFEST.json", "trainer.json"
_CHUNK = 1 << 22


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != _MANIFEST)


def _fsync_tree(root: Path) -> None:
    """Flush every file and directory under root to disk (before the rename publishes them)."""
    for path in sorted(root.rglob("*"), reverse=True):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        elif path.is_dir():
            fsync_dir(path)
    fsync_dir(root)


def problem(path: Path) -> str | None:
    """What is wrong with checkpoint directory `path` (its first bad file), or None if intact."""
    manifest_file = path / _MANIFEST
    if not manifest_file.is_file() and (path / "trainer.pt").is_file():
        return f"{path} was written by an older version of the trainer (trainer.pt, no {_MANIFEST})"
    if not manifest_file.is_file():
        return f"{manifest_file} is missing"
    try:
        manifest = json.loads(manifest_file.read_text())
    except ValueError as exc:
        return f"{manifest_file} is not valid JSON ({exc})"
    for rel, (size, _) in manifest["files"].items():
        f = path / rel
        if not f.is_file():
            return f"{f} is missing"
        if f.stat().st_size != size:
            return f"{f} has {f.stat().st_size} bytes, the manifest says {size}"
    for rel, (_, digest) in manifest["files"].items():
        if _sha256(path / rel) != digest:
            return f"{path / rel} does not match its checksum"
    return None


class CheckpointStore:
    def __init__(self, run_dir: str | Path, keep: int = 2) -> None:
        self.root = Path(run_dir) / "checkpoints"
        self.keep = max(1, keep)

    def complete(self) -> list[Path]:
        """Checkpoint directories, oldest first (a directory gets its final name only when complete)."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.name.startswith(_PREFIX) and p.is_dir())

    def latest(self) -> Checkpoint | None:
        """The newest intact checkpoint; each damaged newer one is named in a warning.
        Raises ResumeError when checkpoints exist but none is intact."""
        found = self.complete()
        for path in reversed(found):
            wrong = problem(path)
            if wrong is None:
                return Checkpoint(path, json.loads((path / _STATE).read_text()))
            log.warning("[resume] checkpoint %s is damaged: %s; trying the one before it", path.name, wrong)
        if found:
            raise ResumeError(
                f"no intact checkpoint in {self.root} ({len(found)} damaged); use another run_dir to start a new run"
            )
        return None

    def save(self, step: int, state: dict[str, Any], write_learner: Callable[[Path], None]) -> Path:
        """Write checkpoint `step`: `write_learner(dir)` fills dir (learner/ and hf/), then the
        driver state, then the manifest; then the rename makes it visible; then older ones are pruned."""
        self.root.mkdir(parents=True, exist_ok=True)
        for stale in self.root.glob(_TMP + "*"):  # left by a killed driver
            shutil.rmtree(stale, ignore_errors=True)
        final = self.root / f"{_PREFIX}{step:06d}"
        tmp = self.root / f"{_TMP}{final.name}"
        tmp.mkdir()
        write_learner(tmp)
        (tmp / _STATE).write_text(json.dumps(state, indent=1, default=str) + "\n")
        files = {str(f.relative_to(tmp)): [f.stat().st_size, _sha256(f)] for f in _files(tmp)}
        (tmp / _MANIFEST).write_text(json.dumps({"step": step, "files": files}, indent=1) + "\n")
        _fsync_tree(tmp)
        if final.exists():  # the same step written again (resumed with a smaller checkpoint_every)
            shutil.rmtree(final)
        os.replace(tmp, final)
        fsync_dir(self.root)
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

    def __init__(self, run_dir: Path, config: Mapping[str, Any], keep: int = 2) -> None:
        self.run_dir, self.config = run_dir, dict(config)
        self.store = CheckpointStore(run_dir, keep)
        self.latest = self.store.latest()
        if self.latest is not None:  # refuse an incompatible config before anything starts
            saved = self.latest.state["config"]
            check_compatible(saved, self.config)
            if changes := config_changes(saved, self.config):
                log.info(
                    "[resume] %d config key(s) changed since %s: %s",
                    len(changes),
                    self.latest.path.name,
                    describe_changes(changes),
                )

    def restore(self, learner: LearnerGroup, loader: InstanceLoader) -> Checkpoint | None:
        """Load the latest checkpoint into the learner, the loader and this process's RNGs."""
        ckpt = self.latest
        if ckpt is not None:
            learner.load_state(str(ckpt.path / "learner"))
            loader.load_state_dict(ckpt.state["loader"])
            set_rng_states(ckpt.state["rng"])
        return ckpt

    def save(
        self,
        learner: LearnerGroup,
        loader_state: dict[str, Any],
        *,
        step: int,
        policy_version: int,
        metrics: dict[str, Any],
    ) -> Path:
        state = {
            "step": step,
            "policy_version": policy_version,
            "loader": loader_state,
            "rng": rng_states(),
            "metrics": metrics,
            "config": self.config,
        }

        def write_learner(tmp: Path) -> None:
            learner.save_state(str(tmp / "learner"))
            learner.save_hf(str(tmp / "hf"))

        final = self.store.save(step, state, write_learner)
        # <run_dir>/hf -> the newest export, swapped atomically (a new link renamed over the old).
        tmp_link = self.run_dir / ".hf.tmp"
        tmp_link.unlink(missing_ok=True)
        tmp_link.symlink_to(final.relative_to(self.run_dir) / "hf")
        os.replace(tmp_link, self.run_dir / "hf")
        return final
