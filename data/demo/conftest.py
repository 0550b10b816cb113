"""Keeps pytest out of the demo sources: their test files fail on purpose against before/.

tests/data/test_demo.py runs them in temporary directories instead.
"""

collect_ignore = ["src"]
