"""The rules injector: bugs put into working code, kept only when the code's own tests prove them.

Working code is an instance's tree after its fix (the code context with the oracle's content)
and its tests (the test patch's files): a validated instance is a repository whose tests pass.
For each one:

    baseline   the tests run twice on the working code; the tests that pass both times are the
               baseline (the others, failing or flaky, are left out and counted)
    bugs       `per_instance` candidates, each `combine` mutations (data/bugs/mutations.py,
               js_mutations.py) drawn with seed (seed, instance, k) from the non-test Python,
               JavaScript and TypeScript files (languages.py: by extension), on the
               lines the baseline's tests executed when its first run measured them
    proof      the tests run twice with the bug: kept when the same non-empty set of baseline
               tests fails both times (FAIL_TO_PASS) and every other baseline test passes
               (PASS_TO_PASS); with a bug over several files, each file must matter: reverting
               it alone makes some FAIL_TO_PASS test pass again (Self-play SWE-RL's inverse
               mutation check)

A kept bug becomes a schema-v3 instance: the buggy tree is its code context, the oracle patch
is the inverse of the bug, the test patch is the source's, FAIL_TO_PASS / PASS_TO_PASS as
proved, the environment the source's, `problem_source` "injected:rules:<operators>", and the
issue text the failing tests' report (their names and first failure lines: what a red CI run
tells an engineer; it never names the fix). Every rejection has a reason (`BugOutcome.reason`).

An instance whose snapshot is its files (EnvSpec.snapshot "files": the demo set) carries its
buggy tree as its code context. A repository at a commit (repository.py: a clone of
reward.execution.repos) carries it as a commit of its clone; a mined instance's fixed code is no
commit of its clone, so `--data` of git instances is refused (`git_snapshot`: give the
repository as a clone, reward.execution.repos).

This module is the injector's logic, pure: the draws, the trees, the proof and the instance.
The runs themselves (test jobs on the test-runner pool) are proof.py's, beside it; the
command is data/inject/__main__.py. A run is read by its `status`, `reason`,
`outcomes` and `failures` (reward.execution.runner.TestRun's fields), as data.validate reads it.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Any

from data.bugs.languages import language_of, sites
from data.bugs.mutations import Mutation, apply_all, choose
from data.patching import created_files, files_patch
from data.schema import Instance


@dataclass(frozen=True)
class BugCandidate:
    source: Instance
    bug: tuple[Mutation, ...]

    @property
    def operators(self) -> str:
        return "+".join(sorted({m.operator for m in self.bug}))

    @property
    def problem_source(self) -> str:
        """How the bug was made: "injected:rules:<operators>", or "injected:model" (the policy)."""
        ops = self.operators
        return "injected:model" if ops == "model" else f"injected:rules:{ops}"


# Why a bug or its source is not kept (data/bugs/proof.py), in the order of the proof: the
# source (its prompt, clone, tests, baseline), the answer read as a bug, its runs, the instance.
# Self-play counts each as `selfplay_rejected_<reason>` (actors/driver/selfplay.py).
REJECTIONS: tuple[str, ...] = (
    *("prompt_too_long", "git_snapshot", "no_tests", "baseline_failed"),
    *("malformed", "edit_failed", "edits_outside_code"),
    *("run_failed", "flaky", "no_test_fails", "file_does_not_matter", "duplicate", "near_duplicate"),
)


@dataclass(frozen=True)
class BugOutcome:
    candidate: BugCandidate | None  # None: the source itself was rejected (its baseline)
    source_id: str
    reason: str  # "kept" or one of REJECTIONS
    instance: Instance | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        # A new reason is a line in REJECTIONS, so the self-play metrics and the dashboard know it.
        if self.reason != "kept" and self.reason not in REJECTIONS:
            raise ValueError(f"BugOutcome.reason {self.reason!r}: not 'kept' nor one of REJECTIONS {REJECTIONS}")


def working_tree(inst: Instance) -> dict[str, str]:
    """The repository's files after the fix (a deleted file is gone)."""
    tree = {**inst.code_context, **inst.oracle_new_content}
    return {p: c for p, c in tree.items() if c != "" or p not in inst.oracle_new_content}


def candidates(
    inst: Instance,
    per_instance: int,
    combine: int,
    seed: int,
    operators: tuple[str, ...],
    covered: Mapping[str, AbstractSet[int]] | None = None,
) -> list[BugCandidate]:
    """Up to `per_instance` distinct bugs of `combine` mutations each, seeded per instance.
    With `covered` (path -> lines the baseline's tests executed), only sites on those lines are
    drawn: a bug on a line no test runs cannot fail a test. None, or no site on a covered line
    (a run that measured nothing of these files), draws from every site."""
    tree = working_tree(inst)
    paths = [path for path in sorted(tree) if language_of(path) is not None]
    found: list[Mutation] = []
    if covered:
        found = [m for path in paths if covered.get(path) for m in sites(path, tree[path], operators, covered[path])]
    if not found:
        found = [m for path in paths for m in sites(path, tree[path], operators)]
    base = int.from_bytes(hashlib.sha256(f"{seed}/{inst.instance_id}".encode()).digest()[:8], "big")
    out: list[BugCandidate] = []
    seen: set[tuple[Mutation, ...]] = set()
    rng = random.Random(base)
    for _ in range(per_instance * 4):  # draws that repeat a bug are skipped, up to a bound
        bug = tuple(choose(found, combine, rng.randrange(1 << 30)))
        if len(bug) == combine and bug not in seen:
            seen.add(bug)
            out.append(BugCandidate(inst, bug))
        if len(out) == per_instance:
            break
    return out


def buggy_tree(inst: Instance, bug: Sequence[Mutation]) -> dict[str, str]:
    tree = working_tree(inst)
    for path in sorted({m.path for m in bug}):
        tree[path] = apply_all(tree[path], [m for m in bug if m.path == path])
    return tree


def prove(candidate: BugCandidate, baseline: set[str], runs: Sequence[Any]) -> tuple[str, set[str], str]:
    """(reason, FAIL_TO_PASS, detail) of a bug's runs against the baseline."""
    for run in runs:
        if run.status != "ok":
            return "run_failed", set(), f"{run.status}: {run.reason or ''}"
    failing = [{t for t in baseline if r.outcomes.get(t) != "passed"} for r in runs]
    if disagree := sum(f != failing[0] for f in failing):
        return "flaky", set(), f"{disagree} of {len(runs)} runs fail other tests than the first"
    if not failing[0]:
        return "no_test_fails", set(), ""
    return "kept", failing[0], ""


def issue_text(fail_to_pass: set[str], runs: Sequence[Any]) -> str:
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
    candidate: BugCandidate, k: int, fail_to_pass: set[str], baseline: set[str], runs: Sequence[Any]
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
        problem_source=candidate.problem_source,
        linked_issues=None,
        pr_number=None,
        fail_to_pass=tuple(sorted(fail_to_pass)),
        pass_to_pass=tuple(sorted(baseline - fail_to_pass)),
    )


def tree_patch(inst: Instance, tree: dict[str, str]) -> str:
    """`tree` (the repository's files) as the candidate patch of a test run on `inst`: a diff
    against its code context (its snapshot), with the source's test patch applied beside it."""
    changed = {p: c for p, c in tree.items() if inst.code_context.get(p) != c}
    gone = {p: "" for p in inst.code_context if p not in tree}
    return files_patch(inst.code_context, {**changed, **gone}, created_files(inst.patch))
