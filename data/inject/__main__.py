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
as `git_snapshot`). The injector's logic is data/inject/injector.py; this command runs its
tests (`inject`: baseline, bug and inverse-check runs on `pool`, anything with
`run(jobs, what) -> runs` in order: the test-runner pool, or `InProcess(Runner)`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from actors.cluster.join import ray_session
from conf import logs
from conf.config import ExecutionConfig
from conf.errors import UserError, fail
from conf.progress import Progress
from data.inject.injector import (
    BugCandidate,
    BugOutcome,
    as_instance,
    buggy_tree,
    candidates,
    prove,
    tree_patch,
    working_tree,
)
from data.inject.mutations import OPERATORS
from data.loader import read_instances
from data.schema import Instance
from data.shards import ShardWriter, prepare_output, write_manifest
from reward.execution.environments import EnvSpec
from reward.execution.pool import TestPool
from reward.execution.runner import Runner, TestJob, TestRun

EXAMPLES = 5  # per reason, in the manifest
REPEATS = 2  # runs of every tree: a bug's failures must repeat to count


class InProcess:
    """The pool's interface over one Runner in this process."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def run(self, jobs: Sequence[TestJob], what: str = "test runs") -> list[TestRun]:
        with Progress("inject", what, len(jobs)) as progress:
            out = []
            for job in jobs:
                out.append(self.runner.run(job))
                progress.update(1)
        return out


def _job(inst: Instance, tree: dict[str, str], job_id: str) -> TestJob:
    """Tests of `tree` (the repository's files) with the source's test patch."""
    return TestJob(inst, tree_patch(inst, tree), job_id=job_id)


def _passing(runs: Sequence[TestRun]) -> tuple[set[str], str]:
    """The tests that passed in every run, or ("", why) when a run had no outcome."""
    for run in runs:
        if run.status != "ok":
            return set(), f"{run.status}: {run.reason or ''}".strip()
    names = set().union(*(r.outcomes for r in runs))
    return {t for t in names if all(r.outcomes.get(t) == "passed" for r in runs)}, ""


def inject(
    sources: Sequence[Instance],
    pool: Any,
    *,
    per_instance: int = 4,
    combine: int = 1,
    seed: int = 0,
    operators: tuple[str, ...] = OPERATORS,
    seconds: dict[str, float] | None = None,
) -> list[BugOutcome]:
    """Every source's outcome (when it was rejected) and every candidate's, in order; the
    seconds of each stage (baseline, bugs, inverse) go into `seconds` when given."""
    seconds = {} if seconds is None else seconds
    clock = time.monotonic()
    outcomes: list[BugOutcome] = []
    usable = []
    for inst in sources:
        spec = (EnvSpec.from_json(inst.environment) if inst.environment else None) or EnvSpec()
        if spec.snapshot != "files":
            outcomes.append(BugOutcome(None, inst.instance_id, "git_snapshot", detail="needs a commit holding the bug"))
        elif not inst.test_patch:
            outcomes.append(BugOutcome(None, inst.instance_id, "no_tests"))
        else:
            usable.append(inst)
    jobs = [_job(inst, working_tree(inst), f"{i}/base/{r}") for i, inst in enumerate(usable) for r in range(REPEATS)]
    runs = pool.run(jobs, what="baseline runs")
    seconds["baseline"], clock = time.monotonic() - clock, time.monotonic()
    baselines: dict[int, set[str]] = {}
    bugs: list[tuple[int, BugCandidate]] = []
    for i, inst in enumerate(usable):
        passing, why = _passing(runs[i * REPEATS : (i + 1) * REPEATS])
        if not passing:
            outcomes.append(BugOutcome(None, inst.instance_id, "baseline_failed", detail=why or "no test passes"))
            continue
        baselines[i] = passing
        bugs += [(i, c) for c in candidates(inst, per_instance, combine, seed, operators)]
    jobs = [
        _job(c.source, buggy_tree(c.source, c.bug), f"{j}/bug/{r}")
        for j, (_, c) in enumerate(bugs)
        for r in range(REPEATS)
    ]
    runs = pool.run(jobs, what="bug runs")
    seconds["bugs"], clock = time.monotonic() - clock, time.monotonic()
    proved = []
    for j, (i, cand) in enumerate(bugs):
        bug_runs = runs[j * REPEATS : (j + 1) * REPEATS]
        reason, f2p, detail = prove(cand, baselines[i], bug_runs)
        if reason != "kept":
            outcomes.append(BugOutcome(cand, cand.source.instance_id, reason, detail=detail))
        else:
            proved.append((i, cand, f2p, bug_runs))
    outcomes += _inverse_checked(proved, baselines, pool)
    seconds["inverse"] = time.monotonic() - clock
    return outcomes


def _inverse_checked(
    proved: list[tuple[int, BugCandidate, set[str], Sequence[TestRun]]], baselines: dict[int, set[str]], pool: Any
) -> list[BugOutcome]:
    """The proved bugs whose every file matters (a one-file bug needs no check)."""
    jobs, owners = [], []
    for j, (_, cand, _, _) in enumerate(proved):
        paths = sorted({m.path for m in cand.bug})
        if len(paths) < 2:
            continue
        for path in paths:
            rest = [m for m in cand.bug if m.path != path]
            jobs.append(_job(cand.source, buggy_tree(cand.source, rest), f"{j}/revert/{path}"))
            owners.append((j, path))
    runs = pool.run(jobs, what="inverse checks") if jobs else []
    useless: dict[int, str] = {}
    for (j, path), run in zip(owners, runs, strict=True):
        f2p = proved[j][2]
        if run.status != "ok" or not any(run.outcomes.get(t) == "passed" for t in f2p):
            useless.setdefault(j, path)
    out = []
    kept_by_source: dict[str, int] = {}
    seen_patches: set[str] = set()
    for j, (i, cand, f2p, bug_runs) in enumerate(proved):
        src_id = cand.source.instance_id
        if j in useless:
            out.append(BugOutcome(cand, src_id, "file_does_not_matter", detail=useless[j]))
            continue
        k = kept_by_source.get(src_id, 0)
        inst = as_instance(cand, k, f2p, baselines[i], bug_runs)
        if inst.patch in seen_patches:  # the same bug drawn twice (two mutations with one effect)
            out.append(BugOutcome(cand, src_id, "duplicate"))
            continue
        seen_patches.add(inst.patch)
        kept_by_source[src_id] = k + 1
        out.append(BugOutcome(cand, src_id, "kept", inst))
    return out


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
