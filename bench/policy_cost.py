"""What the test process's audit hook (reward/execution/policy.py) costs a test run, as a ratio.

    python bench/policy_cost.py [--rounds 3] [--tests tests/reward/test_report.py]

Runs the same pytest session (`--tests`, the project's own tests: imports, collection and
pure-Python test bodies, the work a repository's suite does) in child processes that
alternate hook off and hook on (AuditPolicy installed first, as bootstrap.py does, with a
candidate file of its own so that every event is judged), so that drift on a loaded machine
falls on both. Prints one JSON object: each mode's median seconds and on / off, and the
seconds spent inside the hook itself in the hook-on runs (timed around each event): on a
loaded machine the ratio is mostly noise, the hook's own share is not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import importlib.util, os, sys, time
if sys.argv[1] == "on":
    spec = importlib.util.spec_from_file_location("swe_rl_policy", sys.argv[2])
    policy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(policy)
    hook = policy.AuditPolicy(1, lambda fd, record: None, ["bench/policy_cost.py"], {"bench/policy_cost.py": [1]},
                              [sys.argv[3]], "/swe-rl")
    spent = [0.0, 0]

    def timed(event, args, judge=hook.hook, clock=time.perf_counter):
        start = clock()
        try:
            return judge(event, args)
        finally:
            spent[0] += clock() - start
            spent[1] += 1

    sys.addaudithook(timed)
import pytest
code = pytest.main(["-q", "-p", "no:cacheprovider", sys.argv[3]])
if sys.argv[1] == "on":
    os.write(2, ("HOOK %f %d" % (spent[0], spent[1])).encode())
sys.exit(int(code))
"""


def once(mode: str, tests: str) -> tuple[float, float, int]:
    """The child's wall seconds, start to exit, and (hook on) the seconds its hook ran and the
    events it judged, as the child writes them before the project's conftest ends it."""
    argv = [sys.executable, "-c", CHILD, mode, str(ROOT / "reward" / "execution" / "policy.py"), tests]
    start = time.perf_counter()
    env = {**os.environ, "SWE_RL_TEST_TEARDOWN": "1"}  # pytest.main returns: the child writes its figures
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    hook = next((line.split() for line in done.stderr.splitlines() if line.startswith("HOOK")), ["", "0", "0"])
    return wall, float(hook[1]), int(hook[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tests", default="tests/reward/test_report.py")
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    hook: list[float] = []
    events = 0
    start = time.monotonic()
    for _ in range(args.rounds):
        for mode in ("off", "on"):
            wall, in_hook, events = once(mode, args.tests)
            seconds[mode].append(wall)
            if mode == "on":
                hook.append(in_hook)
    off, on = (statistics.median(seconds[m]) for m in ("off", "on"))
    result = {"off_s": round(off, 3), "on_s": round(on, 3), "on/off": round(on / off, 3)}
    result |= {"in_hook_s": round(statistics.median(hook), 3), "in_hook/on": round(statistics.median(hook) / on, 4)}
    print(json.dumps({**result, "events": events, "rounds": args.rounds, "wall_s": round(time.monotonic() - start, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
