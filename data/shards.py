"""Sharded Parquet output with a dataset manifest; an interrupted build leaves no half shard.

Layout of an output directory:
    shard-00000.parquet ...   complete shards of `shard_size` instances (the last may be shorter)
    _shard-00001.parquet      a shard being written (renamed with os.replace when complete)
    _manifest.json            source, counts per filter, creation time, schema version, shards
pyarrow's dataset discovery skips names starting with "_" or ".", so
`pyarrow.dataset.dataset(DIR)` reads exactly the complete shards, during and after a build.
Rows are flushed in row groups of `row_group_size`, so memory holds at most one row group.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from data.schema import INSTANCE_SCHEMA, to_table

MANIFEST = "_manifest.json"
_SHARD_RE = re.compile(r"^_?shard-\d{5}\.parquet$")


class OutputExistsError(FileExistsError):
    """The output directory already holds a dataset and overwriting was not asked for."""


def prepare_output(out_dir: str | Path, overwrite: bool) -> Path:
    """Create `out_dir`, or clear a previous build's shards and manifest from it if `overwrite`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ours = sorted(p for p in out.iterdir() if _SHARD_RE.match(p.name) or p.name.startswith(MANIFEST))
    complete = [p for p in ours if not p.name.startswith("_shard-")]
    if complete and not overwrite:
        raise OutputExistsError(f"{out}: already holds a dataset ({complete[0].name}); pass --overwrite")
    for p in ours:  # leftovers of an interrupted build are always removed
        p.unlink()
    return out


class ShardWriter:
    """Write instances to numbered shards; use as a context manager (an error discards the open shard)."""

    def __init__(self, out_dir: Path, shard_size: int, row_group_size: int = 64) -> None:
        if shard_size < 1 or row_group_size < 1:
            raise ValueError(f"shard_size and row_group_size must be >= 1, got {shard_size}, {row_group_size}")
        self.out_dir = out_dir
        self.shard_size = shard_size
        self.row_group_size = min(row_group_size, shard_size)
        self.shards: list[dict[str, Any]] = []  # {"name", "rows"} of every completed shard
        self._writer: pq.ParquetWriter | None = None
        self._rows_in_shard = 0
        self._pending: list[Mapping[str, Any]] = []

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _tmp(self) -> Path:
        return self.out_dir / f"_shard-{len(self.shards):05d}.parquet"

    def write(self, row: Mapping[str, Any]) -> None:
        self._pending.append(row)
        if len(self._pending) >= self.row_group_size:
            self._flush()

    def _flush(self) -> None:
        while self._pending:
            room = self.shard_size - self._rows_in_shard
            batch, self._pending = self._pending[:room], self._pending[room:]
            if self._writer is None:
                self._writer = pq.ParquetWriter(self._tmp(), INSTANCE_SCHEMA, compression="zstd")
            self._writer.write_table(to_table(batch))
            self._rows_in_shard += len(batch)
            if self._rows_in_shard == self.shard_size:
                self._seal()

    def _seal(self) -> None:
        assert self._writer is not None
        self._writer.close()
        name = f"shard-{len(self.shards):05d}.parquet"
        os.replace(self._tmp(), self.out_dir / name)  # atomic: readers never see a partial shard
        self.shards.append({"name": name, "rows": self._rows_in_shard})
        self._writer, self._rows_in_shard = None, 0

    def close(self) -> None:
        self._flush()
        if self._writer is not None:
            self._seal()

    def abort(self) -> None:
        """Drop the shard being written (completed shards stay: they are valid on their own)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._tmp().unlink(missing_ok=True)
        self._pending = []


def write_manifest(out_dir: Path, manifest: Mapping[str, Any]) -> Path:
    """Write `_manifest.json` atomically (a temporary file, then os.replace)."""
    path = out_dir / MANIFEST
    tmp = out_dir / f"{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_manifest(out_dir: str | Path) -> dict[str, Any] | None:
    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))
