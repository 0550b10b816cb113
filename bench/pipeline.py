"""Step time of trainer.mode=async vs sync, from the driver's own metrics.

    python bench/pipeline.py smoke            # the smoke preset, 4 steps per mode
    python bench/pipeline.py default          # the default job, 3 steps per mode (slow: ~25 min)
    python bench/pipeline.py smoke --separate-cores   # engine on core 0, learner on core 1

Runs `python train.py` once per mode (same seed, same data), reads metrics.jsonl and prints, per
mode, the mean over steps 2.. (step 1 has no overlap to gain) of step_s and of the phase
times, then the ratio async/sync and async step time vs max(generate, train) of the sync run:
the pipeline's goal is async step time within 10% of max(generate, train).

That goal assumes the engine and the learner run on separate devices. On a 2-core host they
share the cores, and an overlapped step is slowed by contention that separate devices would not
have. `--separate-cores` pins the engine to core 0 (one torch thread) and the learner ranks to
core 1 (`rollout.cpu_affinity`, `learner.cpu_affinity`), the same pinning in both modes, so that
the comparison is the one the goal is about. The last line is
`async/max(generate, train) = X` with the sync run's generate and train times.

In sync mode `generate_s` is the generation time; in async mode it is only the time the
driver still had to wait for the step's groups, because they were generated during the
previous step's training.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRESETS = {
    "smoke": ["experiment=smoke", "trainer.steps=4", "trainer.verify_sync=false"],
    # One oracle sample per group gives every group a reward spread, so the learner trains on
    # every row (otherwise SmolLM2's all -1 groups leave it nothing to do).
    "default": [
        "trainer.steps=3",
        "trainer.prompts_per_step=1",
        "rollout.oracle_samples_per_group=1",
        "rollout.max_new_tokens=256",
    ],
}


SEPARATE_CORES = ["rollout.cpu_affinity=[0]", "rollout.cpu_threads=1", "learner.cpu_affinity=[1]"]


def run(preset: str, mode: str, out: Path, separate_cores: bool) -> list[dict]:
    cmd = [
        sys.executable,
        str(REPO / "train.py"),
        *PRESETS[preset],
        *(SEPARATE_CORES if separate_cores else []),
        f"trainer.mode={mode}",
        f"run_dir={out}",
        "trainer.checkpoint_every=1000",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{mode} run failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def mean(rows: list[dict], key: str) -> float:
    return statistics.mean(r[key] for r in rows[1:])


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    separate = "--separate-cores" in sys.argv[1:]
    preset = args[0] if args else "smoke"
    with tempfile.TemporaryDirectory() as tmp:
        result = {mode: run(preset, mode, Path(tmp) / mode, separate) for mode in ("sync", "async")}
    keys = ("step_s", "generate_s", "reward_s", "train_s", "sync_s")
    pinning = "engine on core 0, learner on core 1" if separate else "shared cores"
    print(f"preset {preset} ({pinning}): mean over steps 2..{len(result['sync'])}")
    for mode, rows in result.items():
        print(
            f"  {mode:5s} "
            + "  ".join(f"{k} {mean(rows, k):7.2f}" for k in keys)
            + f"  staleness_max {max(r['staleness_max'] for r in rows)}"
        )
    sync_step, async_step = mean(result["sync"], "step_s"), mean(result["async"], "step_s")
    generate, train = mean(result["sync"], "generate_s"), mean(result["sync"], "train_s")
    print(f"  ratio async/sync step time: {async_step / sync_step:.2f} (goal of the pipeline: async/max <= 1.10)")
    print(
        f"async/max(generate, train) = {async_step / max(generate, train):.2f} "
        f"(async step {async_step:.2f} s; sync generate {generate:.2f} s, train {train:.2f} s)"
    )


if __name__ == "__main__":
    main()
