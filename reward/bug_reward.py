"""The injector's reward in self-play training (`trainer.selfplay`): how useful a bug it wrote was.

Self-play SWE-RL (Wei et al. 2025, arXiv 2512.18552) rewards the injector by the solver's solve
rate `s` on its bug, so that the policy writes bugs at the edge of what it can fix. Our reading
of its rule, with `alpha` in (0, 1):

    reward = -1                   the bug is invalid (no answer, an edit that fails, a test
                                  file touched, or not proved by the tests: data/bugs/)
           = -alpha               valid, and solved by every solver sample or by none (s = 1 or
                                  s = 0): too easy or too hard, no learning signal for the solver
           = 1 - (1 + alpha) * s  valid and solved sometimes: the rarer the fix, the better

so a bug solved sometimes earns most (up to 1 as s -> 0), one solved always or never earns
less (-alpha), an invalid one least (-1); at s = 1 both branches give -alpha. A bug is solved by
a solver sample whose reward is 1 (its tests pass, `tests`/`hybrid`, or its edits are the
inverse exactly, `similarity`/`discrete`). The default alpha 0.8 is ours.
"""

from __future__ import annotations

from collections.abc import Sequence

INVALID = -1.0


def solve_rate(solver_rewards: Sequence[float]) -> float:
    """The share of solver samples that fixed the bug (reward 1)."""
    if not solver_rewards:
        raise ValueError("a solve rate needs at least one solver sample")
    return sum(r >= 1.0 for r in solver_rewards) / len(solver_rewards)


def injector_reward(valid: bool, s: float | None, alpha: float) -> float:
    """The injector's reward for one bug (module docstring); `s` is its solve rate (None when
    invalid)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha}: must be in (0, 1)")
    if not valid or s is None:
        return INVALID
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"solve rate {s}: must be in [0, 1]")
    return -alpha if s in (0.0, 1.0) else 1.0 - (1.0 + alpha) * s
