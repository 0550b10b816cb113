"""Score a JSONL file of outputs or patches: `python -m reward.score --input IN.jsonl --output OUT.jsonl`.

Each input line is one of:
  (a) `id`, `code_context` (path -> content), `oracle_new_content` (path -> content), `output`
      (the model's text): the SWE-RL reward, rules 1-5;
  (b) `id`, `oracle_patch`, `pred_patch` (a unified diff, or a list of them): rule 6.
Other fields are ignored. Each output line, one per input line and in input order, is
`{"id": ..., "reward": float | null, "error": null | str}`. A bad line (bad JSON, a missing or
mistyped field) gets `reward: null` and an error naming the field; the other lines still score.
The trainer's time cap applies (`--max-pair-seconds`, default as `reward.max_pair_seconds`; 0 =
none): a diff pair whose similarity would take longer scores 0 with error "timeout: <path>",
so one hostile line cannot stall the file; a line built to defeat that estimate is stopped
once it has used `--max-pair-seconds` x `reward.answer_cpu_factor` seconds of CPU (the
trainer's CPU budget per answer, reward/workers.py) or after `--line-timeout-s` of wall clock
(its worker process is killed and replaced) and scores 0 with error "timeout: ...", as the
trainer's reward pool does with a call over its limits. The output is
written to a temporary file renamed into place when complete, and may not be the input.
Progress goes to stderr on long inputs; lines are scored in `--workers N` processes (order is kept).

Imports only the standard library and the reward package (no Ray, no torch): it starts fast.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from conf.config import RewardConfig
from conf.errors import UserError, fail
from conf.io import atomic_write, check_output
from reward.core import RewardResult, score_output, score_patches
from reward.workers import LimitedPool

PROGRESS_INTERVAL_S = 5.0
# A line still scoring after this long is given up (reward 0, error "timeout: ..."). The pair
# cap stops ordinary large diffs in well under a second of estimation; what it misses took up to
# ~20 s in the fuzz pass (docs/benchmarks.md): 60 s stops those without touching real lines.
LINE_TIMEOUT_S = 60.0


class BadLine(ValueError):
    """A line that cannot be scored; the message names the field."""


def _files_field(row: dict[str, Any], name: str) -> dict[str, str]:
    value = row[name]
    if not isinstance(value, dict):
        raise BadLine(f"field {name}: expected an object of path -> file content, got {type(value).__name__}")
    for path, content in value.items():
        if not isinstance(content, str):
            raise BadLine(f"field {name}[{path!r}]: expected a string, got {type(content).__name__}")
    return value


def _patches_field(row: dict[str, Any], name: str) -> str | list[str]:
    value = row[name]
    if isinstance(value, str) or (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        return value
    raise BadLine(f"field {name}: expected a unified diff string or a list of them, got {type(value).__name__}")


def _require(row: dict[str, Any], names: Iterable[str]) -> None:
    missing = [name for name in names if name not in row]
    if missing:
        raise BadLine(f"missing field{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")


OUTPUT_FIELDS = ("code_context", "oracle_new_content", "output")  # kind (a)
PATCH_FIELDS = ("oracle_patch", "pred_patch")  # kind (b)


def score_row(row: dict[str, Any], max_pair_seconds: float | None = None) -> RewardResult:
    """Score one parsed line of either kind; raises BadLine naming the field.

    A line is kind (a) when it has every field of (a), else kind (b) when it has every field of
    (b); other fields are ignored. Otherwise the kind it comes closest to (more of its fields
    present; (a) on a tie) names what it lacks."""
    if all(name in row for name in OUTPUT_FIELDS):
        if not isinstance(row["output"], str):
            raise BadLine(f"field output: expected a string, got {type(row['output']).__name__}")
        context, oracle = _files_field(row, "code_context"), _files_field(row, "oracle_new_content")
        return score_output(context, oracle, row["output"], max_pair_seconds=max_pair_seconds)
    if all(name in row for name in PATCH_FIELDS):
        oracle_patch, pred_patch = _patches_field(row, "oracle_patch"), _patches_field(row, "pred_patch")
        return score_patches(oracle_patch, pred_patch, max_pair_seconds=max_pair_seconds)
    has_a, has_b = (sum(name in row for name in kind) for kind in (OUTPUT_FIELDS, PATCH_FIELDS))
    if has_a or has_b:
        _require(row, OUTPUT_FIELDS if has_a >= has_b else PATCH_FIELDS)
    raise BadLine("missing field: output (with code_context and oracle_new_content) or oracle_patch and pred_patch")


def score_line(line: str | bytes, max_pair_seconds: float | None = None) -> dict[str, Any]:
    """One input line (text, or raw bytes decoded here as UTF-8) -> one output record; never raises."""
    row_id = None
    try:
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                return {"id": None, "reward": None, "error": f"line: not UTF-8 (byte {exc.start}: {exc.reason})"}
        try:
            row = json.loads(line)
        except RecursionError:  # nesting deeper than Python's recursion limit: bad input, not a bug
            return {"id": None, "reward": None, "error": "line: bad JSON (nested too deeply)"}
        if not isinstance(row, dict):
            raise BadLine(f"line: expected a JSON object, got {type(row).__name__}")
        row_id = row.get("id")  # echoed as given (null when absent); its absence is reported below
        _require(row, ("id",))
        if not isinstance(row_id, (str, int)) or isinstance(row_id, bool):
            raise BadLine(f"field id: expected a string or an integer, got {type(row_id).__name__}")
        result = score_row(row, max_pair_seconds)
        return {"id": row_id, "reward": result.reward, "error": result.error}
    except json.JSONDecodeError as exc:
        return {"id": None, "reward": None, "error": f"line: bad JSON ({exc})"}
    except BadLine as exc:
        return {"id": row_id, "reward": None, "error": str(exc)}
    except Exception as exc:  # a bug must cost one line, not the file: report it on that line
        return {"id": row_id, "reward": None, "error": f"internal error: {exc!r}"}


def timed_out(line: bytes, reason: str) -> dict[str, Any]:
    """The record of a line given up by its worker (`LimitedPool`'s reason: "took longer than
    60 s", "used more than 30 s of CPU"), with its id when the line is readable."""
    try:
        row = json.loads(line)
        row_id = row.get("id") if isinstance(row, dict) else None
    except (ValueError, RecursionError):
        row_id = None
    return {"id": row_id, "reward": 0.0, "error": f"timeout: scoring the line {reason}"}


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    # Bytes, decoded line by line in score_line: one undecodable line costs that line only.
    for line in stream:
        yield line.rstrip(b"\n")


def _progress(done: int, total: int, started: float) -> None:
    elapsed = time.monotonic() - started
    print(f"reward.score: {done}/{total} lines, {done / max(elapsed, 1e-9):.0f} lines/s", file=sys.stderr, flush=True)


def run(
    input_path: str,
    output_path: str,
    *,
    workers: int = 1,
    max_pair_seconds: float | None = RewardConfig.max_pair_seconds,
    line_timeout_s: float | None = LINE_TIMEOUT_S,
    progress_interval_s: float = PROGRESS_INTERVAL_S,
) -> dict[str, int]:
    """Score input_path into output_path; returns counts {lines, scored, malformed, bad, timeouts}."""
    check_output(output_path, [input_path], what="--output")
    with open(input_path, "rb") as f:
        total = sum(1 for _ in f)
    counts = {"lines": 0, "scored": 0, "malformed": 0, "bad": 0, "timeouts": 0}
    started = last_report = time.monotonic()
    score = functools.partial(score_line, max_pair_seconds=max_pair_seconds)
    cpu_s = max_pair_seconds * RewardConfig.answer_cpu_factor if max_pair_seconds else None
    pool = LimitedPool(score, workers, line_timeout_s, cpu_s)
    try:
        with open(input_path, "rb") as src, atomic_write(output_path, encoding="utf-8") as dst:
            records = pool.map(_lines(src), on_limit=timed_out)
            for record in records:
                dst.write(json.dumps(record) + "\n")
                counts["lines"] += 1
                counts[
                    "bad" if record["reward"] is None else "malformed" if record["reward"] == -1.0 else "scored"
                ] += 1
                counts["timeouts"] += (record["error"] or "").startswith(("timeout:", "too large:"))
                if time.monotonic() - last_report >= progress_interval_s:
                    _progress(counts["lines"], total, started)
                    last_report = time.monotonic()
    finally:
        pool.close()
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reward.score", description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="JSONL file, one output or patch pair per line")
    parser.add_argument("--output", required=True, help="JSONL file written with id, reward, error per line")
    parser.add_argument("--workers", type=int, default=1, help="processes scoring in parallel (default 1)")
    parser.add_argument(
        "--max-pair-seconds",
        type=float,
        default=RewardConfig.max_pair_seconds,
        help="a diff pair whose similarity would take longer scores 0 with error 'timeout: <path>', as in the "
        f"trainer; 0 = no cap (default {RewardConfig.max_pair_seconds:g})",
    )
    parser.add_argument(
        "--line-timeout-s",
        type=float,
        default=LINE_TIMEOUT_S,
        help=f"a line still scoring after this many seconds scores 0 with error 'timeout: ...'; 0 = no limit "
        f"(default {LINE_TIMEOUT_S:g})",
    )
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers={args.workers}: must be >= 1")
    for name in ("max_pair_seconds", "line_timeout_s"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name):g}: must be >= 0")
    if not Path(args.input).is_file():
        parser.error(f"--input {args.input}: no such file")
    try:
        counts = run(
            args.input,
            args.output,
            workers=args.workers,
            max_pair_seconds=args.max_pair_seconds or None,
            line_timeout_s=args.line_timeout_s or None,
        )
    except UserError as exc:
        fail(parser.prog, str(exc))
    print(
        f"reward.score: {counts['lines']} lines: {counts['scored']} scored, {counts['malformed']} malformed "
        f"(reward -1), {counts['bad']} bad lines (reward null), {counts['timeouts']} over the time cap "
        f"-> {args.output}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
