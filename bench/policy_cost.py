"""What the test process's audit hook (reward/execution/policy.py) costs a test run, as a ratio.

    python bench/policy_cost.py [--rounds 3] [--tests tests/reward/test_report.py]

Runs the same pytest session (`--tests`, the project's own tests: imports, collection and
pure-Python test bodies, the work a repository's suite does) in child processes that
alternate hook off and hook on (AuditPolicy installed first, as bootstrap.py does, with a
candidate file of its own so that every event is judged), so that drift on a loaded machine
falls on both. Prints one JSON object: each mode's median seconds and on / off.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import importlib.util, sys
if sys.argv[1] == "on":
    spec = importlib.util.spec_from_file_location("swe_rl_policy", sys.argv[2])
    policy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(policy)
    hook = policy.AuditPolicy(1, lambda fd, record: None, ["bench/policy_cost.py"], {"bench/policy_cost.py": [1]},
                              [sys.argv[3]], "/swe-rl")
    assert hook.install()
import pytest
sys.exit(int(pytest.main(["-q", "-p", "no:cacheprovider", sys.argv[3]])))
"""


def once(mode: str, tests: str) -> float:
    """The child's wall seconds, start to exit (the project's conftest ends it with os._exit)."""
    argv = [sys.executable, "-c", CHILD, mode, str(ROOT / "reward" / "execution" / "policy.py"), tests]
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tests", default="tests/reward/test_report.py")
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    start = time.monotonic()
    for _ in range(args.rounds):
        for mode in ("off", "on"):
            seconds[mode].append(once(mode, args.tests))
    off, on = (statistics.median(seconds[m]) for m in ("off", "on"))
    result = {"off_s": round(off, 3), "on_s": round(on, 3), "on/off": round(on / off, 3)}
    print(json.dumps({**result, "rounds": args.rounds, "wall_s": round(time.monotonic() - start, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
