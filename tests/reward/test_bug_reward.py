"""reward/bug_reward.py: the self-play injector's reward by the solver's solve rate."""

from __future__ import annotations

import pytest

from reward.bug_reward import INVALID, injector_reward, solve_rate


def test_a_bug_solved_sometimes_earns_most_always_or_never_less_invalid_least():
    a = 0.8
    assert injector_reward(False, None, a) == INVALID == -1.0
    assert injector_reward(True, 0.0, a) == injector_reward(True, 1.0, a) == -a
    assert injector_reward(True, 0.25, a) == pytest.approx(1 - 1.8 * 0.25)
    rare, common = injector_reward(True, 1 / 16, a), injector_reward(True, 15 / 16, a)
    assert rare > common > INVALID and rare > -a
    assert injector_reward(True, 1.0 - 1e-12, a) == pytest.approx(-a)  # continuous at s = 1


def test_the_solve_rate_counts_solver_samples_with_reward_one():
    assert solve_rate([1.0, 0.0, -1.0, 1.0]) == 0.5
    assert solve_rate([0.99, 0.5]) == 0.0
    with pytest.raises(ValueError):
        solve_rate([])
    with pytest.raises(ValueError):
        injector_reward(True, 0.5, 1.5)
