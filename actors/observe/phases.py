"""Named, timed phases of the driver's step, and the error a phase raises when time runs out.

`with timer("generate"): ...` records `generate_s` (wall seconds, 3 decimals, summed over the
step's entries into the phase) for the step's metrics line. A Ray call that times out inside a
phase (`ray.get(..., timeout=...)` raising GetTimeoutError) becomes a PhaseTimeout naming the
phase, so the run ends with one line that says where it stopped (train.py prints it) instead of
a traceback from deep inside Ray. The Agentless evaluation times its stages with the same timer
(actors/eval/agentless_mini.py: summary.json's `seconds`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from ray.exceptions import GetTimeoutError


class PhaseTimeout(RuntimeError):
    """A remote call did not answer in time; the message names the phase and the actor."""


class PhaseTimer:
    """Wall time per named phase of one step (`<name>_s`)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._started = time.perf_counter()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        except GetTimeoutError as exc:
            raise PhaseTimeout(f"phase {name}: a remote call did not answer in time ({exc})") from exc
        finally:
            # A phase entered twice in a step (dynamic sampling's extra rounds) adds up.
            key = f"{name}_s"
            self.seconds[key] = round(self.seconds.get(key, 0.0) + time.perf_counter() - start, 3)

    def total(self) -> float:
        """Seconds since the timer was made (the step's wall time so far)."""
        return round(time.perf_counter() - self._started, 3)
