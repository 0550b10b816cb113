"""Reward kinds: `similarity` (rule.py, the paper's reward and the default), `discrete` (rule.py,
the paper's ablation), `tests` and `hybrid` (verdict.py, which run the instance's tests). The
interface and the registry are in interface.py; importing this package registers every kind."""

from reward.kinds import rule, verdict  # noqa: F401 - each registers its kinds on import
from reward.kinds.interface import REWARDS, RewardKind, make_reward
from reward.kinds.rule import Similarity

__all__ = ["REWARDS", "RewardKind", "Similarity", "make_reward"]
