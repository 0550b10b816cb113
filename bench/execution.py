"""Test execution: sandbox overhead, start latency, environment builds, pool throughput.

    python bench/execution.py [--instances 6] [--repeats 3]

On the demo set, in one process (ratios against baselines measured in the same run):

  (1) overhead: each instance's tests (oracle patch + test patch) run by the same interpreter
      and pytest command, bare (a subprocess over a copy of the snapshot) and in the sandbox;
      the ratio of the median times (goal <= 1.2x);
  (2) start latency: `true` in the sandbox vs bare, median;
  (3) environment build: a uv-built venv (pytest pinned, resolved as of a date), cold (a new
      cache) and warm (the cache hit);
  (4) pool throughput: every instance's test run on the Ray test-runner pool with 1 and 2
      runners, runs per minute and the ratio;
  (5) a fresh copy of a snapshot per run: an overlay mount (what the sandbox does) against hard
      links (`cp -al`) and a full copy (`cp -a`), each in a new mount namespace, on a tree the
      size of a large repository (`--tree`, default the interpreter's standard library).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conf.config import ExecutionConfig  # noqa: E402
from data.demo import load_demo_rows  # noqa: E402
from data.schema import Instance  # noqa: E402
from reward.execution import junit, sandbox  # noqa: E402
from reward.execution.environments import Environments, EnvSpec  # noqa: E402
from reward.execution.runner import Runner, TestJob, patched_files, test_files  # noqa: E402


def bare_run(python: str, snapshot: Path, changes: dict[str, str | None], tests: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(snapshot, work)
        for rel, content in changes.items():
            if content is not None:
                (work / rel).parent.mkdir(parents=True, exist_ok=True)
                (work / rel).write_text(content)
        start = time.perf_counter()
        cmd = [python, "-m", "pytest", *junit.PYTEST_ARGS, f"--junitxml={tmp}/j.xml", *tests]
        subprocess.run(
            cmd,
            cwd=work,
            env={"PYTHONPATH": str(work), "PATH": "/usr/bin:/bin", "HOME": tmp},
            capture_output=True,
            timeout=300,
        )
        return time.perf_counter() - start


def fresh_copy_seconds(tree: Path, repeats: int) -> dict[str, float]:
    """Median seconds to give one run its own writable copy of `tree`, by each method. Every
    command runs in a new private mount namespace, so the process costs are the same for all."""
    methods = {
        "overlay": 'mount -t tmpfs t "$W" && mkdir "$W/u" "$W/w" "$W/m" && '
        'mount -t overlay o -o lowerdir="$S",upperdir="$W/u",workdir="$W/w" "$W/m"',
        "hard links": 'cp -al "$S" "$W/m"',
        "copy": 'cp -a "$S" "$W/m"',
    }
    times: dict[str, list[float]] = {m: [] for m in methods}
    for _ in range(repeats):
        for name, command in methods.items():
            with tempfile.TemporaryDirectory() as work:
                start = time.perf_counter()
                subprocess.run(
                    ["unshare", "--mount", "--propagation", "private", "sh", "-c", command],
                    env={"S": str(tree), "W": work, "PATH": "/usr/bin:/bin"},
                    check=True,
                )
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tree", default=sysconfig.get_paths()["stdlib"], help="the tree of (5)")
    args = parser.parse_args()
    instances = [Instance.from_row(r) for r in load_demo_rows()[: args.instances]]
    cache = Path(tempfile.mkdtemp(prefix="bench-exec-"))
    runner = Runner(ExecutionConfig(cache_dir=str(cache)))
    env = runner.envs.ensure(EnvSpec())
    bare, boxed = [], []
    for inst in instances:
        snapshot = runner.snapshots.path(inst, EnvSpec())
        changes = patched_files(snapshot, inst.patch, inst.test_patch or "")
        for _ in range(args.repeats):
            bare.append(bare_run(env.python, snapshot, changes, test_files(inst.test_patch)))
            start = time.perf_counter()
            run = runner.run(TestJob(inst, inst.patch))
            boxed.append(time.perf_counter() - start)
            assert run.resolved, run
    b, s = statistics.median(bare), statistics.median(boxed)
    print(
        f"(1) demo tests, {len(instances)} instances x {args.repeats}: bare {b:.2f} s, sandbox {s:.2f} s, "
        f"ratio {s / b:.2f}x (median per run)"
    )
    snap = runner.snapshots.path(instances[0], EnvSpec())
    t_bare, t_box = [], []
    for _ in range(10):
        start = time.perf_counter()
        subprocess.run(["true"], check=True)
        t_bare.append(time.perf_counter() - start)
        start = time.perf_counter()
        sandbox.run(["/bin/true"], snapshot=snap, ro_paths=env.ro_paths, env=env.variables)
        t_box.append(time.perf_counter() - start)
    print(
        f"(2) start latency: `true` bare {1000 * statistics.median(t_bare):.1f} ms, "
        f"in the sandbox {1000 * statistics.median(t_box):.0f} ms (median of 10)"
    )
    envs = Environments(cache / "envs")
    spec = EnvSpec(python="3.11", requirements=("pytest==8.3.3",), exclude_newer="2025-01-01")
    start = time.perf_counter()
    envs.ensure(spec)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    envs.ensure(spec)
    warm = time.perf_counter() - start
    print(f"(3) environment (python 3.11, pytest 8.3.3 as of 2025-01-01): cold {cold:.1f} s, warm {warm * 1000:.0f} ms")
    import ray

    from actors.cluster import init_ray
    from actors.test_pool import TestPool

    init_ray("", num_cpus=2, include_dashboard=False)
    rates = {}
    for n in (1, 2):
        pool = TestPool(ExecutionConfig(num_runners=n, num_cpus=1.0, cache_dir=str(cache)))
        jobs = [TestJob(i, i.patch, job_id=i.instance_id) for i in instances * 2]
        pool.run(jobs[:n])  # warm the runners (imports, the snapshot cache)
        start = time.perf_counter()
        runs = pool.run(jobs)
        rates[n] = 60 * len(jobs) / (time.perf_counter() - start)
        assert all(r.resolved for r in runs)
        pool.shutdown()
    ratio = rates[2] / rates[1]
    print(f"(4) pool: 1 runner {rates[1]:.1f} runs/min, 2 runners {rates[2]:.1f} runs/min, ratio {ratio:.2f}x")
    ray.shutdown()
    shutil.rmtree(cache, ignore_errors=True)
    tree = Path(args.tree).resolve()
    files = [p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()]
    size_mb = sum(p.stat().st_size for p in files) / 2**20
    costs = fresh_copy_seconds(tree, repeats=5)
    print(
        f"(5) a fresh copy of {tree} ({len(files)} files, {size_mb:.0f} MB), median of 5: "
        + ", ".join(f"{name} {1000 * t:.0f} ms" for name, t in costs.items())
        + f"; hard links / overlay {costs['hard links'] / costs['overlay']:.1f}x, "
        f"copy / overlay {costs['copy'] / costs['overlay']:.1f}x"
    )


if __name__ == "__main__":
    main()
