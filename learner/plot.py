"""`python -m learner.plot RUN_DIR`: the run's learning curves as RUN_DIR/reward_curve.png.

Top: mean reward and format error rate per RL step (from metrics.jsonl: each step's own
samples, of the prompts that step drew), and the probe's reward on its fixed training prompts
and seeds (from probe.jsonl, when `trainer.probe_prompts` > 0: at step 0 the policy RL starts
from, then after every `trainer.probe_every`-th step and the last): the learning curve, free of
which prompts a step drew. Bottom: the SFT warm start's loss per step (from sft_metrics.jsonl),
when there was one. The trainer calls `plot_run` at the end of every run; matplotlib is part of
the `test` extra.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conf.errors import fail
from conf.io import atomic_write


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def probe_curve(rows: list[dict], last_step: int) -> list[tuple[int, float]]:
    """(RL step, the probe's training reward) from probe.jsonl's rows: the policy RL starts from
    at 0 (after the warm start when there was one), "step N" at N, "end" at `last_step` unless
    that step was measured already. A label measured twice (a resumed run) counts once, its last."""
    train = {r["label"]: r["train"]["reward_mean"] for r in rows if "train" in r}
    points: dict[int, float] = {}
    start = "sft" if "sft" in train else "start"
    if start in train:
        points[0] = train[start]
    for label, reward in train.items():
        if label.startswith("step "):
            points[int(label.split()[1])] = reward
    if "end" in train:
        points.setdefault(last_step, train["end"])
    return sorted(points.items())


def plot_run(run_dir: str | Path) -> Path:
    # matplotlib (a test extra): only when a curve is drawn
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt  # after the backend is chosen

    run = Path(run_dir)
    # A step run again after a resume (marked rerun) is logged twice: its last line counts.
    rl = sorted({m["step"]: m for m in _rows(run / "metrics.jsonl")}.values(), key=lambda m: m["step"])
    sft = _rows(run / "sft_metrics.jsonl")
    fig, axes = plt.subplots(2 if sft else 1, 1, figsize=(8, 6 if sft else 3.5), squeeze=False)
    ax = axes[0][0]
    steps = [m["step"] for m in rl]
    ax.plot(steps, [m["reward_mean"] for m in rl], marker="o", label="reward mean")
    ax.plot(steps, [m["format_error_rate"] for m in rl], marker="x", linestyle="--", label="format error rate")
    probe = probe_curve(_rows(run / "probe.jsonl"), steps[-1] if steps else 0)
    if probe:
        ax.plot(*zip(*probe, strict=True), marker="s", label="probe reward (fixed prompts and seeds)")
    ax.set_xlabel("RL step")
    ax.set_ylim(-1.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"{run.name}: GRPO")
    if sft:
        ax2 = axes[1][0]
        ax2.plot([m["sft_step"] for m in sft], [m["sft_loss"] for m in sft])
        ax2.set_xlabel("SFT step")
        ax2.set_ylabel("loss (nats/token)")
        ax2.set_yscale("log")
        ax2.grid(alpha=0.3)
        ax2.set_title("SFT warm start on oracle answers")
    fig.tight_layout()
    out = run / "reward_curve.png"
    with atomic_write(out, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        raise SystemExit("usage: python -m learner.plot RUN_DIR")
    if not (Path(sys.argv[1]) / "metrics.jsonl").is_file():
        fail("python -m learner.plot", f"{sys.argv[1]}: no metrics.jsonl there (not a run directory)")
    print(plot_run(sys.argv[1]))
