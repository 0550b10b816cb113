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

import pyarrow as pa
import pyarrow.parquet as pq

from conf.io import write_text
from data.schema import INSTANCE_SCHEMA, SchemaError, to_table

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
    """Write `_manifest.json` atomically (conf/io.py)."""
    path = out_dir / MANIFEST
    write_text(path, json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    return path


def read_manifest(out_dir: str | Path) -> dict[str, Any] | None:
    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Equal types, ignoring the nullability of nested fields (writers differ in it)."""
    if pa.types.is_list(a) and pa.types.is_list(b):
        return _same_type(a.value_type, b.value_type)
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return [f.name for f in a] == [f.name for f in b] and all(
            _same_type(x.type, y.type) for x, y in zip(a, b, strict=True)
        )
    return a.equals(b)


def check_shard(path: Path) -> int:
    """The number of rows of a shard, after checking what can be checked without reading its
    data: that it is a readable Parquet file (its footer), that its columns are the instance
    schema's (a field added later may be absent: older versions), and that no required field
    holds a null (the row groups' statistics). SchemaError names the file, the field and the
    rows; the loader checks each row again when it reaches it."""
    try:
        meta = pq.ParquetFile(path)
        schema = meta.schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise SchemaError(f"{path}: not a readable Parquet file ({exc})") from None
    for field in INSTANCE_SCHEMA:
        if field.name not in schema.names:
            if field.nullable:
                continue  # a field a newer schema version appended
            raise SchemaError(f"{path}: field {field.name!r} is missing")
        got = schema.field(field.name).type
        if not _same_type(got, field.type):
            raise SchemaError(f"{path}: field {field.name!r} has type {got}, the instance schema says {field.type}")
    required = {f.name for f in INSTANCE_SCHEMA if not f.nullable and pa.types.is_string(f.type)}
    start = 0
    for index in range(meta.num_row_groups):
        group = meta.metadata.row_group(index)
        for c in range(group.num_columns):
            column = group.column(c)
            stats = column.statistics
            if column.path_in_schema in required and stats is not None and stats.null_count:
                raise SchemaError(
                    f"{path}: rows {start}-{start + group.num_rows - 1}: field "
                    f"{column.path_in_schema!r} is null in {stats.null_count} row(s)"
                )
        start += group.num_rows
    return int(meta.metadata.num_rows)


def unlabelled_rows(path: Path) -> int:
    """Rows of a shard without FAIL_TO_PASS labels (`data.validate` writes them): every row of a
    shard older than schema version 3. Reads that one column only."""
    meta = pq.ParquetFile(path)
    if "FAIL_TO_PASS" not in meta.schema_arrow.names:
        return int(meta.metadata.num_rows)
    return int(pq.read_table(path, columns=["FAIL_TO_PASS"]).column(0).null_count)


def check_manifest(directory: Path, shards: list[Path]) -> None:
    """A data directory is trained on only when `_manifest.json` lists exactly its shards: a
    missing manifest is an interrupted or hand-made directory, a shard it does not list (or
    lists but is absent) a mix of builds."""
    manifest = read_manifest(directory)
    if manifest is None:
        raise SchemaError(
            f"{directory}: no {MANIFEST} (an interrupted `data.build`, or a hand-made directory: "
            "set data.require_manifest=false to train on it anyway)"
        )
    listed = {s["name"] for s in manifest.get("shards", [])}
    present = {str(p.relative_to(directory)) for p in shards}
    if listed != present:
        extra, absent = sorted(present - listed), sorted(listed - present)
        raise SchemaError(
            f"{directory}: {MANIFEST} does not match the shards present (not listed: {extra[:3]}, "
            f"listed but absent: {absent[:3]}); rebuild, or set data.require_manifest=false"
        )
