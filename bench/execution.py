"""Test execution: sandbox overhead, start latency, environment builds, pool throughput.

    python bench/execution.py [--instances 6] [--repeats 3]
    python bench/execution.py --data VALIDATED_DIR --git owner/name=CLONE [--instances 3]

On the demo set, or with `--data` on a real repository's validated instances (their own
environments, snapshots from the clones), in one process (ratios against baselines measured in
the same run):

  (1) overhead: each instance's tests (oracle patch + test patch) run by the same interpreter
      and pytest command, bare (a subprocess over a copy of the snapshot) and in the sandbox;
      the ratio of the median times (goal <= 1.2x);
  (2) start latency: `true` in the sandbox vs bare, median;
  (3) environment build: a uv-built venv (pytest pinned, resolved as of a date; with --data,
      the first instance's own environment), cold (a new environment cache; with --data also
      with an empty uv package cache, every wheel downloaded) and warm (the cache hit);
  (4) pool throughput (demo set only): every instance's test run on the Ray test-runner pool
      with 1 and 2 runners, runs per minute and the ratio;
  (5) a fresh copy of a snapshot per run: an overlay mount (what the sandbox does) against hard
      links (`cp -al`) and a full copy (`cp -a`), each in a new mount namespace, on `--tree`
      (default: with --data the first instance's snapshot, else the interpreter's standard
      library, a tree the size of a large repository).

The bare run is the sandbox's command outside it: the same interpreter, arguments, environment
variables (PYTHONPATH pointing at the copy) and working tree (a copy of the snapshot with the
same files changed), so the ratio is the cost of the sandbox alone.
"""

from __future__ import annotations

import argparse
import os
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
from reward.execution import sandbox  # noqa: E402
from reward.execution.environments import Environments, EnvSpec  # noqa: E402
from reward.execution.runner import Runner, TestJob, patched_files, test_files  # noqa: E402
from reward.execution.runners import PYTEST_ARGS  # noqa: E402


def bare_run(
    python: str, snapshot: Path, changes: dict[str, str | None], tests: list[str], variables: dict[str, str]
) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(snapshot, work, symlinks=True)
        for rel, content in changes.items():
            if content is None:
                (work / rel).unlink(missing_ok=True)
                continue
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(content)
        start = time.perf_counter()
        cmd = [python, "-m", "pytest", *PYTEST_ARGS, *tests]  # bare pytest: no harness, no report
        # The sandbox's variables, its /testbed and /tmp mapped onto the copy and a private tmp.
        env = {k: v.replace("/testbed", str(work)) for k, v in variables.items()} | {"HOME": tmp, "TMPDIR": tmp}
        subprocess.run(cmd, cwd=work, env=env, capture_output=True, timeout=600)
        return time.perf_counter() - start


def load(args: argparse.Namespace) -> list[Instance]:
    if not args.data:
        return [Instance.from_row(r) for r in load_demo_rows()[: args.instances]]
    from data.loader import read_instances

    return [i for i in read_instances(args.data, 0) if i.fail_to_pass][: args.instances]


def build_times(instance: Instance, runner: Runner, cache: Path) -> str:
    """Cold and warm builds of the instance's own environment (--data)."""
    spec = EnvSpec.from_json(instance.environment)
    assert spec is not None
    snapshot = runner.snapshots.path(instance, spec)
    times: dict[str, float] = {}
    for label, uv_cache in (("cold, empty uv cache", cache / "uv"), ("cold, uv cache warm", None)):
        envs = Environments(cache / f"envs-{len(times)}")
        if uv_cache is not None:
            os.environ["UV_CACHE_DIR"] = str(uv_cache)
        try:
            start = time.perf_counter()
            envs.ensure(spec, snapshot)
            times[label] = time.perf_counter() - start
        finally:
            os.environ.pop("UV_CACHE_DIR", None)
    start = time.perf_counter()
    envs.ensure(spec, snapshot)
    warm = time.perf_counter() - start
    cold = ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
    what = f"Python {spec.python}, {len(spec.requirements)} requirements + the snapshot's dependencies"
    return (
        f"(3) environment of {instance.instance_id} ({what}, as of {spec.exclude_newer}): {cold}, "
        f"warm {warm * 1000:.0f} ms"
    )


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


def print_fresh_copy(tree: Path) -> None:
    tree = tree.resolve()
    files = [p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()]
    size_mb = sum(p.stat().st_size for p in files) / 2**20
    costs = fresh_copy_seconds(tree, repeats=5)
    print(
        f"(5) a fresh copy of {tree} ({len(files)} files, {size_mb:.0f} MB), median of 5: "
        + ", ".join(f"{name} {1000 * t:.0f} ms" for name, t in costs.items())
        + f"; hard links / overlay {costs['hard links'] / costs['overlay']:.1f}x, "
        f"copy / overlay {costs['copy'] / costs['overlay']:.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", default="", help="validated instances of a real repository (default: the demo set)")
    parser.add_argument("--git", action="append", default=[], help="owner/name=CLONE (repeatable), with --data")
    parser.add_argument("--tree", default="", help="the tree of (5)")
    parser.add_argument("--cache-dir", default="", help="environments and snapshots (default: a new one)")
    args = parser.parse_args()
    instances = load(args)
    cache = Path(args.cache_dir) if args.cache_dir else Path(tempfile.mkdtemp(prefix="bench-exec-"))
    runner = Runner(ExecutionConfig(cache_dir=str(cache), repos=args.git))
    bare, boxed = [], []
    for inst in instances:
        spec = EnvSpec.from_json(inst.environment) or EnvSpec()
        snapshot = runner.snapshots.path(inst, spec)
        env = runner.envs.ensure(spec, snapshot)
        changes, _ = patched_files(snapshot, inst.patch, inst.test_patch or "")
        runner.run(TestJob(inst, inst.patch))  # once unmeasured: the page cache holds both trees alike
        for _ in range(args.repeats):
            bare.append(bare_run(env.python, snapshot, changes, test_files(inst.test_patch), env.variables))
            start = time.perf_counter()
            run = runner.run(TestJob(inst, inst.patch))
            boxed.append(time.perf_counter() - start)
            assert run.resolved, run
    b, s = statistics.median(bare), statistics.median(boxed)
    what = f"{instances[0].repo} tests" if args.data else "demo tests"
    print(
        f"(1) {what}, {len(instances)} instances x {args.repeats}: bare {b:.2f} s, sandbox {s:.2f} s, "
        f"ratio {s / b:.2f}x (median per run; sum {sum(boxed) / sum(bare):.2f}x)"
    )
    snap = runner.snapshots.path(instances[0], EnvSpec.from_json(instances[0].environment) or EnvSpec())
    env = runner.envs.ensure(EnvSpec())
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
    if args.data:
        print(build_times(instances[0], runner, cache))
        print_fresh_copy(Path(args.tree or snap))
        if not args.cache_dir:
            shutil.rmtree(cache, ignore_errors=True)
        return
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

    from actors.cluster.join import init_ray
    from reward.execution.pool import TestPool

    init_ray("", num_cpus=2, include_dashboard=False, quiet=True)
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
    print_fresh_copy(Path(args.tree or sysconfig.get_paths()["stdlib"]))


if __name__ == "__main__":
    main()
