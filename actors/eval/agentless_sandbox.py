"""The sandbox stages of the Agentless-Mini evaluation (actors/eval/agentless_mini.py) and its rerank:
reproduction tests checked on the original code, regression runs of each candidate (with the
repository's own tests as a fallback for instances without PASS_TO_PASS), each kept
reproduction test on each regression survivor, then the vote (reward/rerank.py).

`Case` is one instance's record through every stage; `run_jobs` is whatever runs a list of
test jobs (the test-runner pool, or one Runner in-process), so these stages are tested without
Ray.

Nothing here assumes pytest: every run goes through the runner of the instance's environment
(EnvSpec.runner: pytest, django, or a JavaScript runner), which picks the test files of a test
patch by its suffixes and reports ids in its own form (`file::name`). What differs per language
is which files are tests and how they import (`runner_of`, `case_repro_target`,
`regression_fallback`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from data.agentless.prompts import ReproTarget, repro_target
from data.agentless.regression_tests import is_test_file, regression_test_files
from data.agentless.repo_view import RepoView
from data.schema import Instance
from reward.execution.environments import EnvSpec
from reward.execution.jsenv import is_js_test_file
from reward.execution.runner import HOST_DEMO_SPEC, TestJob, TestRun, labelled_files
from reward.execution.runners import TestRunner, runner_for
from reward.rerank import Candidate, vote

if TYPE_CHECKING:  # the timer's module imports Ray; these stages run and are tested without it
    from actors.observe.phases import PhaseTimer


@dataclass
class Case:
    """One instance through the stages."""

    instance: Instance
    view: RepoView
    oracle_files: list[str]  # what a perfect localization names
    localized: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # named paths that are not in the tree
    context: dict[str, str] = field(default_factory=dict)  # the repair prompt's files
    generated: int = 0
    applied: int = 0
    candidates: list[Candidate] = field(default_factory=list)
    repro_written: int = 0  # answers with a test file in them
    repro_kept: list[str] = field(default_factory=list)  # test patches that fail on the original code
    runs: list[TestRun | None] = field(default_factory=list)  # regression run per candidate
    regression_ok: list[bool] = field(default_factory=list)
    repro_passed: list[int] = field(default_factory=list)
    winner: int | None = None
    # The regression fallback (no PASS_TO_PASS): the repository's test files run, the tests that
    # passed on the original code, and the candidates it dropped.
    fallback_tests: list[str] = field(default_factory=list)
    fallback_baseline: TestRun | None = None
    fallback_dropped: int = 0

    @property
    def iid(self) -> str:
        return self.instance.instance_id


RunJobs = Callable[[list[TestJob], str], list[TestRun]]


def runner_of(instance: Instance) -> tuple[str, TestRunner]:
    """The name and the runner of the instance's environment (the demo set's: pytest)."""
    name = (EnvSpec.from_json(instance.environment) or HOST_DEMO_SPEC).runner
    return name, runner_for(name)


def is_test(runner: TestRunner) -> Callable[[str], bool]:
    """Which of a repository's files are test files for `runner`: pytest's names for a Python
    runner, the harness's JavaScript test-file rules for a JavaScript one."""
    if runner.language == "javascript":
        return lambda path: runner.takes(path) and is_js_test_file(path)
    return is_test_file


def case_repro_target(case: Case) -> ReproTarget:
    """Where the instance's reproduction tests go (data/agentless/prompts.repro_target). For a
    JavaScript runner, beside the repository's test files in the folder of the instance's first
    labelled test file that exists at the base commit (where its runner's settings surely take
    tests), else in the folder that holds most of them. The prompt names the folder's first
    test file as the example, not the labelled one: it says no more of the instance's tests
    than their folder, and the tree the model localized on showed that file already."""
    name, runner = runner_of(case.instance)
    if runner.language != "javascript":
        return repro_target(runner.language, name, [])
    parent = lambda path: str(PurePosixPath(path).parent)  # noqa: E731
    tests = [p for p in case.view.files if is_test(runner)(p)]
    labelled = [f for f in labelled_files(case.instance, runner.suffixes) if f in set(case.view.files)]
    folders = Counter(parent(p) for p in tests)
    if labelled:
        folder = parent(labelled[0])
    elif folders:
        folder = max(folders, key=lambda f: (folders[f], -len(f)))
    else:
        return repro_target(runner.language, name, [])
    return repro_target(runner.language, name, [p for p in tests if parent(p) == folder] or labelled)


def reproduces(run: TestRun) -> bool:
    """A reproduction test is kept when it ran and at least one of its tests failed (an error,
    e.g. a test that does not import, reproduces nothing)."""
    return run.status == "ok" and "failed" in run.outcomes.values()


def passes(run: TestRun) -> bool:
    return run.status == "ok" and bool(run.outcomes) and all(v == "passed" for v in run.outcomes.values())


def keeps_regressions(instance: Instance, run: TestRun) -> bool:
    return run.status == "ok" and all(run.outcomes.get(t) == "passed" for t in instance.pass_to_pass or ())


def run_tests(cases: list[Case], written: list[tuple[Case, str]], run_jobs: RunJobs, timer: PhaseTimer) -> None:
    """The sandbox stages, each timed by `timer`: reproduction tests on the original code,
    regression runs, then each kept reproduction test on each regression survivor."""
    with timer("repro_check"):
        checks = run_jobs(
            [TestJob(c.instance, "", f"check/{n}", test_patch=p) for n, (c, p) in enumerate(written)], "repro checks"
        )
        for (case, test_patch), run in zip(written, checks, strict=True):
            if reproduces(run):
                case.repro_kept.append(test_patch)
    with timer("regression"):
        jobs = [
            (c, i, TestJob(c.instance, cand.patch, f"{c.iid}/{i}"))
            for c in cases
            for i, cand in enumerate(c.candidates)
        ]
        regressions = run_jobs([job for _, _, job in jobs], "regression runs")
        for case in cases:
            case.runs = [None] * len(case.candidates)
            case.repro_passed = [0] * len(case.candidates)
        for (case, i, _), run in zip(jobs, regressions, strict=True):
            case.runs[i] = run
        for case in cases:
            case.regression_ok = [r is not None and keeps_regressions(case.instance, r) for r in case.runs]
    with timer("regression_fallback"):
        regression_fallback(cases, run_jobs)
    with timer("repro_on_candidates"):
        pairs = [(c, i, t) for c in cases for i, ok in enumerate(c.regression_ok) if ok for t in c.repro_kept]
        repro = run_jobs(
            [
                TestJob(c.instance, c.candidates[i].patch, f"repro/{n}", test_patch=t)
                for n, (c, i, t) in enumerate(pairs)
            ],
            "repro runs",
        )
        for (case, i, _), run in zip(pairs, repro, strict=True):
            case.repro_passed[i] += passes(run)


def regression_fallback(cases: list[Case], run_jobs: RunJobs) -> None:
    """For instances without PASS_TO_PASS: the repository's test files that import the modules
    any surviving candidate edits (data/agentless/regression_tests.py) run on the original code and on each
    candidate; a candidate that fails a test the original passes is dropped. Tests that fail on
    the original are not held against candidates; when the original's run itself fails (an
    import error in the suite, a missing dependency), nothing is dropped."""
    for case in cases:  # only where a candidate is left to drop: the original's run is not free
        if not case.instance.pass_to_pass and any(case.regression_ok):
            edited = {
                path for cand, ok in zip(case.candidates, case.regression_ok, strict=True) if ok for path, _ in cand.key
            }
            _, runner = runner_of(case.instance)
            case.fallback_tests = regression_test_files(
                case.view, edited, language=runner.language, is_test=is_test(runner)
            )
    users = [c for c in cases if c.fallback_tests]
    jobs: list[tuple[Case, int | None, TestJob]] = [
        (c, None, TestJob(c.instance, "", f"{c.iid}/fallback-base", "", tuple(c.fallback_tests))) for c in users
    ]
    jobs += [
        (c, i, TestJob(c.instance, cand.patch, f"{c.iid}/fallback/{i}", "", tuple(c.fallback_tests)))
        for c in users
        for i, cand in enumerate(c.candidates)
        if c.regression_ok[i]
    ]
    runs = run_jobs([job for _, _, job in jobs], "regression fallback runs")
    for (case, i, _), run in zip(jobs, runs, strict=True):
        if i is None:
            case.fallback_baseline = run
    for (case, i, _), run in zip(jobs, runs, strict=True):
        base = case.fallback_baseline
        if i is None or base is None or base.status != "ok":
            continue
        passed_before = [t for t, outcome in base.outcomes.items() if outcome == "passed"]
        if run.status != "ok" or any(run.outcomes.get(t) != "passed" for t in passed_before):
            case.regression_ok[i] = False
            case.fallback_dropped += 1


def fallback_figures(cases: list[Case]) -> dict[str, int]:
    """summary.json's `regression_fallback`: instances that used it, those whose original run
    failed (nothing dropped), test files run, candidates dropped."""
    users = [c for c in cases if c.fallback_tests]
    return {
        "instances_without_pass_to_pass": sum(not c.instance.pass_to_pass for c in cases),
        "instances": len(users),
        "baseline_failed": sum(c.fallback_baseline is None or c.fallback_baseline.status != "ok" for c in users),
        "test_files": sum(len(c.fallback_tests) for c in users),
        "dropped": sum(c.fallback_dropped for c in users),
    }


def rerank(case: Case) -> dict[str, int]:
    """Set case.winner; the candidates left at each filter."""
    indices = list(range(len(case.candidates)))
    survivors = [i for i in indices if case.regression_ok[i]]
    kept = len(case.repro_kept)
    full = [i for i in survivors if kept and case.repro_passed[i] == kept]
    pool = full or survivors or indices
    best = vote([case.candidates[i] for i in pool], [case.repro_passed[i] for i in pool])
    case.winner = None if best is None else pool[best]
    return {"survive_regression": len(survivors), "survive_repro": len(full)}
