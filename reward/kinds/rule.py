"""The rule-based reward kinds: `similarity`, the default (the paper's rule, reward/core.py: -1
for a malformed output, else the mean diff similarity to the oracle), and `discrete`, the
paper's ablation of it (section 3.6: -1, else 1 only for exactly the oracle's change, else 0).
Pure Python."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reward.core import RewardResult, exact_match, oracle_diffs, score_patches, score_with_oracle_diffs
from reward.kinds.interface import REWARDS, RewardKind
from reward.kinds.outcomes import screened
from reward.screen import screen_answer, screen_patch

if TYPE_CHECKING:
    from data.schema import Instance


@REWARDS.register("similarity")
class Similarity(RewardKind):
    """SWE-RL's reward (Wei et al. 2025, section 2.2; rules in docs/reward.md): -1 when the
    output is malformed or its edits do not apply, else the mean over files of the
    SequenceMatcher ratio between the predicted and the oracle diff. The trainer's time cap
    (`reward.max_pair_seconds`) scores a pair that would take longer 0, counted as a timeout."""

    def prepare(self, instance: Instance) -> tuple[dict[str, str], dict[str, str | None]]:
        return instance.code_context, oracle_diffs(instance.code_context, instance.oracle_new_content)

    def score(self, state: tuple[dict[str, str], dict[str, str | None]], output: str) -> RewardResult:
        context, oracle = state
        if findings := screen_answer(output):  # a forgery under `tests` earns no similarity
            return screened(findings)
        return score_with_oracle_diffs(context, oracle, output, max_pair_seconds=self.cfg.max_pair_seconds)


@REWARDS.register("discrete")
class Discrete(RewardKind):
    """SWE-RL's discrete ablation (Wei et al. 2025, section 3.6): -1 for a malformed output, 1 when
    the edits reproduce the oracle's change exactly (the files the oracle changes, each with the
    oracle's content: the evaluation's exact match), else 0. The paper found it worse than the
    continuous reward (repair with oracle files 29.0 vs 34.8): almost every group is all 0, so
    GRPO's advantages are 0 and the reward's mean stayed near 0 for its 1,600 steps."""

    def prepare(self, instance: Instance) -> tuple[dict[str, str], dict[str, str]]:
        return instance.code_context, instance.oracle_new_content

    def score(self, state: tuple[dict[str, str], dict[str, str]], output: str) -> RewardResult:
        if findings := screen_answer(output):
            return screened(findings)
        return exact_match(*state, output)

    def score_patches(self, items: list[tuple[Instance, str]]) -> list[RewardResult]:
        """An agent's final patch: 1 when each file's change is the oracle patch's (rule 6's
        similarity is exactly 1), else 0."""
        results = []
        for inst, patch in items:
            if findings := screen_patch(patch):
                results.append(screened(findings))
                continue
            similar = score_patches(inst.patch, patch, max_pair_seconds=self.cfg.max_pair_seconds)
            exact = similar.reward == 1.0
            results.append(RewardResult(1.0 if exact else 0.0, None if exact else "not the oracle's change"))
        return results
