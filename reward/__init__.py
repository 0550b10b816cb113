"""The SWE-RL reward: parse a model output, apply its edits, diff, and score against the oracle.

Pure Python (standard library, `cydifflib`, `unidiff`): no Ray, torch or numpy, so that the
trainer's reward actors, the evaluation and `python -m reward.score` share one implementation
and the command starts fast. The rules, the time cap and the measured speed: docs/reward.md.
"""

from reward.core import RewardResult, oracle_diffs, score_output, score_patches, score_with_oracle_diffs
from reward.oracle import OracleAnswerError, oracle_answer

__all__ = [
    "OracleAnswerError",
    "RewardResult",
    "oracle_answer",
    "oracle_diffs",
    "score_output",
    "score_patches",
    "score_with_oracle_diffs",
]
