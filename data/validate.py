"""`python -m data.validate`: run every instance's tests and keep those whose oracle fixes something.

    python -m data.validate --data IN --out DIR [reward.execution.repos=[CLONE,...]] [--environment JSON]
        [reward.execution.num_runners=N | ray.address=ADDR] [--limit N] [--overwrite]
        [reward.execution.*=...]

For each instance with a test patch, its tests (the test files the test patch touches) run in
the sandbox on the test-runner pool (reward/execution/pool.py) three times:

    before   the base commit with the test patch only
    after    with the oracle patch and the test patch, twice

The after runs' wall clock follows what the before run took (reward/execution/walls.py: 4x that,
never under `reward.execution.wall_s`), and a run out of its wall runs once more with it doubled
before it counts as a timeout.

FAIL_TO_PASS = tests that do not pass before and pass in both after runs; PASS_TO_PASS = tests
that pass in all three. A test whose two after runs disagree is flaky and kept out of both
(counted). A test that does not pass after the fix because it failed on the network (the
sandbox has none but its own loopback; NETWORK_ERROR) is in neither set: it is named in the
instance's `needs_network` (counted in the manifest's `needs_network_tests`), so what it checks
is known to be unchecked here. An instance is kept when it has at least one FAIL_TO_PASS test;
kept instances are written as schema-v4 Parquet shards (FAIL_TO_PASS, PASS_TO_PASS,
needs_network and the environment they were validated in) with `_manifest.json`, which counts
every outcome and keeps the first examples of each:

    kept, no_test_patch, no_tests (none of the test patch's files is one the runner takes: a
    JavaScript command's own selection leaves out axios's karma specs), env_failed,
    no_interpreter, no_snapshot, test_patch_fails (the test
    patch does not apply to the snapshot: not the tree it was written for), oracle_fails (the
    patch does not apply, or the after runs produce no report), timeout, no_fail_to_pass, lost

Instances without an environment get `--environment`: a JSON EnvSpec (reward/execution/
environments.py; `{}`: their own files and the project's interpreter, as the demo set), or
`derive`: each instance's own, derived from its snapshot at the base commit
(reward/execution/derivation.py: the candidates its declarations give, interpreter x
requirement set, resolved as of its date, each built and run on its tests (the test patch
applied, not the fix) until one runs them; every attempt is in `_environments.json` beside the
manifest, one line per instance in the manifest's `environments` and on the console). Without
`--environment` they are derived when a clone is given (`reward.execution.repos`: mined
instances of a real repository, whose code context alone is not the tree),
and refused in one line naming `--environment` when none is. `_labels.json` beside the
manifest has every instance's outcome, reason, FAIL_TO_PASS and PASS_TO_PASS, kept or not.
Why a test fails is read from the harness's report stream: when no test turns from failing to
passing, the reason counts the tests that still do not pass after the fix and how many of
those failed on the network (the sandbox has none).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from actors.cluster.join import ray_session
from conf import logs, overrides
from conf.config import ExecutionConfig
from conf.errors import UserError, fail
from conf.io import write_text
from data.loader import read_instances
from data.schema import Instance
from data.shards import ShardWriter, prepare_output, write_manifest
from reward.execution.derivation import Deriver, write_records
from reward.execution.environments import EnvSpec
from reward.execution.pool import TestPool
from reward.execution.runner import TestJob, TestRun, run_retried
from reward.execution.snapshots import Snapshots, SnapshotUnavailable

log = logging.getLogger(__name__)
EXAMPLES = 5  # per outcome, in the manifest
# A failure message of a test that needed the network: the sandbox has no network (a
# namespace whose loopback is down too), so these tests cannot pass there, fixed or not.
NETWORK_ERROR = re.compile(
    r"ConnectionError|NewConnectionError|Max retries exceeded|Network is unreachable|Connection refused|"
    r"Name or service not known|Temporary failure in name resolution|Cannot assign requested address|ProxyError|"
    # the recorder's own note: the test looked up or connected to a host beyond the loopback
    # (bootstrap.py: NetworkWatch), whatever its assertion says (sphinx's linkcheck tests)
    r"\[tried the network: "
)


@dataclass(frozen=True)
class Labels:
    outcome: str  # "kept" or the reason it was dropped
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    flaky: tuple[str, ...] = ()
    reason: str = ""
    needs_network: tuple[str, ...] = ()  # failed on the network after the fix: in neither label


def label(before: object, after: Iterable[object]) -> Labels:
    """FAIL_TO_PASS and PASS_TO_PASS from one before run and the after runs (TestRun objects)."""
    runs = [before, *after]
    for run in runs:
        status, reason = run.status, run.reason or ""  # type: ignore[attr-defined]
        if status == "ok":
            continue
        if status in ("env_failed", "no_interpreter", "no_snapshot", "timeout", "lost"):
            return Labels(status, reason=reason)
        if status == "patch_failed" and run is before:  # the tree is not the one the test patch is for
            return Labels("test_patch_fails", reason=reason)
        if status == "no_tests":  # no test file the runner takes (a JavaScript command's selection)
            return Labels("no_tests", reason=reason)
        return Labels("oracle_fails" if run is not before else "env_failed", reason=f"{status}: {reason}")
    b, *a = (run.outcomes for run in runs)  # type: ignore[attr-defined]
    names = set(b).union(*a)
    flaky = sorted(t for t in names if len({x.get(t) for x in a}) > 1)
    passed_after = {t for t in names if all(x.get(t) == "passed" for x in a)} - set(flaky)
    f2p = sorted(t for t in passed_after if b.get(t) != "passed")
    p2p = sorted(t for t in passed_after if b.get(t) == "passed")
    network = tuple(network_failures(runs[1:], names - passed_after - set(flaky)))
    if not f2p:
        return Labels("no_fail_to_pass", (), tuple(p2p), tuple(flaky), _why_none(runs[1]), network)
    return Labels("kept", tuple(f2p), tuple(p2p), tuple(flaky), needs_network=network)


def network_failures(after: list[object], unlabelled: set[str]) -> list[str]:
    """The tests of `unlabelled` (in neither label) whose failure in an after run was on the
    network. They are named in the instance (`needs_network`) rather than silently dropped: a
    patch that breaks what they check is not caught here, where SWE-bench's containers, with
    the internet, ran them."""
    failures = [getattr(run, "failures", {}) or {} for run in after]
    return sorted(t for t in unlabelled if any(NETWORK_ERROR.search(f.get(t, "")) for f in failures))


def _why_none(after: object) -> str:
    """The reason of a no_fail_to_pass: what still fails after the fix, and whether on the network."""
    outcomes: dict[str, str] = after.outcomes  # type: ignore[attr-defined]
    failures: dict[str, str] = getattr(after, "failures", {}) or {}
    failing = sorted(t for t, o in outcomes.items() if o in ("failed", "error"))
    network = [t for t in failing if NETWORK_ERROR.search(failures.get(t, ""))]
    why = f"no test fails before and passes after; after the fix {len(failing)} of {len(outcomes)} do not pass"
    if network:
        why += f", {len(network)} on the network (e.g. {network[0]}: {failures[network[0]][:120]})"
    return why


def validate(instances: list[Instance], pool: object, repeats: int = 2) -> list[Labels]:
    """Labels of every instance, running its tests on `pool` (a TestPool)."""

    # The before runs first: the after runs' walls follow what each took (walls.py), and a run
    # out of its wall runs once more with it doubled before it counts.
    def run(what: str) -> Callable[[list[TestJob]], list[TestRun]]:
        return lambda jobs: pool.run(jobs, what=f"validation runs {what}")  # type: ignore[attr-defined]

    slots = [i for i, inst in enumerate(instances) if inst.test_patch]
    before = run_retried(run("before the fix"), [TestJob(instances[i], "", job_id=f"{i}/before") for i in slots])
    took = [b.seconds if b.status == "ok" else None for b in before]
    after = [
        TestJob(instances[i], instances[i].patch, job_id=f"{i}/after{k}", baseline_s=seconds)
        for i, seconds in zip(slots, took, strict=True)
        for k in range(repeats)
    ]
    by_index: dict[int, list[object]] = {i: [b] for i, b in zip(slots, before, strict=True)}
    for r in run_retried(run("with the fix"), after):
        by_index[int(r.job_id.split("/")[0])].append(r)
    return [
        label(by_index[i][0], by_index[i][1:]) if i in by_index else Labels("no_test_patch")
        for i in range(len(instances))
    ]


def derive_environments(
    instances: list[Instance], cfg: ExecutionConfig, deriver: Deriver | None = None
) -> list[Instance]:
    """Each instance without an environment gets the one its snapshot declares, found by
    building its candidates and running its tests (reward/execution/derivation.py), each
    attempt kept in `deriver`; an instance whose snapshot cannot be made keeps none (its runs
    count it: no_snapshot)."""

    deriver = deriver or Deriver(cfg, need_passing=False)
    snapshots = Snapshots(Path(cfg.cache_dir).expanduser().resolve() / "snapshots", cfg.repos)
    out = []
    for inst in instances:
        if inst.environment or not inst.test_patch:
            out.append(inst)
            continue
        try:
            snapshot = snapshots.path(inst, EnvSpec(snapshot="git"))
        except SnapshotUnavailable as exc:
            log.warning("[validate] %s: %s", inst.instance_id, exc)
            out.append(replace(inst, environment=EnvSpec(snapshot="git").to_json()))
            continue
        out.append(replace(inst, environment=deriver.derive(inst, snapshot).spec.to_json()))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data.validate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="Parquet file or directory of instances, or 'demo' / 'demo-js'")
    parser.add_argument("--out", required=True, help="output directory: v3 shards and _manifest.json")
    parser.add_argument(
        "--environment", default=None, help="EnvSpec JSON for instances that carry none, or 'derive' (each its own)"
    )
    parser.add_argument("--limit", type=int, default=0, help="validate at most this many instances (0 = all)")
    parser.add_argument("--overwrite", action="store_true", help="replace a dataset already in --out")
    args, cfg, ray_address = overrides.parse_pool_command(parser, argv)
    logs.setup()
    try:
        derive = args.environment == "derive"
        default_env = EnvSpec.from_json(args.environment) if args.environment and not derive else None
        instances = list(read_instances(args.data, args.limit))
        out = prepare_output(args.out, args.overwrite)
    except (UserError, OSError, ValueError) as exc:
        fail(parser.prog, str(exc))
    if default_env is not None:
        instances = [i if i.environment else replace(i, environment=default_env.to_json()) for i in instances]
    bare = 0 if args.environment else sum(1 for i in instances if not i.environment and i.test_patch)
    if bare:
        if not cfg.repos:
            fail(
                parser.prog,
                f"{bare} of {len(instances)} instances carry no environment: give reward.execution.repos=[CLONE] "
                "(each one's is derived from its snapshot) or --environment (JSON, or 'derive')",
            )
        log.info(
            "[validate] %d instances carry no environment: derived from their snapshots (reward.execution.repos)", bare
        )
        derive = True
    started = time.monotonic()
    deriver = Deriver(cfg, need_passing=False) if derive else None  # before the fix, all may fail
    if deriver is not None:
        instances = derive_environments(instances, cfg, deriver)

    with ray_session(ray_address, max(cfg.num_runners, 1)):
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
                row = replace(
                    inst,
                    fail_to_pass=lab.fail_to_pass,
                    pass_to_pass=lab.pass_to_pass,
                    environment=spec,
                    needs_network=lab.needs_network,
                )
                writer.write(row.to_row())
    manifest = {
        "source": args.data,
        "instances": len(instances),
        "kept": counts["kept"],
        "counts": dict(counts),
        "examples": dict(examples),
        "flaky_tests": sum(len(lab.flaky) for lab in labels),
        "needs_network_tests": sum(len(lab.needs_network) for lab in labels if lab.outcome == "kept"),
        "shards": writer.shards,
        "pool": stats,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    if deriver is not None:
        manifest["environments"] = [d.summary() for d in deriver.derivations]
        write_records(out, deriver.derivations)
    write_manifest(out, manifest)
    details = [
        {
            "instance_id": inst.instance_id,
            "outcome": lab.outcome,
            "reason": lab.reason,
            "FAIL_TO_PASS": list(lab.fail_to_pass),
            "PASS_TO_PASS": list(lab.pass_to_pass),
            "flaky": list(lab.flaky),
            "needs_network": list(lab.needs_network),
            "environment": inst.environment,
        }
        for inst, lab in zip(instances, labels, strict=True)
    ]
    write_text(out / "_labels.json", json.dumps(details, indent=1) + "\n")
    shown = ("instances", "kept", "counts", "flaky_tests", "needs_network_tests", "elapsed_s")
    print(json.dumps({k: manifest[k] for k in shown}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
