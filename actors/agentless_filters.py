"""The sandbox stages of the Agentless-Mini evaluation (actors/agentless.py) and its rerank:
reproduction tests checked on the original code, regression runs of each candidate, each kept
reproduction test on each regression survivor, then the vote (reward/rerank.py).

`Case` is one instance's record through every stage; `run_jobs` is whatever runs a list of
test jobs (the test-runner pool, or one Runner in-process), so these stages are tested without
Ray.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from data.repo_view import RepoView
from data.schema import Instance
from reward.execution.runner import TestJob, TestRun
from reward.rerank import Candidate, vote


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

    @property
    def iid(self) -> str:
        return self.instance.instance_id


RunJobs = Callable[[list[TestJob], str], list[TestRun]]


def reproduces(run: TestRun) -> bool:
    """A reproduction test is kept when it ran and at least one of its tests failed (an error,
    e.g. a test that does not import, reproduces nothing)."""
    return run.status == "ok" and "failed" in run.outcomes.values()


def passes(run: TestRun) -> bool:
    return run.status == "ok" and bool(run.outcomes) and all(v == "passed" for v in run.outcomes.values())


def keeps_regressions(instance: Instance, run: TestRun) -> bool:
    return run.status == "ok" and all(run.outcomes.get(t) == "passed" for t in instance.pass_to_pass or ())


def run_tests(cases: list[Case], written: list[tuple[Case, str]], run_jobs: RunJobs, seconds: dict[str, float]) -> None:
    """The sandbox stages: reproduction tests on the original code, regression runs, then each
    kept reproduction test on each regression survivor."""
    start = time.perf_counter()
    checks = run_jobs(
        [TestJob(c.instance, "", f"check/{n}", test_patch=p) for n, (c, p) in enumerate(written)], "repro checks"
    )
    for (case, test_patch), run in zip(written, checks, strict=True):
        if reproduces(run):
            case.repro_kept.append(test_patch)
    seconds["repro_check"] = time.perf_counter() - start
    start = time.perf_counter()
    jobs = [
        (c, i, TestJob(c.instance, cand.patch, f"{c.iid}/{i}")) for c in cases for i, cand in enumerate(c.candidates)
    ]
    regressions = run_jobs([job for _, _, job in jobs], "regression runs")
    for case in cases:
        case.runs = [None] * len(case.candidates)
        case.repro_passed = [0] * len(case.candidates)
    for (case, i, _), run in zip(jobs, regressions, strict=True):
        case.runs[i] = run
    for case in cases:
        case.regression_ok = [r is not None and keeps_regressions(case.instance, r) for r in case.runs]
    seconds["regression"] = time.perf_counter() - start
    start = time.perf_counter()
    pairs = [(c, i, t) for c in cases for i, ok in enumerate(c.regression_ok) if ok for t in c.repro_kept]
    repro = run_jobs(
        [TestJob(c.instance, c.candidates[i].patch, f"repro/{n}", test_patch=t) for n, (c, i, t) in enumerate(pairs)],
        "repro runs",
    )
    for (case, i, _), run in zip(pairs, repro, strict=True):
        case.repro_passed[i] += passes(run)
    seconds["repro_on_candidates"] = time.perf_counter() - start


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
