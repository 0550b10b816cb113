"""`python -m data.validate`: run every instance's tests and keep those whose oracle fixes something.

    python -m data.validate --data IN --out DIR [--git CLONE ...] [--environment JSON]
        [--workers N | --ray-address ADDR] [--limit N] [--overwrite]

For each instance with a test patch, its tests (the test files the test patch touches) run in
the sandbox on the test-runner pool (actors/test_pool.py) three times:

    before   the base commit with the test patch only
    after    with the oracle patch and the test patch, twice

FAIL_TO_PASS = tests that do not pass before and pass in both after runs; PASS_TO_PASS = tests
that pass in all three. A test whose two after runs disagree is flaky and kept out of both
(counted). An instance is kept when it has at least one FAIL_TO_PASS test; kept instances are
written as schema-v3 Parquet shards (FAIL_TO_PASS, PASS_TO_PASS and the environment they were
validated in) with `_manifest.json`, which counts every outcome and keeps the first examples of
each:

    kept, no_test_patch, env_failed, no_interpreter, no_snapshot, oracle_fails (the patch does
    not apply, or the after runs produce no report), timeout, no_fail_to_pass, lost

Instances without an environment get `--environment` (a JSON EnvSpec, reward/execution/
environments.py; default: their own files and the project's interpreter, as the demo set).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import pyarrow.parquet as pq

from conf import logs
from conf.config import ExecutionConfig
from conf.errors import UserError, fail
from data.loader import resolve_path, shard_files
from data.schema import Instance
from data.shards import ShardWriter, prepare_output, write_manifest
from reward.execution.environments import EnvSpec

log = logging.getLogger(__name__)
EXAMPLES = 5  # per outcome, in the manifest


@dataclass(frozen=True)
class Labels:
    outcome: str  # "kept" or the reason it was dropped
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    flaky: tuple[str, ...] = ()
    reason: str = ""


def label(before: object, after: Iterable[object]) -> Labels:
    """FAIL_TO_PASS and PASS_TO_PASS from one before run and the after runs (TestRun objects)."""
    runs = [before, *after]
    for run in runs:
        status, reason = run.status, run.reason or ""  # type: ignore[attr-defined]
        if status == "ok":
            continue
        if status in ("env_failed", "no_interpreter", "no_snapshot", "timeout", "lost"):
            return Labels(status, reason=reason)
        return Labels("oracle_fails" if run is not before else "env_failed", reason=f"{status}: {reason}")
    b, *a = (run.outcomes for run in runs)  # type: ignore[attr-defined]
    names = set(b).union(*a)
    flaky = sorted(t for t in names if len({x.get(t) for x in a}) > 1)
    passed_after = {t for t in names if all(x.get(t) == "passed" for x in a)} - set(flaky)
    f2p = sorted(t for t in passed_after if b.get(t) != "passed")
    p2p = sorted(t for t in passed_after if b.get(t) == "passed")
    if not f2p:
        return Labels("no_fail_to_pass", (), tuple(p2p), tuple(flaky), "no test fails before and passes after")
    return Labels("kept", tuple(f2p), tuple(p2p), tuple(flaky))


def read_instances(path: str, limit: int) -> Iterator[Instance]:
    n = 0
    for shard in shard_files(resolve_path(path)):
        for i, row in enumerate(pq.read_table(shard).to_pylist()):
            yield Instance.from_row(row, where=f"{shard}: row {i}")
            n += 1
            if limit and n >= limit:
                return


def validate(instances: list[Instance], pool: object, repeats: int = 2) -> list[Labels]:
    """Labels of every instance, running its tests on `pool` (a TestPool)."""
    from reward.execution.runner import TestJob

    jobs, slots = [], []
    for index, inst in enumerate(instances):
        if not inst.test_patch:
            continue
        jobs.append(TestJob(inst, "", job_id=f"{index}/before"))
        jobs += [TestJob(inst, inst.patch, job_id=f"{index}/after{k}") for k in range(repeats)]
        slots.append(index)
    runs = pool.run(jobs, what="validation runs")  # type: ignore[attr-defined]
    by_index: dict[int, list[object]] = defaultdict(list)
    for run in runs:
        by_index[int(run.job_id.split("/")[0])].append(run)
    return [
        label(by_index[i][0], by_index[i][1:]) if i in by_index else Labels("no_test_patch")
        for i in range(len(instances))
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data.validate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="Parquet file or directory of instances, or 'demo'")
    parser.add_argument("--out", required=True, help="output directory: v3 shards and _manifest.json")
    parser.add_argument("--git", action="append", default=[], help="a local clone of a repository (repeatable)")
    parser.add_argument("--environment", default=None, help="EnvSpec JSON for instances that carry none")
    parser.add_argument("--workers", type=int, default=2, help="test runners on a local Ray (default 2)")
    parser.add_argument("--ray-address", default="", help="join this Ray cluster instead of starting one")
    parser.add_argument("--limit", type=int, default=0, help="validate at most this many instances (0 = all)")
    parser.add_argument("--wall-s", type=float, default=ExecutionConfig.wall_s, help="per test run")
    parser.add_argument("--cache-dir", default=ExecutionConfig.cache_dir, help="environments and snapshots")
    parser.add_argument("--overwrite", action="store_true", help="replace a dataset already in --out")
    args = parser.parse_args(argv)
    logs.setup()
    try:
        default_env = EnvSpec.from_json(args.environment) if args.environment else None
        instances = list(read_instances(args.data, args.limit))
        out = prepare_output(args.out, args.overwrite)
    except (UserError, OSError, ValueError) as exc:
        fail(parser.prog, str(exc))
    if default_env is not None:
        instances = [i if i.environment else replace(i, environment=default_env.to_json()) for i in instances]
    cfg = ExecutionConfig(
        num_runners=args.workers, num_cpus=1.0, cache_dir=args.cache_dir, repos=args.git, wall_s=args.wall_s
    )
    started = time.monotonic()
    from actors.test_pool import TestPool
    from data.parallel import ray_session

    with ray_session(args.ray_address, max(args.workers, 1)):
        pool = TestPool(cfg)
        labels = validate(instances, pool)
        stats = pool.stats()
        pool.shutdown()
    counts: Counter[str] = Counter(lab.outcome for lab in labels)
    examples: dict[str, list[str]] = defaultdict(list)
    with ShardWriter(out, shard_size=1000) as writer:
        for inst, lab in zip(instances, labels, strict=True):
            if len(examples[lab.outcome]) < EXAMPLES:
                examples[lab.outcome].append(f"{inst.instance_id}: {lab.reason}" if lab.reason else inst.instance_id)
            if lab.outcome == "kept":
                spec = inst.environment or EnvSpec().to_json()
                row = replace(inst, fail_to_pass=lab.fail_to_pass, pass_to_pass=lab.pass_to_pass, environment=spec)
                writer.write(row.to_row())
    manifest = {
        "source": args.data,
        "instances": len(instances),
        "kept": counts["kept"],
        "counts": dict(counts),
        "examples": dict(examples),
        "flaky_tests": sum(len(lab.flaky) for lab in labels),
        "shards": writer.shards,
        "pool": stats,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    write_manifest(out, manifest)
    print(json.dumps({k: manifest[k] for k in ("instances", "kept", "counts", "flaky_tests", "elapsed_s")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
