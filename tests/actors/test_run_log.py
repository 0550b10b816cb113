"""The step's metrics line is built in one place, which refuses a key two sources give."""

from __future__ import annotations

import pytest

from actors.driver.run_log import merged


def test_sources_are_joined_in_order():
    assert list(merged({"step": 1}, {"reward_mean": 0.5}, {"sync_s": 0.1})) == ["step", "reward_mean", "sync_s"]


def test_a_key_given_twice_is_refused_rather_than_overwritten():
    with pytest.raises(ValueError, match=r"\['sync_s'\] given by two sources"):
        merged({"step": 1, "sync_s": 0.1}, {"sync_s": 0.2})
