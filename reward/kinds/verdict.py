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
or sandbox failure, a lost job) scores 0 with the reason as the error and `resolved` None. An
output whose added code the static screen refuses (reward/screen.py) scores -1 and is not run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ray

from data.patching import created_files, files_patch
from reward.apply import apply_edits
from reward.core import RewardResult, oracle_diffs, score_with_oracle_diffs
from reward.execution.pool import TestPool
from reward.execution.runner import TestJob, TestRun
from reward.kinds.interface import REWARDS, RewardKind
from reward.kinds.outcomes import hybrid_reward, score_patch, screened, tests_reward
from reward.parse import Rejected, parse_output
from reward.screen import screen_edits, screen_patch

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
                edits = parse_output(output)
                if findings := screen_edits(edits):  # refused before any run (reward/screen.py)
                    results[i] = screened(findings)
                    continue
                applied = apply_edits(instance.code_context, edits)
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

    kind_name = "tests"

    def score_patches(self, items: list[tuple[Instance, str]]) -> list[RewardResult]:
        """Each patch's test run on the pool (in parallel), combined as score_patch does. An
        empty patch (an episode that changed nothing) is not run: on a labelled instance (the
        trainer refuses others with these kinds) its FAIL_TO_PASS tests fail, so it is
        unresolved, as reward.execute counts an empty prediction without running it."""
        refs = {
            i: self.pool.run.remote(TestJob(inst, patch, job_id=str(i)))
            for i, (inst, patch) in enumerate(items)
            if patch.strip() and not screen_patch(patch)  # score_patch scores those -1, unrun
        }
        done = dict(zip(refs, ray.get(list(refs.values())), strict=True))
        unchanged = lambda i, inst: TestRun(str(i), inst.instance_id, "ok", resolved=False)  # noqa: E731
        return [
            score_patch(self.kind_name, inst, patch, done.get(i) or unchanged(i, inst), self.cfg.max_pair_seconds)
            for i, (inst, patch) in enumerate(items)
        ]

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


@REWARDS.register("tests")
class Tests(_RunsTests):
    def combine(self, run: Any, instance: Instance, oracle: dict[str, str | None], output: str) -> RewardResult:
        return tests_reward(run)


@REWARDS.register("hybrid")
class Hybrid(_RunsTests):
    kind_name = "hybrid"

    def combine(self, run: Any, instance: Instance, oracle: dict[str, str | None], output: str) -> RewardResult:
        similar = score_with_oracle_diffs(instance.code_context, oracle, output,
                                          max_pair_seconds=self.cfg.max_pair_seconds)  # fmt: skip
        return hybrid_reward(similar, run)
