"""GH Archive conversion throughput: events per second through the Ray Data pipeline with 1 and
2 CPUs, in one process, as a ratio (and the in-process run for reference).

    python bench/gharchive.py [--hours 4] [--events-per-hour 100000] [--repeats 2]

The input is generated (data/fixtures/gharchive_sample.py: the real event schema, 1 event in 12 part
of an issue/PR story, the rest noise, as in a real hour where pushes, stars and forks
dominate). One local Ray of 2 CPUs (127.0.0.1) serves both Ray modes: the CPU budget of Ray
Data's executor (`execution_options.resource_limits`) is set to 1 or 2, so the workers, the
cluster and the page cache are the same and only the parallelism differs. The modes alternate
and each keeps its best of --repeats runs; a warm-up run (worker start, the functions shipped)
is timed apart as start-up. Every run must give the in-process records.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from actors.cluster.join import ray_session
from data.fixtures.gharchive_sample import generate
from data.gharchive import run_in_process, run_on_ray


def _run_ray(files: list[str], cpus: int) -> tuple[list[str], int, float]:
    """(sorted records, events read, seconds) of one Ray Data run limited to `cpus` CPUs."""
    import ray.data

    ray.data.DataContext.get_current().execution_options.resource_limits = ray.data.ExecutionResources(cpu=cpus)
    start = time.perf_counter()
    rows = list(run_on_ray(files, None, True, partitions=4 * cpus))
    seconds = time.perf_counter() - start
    events = sum(sum(json.loads(r["record"]).values()) for r in rows if r["kind"] == "stats")
    return sorted(r["record"] for r in rows if r["kind"] != "stats"), events, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=int, default=4, help="hourly files to generate")
    ap.add_argument("--events-per-hour", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=2, help="runs per mode (the best counts)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        expected = generate(tmp, args.hours, args.events_per_hour)
        files = sorted(str(f) for f in Path(tmp).iterdir())
        size = sum(Path(f).stat().st_size for f in files) / 2**20
        print(
            f"generated {expected.events} events in {len(files)} files ({size:.1f} MiB gzipped) in "
            f"{time.perf_counter() - t0:.1f} s"
        )
        t0 = time.perf_counter()
        here = sorted(r["record"] for r in run_in_process(files, None, True, lambda done: None) if r["kind"] != "stats")
        t_here = time.perf_counter() - t0
        t0 = time.perf_counter()
        with ray_session("", 2):
            _run_ray(files[:1], 2)  # warm-up: workers started, the functions shipped
            t_start = time.perf_counter() - t0
            runs: dict[int, list[float]] = {1: [], 2: []}
            for _ in range(args.repeats):
                for cpus in (1, 2):
                    records, events, seconds = _run_ray(files, cpus)
                    assert records == here and events == expected.events, "Ray and in-process runs disagree"
                    runs[cpus].append(seconds)
    n = expected.events
    best = {cpus: min(times) for cpus, times in runs.items()}
    print(
        f"{n} events -> {sum('pull_request' in r for r in here)} merged PRs, "
        f"{sum('resolved_by' in r for r in here)} issues"
    )
    print(f"in-process       : {n / t_here:10,.0f} events/s ({t_here:.1f} s)")
    for cpus in (1, 2):
        print(f"ray data, {cpus} CPU{'s' if cpus > 1 else ' '}: {n / best[cpus]:10,.0f} events/s ({best[cpus]:.1f} s)")
    print(f"ratio 2 CPUs / 1 CPU: {best[1] / best[2]:.2f}x (Ray start-up and warm-up {t_start:.1f} s, not counted)")


if __name__ == "__main__":
    main()
