"""Wall clocks that follow the measured baseline: a test run's limit in validation, injection and
the proofs of bugs is a multiple of what the same tests took on the same code, never less than
the configured `reward.execution.wall_s`, and a run that still meets it is tried once more with
its wall doubled before anything is dropped.

    wall_for(baseline_s, floor_s)   FACTOR x the baseline's seconds, at least `floor_s`; the
                                    floor alone when nothing was measured yet
    retry_wall(wall_s)              the wall of the one retry after a timeout

Why not a constant: on these 2 shared cores an injector baseline with coverage ran out of a 30 s
wall under a load average of ~19 while the same repository's plain baseline had just passed in
17 s (docs/benchmarks.md); a repository whose suite takes 60 s on a quiet machine would never
pass a 30 s one. A bug that loops forever costs its wall and the retry's, twice its tests' runs:
bounded by the baseline, not by a guess.
"""

from __future__ import annotations

# A run may take this many times its baseline: coverage.py roughly doubles a suite's time, and a
# machine shared with other work (the load beside it) slows it again.
FACTOR = 4.0
RETRY = 2.0  # the one retry after a timeout runs with this many times the wall it ran out of


def wall_for(baseline_s: float | None, floor_s: float, factor: float = FACTOR) -> float:
    """The wall clock of a run whose tests took `baseline_s` on the working code (None or 0:
    not measured): `factor` times that, at least `floor_s`."""
    if not baseline_s or baseline_s <= 0:
        return floor_s
    return max(floor_s, factor * baseline_s)


def retry_wall(wall_s: float) -> float:
    """The wall of the retry of a run that timed out under `wall_s`."""
    return RETRY * wall_s
