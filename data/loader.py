"""The training loader: Parquet shards -> prompts, in a deterministic shuffled order with a cursor.

Order: epoch e visits the shards in a permutation drawn from (seed, e), and each shard's rows in
a permutation drawn from (seed, e, shard); only one shard is in memory at a time, so datasets
larger than memory stream. The cursor is (epoch, position in that epoch's order): the trainer's
checkpoint stores it, and a loader restored from it yields exactly the instances an
uninterrupted loader would have yielded next: no prompt skipped, none repeated.

Split: an instance is held out when a hash of its instance_id falls below heldout_fraction, a
rule that does not depend on order, shard layout or seed. Prompts over max_prompt_tokens are
skipped (and counted) when reached; skipping is deterministic, so it does not disturb the cursor.
Each prompt shows its instance's files in an order drawn from (seed, instance_id)
(data/prompt.py: build_messages), so the changed files are not always first.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from conf.config import DataConfig
from data.demo import DEMO_SETS
from data.prompt import build_messages, encode_prompt
from data.schema import Instance, SchemaError
from data.shards import check_manifest, check_shard, unlabelled_rows


@dataclass(frozen=True)
class PromptItem:
    instance: Instance
    prompt_ids: list[int]  # the chat-templated prompt, as the engine and the learner see it

    @property
    def instance_id(self) -> str:
        return self.instance.instance_id


@dataclass
class LoaderStats:
    yielded: int = 0
    dropped_too_long: int = 0
    skipped_heldout: int = 0
    epochs_started: int = 1


def resolve_path(path: str) -> Path:
    """A data path: a Parquet file or directory, or the name of an embedded demo set ("demo",
    the Python one; "demo-js", the JavaScript one: data/demo/__init__.py)."""
    if path in DEMO_SETS:
        return DEMO_SETS[path].parquet
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"data.path={path!r}: no such file or directory")
    return p


def shard_files(path: Path) -> list[Path]:
    """Complete shards of a dataset directory (files being written start with '_' or '.')."""
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*.parquet") if not p.name.startswith(("_", ".")))
    if not files:
        raise FileNotFoundError(f"data.path={str(path)!r}: no .parquet shards in this directory")
    return files


def is_heldout(instance_id: str, fraction: float) -> bool:
    digest = hashlib.sha256(instance_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def _rng(*keys: int) -> np.random.Generator:
    return np.random.default_rng(list(keys))


@dataclass
class InstanceLoader:
    path: str
    tokenizer: Any
    seed: int = 0
    heldout_fraction: float = 0.0
    max_prompt_tokens: int = 3072
    split: str = "train"  # "train" or "heldout"
    # The chat messages of an instance's prompt, from the instance and the seed: the paper's
    # (its files shuffled by the seed), or an agent episode's (rollout.mode=agent: the task alone).
    messages: Callable[[Instance, int], list[dict[str, str]]] = build_messages
    epoch: int = 0
    position: int = 0  # index into the current epoch's order of all rows
    stats: LoaderStats = field(default_factory=LoaderStats)

    @classmethod
    def from_config(
        cls,
        cfg: DataConfig,
        tokenizer: Any,
        *,
        seed: int,
        messages: Callable[[Instance, int], list[dict[str, str]]] = build_messages,
    ) -> InstanceLoader:
        """The training split of `data.path`, in the order `seed` draws, prompted by `messages`;
        a directory must carry its `data.build` manifest unless `data.require_manifest=false`."""
        loader = cls(
            cfg.path,
            tokenizer,
            seed=seed,
            heldout_fraction=cfg.heldout_fraction,
            max_prompt_tokens=cfg.max_prompt_tokens,
            messages=messages,
        )
        directory = resolve_path(cfg.path)
        if directory.is_dir() and cfg.require_manifest:
            check_manifest(directory, loader._files)
        return loader

    def __post_init__(self) -> None:
        if self.split not in ("train", "heldout"):
            raise ValueError(f"split={self.split!r}: accepted values are 'train', 'heldout'")
        self._files = shard_files(resolve_path(self.path))
        # Every shard readable and of the schema before anything starts (metadata only).
        self._rows_per_file = [check_shard(f) for f in self._files]
        if sum(self._rows_per_file) == 0:
            raise ValueError(f"data.path={self.path!r}: the dataset has no rows")
        self._cache: tuple[tuple[int, int], list[dict[str, Any]]] | None = None

    def require_test_labels(self, why: str) -> None:
        """Refuse, before anything starts, a dataset whose instances cannot be tested: a reward
        that runs the tests would score every sample of an unlabelled instance 0."""
        for path, rows in zip(self._files, self._rows_per_file, strict=True):
            missing = unlabelled_rows(path)
            if missing:
                raise SchemaError(
                    f"{why} runs each instance's tests, which needs its FAIL_TO_PASS labels: {path} has "
                    f"{missing} of {rows} row(s) without them; label the data first with `python -m "
                    f"data.validate --data {self.path} --out DIR` and train on DIR"
                )

    def require_rows(self, why: str, columns: tuple[str, ...], problem: Callable[..., str | None]) -> None:
        """Refuse, before anything starts, a dataset with a row that `problem` (called with the
        row's `columns`, None where a shard lacks one) names a problem of: the file, how many
        rows, the first one's id and its problem."""
        for path in self._files:
            names = pq.ParquetFile(path).schema_arrow.names
            rows = pq.read_table(path, columns=["instance_id", *(c for c in columns if c in names)]).to_pylist()
            found = [(r["instance_id"], p) for r in rows if (p := problem(*(r.get(c) for c in columns)))]
            if found:
                (first, reason), n = found[0], len(found)
                raise SchemaError(f"{why}: {path} has {n} of {len(rows)} row(s) it cannot use; {first}: {reason}")

    # -- cursor -------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed, "num_rows": sum(self._rows_per_file)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["seed"] != self.seed or state["num_rows"] != sum(self._rows_per_file):
            raise ValueError(
                f"loader cursor was saved for seed={state['seed']} over {state['num_rows']} rows; this loader has "
                f"seed={self.seed} over {sum(self._rows_per_file)} rows (data.path or seed changed)"
            )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])

    # -- iteration ----------------------------------------------------------------------------

    def next_batch(self, n: int) -> list[PromptItem]:
        items: list[PromptItem] = []
        guard = 0
        while len(items) < n:
            item = self._next()
            if item is not None:
                items.append(item)
                guard = 0
            else:
                guard += 1
                if guard > 2 * sum(self._rows_per_file) + 1:
                    raise ValueError(
                        f"data.path={self.path!r}: no instance of split {self.split!r} fits "
                        f"data.max_prompt_tokens={self.max_prompt_tokens}"
                    )
        return items

    def __iter__(self) -> Iterator[PromptItem]:
        while True:
            yield from self.next_batch(1)

    def _next(self) -> PromptItem | None:
        total = sum(self._rows_per_file)
        if self.position >= total:
            self.epoch, self.position = self.epoch + 1, 0
            self.stats.epochs_started += 1
        row = self._row_at(self.epoch, self.position)
        self.position += 1
        instance = Instance.from_row(row, where=f"{self.path}: row {self.position - 1} of epoch {self.epoch}")
        if is_heldout(instance.instance_id, self.heldout_fraction) != (self.split == "heldout"):
            self.stats.skipped_heldout += 1
            return None
        ids = encode_prompt(self.tokenizer, self.messages(instance, self.seed))
        if len(ids) > self.max_prompt_tokens:
            self.stats.dropped_too_long += 1
            return None
        self.stats.yielded += 1
        return PromptItem(instance, ids)

    def _row_at(self, epoch: int, position: int) -> dict[str, Any]:
        shard_order = _rng(self.seed, epoch).permutation(len(self._files))
        offset = 0
        for shard in shard_order:
            rows = self._rows_per_file[shard]
            if position < offset + rows:
                return self._shard_rows(epoch, int(shard))[position - offset]
            offset += rows
        raise IndexError(position)

    def _shard_rows(self, epoch: int, shard: int) -> list[dict[str, Any]]:
        key = (epoch, shard)
        if self._cache is None or self._cache[0] != key:
            rows = pq.read_table(self._files[shard]).to_pylist()
            order = _rng(self.seed, epoch, shard).permutation(len(rows))
            self._cache = (key, [rows[i] for i in order])
        return self._cache[1]


def read_instances(path: str, limit: int) -> Iterator[Instance]:
    """The instances of a Parquet file or directory (or `demo`, `demo-js`) in file order, unshuffled and
    unsplit; the first `limit` (0 = all). SchemaError names the shard and row of a bad one."""
    n = 0
    for shard in shard_files(resolve_path(path)):
        for i, row in enumerate(pq.read_table(shard).to_pylist()):
            yield Instance.from_row(row, where=f"{shard}: row {i}")
            n += 1
            if limit and n >= limit:
                return
