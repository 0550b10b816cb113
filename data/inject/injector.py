"""The rules injector: bugs put into working code, kept only when the code's own tests prove them.

Working code is an instance's tree after its fix (the code context with the oracle's content)
and its tests (the test patch's files): a validated instance is a repository whose tests pass.
For each one:

    baseline   the tests run twice on the working code; the tests that pass both times are the
               baseline (the others, failing or flaky, are left out and counted)
    bugs       `per_instance` candidates, each `combine` mutations (data/inject/mutations.py)
               drawn with seed (seed, instance, k) from the non-test Python files
    proof      the tests run twice with the bug: kept when the same non-empty set of baseline
               tests fails both times (FAIL_TO_PASS) and every other baseline test passes
               (PASS_TO_PASS); with a bug over several files, each file must matter: reverting
               it alone makes some FAIL_TO_PASS test pass again (Self-play SWE-RL's inverse
               mutation check)

A kept bug becomes a schema-v3 instance: the buggy tree is its code context, the oracle patch
is the inverse of the bug, the test patch is the source's, FAIL_TO_PASS / PASS_TO_PASS as
proved, the environment the source's, `problem_source` "injected:rules:<operators>", and the
issue text the failing tests' report (their names and first failure lines: what a red CI run
tells an engineer; it never names the fix). Every rejection has a reason (`Outcome.reason`).

Only instances whose snapshot is their files (EnvSpec.snapshot "files": the demo set) can
carry a buggy tree as their code context; an instance whose snapshot is a git commit would
need a commit holding the bug (not built: counted as `git_snapshot`).

`pool` is anything with `run(jobs, what) -> runs` in order: the test-runner pool, or
`InProcess(Runner)` for small runs.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from conf.progress import Progress
from data.inject.mutations import OPERATORS, Mutation, apply_all, choose, sites
from data.patching import created_files, files_patch
from data.schema import Instance
from reward.execution.environments import EnvSpec
from reward.execution.runner import Runner, TestJob, TestRun

REPEATS = 2  # runs of every tree: a bug's failures must repeat to count


@dataclass(frozen=True)
class Candidate:
    source: Instance
    bug: tuple[Mutation, ...]

    @property
    def operators(self) -> str:
        return "+".join(sorted({m.operator for m in self.bug}))


@dataclass(frozen=True)
class Outcome:
    candidate: Candidate | None  # None: the source itself was rejected (its baseline)
    source_id: str
    reason: str  # "kept" or why not
    instance: Instance | None = None
    detail: str = ""


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


def working_tree(inst: Instance) -> dict[str, str]:
    """The repository's files after the fix (a deleted file is gone)."""
    tree = {**inst.code_context, **inst.oracle_new_content}
    return {p: c for p, c in tree.items() if c != "" or p not in inst.oracle_new_content}


def candidates(
    inst: Instance, per_instance: int, combine: int, seed: int, operators: tuple[str, ...]
) -> list[Candidate]:
    """Up to `per_instance` distinct bugs of `combine` mutations each, seeded per instance."""
    tree = working_tree(inst)
    found = [m for path in sorted(tree) if path.endswith(".py") for m in sites(path, tree[path], operators)]
    base = int.from_bytes(hashlib.sha256(f"{seed}/{inst.instance_id}".encode()).digest()[:8], "big")
    out: list[Candidate] = []
    seen: set[tuple[Mutation, ...]] = set()
    rng = random.Random(base)
    for _ in range(per_instance * 4):  # draws that repeat a bug are skipped, up to a bound
        bug = tuple(choose(found, combine, rng.randrange(1 << 30)))
        if len(bug) == combine and bug not in seen:
            seen.add(bug)
            out.append(Candidate(inst, bug))
        if len(out) == per_instance:
            break
    return out


def buggy_tree(inst: Instance, bug: Sequence[Mutation]) -> dict[str, str]:
    tree = working_tree(inst)
    for path in sorted({m.path for m in bug}):
        tree[path] = apply_all(tree[path], [m for m in bug if m.path == path])
    return tree


def _job(inst: Instance, tree: dict[str, str], job_id: str) -> TestJob:
    """Tests of `tree` (the repository's files) with the source's test patch."""
    changed = {p: c for p, c in tree.items() if inst.code_context.get(p) != c}
    gone = {p: "" for p in inst.code_context if p not in tree}
    return TestJob(inst, files_patch(inst.code_context, {**changed, **gone}, created_files(inst.patch)), job_id=job_id)


def _passing(runs: Sequence[TestRun]) -> tuple[set[str], str]:
    """The tests that passed in every run, or ("", why) when a run had no outcome."""
    for run in runs:
        if run.status != "ok":
            return set(), f"{run.status}: {run.reason or ''}".strip()
    names = set().union(*(r.outcomes for r in runs))
    return {t for t in names if all(r.outcomes.get(t) == "passed" for r in runs)}, ""


def prove(candidate: Candidate, baseline: set[str], runs: Sequence[TestRun]) -> tuple[str, set[str], str]:
    """(reason, FAIL_TO_PASS, detail) of a bug's runs against the baseline."""
    for run in runs:
        if run.status != "ok":
            return "run_failed", set(), f"{run.status}: {run.reason or ''}"
    failing = [{t for t in baseline if r.outcomes.get(t) != "passed"} for r in runs]
    if any(f != failing[0] for f in failing):
        return "flaky", set(), f"{len(failing[0] ^ failing[1])} tests disagree between runs"
    if not failing[0]:
        return "no_test_fails", set(), ""
    return "kept", failing[0], ""


def issue_text(fail_to_pass: set[str], runs: Sequence[TestRun]) -> str:
    """The failing tests' report: names, and each one's first failure line where pytest gave one."""
    failures: dict[str, str] = {}
    for run in runs:
        failures.update(run.failures)
    names = sorted(fail_to_pass)
    lines = [f"After a recent change, {len(names)} test(s) fail:", ""]
    for name in names[:20]:
        why = failures.get(name, "").strip()
        lines.append(f"- {name}" + (f"\n  {why[:300]}" if why else ""))
    if len(names) > 20:
        lines.append(f"- ... and {len(names) - 20} more")
    return "\n".join(lines) + "\n"


def as_instance(
    candidate: Candidate, k: int, fail_to_pass: set[str], baseline: set[str], runs: Sequence[TestRun]
) -> Instance:
    src = candidate.source
    tree, buggy = working_tree(src), buggy_tree(src, candidate.bug)
    changed = sorted({m.path for m in candidate.bug})
    context = {p: buggy[p] for p in changed} | {p: c for p, c in buggy.items() if p not in changed}
    oracle = {p: tree[p] for p in changed}
    return replace(
        src,
        instance_id=f"{src.instance_id}.inject{k}",
        problem_statement=issue_text(fail_to_pass, runs),
        patch=files_patch(context, oracle, set()),
        code_context=context,
        oracle_new_content=oracle,
        problem_source=f"injected:rules:{candidate.operators}",
        linked_issues=None,
        pr_number=None,
        fail_to_pass=tuple(sorted(fail_to_pass)),
        pass_to_pass=tuple(sorted(baseline - fail_to_pass)),
    )


def inject(
    sources: Sequence[Instance],
    pool: Any,
    *,
    per_instance: int = 4,
    combine: int = 1,
    seed: int = 0,
    operators: tuple[str, ...] = OPERATORS,
    seconds: dict[str, float] | None = None,
) -> list[Outcome]:
    """Every source's outcome (when it was rejected) and every candidate's, in order; the
    seconds of each stage (baseline, bugs, inverse) go into `seconds` when given."""
    seconds = {} if seconds is None else seconds
    clock = time.monotonic()
    outcomes: list[Outcome] = []
    usable = []
    for inst in sources:
        spec = (EnvSpec.from_json(inst.environment) if inst.environment else None) or EnvSpec()
        if spec.snapshot != "files":
            outcomes.append(Outcome(None, inst.instance_id, "git_snapshot", detail="needs a commit holding the bug"))
        elif not inst.test_patch:
            outcomes.append(Outcome(None, inst.instance_id, "no_tests"))
        else:
            usable.append(inst)
    jobs = [_job(inst, working_tree(inst), f"{i}/base/{r}") for i, inst in enumerate(usable) for r in range(REPEATS)]
    runs = pool.run(jobs, what="baseline runs")
    seconds["baseline"], clock = time.monotonic() - clock, time.monotonic()
    baselines: dict[int, set[str]] = {}
    bugs: list[tuple[int, Candidate]] = []
    for i, inst in enumerate(usable):
        passing, why = _passing(runs[i * REPEATS : (i + 1) * REPEATS])
        if not passing:
            outcomes.append(Outcome(None, inst.instance_id, "baseline_failed", detail=why or "no test passes"))
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
            outcomes.append(Outcome(cand, cand.source.instance_id, reason, detail=detail))
        else:
            proved.append((i, cand, f2p, bug_runs))
    outcomes += _inverse_checked(proved, baselines, pool)
    seconds["inverse"] = time.monotonic() - clock
    return outcomes


def _inverse_checked(
    proved: list[tuple[int, Candidate, set[str], Sequence[TestRun]]], baselines: dict[int, set[str]], pool: Any
) -> list[Outcome]:
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
            out.append(Outcome(cand, src_id, "file_does_not_matter", detail=useless[j]))
            continue
        k = kept_by_source.get(src_id, 0)
        inst = as_instance(cand, k, f2p, baselines[i], bug_runs)
        if inst.patch in seen_patches:  # the same bug drawn twice (two mutations with one effect)
            out.append(Outcome(cand, src_id, "duplicate"))
            continue
        seen_patches.add(inst.patch)
        kept_by_source[src_id] = k + 1
        out.append(Outcome(cand, src_id, "kept", inst))
    return out
