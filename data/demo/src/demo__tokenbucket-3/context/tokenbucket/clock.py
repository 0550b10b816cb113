"""Clocks for the limiter: the process's monotonic clock, and a manual one for tests."""

from __future__ import annotations

import time


class MonotonicClock:
    """Seconds from time.monotonic(): immune to wall-clock jumps (NTP, DST)."""

    def now(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to, so that limiter tests need no sleeping."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {seconds})")
        self._now += seconds
