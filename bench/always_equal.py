"""False alarms of the always-equal probe (reward/execution/bootstrap.EqualityProbe) on gold patches.

    python bench/always_equal.py [--instances demo] [--instances DIR ...] [--git owner/name=CLONE ...]
        [--cache-dir DIR] [--limit N]

Runs each instance's own patch (the gold fix) through the real Runner, with the probe watching
its FAIL_TO_PASS tests as in every verdict, and counts the statuses: a gold patch made
`tampered` by the probe is a false alarm and is printed with its reason. Instances are what
read_instances takes (`demo`, a Parquet file or folder: data.validate's output for SWE-bench
rows, whose clones `--git` names). The last line reads `probe on gold patches: N run, R resolved, F false alarms`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conf.config import ExecutionConfig  # noqa: E402
from data.loader import read_instances  # noqa: E402
from reward.execution.runner import Runner, TestJob  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", action="append", help="demo, or a Parquet file or folder (repeatable)")
    parser.add_argument("--git", action="append", default=[], help="owner/name=CLONE (reward.execution.repos)")
    parser.add_argument("--cache-dir", default=None, help="environments and snapshots (default: a temporary folder)")
    parser.add_argument("--limit", type=int, default=0, help="the first N instances of each source (0 = all)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(ExecutionConfig(cache_dir=args.cache_dir or tmp, repos=args.git))
        statuses: Counter[str] = Counter()
        alarms, start, in_sandbox = 0, time.monotonic(), 0.0
        for source in args.instances or ["demo"]:
            for inst in read_instances(source, args.limit):
                run = runner.run(TestJob(inst, inst.patch, job_id=inst.instance_id))
                statuses["resolved" if run.resolved else run.status] += 1
                in_sandbox += run.seconds
                if run.status == "tampered":
                    alarms += 1
                    print(f"false alarm: {inst.instance_id}: {run.reason}")
                elif not run.resolved:
                    print(f"not resolved ({run.status}): {inst.instance_id}: {run.reason or ''}"[:300])
        total = sum(statuses.values())
        print(f"{dict(statuses)} in {time.monotonic() - start:.0f} s ({in_sandbox:.1f} s in the sandbox)")
        print(f"probe on gold patches: {total} run, {statuses['resolved']} resolved, {alarms} false alarms")
    return 0 if alarms == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
