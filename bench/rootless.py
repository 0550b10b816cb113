"""The sandbox as root and rootless (identity.py): start and per-command cost, as ratios.

    python bench/rootless.py [--rounds 2] [--runs 30] [--commands 100]    (as root)

Makes the test user of tests/reward/test_rootless.py (a delegated cgroup, a view of root's
home) and measures, in child processes that alternate root, rootless, root, ... (`--rounds`
of each, so that drift on a noisy machine falls on both):

  run       `sandbox.run(["/bin/true"])`: namespaces, root, cgroups, PID 1 and teardown (what a
            test run pays beyond its tests), median of --runs
  session   a Session's start on a spare PID 1 (workspace.py SPARES), median of 10
  command   `true` through a live session, median of --commands
  bare      `subprocess.run(["true"])` in the same child: the machine's own process start

Prints one JSON object: each mode's medians (ms, the median over rounds) and rootless / root.
With --redteam it runs bench/redteam.py as root and then as the test user instead, and prints
each one's table (the attack classes, attempts, and how many forged or escaped).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.workspace import median_ms  # noqa: E402
from reward.execution import cgroups, identity, sandbox  # noqa: E402 - rootless follows the process's uid
from reward.execution.environments import Environments, EnvSpec  # noqa: E402
from reward.execution.workspace import Session  # noqa: E402


def measure(runs: int, commands: int) -> dict[str, float]:
    """One child's figures (run as root or as the test user)."""
    work = Path(tempfile.mkdtemp())
    snapshot = work / "snapshot"
    (snapshot / "pkg").mkdir(parents=True)
    (snapshot / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    for path in [snapshot, *snapshot.rglob("*")]:
        identity.give(path)
    env = Environments(work / "envs").ensure(EnvSpec())
    for _ in range(3):  # warm: page cache, the spares
        sandbox.run(["/bin/true"], snapshot=snapshot)
    figures = {"bare": median_ms(lambda: subprocess.run(["true"]), runs)}
    figures["run"] = median_ms(lambda: sandbox.run(["/bin/true"], snapshot=snapshot), runs)
    starts = []
    for _ in range(10):
        time.sleep(0.1)  # the spare taken is replaced meanwhile, as between an episode's starts
        start = time.perf_counter()
        with Session(snapshot, env):
            starts.append(time.perf_counter() - start)
    figures["session"] = statistics.median(starts) * 1000
    with Session(snapshot, env) as live:
        figures["command"] = median_ms(lambda: live.run("true", 10, 1000), commands)
    figures["rootless"] = float(identity.rootless())
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--commands", type=int, default=100)
    parser.add_argument("--redteam", action="store_true", help="bench/redteam.py as root, then rootless")
    parser.add_argument("--measure", action="store_true", help="(internal) one child's figures")
    args = parser.parse_args()
    sizes = ["--runs", str(args.runs), "--commands", str(args.commands)]
    if args.measure:
        print(json.dumps(measure(args.runs, args.commands)))
        return
    from tests.reward.test_rootless import unprivileged_user  # the test's user and its view

    child = [sys.executable, str(Path(__file__).resolve()), "--measure", *sizes]
    rounds: dict[str, list[dict[str, float]]] = {"root": [], "rootless": []}
    with tempfile.TemporaryDirectory(dir="/tmp") as home, unprivileged_user(Path(home)) as user:  # the user enters it
        if args.redteam:
            redteam = [sys.executable, str(ROOT / "bench" / "redteam.py")]
            as_root = subprocess.run(redteam, capture_output=True, text=True, cwd=ROOT)
            rootless = user.run(redteam, {cgroups.ROOT_ENV: user.cgroup_root}, timeout=3600)
            for mode, done in (("root", as_root), ("rootless", rootless)):
                print(f"== {mode} (exit {done.returncode})\n{done.stdout.strip()}\n{done.stderr.strip()[-3000:]}")
            return
        for _ in range(args.rounds):
            done = subprocess.run(child, capture_output=True, text=True, check=True, cwd=ROOT)
            rounds["root"].append(json.loads(done.stdout.splitlines()[-1]))
            run = user.run(child, {cgroups.ROOT_ENV: user.cgroup_root}, timeout=600)
            if run.returncode != 0:
                raise SystemExit(f"the rootless child failed: {run.stderr[-2000:]}")
            rounds["rootless"].append(json.loads(run.stdout.splitlines()[-1]))
    assert [r["rootless"] for r in rounds["rootless"]] == [1.0] * args.rounds, "the child did not run rootless"
    keys = ("bare", "run", "session", "command")
    medians = {mode: {k: round(statistics.median(r[k] for r in rs), 2) for k in keys} for mode, rs in rounds.items()}
    ratios = {k: round(medians["rootless"][k] / medians["root"][k], 2) for k in keys}
    print(json.dumps({"rounds": args.rounds, "ms": medians, "rootless_over_root": ratios}))


if __name__ == "__main__":
    main()
