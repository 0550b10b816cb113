"""Reward kinds that run the instance's tests: `tests` and `hybrid` (reward/kinds/__init__.py's registry).

    tests   -1 for a malformed output (rules 1-3 of the SWE-RL reward: format, edits, apply);
            otherwise 1.0 if the edits resolve the instance (every FAIL_TO_PASS and PASS_TO_PASS
            test passes with the instance's test patch applied), else 0.0
    hybrid  -1 for a malformed output; otherwise 0.5 x the paper's similarity + 0.5 x resolved

The output's edits become a unified diff against the code context (data.patching.files_patch),
which the test-runner pool (reward/execution/pool.py) applies to the repository snapshot and tests
in a sandbox. The kind starts the pool on the driver, when it is built, and carries only the
pool's actor handle to the reward workers; each worker submits a batch's outputs at once (the
pool runs them in parallel) and waits. A run that ends without an outcome (environment, patch
or sandbox failure, a lost job) scores 0 with the reason as the error and `resolved` None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ray

from data.patching import created_files, files_patch
from reward.apply import apply_edits
from reward.core import RewardResult, oracle_diffs, score_patches, score_with_oracle_diffs
from reward.execution.pool import TestPool
from reward.execution.runner import TestJob
from reward.kinds.interface import REWARDS, RewardKind
from reward.parse import Rejected, parse_output

if TYPE_CHECKING:
    from conf.config import RewardConfig
    from data.schema import Instance


class _RunsTests(RewardKind):
    uses_test_pool = True

    def __init__(self, cfg: RewardConfig) -> None:
        super().__init__(cfg)
        pool = TestPool(cfg.execution)
        self.pool = pool.actor  # a handle: it travels to the reward workers
        self._last_tests_s = 0.0

    def prepare(self, instance: Instance) -> tuple[Instance, set[str], dict[str, str | None]]:
        return instance, created_files(instance.patch), oracle_diffs(instance.code_context, instance.oracle_new_content)

    def score(self, state: Any, output: str) -> RewardResult:
        return self.score_batch([(state, output)])[0]

    def score_batch(self, items: list[tuple[Any, str]]) -> list[RewardResult]:
        results: list[RewardResult | None] = [None] * len(items)
        runs = {}
        for i, ((instance, created, _), output) in enumerate(items):
            try:
                applied = apply_edits(instance.code_context, parse_output(output))
            except Rejected as rejected:
                results[i] = RewardResult(-1.0, rejected.reason, rejected.format_ok, resolved=False)
                continue
            patch = files_patch(instance.code_context, applied.new_content, created)
            runs[i] = self.pool.run.remote(TestJob(instance, patch, job_id=str(i)))
        for i, run in zip(runs, ray.get(list(runs.values())), strict=True):
            (instance, _, oracle), output = items[i]
            results[i] = self.combine(run, instance, oracle, output)
        return [r for r in results if r is not None]

    def combine(self, run: Any, instance: Instance, oracle: dict[str, str | None], output: str) -> RewardResult:
        raise NotImplementedError

    def stats(self) -> dict[str, float]:
        """The pool's cumulative counters; `tests_s` is the sandbox seconds since the last call
        (the step's, as the driver calls this once per step)."""
        stats = dict(ray.get(self.pool.stats.remote()))
        total = stats["tests_s"]
        stats["tests_s"] = round(total - self._last_tests_s, 3)
        self._last_tests_s = total
        return stats

    def shutdown(self) -> None:
        ray.get(self.pool.shutdown.remote())
        ray.kill(self.pool, no_restart=True)


def _why(run: Any) -> str | None:
    if run.status != "ok":
        return f"{run.status}: {run.reason}"
    return None if run.resolved else "unresolved"


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
    with the test run of that patch as for an answer. `run` is needed for those two."""
    similar = score_patches(instance.patch, patch, max_pair_seconds=max_pair_seconds)
    if kind == "similarity":
        return similar
    if run is None or kind not in ("tests", "hybrid"):
        raise ValueError(f"score_patch: kind {kind!r} needs a test run" if run is None else f"unknown kind {kind!r}")
    return tests_reward(run) if kind == "tests" else hybrid_reward(similar, run)


@REWARDS.register("tests")
class Tests(_RunsTests):
    def combine(self, run: Any, instance: Instance, oracle: dict[str, str | None], output: str) -> RewardResult:
        return tests_reward(run)


@REWARDS.register("hybrid")
class Hybrid(_RunsTests):
    def combine(self, run: Any, instance: Instance, oracle: dict[str, str | None], output: str) -> RewardResult:
        similar = score_with_oracle_diffs(instance.code_context, oracle, output,
                                          max_pair_seconds=self.cfg.max_pair_seconds)  # fmt: skip
        return hybrid_reward(similar, run)
