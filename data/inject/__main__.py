"""`python -m data.inject`: validated instances made by injecting bugs into working code.

    python -m data.inject --data demo --out DIR [--per-instance 4] [--combine 1] [--seed 0]
        [--operators binop,compare,...] [--workers 2 | --ray-address ADDR] [--limit N]
        [--wall-s 30] [--overwrite]

The working code is each instance of `--data` after its fix, with its tests (validated data:
`python -m data.validate` makes it; the demo set is). The rules injector (data/inject/
injector.py) draws `--per-instance` bugs per instance, each of `--combine` mutations
(data/inject/mutations.py: operators, comparisons, conditions, off-by-one, constants, swapped
arguments, dropped returns and statements; never in a test file), and keeps those the tests
prove: the same baseline tests fail in both runs with the bug, every other one passes, and
every file the bug touches matters. Kept instances are schema-v3 Parquet shards under `--out`
that every reward kind and evaluation mode takes (`problem_source` "injected:rules:<ops>");
`_manifest.json` has the funnel (sources, candidates, kept, each rejection reason with
examples) and the seconds per stage.

Tests run in the sandbox on the test-runner pool (`--workers` runners on a local Ray, or the
cluster at `--ray-address`), or `--workers 0` one by one in this process. `--wall-s` bounds
each run: a bug that loops forever costs that much, twice, and is rejected (`run_failed`).
Only instances whose snapshot is their files can carry the buggy tree (the others are counted
as `git_snapshot`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict

from actors.cluster.join import ray_session
from conf import logs
from conf.config import ExecutionConfig
from conf.errors import UserError, fail
from data.inject.injector import InProcess, inject
from data.inject.mutations import OPERATORS
from data.loader import read_instances
from data.shards import ShardWriter, prepare_output, write_manifest
from reward.execution.pool import TestPool
from reward.execution.runner import Runner

EXAMPLES = 5  # per reason, in the manifest


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m data.inject", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="validated instances: a Parquet file or directory, or 'demo'")
    p.add_argument("--out", required=True, help="output directory: v3 shards and _manifest.json")
    p.add_argument("--per-instance", type=int, default=4, help="bugs drawn per instance (default 4)")
    p.add_argument("--combine", type=int, default=1, help="mutations per bug (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seeds the draws (default 0)")
    p.add_argument("--operators", default=",".join(OPERATORS), help=f"comma-separated, of {', '.join(OPERATORS)}")
    p.add_argument("--workers", type=int, default=2, help="test runners on a local Ray; 0 = in this process")
    p.add_argument("--ray-address", default="", help="join this Ray cluster instead of starting one")
    p.add_argument("--limit", type=int, default=0, help="use at most this many instances (0 = all)")
    p.add_argument("--wall-s", type=float, default=30.0, help="wall clock of one test run (default 30)")
    p.add_argument("--cache-dir", default=ExecutionConfig.cache_dir, help="environments and snapshots")
    p.add_argument("--overwrite", action="store_true", help="replace a dataset already in --out")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logs.setup()
    operators = tuple(o.strip() for o in args.operators.split(",") if o.strip())
    unknown = sorted(set(operators) - set(OPERATORS))
    if unknown or not operators:
        fail(parser.prog, f"--operators: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(OPERATORS)}")
    if args.per_instance < 1 or args.combine < 1 or args.workers < 0 or args.wall_s <= 0:
        fail(parser.prog, "--per-instance and --combine must be >= 1, --workers >= 0, --wall-s > 0")
    try:
        sources = list(read_instances(args.data, args.limit))
        out = prepare_output(args.out, args.overwrite)
    except (UserError, OSError, ValueError) as exc:
        fail(parser.prog, str(exc))
    cfg = ExecutionConfig(num_runners=max(args.workers, 1), num_cpus=1.0, cache_dir=args.cache_dir, wall_s=args.wall_s)
    started = time.monotonic()
    options = {"per_instance": args.per_instance, "combine": args.combine, "seed": args.seed, "operators": operators}
    seconds: dict[str, float] = {}
    if args.workers == 0:
        outcomes = inject(sources, InProcess(Runner(cfg)), **options, seconds=seconds)
    else:
        with ray_session(args.ray_address, args.workers):
            pool = TestPool(cfg)
            try:
                outcomes = inject(sources, pool, **options, seconds=seconds)
            finally:
                pool.shutdown()
    counts = Counter(o.reason for o in outcomes)
    examples: dict[str, list[str]] = defaultdict(list)
    by_operator: Counter[str] = Counter()
    with ShardWriter(out, shard_size=1000) as writer:
        for o in outcomes:
            label = (
                o.source_id
                + (f" [{o.candidate.operators}]" if o.candidate else "")
                + (f": {o.detail}" if o.detail else "")
            )
            if len(examples[o.reason]) < EXAMPLES:
                examples[o.reason].append(label)
            if o.instance is not None:
                writer.write(o.instance.to_row())
                by_operator[o.candidate.operators if o.candidate else ""] += 1
    elapsed = time.monotonic() - started
    manifest = {
        "source": args.data,
        "injector": "rules",
        "options": {**options, "operators": list(operators), "wall_s": args.wall_s},
        "sources": len(sources),
        "candidates": sum(1 for o in outcomes if o.candidate is not None),
        "kept": counts["kept"],
        "counts": dict(sorted(counts.items())),
        "kept_by_operator": dict(sorted(by_operator.items())),
        "examples": dict(examples),
        "shards": writer.shards,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "elapsed_s": round(elapsed, 1),
        "seconds_per_kept": round(elapsed / counts["kept"], 1) if counts["kept"] else None,
    }
    write_manifest(out, manifest)
    keys = ("sources", "candidates", "kept", "counts", "elapsed_s", "seconds_per_kept")
    print(json.dumps({k: manifest[k] for k in keys}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
