"""Benchmarks: scripts run as `python bench/<name>.py` (a package only so that type checkers can tell them apart)."""
