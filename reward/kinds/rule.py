"""The `similarity` reward kind, the default: the paper's rule (reward/core.py), -1 for a
malformed output, else the mean diff similarity to the oracle. Pure Python."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reward.core import RewardResult, oracle_diffs, score_with_oracle_diffs
from reward.kinds.interface import REWARDS, RewardKind

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
        return score_with_oracle_diffs(context, oracle, output, max_pair_seconds=self.cfg.max_pair_seconds)
