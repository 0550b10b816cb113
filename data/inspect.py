"""`python -m data.inspect DIR`: the schema, the counts and one instance of a built dataset.

Reads the complete shards through `pyarrow.dataset` (skipping `_`-prefixed files, as every
reader does) and the build's `_manifest.json` when there is one. Long file contents are cut
to `--chars` characters unless `--full` is given.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads

from conf.errors import fail
from data.mining.filters import REASONS
from data.shards import read_manifest


def _clip(text: str, chars: int) -> str:
    if chars <= 0 or len(text) <= chars:
        return text
    return f"{text[:chars]}... [{len(text) - chars} more characters]"


def format_instance(row: dict[str, Any], chars: int) -> str:
    """A readable rendering of one instance: scalar fields, then each file and the patches."""
    lines = []
    for key, value in row.items():
        if key in ("code_context", "oracle_new_content"):
            sizes = ", ".join(f"{f['path']} ({len(f['content'])} chars)" for f in value)
            lines.append(f"{key}: {len(value)} files: {sizes}")
        elif key not in ("patch", "test_patch", "problem_statement"):
            lines.append(f"{key}: {value}")
    lines.append("problem_statement:\n" + _clip(row["problem_statement"], chars))
    lines.append("patch:\n" + _clip(row["patch"], chars))
    if row.get("test_patch"):
        lines.append("test_patch:\n" + _clip(row["test_patch"], chars))
    for f in row["code_context"]:
        lines.append(f"### {f['path']}\n" + _clip(f["content"], chars))
    return "\n".join(lines)


def inspect(path: str, index: int, chars: int) -> str:
    """The report `python -m data.inspect` prints."""
    if not Path(path).is_dir():
        raise FileNotFoundError(f"{path}: no such directory")
    dataset = pads.dataset(path, format="parquet")
    out = [f"dataset: {path}", f"shards: {len(dataset.files)}", "schema:", str(dataset.schema)]
    total = dataset.count_rows()
    out.append(f"instances: {total}")
    manifest = read_manifest(path)
    if manifest is not None:
        out.append(f"schema_version: {manifest['schema_version']}  created_at: {manifest['created_at']}")
        out.append(f"source: {manifest['source']}")
        counts = manifest["counts"]
        out.append("counts: " + ", ".join(f"{r}={counts[r]}" for r in REASONS if counts.get(r)))
    if total:
        if not 0 <= index < total:
            raise IndexError(f"--index {index} is out of range: the dataset has {total} instances")
        row = dataset.take([index]).to_pylist()[0]
        out.append(f"--- instance {index} ---")
        out.append(format_instance(row, chars))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m data.inspect", description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="a directory built by python -m data.build")
    ap.add_argument("--index", type=int, default=0, help="which instance to show")
    ap.add_argument("--chars", type=int, default=1500, help="cut long texts to this many characters")
    ap.add_argument("--full", action="store_true", help="do not cut long texts")
    args = ap.parse_args(argv)
    try:
        print(inspect(args.dir, args.index, 0 if args.full else args.chars))
    except (OSError, IndexError) as e:
        fail(ap.prog, str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
