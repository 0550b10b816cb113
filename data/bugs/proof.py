"""Bugs proved by their tests: the baseline, bug and inverse-check runs of the injector on a pool.

The injector's logic is beside it (injector.py: the draws, trees, proof and instance;
repository.py: a repository at a commit; model_bugs.py: the policy's prompt and answer); this
module runs its tests on reward/execution/, so data.bugs sits above the harness in the
layers (docs/architecture.md). Two callers:
`python -m data.inject` (the command: a data set of made instances) and self-play training
(the step's bugs, written by the policy). `inject` runs on `pool`,
anything with `run(jobs, what) -> runs` in order: the test-runner pool (reward/execution/pool.py), or
`InProcess(Runner)`.

    baseline   the suite runs SCREEN times on the working code; tests that pass every time
               are the baseline (the rest, failing or flaky, are left out and counted)
    draw       the bugs of each source whose baseline passed: the rules injector's seeded
               mutations (`rules_draw`, on the lines the baseline's first run executed: it
               measures them, reward/execution/coverage.py) or the policy's answers (`model_draw`, read by the
               reward's own rules 1-3, so a malformed bug is rejected as a malformed fix is)
    bugs       the suite runs SCREEN times with each bug: proved when the same baseline tests
               fail every time (FAIL_TO_PASS, at least one) and every other one passes
    confirm    a proved bug runs until CONFIRM runs, and so does its source's working code: the
               baseline is what passed in all of them, and the bug is kept only when every one
               of its runs fails the same baseline tests (the solver's instance: the inverse
               patch resolves every time, the empty patch never). A bug that fails at random
               (p < 1 per process) passes the screen with p^2 and this with p^5; one that does
               not repeat is `flaky`. The screen keeps the cost on the bugs that can be kept
    inverse    a bug over several files: reverting any one file alone makes some FAIL_TO_PASS
               test pass again (every file matters: Self-play SWE-RL's inverse-mutation check)
    instances  the same bug twice is kept once (an identical patch, or a near copy by
               data.build's rule over the issue text and the patch); a repository's bug is
               committed into its clone and is the instance's base commit
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conf.progress import Progress
from data.bugs.injector import (
    BugCandidate,
    BugOutcome,
    as_instance,
    buggy_tree,
    candidates,
    prove,
    tree_patch,
    working_tree,
)
from data.bugs.model_bugs import Sampler, bug_from_files, bug_messages
from data.bugs.mutations import OPERATORS
from data.bugs.repository import GitSource, bug_instance
from data.mining.filters import FilterConfig
from data.mining.neardup import NearDuplicates
from data.schema import Instance
from reward.apply import apply_edits
from reward.execution.environments import EnvSpec
from reward.execution.runner import Runner, TestJob, TestRun, run_retried
from reward.parse import Rejected, parse_output

SCREEN = 2  # runs of every tree: a bug's failures must repeat to be proved
CONFIRM = 5  # runs of a proved bug, and of its source's working code, before it is kept


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


Source = Instance | GitSource  # an instance's fixed code (--data) or a repository at a commit (a clone)


# Why an instance given without its clone cannot be a source of bugs, and what to do instead.
UNUSABLE = {
    "git_snapshot": "its code is a commit of a clone, not its own files: give the clone with "
    "`python -m data.inject \"reward.execution.repos=['OWNER/NAME=CLONE']\"`",
    "no_tests": "it has no test patch, so no test can prove a bug",
}


def unusable_source(environment: str | None, test_patch: str | None) -> str | None:
    """Why an instance (its `environment` JSON and `test_patch`) cannot be a source of bugs
    proved in its own files (a key of UNUSABLE), or None when it can: its snapshot is its files
    (the demo set's) and it has tests. Self-play's sources are such instances only."""
    spec = (EnvSpec.from_json(environment) if environment else None) or EnvSpec()
    if spec.snapshot != "files":
        return "git_snapshot"
    return None if test_patch else "no_tests"


def why_unusable(environment: str | None, test_patch: str | None) -> str | None:
    """`unusable_source`'s reason with what to do, for an error naming the instance."""
    reason = unusable_source(environment, test_patch)
    return f"{reason} ({UNUSABLE[reason]})" if reason else None


def instance_of(source: Source) -> Instance:
    return source.instance if isinstance(source, GitSource) else source


def _job(
    source: Source, tree: dict[str, str], job_id: str, coverage: bool = False, baseline_s: float | None = None
) -> TestJob:
    """Tests of `tree` (the repository's files): the source's test patch, or a repository's
    test files at its commit; `coverage`: the lines they execute measured too; `baseline_s`: what
    they took on the working code, which the run's wall clock follows (walls.py)."""
    inst = instance_of(source)
    tests = source.tests if isinstance(source, GitSource) else ()
    return TestJob(inst, tree_patch(inst, tree), job_id, tests=tests, coverage=coverage, baseline_s=baseline_s)


def _run(pool: Any, jobs: Sequence[TestJob], what: str) -> list[TestRun]:
    """The jobs on `pool`, each that ran out of its wall clock once more with it doubled."""
    return run_retried(lambda batch: pool.run(batch, what=what), jobs)


def _measured(source: Source) -> float | None:
    """What a repository's suite took in its environment's derivation (None: not measured)."""
    return source.baseline_s if isinstance(source, GitSource) else None


def _slowest(runs: Sequence[TestRun]) -> float | None:
    """The seconds of the slowest run that reported (None when none did): a source's baseline."""
    return max((r.seconds for r in runs if r.status == "ok"), default=None)


@dataclass(frozen=True)
class Baseline:
    """A source's baseline: the tests that passed in every run, how many others ran (failing or
    flaky: left out), and why there is none when `passing` is empty."""

    passing: frozenset[str]
    left_out: int
    why: str = ""
    runs: int = SCREEN  # how many runs `passing` passed: CONFIRM once a bug of the source was confirmed
    # path -> lines the tests executed (the first run's coverage); empty: not measured
    covered: Mapping[str, frozenset[int]] = field(default_factory=dict)
    seconds: float | None = None  # its slowest run's: the later runs' walls follow it (walls.py)


def baseline_key(source: Source) -> str:
    """What a baseline depends on: the source's id, commit, environment, tests and working code."""
    inst = instance_of(source)
    tests = source.tests if isinstance(source, GitSource) else ()
    parts = [inst.instance_id, inst.base_commit or "", inst.environment or "", inst.test_patch or "", *tests]
    digest = hashlib.sha256("\0".join(parts).encode())
    for path, content in sorted(working_tree(inst).items()):
        digest.update(f"\0{path}\0{content}".encode())
    return digest.hexdigest()


def _passing(runs: Sequence[TestRun]) -> tuple[set[str], str]:
    """The tests that passed in every run, or ("", why) when a run had no outcome."""
    for run in runs:
        if run.status != "ok":
            return set(), f"{run.status}: {run.reason or ''}".strip()
    names = set().union(*(r.outcomes for r in runs))
    return {t for t in names if all(r.outcomes.get(t) == "passed" for r in runs)}, ""


def inject(
    sources: Sequence[Source],
    pool: Any,
    *,
    per_instance: int = 4,
    combine: int = 1,
    seed: int = 0,
    operators: tuple[str, ...] = OPERATORS,
    near_dup_threshold: float = FilterConfig.near_dup_threshold,
    relevant_files: int = 3,
    draw: Draw | None = None,
    seconds: dict[str, float] | None = None,
    baselines_out: dict[str, dict[str, int]] | None = None,
    baseline_cache: dict[str, Baseline] | None = None,
    sites: str = "covered",
) -> list[BugOutcome]:
    """Every source's outcome (when it was rejected) and every candidate's, in order; the
    seconds of each stage (baseline, bugs, inverse) go into `seconds`, and each source's
    baseline (tests passing both times, and those left out: failing or flaky) into
    `baselines_out`, when given. `draw` writes the bugs of the sources whose baseline passed
    (default: the rules injector's seeded mutations, `per_instance` per source).
    `baseline_cache` (self-play's, across steps) holds the baselines that passed, by
    `baseline_key`: a source met again is not run again. `sites`: "covered", the rules draw on
    the lines the baseline's first run executed (measured by coverage.py), or "all" (any line)."""
    if sites not in ("covered", "all"):
        raise ValueError(f"sites: {sites!r} is not 'covered' or 'all'")
    # The rules draw where the tests look; the policy's bugs need no lines.
    measure = draw is None and sites == "covered"
    if draw is None:
        draw = rules_draw(per_instance, combine, seed, operators)
    seconds = {} if seconds is None else seconds
    clock = time.monotonic()
    outcomes: list[BugOutcome] = []
    usable: list[Source] = []
    for source in sources:
        inst = instance_of(source)
        if isinstance(source, GitSource):
            usable.append(source)
        elif reason := unusable_source(inst.environment, inst.test_patch):
            outcomes.append(BugOutcome(None, inst.instance_id, reason, detail=UNUSABLE[reason]))
        else:
            usable.append(source)
    keys = [baseline_key(src) for src in usable]
    fresh = [i for i, key in enumerate(keys) if baseline_cache is None or key not in baseline_cache]
    # The first run of each baseline measures the lines its tests execute: rules bugs are drawn there.
    # Their walls follow what the derivation measured of a repository's suite, where it did.
    jobs = [
        _job(
            usable[i],
            working_tree(instance_of(usable[i])),
            f"{i}/base/{r}",
            coverage=measure and r == 0,
            baseline_s=_measured(usable[i]),
        )
        for i in fresh
        for r in range(SCREEN)
    ]
    runs = _run(pool, jobs, "baseline runs")
    seconds["baseline"], clock = time.monotonic() - clock, time.monotonic()
    known = {} if baseline_cache is None else baseline_cache
    for n, i in enumerate(fresh):
        base_runs = runs[n * SCREEN : (n + 1) * SCREEN]
        passing, why = _passing(base_runs)
        ran = set().union(*(r.outcomes for r in base_runs))
        covered = base_runs[0].covered if base_runs else {}
        why = why or "no test passes"
        slowest = _slowest(base_runs)
        known[keys[i]] = Baseline(frozenset(passing), len(ran - passing), why, covered=covered, seconds=slowest)
    baselines: dict[int, set[str]] = {}
    for i, src in enumerate(usable):
        inst, base = instance_of(src), known[keys[i]]
        if baselines_out is not None:
            lines = sum(len(v) for v in base.covered.values())
            baselines_out[inst.instance_id] = {"passing": len(base.passing), "left_out": base.left_out}
            baselines_out[inst.instance_id] |= {"covered_files": len(base.covered), "covered_lines": lines}
        if not base.passing:
            outcomes.append(BugOutcome(None, inst.instance_id, "baseline_failed", detail=base.why))
            if baseline_cache is not None:  # a failed baseline may be the machine's: run it again next time
                del baseline_cache[keys[i]]
            continue
        baselines[i] = set(base.passing)
    drawn, unusable = draw([instance_of(usable[i]) for i in baselines], [known[keys[i]].covered for i in baselines])
    outcomes += unusable
    bugs = [(i, c) for i, found in zip(baselines, drawn, strict=True) for c in found]
    seconds["draw"], clock = time.monotonic() - clock, time.monotonic()
    jobs = [
        _job(usable[i], buggy_tree(c.source, c.bug), f"{j}/bug/{r}", baseline_s=known[keys[i]].seconds)
        for j, (i, c) in enumerate(bugs)
        for r in range(SCREEN)
    ]
    runs = _run(pool, jobs, "bug runs")
    seconds["bugs"], clock = time.monotonic() - clock, time.monotonic()
    screened: list[tuple[int, Proved]] = []
    for j, (i, cand) in enumerate(bugs):
        bug_runs = runs[j * SCREEN : (j + 1) * SCREEN]
        reason, f2p, detail = prove(cand, baselines[i], bug_runs)
        if reason != "kept":
            outcomes.append(BugOutcome(cand, cand.source.instance_id, reason, detail=detail))
        else:
            screened.append((i, Proved(usable[i], cand, f2p, baselines[i], bug_runs, known[keys[i]].seconds)))
    proved, confirmed = _confirmed(screened, usable, {i: known[keys[i]] for i in baselines}, pool, outcomes)
    for i, base in confirmed.items():  # self-play's cache keeps them: a source is confirmed once
        known[keys[i]] = base
    seconds["confirm"], clock = time.monotonic() - clock, time.monotonic()
    useless = _inverse_checked(proved, pool)
    seconds["inverse"] = time.monotonic() - clock
    clock = time.monotonic()
    outcomes += _kept(proved, useless, near_dup_threshold, relevant_files)
    seconds["instances"] = time.monotonic() - clock
    return outcomes


# Sources in, with the lines each one's baseline executed (empty: not measured), each one's bugs
# out (in order), with the answers that gave no bug as outcomes.
Covered = Mapping[str, frozenset[int]]
Draw = Callable[[list[Instance], list[Covered]], tuple[list[list[BugCandidate]], list[BugOutcome]]]


def rules_draw(per_instance: int, combine: int, seed: int, operators: tuple[str, ...]) -> Draw:
    """Seeded mutations on the lines the baseline's tests executed (all lines when unmeasured)."""

    def draw(sources: list[Instance], covered: list[Covered]) -> tuple[list[list[BugCandidate]], list[BugOutcome]]:
        return [
            candidates(inst, per_instance, combine, seed, operators, lines)
            for inst, lines in zip(sources, covered, strict=True)
        ], []

    return draw


def model_draw(sampler: Sampler, per_source: int, temperature: float, seed: int) -> Draw:
    """The policy writes `per_source` bugs per source (data/bugs/model_bugs.py's prompt), read
    by `read_answers`."""

    def draw(sources: list[Instance], covered: list[Covered]) -> tuple[list[list[BugCandidate]], list[BugOutcome]]:
        messages = [bug_messages(inst, working_tree(inst), seed) for inst in sources]
        answers = sampler.sample([inst.instance_id for inst in sources], messages, per_source, temperature)
        drawn, rejected, _ = read_answers(sources, answers)
        return drawn, rejected

    return draw


Owner = tuple[BugCandidate, tuple[int, int]]  # a candidate (or a rejected answer's) and its (source, answer)


def read_answers(
    sources: list[Instance], answers: list[list[str]]
) -> tuple[list[list[BugCandidate]], list[BugOutcome], list[Owner]]:
    """Each source's answers as bugs, by the reward's own rules (rules 1-3): a malformed answer
    is rejected as a malformed fix would be, one whose edit fails as `edit_failed`, and one that
    edits a test file, no file or a file that is not the repository's Python code as
    `edits_outside_code`. Also every candidate's (and rejected answer's) source and answer index:
    self-play scores each answer by its own bug."""
    drawn: list[list[BugCandidate]] = []
    rejected: list[BugOutcome] = []
    owners: list[Owner] = []
    for i, (inst, texts) in enumerate(zip(sources, answers, strict=True)):
        tree = working_tree(inst)
        found: list[BugCandidate] = []
        if not texts:
            rejected.append(BugOutcome(None, inst.instance_id, "prompt_too_long"))
        for k, text in enumerate(texts):
            try:
                applied = apply_edits(tree, parse_output(text))
                bug, why = bug_from_files(tree, applied.new_content)
                reason = "edits_outside_code" if why else ""
            except Rejected as exc:
                bug, why = (), exc.reason
                reason = "malformed" if not exc.format_ok else "edit_failed"
            cand = BugCandidate(inst, bug)
            owners.append((cand, (i, k)))
            if bug:
                found.append(cand)
            else:
                rejected.append(BugOutcome(cand, inst.instance_id, reason, detail=why[:200]))
        drawn.append(found)
    return drawn, rejected, owners


@dataclass(frozen=True)
class Proved:
    """A bug whose failures the tests showed twice: its source, FAIL_TO_PASS, baseline, runs."""

    source: Source
    candidate: BugCandidate
    fail_to_pass: set[str]
    baseline: set[str]
    runs: Sequence[TestRun]
    baseline_s: float | None = None  # its source's baseline seconds: the inverse checks' walls follow it


def _confirmed(
    screened: list[tuple[int, Proved]],
    usable: list[Source],
    bases: dict[int, Baseline],
    pool: Any,
    outcomes: list[BugOutcome],
) -> tuple[list[Proved], dict[int, Baseline]]:
    """The screened bugs (source index, proof) whose failures repeat in all CONFIRM runs, each
    against its source's baseline over CONFIRM runs of the working code, and those baselines.
    One that does not repeat, or whose failing tests did not pass every run of the working code,
    goes to `outcomes` as `flaky`."""
    sources = sorted({i for i, _ in screened if bases[i].runs < CONFIRM})
    jobs = [
        _job(usable[i], working_tree(instance_of(usable[i])), f"{i}/base/{r}", baseline_s=bases[i].seconds)
        for i in sources
        for r in range(bases[i].runs, CONFIRM)
    ]
    jobs += [
        _job(
            p.source,
            buggy_tree(p.candidate.source, p.candidate.bug),
            f"{j}/confirm/{r}",
            baseline_s=bases[i].seconds,
        )
        for j, (i, p) in enumerate(screened)
        for r in range(SCREEN, CONFIRM)
    ]
    runs = iter(_run(pool, jobs, "confirming runs"))
    confirmed: dict[int, Baseline] = {}
    for i in sources:
        base = bases[i]
        passing, why = _passing([next(runs) for _ in range(base.runs, CONFIRM)])
        kept = base.passing & passing
        left_out = base.left_out + len(base.passing - kept)
        confirmed[i] = Baseline(frozenset(kept), left_out, why or base.why, CONFIRM, base.covered, base.seconds)
    out = []
    for i, p in screened:
        every = [*p.runs, *(next(runs) for _ in range(SCREEN, CONFIRM))]
        baseline = set(confirmed.get(i, bases[i]).passing)
        reason, f2p, detail = prove(p.candidate, baseline, every)
        if reason == "kept":
            out.append(Proved(p.source, p.candidate, f2p, baseline, every, p.baseline_s))
            continue
        if reason == "no_test_fails":  # what it failed did not pass every run of the working code
            reason, detail = "flaky", f"its failing tests are not all in the baseline of {CONFIRM} runs"
        outcomes.append(BugOutcome(p.candidate, p.candidate.source.instance_id, reason, detail=detail))
    return out, confirmed


def _inverse_checked(proved: list[Proved], pool: Any) -> dict[int, str]:
    """Index -> a file that does not matter, of the proved bugs over several files: reverting it
    alone leaves every FAIL_TO_PASS test failing (a one-file bug needs no check)."""
    jobs, owners = [], []
    for j, p in enumerate(proved):
        paths = sorted({m.path for m in p.candidate.bug})
        if len(paths) < 2:
            continue
        for path in paths:
            rest = [m for m in p.candidate.bug if m.path != path]
            tree = buggy_tree(p.candidate.source, rest)
            jobs.append(_job(p.source, tree, f"{j}/revert/{path}", baseline_s=p.baseline_s))
            owners.append((j, path))
    runs = _run(pool, jobs, "inverse checks")
    useless: dict[int, str] = {}
    for (j, path), run in zip(owners, runs, strict=True):
        if run.status != "ok" or not any(run.outcomes.get(t) == "passed" for t in proved[j].fail_to_pass):
            useless.setdefault(j, path)
    return useless


def _kept(
    proved: list[Proved], useless: dict[int, str], near_dup_threshold: float, relevant_files: int
) -> list[BugOutcome]:
    """The proved bugs whose every file matters, as instances; the same bug twice (an exact
    patch, or a near copy by data.build's rule over the issue text and the patch) once."""
    out = []
    kept_by_source: dict[str, int] = {}
    seen_patches: dict[str, str] = {}  # patch -> the kept instance that has it
    near = NearDuplicates(near_dup_threshold) if near_dup_threshold > 0 else None
    for j, p in enumerate(proved):
        cand, src_id = p.candidate, p.candidate.source.instance_id
        if j in useless:
            out.append(BugOutcome(cand, src_id, "file_does_not_matter", detail=useless[j]))
            continue
        k = kept_by_source.get(src_id, 0)
        inst = as_instance(cand, k, p.fail_to_pass, p.baseline, p.runs)
        if inst.patch in seen_patches:  # the same bug drawn twice (two mutations with one effect)
            out.append(BugOutcome(cand, src_id, "duplicate", detail=f"like {seen_patches[inst.patch]}"))
            continue
        verdict, like = near.check(inst.instance_id, inst.problem_statement, inst.patch) if near else ("kept", "")
        if verdict != "kept":
            out.append(BugOutcome(cand, src_id, "near_duplicate", detail=like))
            continue
        seen_patches[inst.patch] = inst.instance_id
        if isinstance(p.source, GitSource):  # its buggy tree becomes a commit of the clone
            inst = bug_instance(p.source, cand, k, p.fail_to_pass, p.baseline, list(p.runs), relevant_files)
        kept_by_source[src_id] = k + 1
        out.append(BugOutcome(cand, src_id, "kept", inst))
    return out
