"""Mining throughput: pull requests per second in-process vs on Ray with 2 workers, as a ratio.

    python bench/mining.py [--git PATH --repo owner/name] [--limit N] [--workers 2]

Without --git it generates a synthetic history (data/fixtures/synthetic.py) of --prs PRs. Both runs
mine the same PRs through data.build's own pipeline (history walk, diffs, contents, apply
check, relevant files, filters) and must give the same outcomes; shard writing is left out
so that only mining is timed. Ray's start-up (cluster, workers, the task function) is timed
separately. The modes alternate and each keeps its best of --repeats runs: the machine is
noisy, so compare the ratio measured here in one process, not absolute numbers.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from actors.cluster.join import ray_session
from data.build import BuildConfig, iter_outcomes, resolve_sources
from data.fixtures.synthetic import generate_history


def _mine(cfg: BuildConfig, workers: int) -> tuple[list[tuple[str, str]], float]:
    """[(instance_id, reason)] of every candidate, and the seconds the mining took."""
    sources = resolve_sources(cfg)
    start = time.perf_counter()
    results = [(o.instance_id, o.reason) for o in iter_outcomes(cfg, sources, workers)]
    return results, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git", default="", help="a clone to mine (default: a generated history)")
    ap.add_argument("--repo", default="", help="owner/name of --git")
    ap.add_argument("--prs", type=int, default=300, help="PRs of the generated history")
    ap.add_argument("--limit", type=int, default=0, help="mine only the newest N PRs (0 = all)")
    ap.add_argument("--workers", type=int, default=2, help="Ray CPUs for the parallel run")
    ap.add_argument("--chunk-size", type=int, default=16, help="PRs per Ray task")
    ap.add_argument("--repeats", type=int, default=2, help="runs per mode (the best counts)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        git = args.git
        if not git:
            git = str(Path(tmp) / "synthetic")
            t0 = time.perf_counter()
            generate_history(git, args.prs)
            print(f"generated {args.prs} PRs in {time.perf_counter() - t0:.1f} s at {git}")
        cfg = BuildConfig(git=(git,), repo=args.repo, limit=args.limit, chunk_size=args.chunk_size)
        warm = BuildConfig(git=(git,), repo=args.repo, limit=2 * args.chunk_size, chunk_size=args.chunk_size)
        t0 = time.perf_counter()
        with ray_session("", args.workers) as workers:
            _mine(warm, workers)  # start the workers and ship the task function
            t_start = time.perf_counter() - t0
            # Alternate the two modes and keep each one's best run: the page cache and the
            # machine's other load then favour neither.
            local_runs, ray_runs = [], []
            for _ in range(args.repeats):
                local_runs.append(_mine(cfg, 0))
                ray_runs.append(_mine(cfg, workers))
    (local, t_local), (on_ray, t_ray) = min(local_runs, key=lambda r: r[1]), min(ray_runs, key=lambda r: r[1])
    assert on_ray == local, "Ray and in-process mining disagree"
    n = len(local)
    kept = sum(1 for _, r in local if r == "kept")
    print(f"source: {args.git or 'generated history'}; {n} candidate PRs, {kept} kept")
    print(f"in-process      : {n / t_local:8.1f} PRs/s ({t_local:.1f} s)")
    print(f"ray, {args.workers} workers  : {n / t_ray:8.1f} PRs/s ({t_ray:.1f} s; start-up {t_start:.1f} s more)")
    print(f"ratio ray/in-process: {t_local / t_ray:.2f}x (with start-up: {t_local / (t_ray + t_start):.2f}x)")


if __name__ == "__main__":
    main()
