"""CPU that an idle local Ray cluster takes from a CPU engine, per process and per profile.

    python bench/ray_idle.py [--window 60] [--settle 20] [--profiles default,nodash,quiet]

Each profile starts the local cluster the trainer starts (actors/cluster/join.py `init_ray`, 4
logical CPUs) in a fresh child process, lets start-up settle, then reads the CPU time
(utime + stime from /proc) of every process of the cluster at the start and the end of the
window. It prints each process's share of one core and the total, then as its last line
`idle Ray: X% of a core (default) -> Y% (best profile)`. CPU time is what a process consumed,
not how long it waited, so a busy machine shifts these figures much less than it shifts a
throughput figure; still, run it on a quiet machine to compare with bench/rollout.py.

Profiles (what the trainer offers, conf/config.py RayConfig):
- "default": Ray as before `ray.quiet`: dashboard on, no quieting (ray.quiet=false);
- "nodash":  without the dashboard;
- "quiet":   dashboard on, quieted (actors/cluster/quiet.py: slower polling, SCHED_IDLE daemons;
             ray.quiet, the default). SCHED_IDLE changes when the daemons run, not how much
             CPU they take: its effect shows in bench/rollout.py, not here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TICKS = os.sysconf("SC_CLK_TCK")


def _name(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    args = [a.decode(errors="replace") for a in cmd if a]
    if not args:
        return "?"
    if args[0].startswith("ray::") or args[0].startswith("ray-dashboard"):
        return args[0].split()[0]
    for a in args:  # python -m x / python path/to/x.py
        if a.endswith(".py"):
            return Path(a).name
    if "-m" in args:
        return args[args.index("-m") + 1]
    return Path(args[0]).name


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def child(profile: str, settle: float, window: float) -> None:
    """In the child: start the cluster as the trainer would, measure, print JSON."""
    import ray

    from actors.cluster.join import init_ray
    from actors.cluster.reaper import descendants

    init_ray("", num_cpus=4, include_dashboard=profile != "nodash", quiet=profile == "quiet")
    time.sleep(settle)
    me = os.getpid()
    pids = [p for p in descendants([me]) if p != me]
    before = {p: _cpu_seconds(p) for p in pids}
    start = time.perf_counter()
    time.sleep(window)
    elapsed = time.perf_counter() - start
    shares: dict[str, float] = defaultdict(float)
    for p in pids:
        shares[_name(p)] += (_cpu_seconds(p) - before[p]) / elapsed
    ray.shutdown()
    print(json.dumps(shares))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--window", type=float, default=60.0)
    p.add_argument("--settle", type=float, default=20.0)
    p.add_argument("--profiles", default="default,nodash,quiet")
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.settle, args.window)
        return
    totals = {}
    for profile in args.profiles.split(","):
        out = subprocess.run(
            [sys.executable, __file__, "--child", profile, "--settle", str(args.settle), "--window", str(args.window)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        shares = json.loads(out.strip().splitlines()[-1])
        totals[profile] = sum(shares.values())
        print(f"{profile}: {100 * totals[profile]:.1f}% of a core")
        for name, share in sorted(shares.items(), key=lambda kv: -kv[1]):
            if share >= 0.001:
                print(f"    {100 * share:5.1f}%  {name}")
    best = min(totals, key=lambda k: totals[k])
    first = next(iter(totals))
    print(f"idle Ray: {100 * totals[first]:.1f}% of a core ({first}) -> {100 * totals[best]:.1f}% ({best})")


if __name__ == "__main__":
    main()
