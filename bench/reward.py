"""Reward benchmark on real instances: scorer speed vs the standard library, pool scaling.

    python bench/reward.py [--data ../shared/data] [--jobs 1600]

Inputs (all from the shared real data; nothing is copied into the project):
- psf/requests instances with full code context: the oracle answer, answers rebuilt from every
  `resolved_by` patch that applies to the context (real alternative fixes), a truncated and a
  corrupted answer (model-like failures); scored with rules 1-5;
- the 300 SWE-bench Lite instances: every `resolved_by` patch against the golden patch (rule 6).

Prints, each as a ratio measured in this process (the machine is noisy; absolute times are not
comparable across runs):
(1) the project's scorer (`reward`, cydifflib + linear parser) against the literal standard
    library transcription (`reward.spec`), on the same inputs, after checking that both
    give the same rewards;
(2) rollouts (model-like patches) per second of the reward pool with 1 and with 2 workers, and
    their ratio (alternating runs, medians);
(3) the time cap's calibration: the slowest seconds per work unit seen on these pairs, against
    the constant `SECONDS_PER_UNIT`.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import statistics
import string
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from data.patching import PatchError, apply_patch  # noqa: E402
from reward import OracleAnswerError, oracle_answer, score_output, score_patches  # noqa: E402
from reward.patches import file_changes  # noqa: E402
from reward.similarity import SECONDS_PER_UNIT, diff_ratio, work_units  # noqa: E402
from reward.spec import reference_score_output, reference_score_patches  # noqa: E402

# (instance_id, (code_context, oracle_new_content, output))
OutputCase = tuple[str, tuple[dict[str, str], dict[str, str], str]]


def _resolved(row: dict[str, Any]) -> list[str]:
    entries = ast.literal_eval(row["resolved_by"]) if isinstance(row["resolved_by"], str) else row["resolved_by"]
    return [entry["patch"] if isinstance(entry, dict) else entry for entry in entries]


def output_cases(data: Path) -> list[OutputCase]:
    """Model-like outputs for the requests instances (see the module docstring)."""
    cases: list[OutputCase] = []
    with open(data / "requests_lite.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in rows:
        context, oracle = row["code_context"], row["oracle_new_content"]
        gold = oracle_answer(context, oracle)
        answers = [gold, gold[: len(gold) // 2], gold.replace("\n", "\n    ", 3)]
        for patch in _resolved(row):
            try:
                answers.append(oracle_answer(context, apply_patch(context, patch)))
            except (PatchError, OracleAnswerError):
                continue  # the alternative edits files outside the context
        cases += [(row["instance_id"], (context, oracle, answer)) for answer in answers]
    return cases


def patch_cases(data: Path) -> list[tuple[str, str]]:
    with open(data / "swebench_lite.json", encoding="utf-8") as f:
        rows = json.load(f)
    return [(row["golden_patch"], patch) for row in rows for patch in _resolved(row)]


def timed(fn: Callable[[], list[float]]) -> tuple[float, list[float]]:
    start = time.perf_counter()
    values = fn()
    return time.perf_counter() - start, values


def speed_vs_stdlib(outputs: list[OutputCase], patches: list[tuple[str, str]]) -> None:
    fast_o, got_o = timed(lambda: [score_output(c, o, out).reward for _, (c, o, out) in outputs])
    slow_o, want_o = timed(lambda: [reference_score_output(c, o, out) for _, (c, o, out) in outputs])
    fast_p, got_p = timed(lambda: [score_patches(g, p).reward for g, p in patches])
    slow_p, want_p = timed(lambda: [reference_score_patches([g], [p]) for g, p in patches])
    mismatches = sum(abs(a - b) > 1e-12 for a, b in zip(got_o + got_p, want_o + want_p, strict=True))
    print(f"(1) scorer vs standard library (same inputs, {mismatches} reward mismatches):")
    print(
        f"    outputs, rules 1-5: {len(outputs)} outputs  project {fast_o:.3f} s  stdlib {slow_o:.3f} s  "
        f"speed-up x{slow_o / fast_o:.1f}"
    )
    print(
        f"    patches, rule 6:    {len(patches)} pairs    project {fast_p:.3f} s  stdlib {slow_p:.3f} s  "
        f"speed-up x{slow_p / fast_p:.1f}"
    )
    total = (slow_o + slow_p) / (fast_o + fast_p)
    print(f"    overall speed-up x{total:.1f}")


def _seconds_per_unit(a: str, b: str) -> float:
    # The fastest of three runs: the intrinsic cost, without other processes' interference.
    return min(timeit.repeat(lambda: diff_ratio(a, b), number=1, repeat=3)) / work_units(a, b, autojunk=False)


def calibration(patches: list[tuple[str, str]]) -> None:
    # Only pairs large enough for the quadratic part to dominate the fixed cost of a call.
    real = []
    for golden, patch in patches:
        pred, oracle = file_changes(patch), file_changes(golden)
        for path in pred.keys() & oracle.keys():
            if pred[path] and oracle[path] and work_units(pred[path], oracle[path], autojunk=False) >= 100_000:
                real.append(_seconds_per_unit(pred[path], oracle[path]))
    rng = random.Random(0)
    synthetic = []
    for size, alphabet in ((5_000, "ab"), (10_000, "ab"), (10_000, string.ascii_lowercase + " \n")):
        a, b = ("".join(rng.choice(alphabet) for _ in range(size)) for _ in range(2))
        synthetic.append(_seconds_per_unit(a, b))
    print(
        f"(3) time cap: {len(real)} real pairs of >= 1e5 work units: slowest {max(real) * 1e9:.1f} ns/unit; "
        f"random text: slowest {max(synthetic) * 1e9:.1f} ns/unit; SECONDS_PER_UNIT = {SECONDS_PER_UNIT * 1e9:.0f} ns"
    )


def pool_scaling(outputs: list[OutputCase], num_jobs: int) -> None:
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # local benchmark: every socket on 127.0.0.1
    import ray

    from actors.driver.reward_pool import RewardPool, ScoreJob
    from conf.config import RewardConfig
    from data.schema import Instance

    instances = {
        row_id: Instance(row_id, "psf/requests", "", "", "", None, context, oracle)
        for row_id, (context, oracle, _) in outputs
    }
    jobs = [ScoreJob(f"r{i}", outputs[i % len(outputs)][0], outputs[i % len(outputs)][1][2]) for i in range(num_jobs)]
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    rates: dict[int, list[float]] = {1: [], 2: []}
    try:
        pools = {
            workers: RewardPool(RewardConfig(num_workers=workers, num_cpus=0.5, batch_size=8)) for workers in (1, 2)
        }
        for pool in pools.values():
            pool.score(jobs[:64], instances)  # warm-up: imports, first object-store transfers
        for _ in range(3):  # alternate, so that a noisy moment does not favour one side
            for workers, pool in pools.items():
                start = time.perf_counter()
                scored = pool.score(jobs, instances)
                rates[workers].append(len(scored) / (time.perf_counter() - start))
        for pool in pools.values():
            pool.shutdown()
    finally:
        ray.shutdown()
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    print(
        f"(2) reward pool, {num_jobs} rollouts in batches of 8 (median of 3): "
        f"1 worker {one:.0f}/s, 2 workers {two:.0f}/s, ratio 2/1 = {two / one:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"), help="the shared real data directory")
    parser.add_argument("--jobs", type=int, default=1600, help="rollouts per pool measurement")
    args = parser.parse_args()
    data = Path(args.data)
    if not (data / "requests_lite.jsonl").is_file() or not (data / "swebench_lite.json").is_file():
        sys.exit(f"bench/reward.py: real data not found in {data} (requests_lite.jsonl, swebench_lite.json)")
    outputs, patches = output_cases(data), patch_cases(data)
    speed_vs_stdlib(outputs, patches)
    pool_scaling(outputs, args.jobs)
    calibration(patches)


if __name__ == "__main__":
    main()
