"""How a test run and the similarity become a reward, for answers and for final patches: one
home for `tests` and `hybrid` (reward/kinds/verdict.py's kinds) and for an agent episode's
patch (RewardKind.score_patches, actors/replay.py). Pure: no Ray, no sandbox; a run is a
reward.execution.runner.TestRun (status, resolved, reason).

A candidate whose added code the static screen refuses (reward/screen.py) scores `screened`,
-1, in every kind, before any similarity or run (the value is argued in reward/screen.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reward.core import RewardResult, score_patches
from reward.screen import Finding, describe, screen_patch

if TYPE_CHECKING:
    from data.schema import Instance


def _why(run: Any) -> str | None:
    if run.status != "ok":
        return f"{run.status}: {run.reason}"
    return None if run.resolved else "unresolved"


def screened(findings: tuple[Finding, ...]) -> RewardResult:
    """The reward of an answer or patch with static-screen findings: -1, every kind."""
    return RewardResult(-1.0, f"tampered: {describe(findings)}", True, False, False)


def tests_reward(run: Any) -> RewardResult:
    """`tests` of a test run (a TestRun) of a well-formed candidate: 1 if resolved, else 0."""
    return RewardResult(1.0 if run.resolved else 0.0, _why(run), True, run.status == "timeout", run.resolved)


def hybrid_reward(similar: RewardResult, run: Any) -> RewardResult:
    """`hybrid`: half the similarity reward, half the test verdict."""
    reward = 0.5 * similar.reward + 0.5 * float(bool(run.resolved))
    error = "; ".join(e for e in (similar.error, _why(run)) if e) or None
    return RewardResult(reward, error, True, similar.timed_out or run.status == "timeout", run.resolved)


def score_patch(
    kind: str, instance: Instance, patch: str, run: Any | None, max_pair_seconds: float | None = None
) -> RewardResult:
    """A kind's reward of a final patch (an agent's episode: the diff of its tree) rather than
    of an answer's edits: `similarity` is rule 6, the paper's similarity of unified diffs
    (reward/core.py score_patches), against the oracle patch; `tests` and `hybrid` combine it
    with the test run of that patch as for an answer. `run` is needed for those two. A patch
    with static-screen findings is `screened` whatever the kind."""
    if findings := screen_patch(patch):
        return screened(findings)
    similar = score_patches(instance.patch, patch, max_pair_seconds=max_pair_seconds)
    if kind == "similarity":
        return similar
    if run is None or kind not in ("tests", "hybrid"):
        raise ValueError(f"score_patch: kind {kind!r} needs a test run" if run is None else f"unknown kind {kind!r}")
    return tests_reward(run) if kind == "tests" else hybrid_reward(similar, run)
