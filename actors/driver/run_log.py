"""What a step leaves behind: its metrics line (the Ray dashboard's gauges, and each logger of
`trainer.loggers`: the console line, metrics.jsonl, TensorBoard, W&B; actors/observe/loggers.py) and
its rollouts (rollouts/step_NNNNNN.jsonl).

metrics.jsonl is appended to, never rewritten. With `trainer.checkpoint_every` > 1 a driver
that dies loses the steps logged after its last checkpoint; on resume they run again and their
new lines carry `"rerun": true` (a step's last line is the one that counts). A driver killed
between writing a checkpoint and logging its step gets that line from the checkpoint
(exactly once). The keys are documented in docs/metrics.md (tests keep the table equal to the
keys the code emits and the runs log).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from actors.driver.generation import Group
from actors.driver.probe import Probe, summary_lines
from actors.driver.reward_pool import ScoredJob
from actors.observe.dashboard import install_on_head
from actors.observe.loggers import LOGGERS, Logger, RunInfo
from actors.observe.telemetry import Telemetry
from conf.config import TrainerConfig
from conf.io import atomic_write
from learner.checkpoint import Checkpoint
from learner.objectives import grpo
from learner.plot import plot_run

log = logging.getLogger(__name__)


def step_metrics(
    groups: Sequence[Group],
    scored: Sequence[ScoredJob],
    rewards: torch.Tensor,
    policy_version: int,
    seconds: dict[str, float],
    sync_bytes: int,
) -> dict[str, Any]:
    """The step's rollout statistics: rewards over the policy's own samples (oracle samples
    excluded), signal, lengths, staleness, throughput."""
    policy = torch.tensor([c.finish_reason != "oracle" for g in groups for c in g.completions])
    r = rewards[policy]
    completions = [c for g in groups for c in g.completions]
    generated = sum(len(c.token_ids) for g in groups for c in g.sampled)
    gen_s, sync_s = seconds["generate_s"], seconds["sync_s"]
    mask = policy.tolist()
    resolved = [s.result.resolved for s, own in zip(scored, mask, strict=True) if own and s.result.resolved is not None]
    return {
        "num_rollouts": len(completions),
        "reward_mean": float(r.mean()),
        "reward_std": float(r.std()) if r.numel() > 1 else 0.0,
        "format_error_rate": float((r == -1).double().mean()),
        # Reward kinds that run the tests: the policy's samples that resolve their instance.
        "resolve_rate": float(np.mean(resolved)) if resolved else None,
        "zero_signal_frac": float(grpo.zero_signal_groups(rewards, len(groups[0].completions)).double().mean()),
        "truncated_frac": float(np.mean([c.finish_reason == "length" for c in completions])),
        "completion_len_mean": float(np.mean([len(c.token_ids) for c in completions])),
        # Version lag of the consumed rollouts: updates applied since the weights that made them.
        "staleness_max": max(policy_version - 1 - g.policy_version for g in groups),
        "gen_tokens_per_s": round(generated / gen_s, 2) if gen_s > 0 else 0.0,
        "sync_mb_per_s": round(sync_bytes / 2**20 / sync_s, 2) if sync_s else 0.0,
    }


def merged(*parts: Mapping[str, Any]) -> dict[str, Any]:
    """The step's metrics line from its sources, in order; a key two sources give is refused
    (with `**` the later one would silently win)."""
    out: dict[str, Any] = {}
    for part in parts:
        if twice := sorted(out.keys() & part.keys()):
            raise ValueError(f"step metrics: {twice} given by two sources")
        out.update(part)
    return out


class RunLog:
    def __init__(self, run_dir: Path, cfg: TrainerConfig, *, config: dict[str, Any]) -> None:
        """`config`: the whole composed config, for the loggers that keep it (W&B)."""
        self.run_dir, self.cfg, self.config = run_dir, cfg, config
        self.metrics_path = run_dir / "metrics.jsonl"
        self.telemetry = Telemetry(run_dir.name)
        self._dashboard_installed = False
        self.rerun: set[int] = set()
        self.loggers: list[Logger] = []  # opened by resume(), which knows the starting step

    def logged_steps(self) -> set[int]:
        if not self.metrics_path.is_file():
            return set()
        return {json.loads(line)["step"] for line in self.metrics_path.read_text().splitlines() if line.strip()}

    def resume(self, ckpt: Checkpoint | None) -> None:
        """Open the loggers at the run's starting point (the checkpoint's step); mark the steps
        logged past the checkpoint as reruns; log a checkpointed step's line that its driver
        died before writing."""
        start = ckpt.step if ckpt else 0
        run = RunInfo(self.run_dir, self.run_dir.name, self.config, self.cfg.steps, start, self.cfg.wandb_project)
        self.loggers = [LOGGERS.get(name)(run) for name in self.cfg.loggers]
        logged = self.logged_steps()
        self.rerun = {s for s in logged if s > start}
        if self.rerun:
            log.info(
                "[resume] steps %d-%d were logged after the last checkpoint; they run again and their "
                "metrics lines are marked rerun",
                min(self.rerun),
                max(self.rerun),
            )
        if ckpt is not None:
            log.info(
                "[resume] from %s (step %d, policy_version %d)", ckpt.path, ckpt.step, ckpt.state["policy_version"]
            )
            if ckpt.state.get("metrics") and ckpt.step not in logged:
                self._emit(ckpt.state["metrics"])

    def write(self, metrics: dict[str, Any]) -> None:
        """The step's line: the dashboard's gauges and every logger."""
        if metrics["step"] in self.rerun:
            metrics["rerun"] = True
        self._emit(metrics)
        self.telemetry.record(metrics)
        if not self._dashboard_installed:
            # After the first step rather than at start-up: Ray's dashboard rewrites its
            # Grafana folder when it starts, which a fresh local cluster may still be doing.
            self._dashboard_installed = True
            install_on_head()

    def _emit(self, metrics: dict[str, Any]) -> None:
        for logger in self.loggers:
            logger.write(metrics)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()
        self.loggers = []

    def rollouts(self, step: int, groups: Sequence[Group], scored: Sequence[ScoredJob]) -> None:
        """Every rollout of step `step` (1-based), every `trainer.rollout_log_every` steps."""
        every = self.cfg.rollout_log_every
        if every <= 0 or step % every:
            return
        out = self.run_dir / "rollouts" / f"step_{step:06d}.jsonl"
        out.parent.mkdir(exist_ok=True)
        rows = iter(scored)
        with atomic_write(out) as f:
            for g in groups:
                for j, c in enumerate(g.completions):
                    s = next(rows)
                    f.write(
                        json.dumps(
                            {
                                "rollout_id": s.rollout_id,
                                "instance_id": g.item.instance_id,
                                "sample": j,
                                "policy_version": None if c.finish_reason == "oracle" else g.policy_version,
                                "actor_id": g.actor_id,
                                "finish_reason": c.finish_reason,
                                "prompt_tokens": len(g.item.prompt_ids),
                                "completion_tokens": len(c.token_ids),
                                "reward": s.result.reward,
                                "error": s.result.error,
                                "text": c.text,
                                # agent mode: every turn (text, action, observation, seconds), the
                                # patch and how it ended: enough to replay it (actors/replay.py)
                                **({"episode": c.episode} if c.episode is not None else {}),
                            }
                        )
                        + "\n"
                    )

    def steps(self) -> list[dict[str, Any]]:
        """The RL steps' metrics lines from metrics.jsonl, one per step (a rerun step's last)."""
        if not self.metrics_path.is_file():
            return []
        rows = [json.loads(line) for line in self.metrics_path.read_text().splitlines() if line.strip()]
        return sorted({m["step"]: m for m in rows}.values(), key=lambda m: m["step"])

    def finish(self, step: int, probe: Probe) -> None:
        """The closing lines: where the export and the plot are, then what the policy learned
        (actors/driver/probe.py: the probe's last measurement, then summary_lines)."""
        probes = probe.end(step)
        log.info("[done] %d steps; Hugging Face export in %s", step, self.run_dir / "hf")
        if self.metrics_path.is_file():  # trainer.loggers without jsonl: nothing to plot
            try:
                log.info("[done] learning curves in %s", plot_run(self.run_dir))
            except ImportError:  # matplotlib comes with the `test` extra; the run does not need it
                log.info("[done] no plot: pip install matplotlib for reward_curve.png")
        for line in summary_lines(probes, self.steps()):
            log.info("%s", line)
