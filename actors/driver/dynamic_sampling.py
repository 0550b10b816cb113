"""The driver's generate and reward phases, with DAPO's dynamic sampling (Yu et al. 2025, 3.2).

    sample(step, version, timer)   generate: the step's groups (actors/driver/generation.py: look-ahead,
                                   staleness, oracle injection); reward: every completion scored.
                                   With `trainer.dynamic_sampling`, then up to
                                   `trainer.dynamic_sampling_max_rounds` extra rounds.

A group whose rewards are all equal has advantage 0 under every estimator: it costs a share of
generation and adds nothing to the gradient, and as a policy improves more groups become all
right (or stay all wrong), so the effective batch shrinks. DAPO over-samples and keeps only
groups with a reward spread until the batch is full. Here each extra round fetches as many new
prompts as groups are missing, generates and scores them (timed under the same `generate` and
`reward` phases), and keeps those with signal; the signal is the task reward's spread (before
DAPO's soft overlong penalty, which is a shaping term). If the rounds run out first, the batch
is completed with flat groups, which train nothing (zero advantage) but keep the step's shape.
Metrics: `dynamic_sampling_rounds` (extra rounds run) and `dynamic_sampling_dropped` (flat
groups left out of the batch); both 0 with dynamic sampling off.

Where it departs from DAPO: DAPO draws whole extra batches per round; this draws only the
missing count (cheaper per round, possibly more rounds). In async mode the extra prompts come
from the loader after the look-ahead steps' prompts, so a resumed run does not hand out exactly
the prompts the interrupted one would have (the data order shifts; nothing is lost).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from actors.driver.generation import Group, Rollouts
from actors.driver.reward_pool import RewardPool, ScoredJob
from actors.observe.phases import PhaseTimer
from conf.config import TrainConfig
from data.loader import InstanceLoader
from learner.objectives import grpo
from reward.kinds import REWARDS

Scored = tuple[Group, list[ScoredJob]]  # a group and its completions' scores, in order


def pair(groups: Sequence[Group], scored: Sequence[ScoredJob]) -> list[Scored]:
    """Flat per-completion scores -> one (group, its scores) pair per group."""
    out, start = [], 0
    for g in groups:
        out.append((g, list(scored[start : start + len(g.completions)])))
        start += len(g.completions)
    if start != len(scored):
        raise ValueError(f"{len(scored)} scores for {start} completions")
    return out


def has_signal(pairs: Sequence[Scored]) -> list[bool]:
    """Per group: are its rewards not all equal (a non-zero advantage for some sample)?"""
    if not pairs:
        return []
    rewards = torch.tensor([s.result.reward for _, scores in pairs for s in scores], dtype=torch.float64)
    return (~grpo.zero_signal_groups(rewards, len(pairs[0][1]))).tolist()


def assemble(rounds: Sequence[Sequence[Scored]], num_groups: int) -> tuple[list[Scored], int]:
    """The step's batch from the groups of every round: the first `num_groups` with signal,
    completed with the first flat ones if too few, in the order they were generated (so a step
    without refills is exactly the one generated). Returns (batch, flat groups left out)."""
    every = [p for r in rounds for p in r]
    ok = [s for r in rounds for s in has_signal(r)]
    signal = [i for i, s in enumerate(ok) if s][:num_groups]
    flat = [i for i, s in enumerate(ok) if not s]
    filler = flat[: num_groups - len(signal)]
    return [every[i] for i in sorted(signal + filler)], len(flat) - len(filler)


class GroupSampler:
    def __init__(self, cfg: TrainConfig, rollouts: Rollouts, rewards: RewardPool) -> None:
        self.cfg, self.rollouts, self.rewards = cfg, rollouts, rewards

    @staticmethod
    def check_data(cfg: TrainConfig, loader: InstanceLoader) -> None:
        """Refuse, before anything starts, data the step cannot use: a reward kind that runs
        the tests needs each instance's labels."""
        if REWARDS.get(cfg.reward.kind).uses_test_pool:
            loader.require_test_labels(f"reward.kind={cfg.reward.kind}")

    def sample(
        self, step: int, policy_version: int, timer: PhaseTimer
    ) -> tuple[list[Group], list[ScoredJob], dict[str, Any]]:
        """The step's groups and their scores (flat, in group order), and the phase's counts."""
        with timer("generate"):
            groups, stale = self.rollouts.collect(step, policy_version)
        with timer("reward"):
            rounds = [pair(groups, self.rewards.score_groups(groups))]
        n, extra = self.cfg.trainer.prompts_per_step, 0
        while self.cfg.trainer.dynamic_sampling and extra < self.cfg.trainer.dynamic_sampling_max_rounds:
            missing = n - sum(sum(has_signal(r)) for r in rounds)
            if missing <= 0:
                break
            extra += 1
            with timer("generate"):
                more = self.rollouts.extra(step, policy_version, missing)
            with timer("reward"):
                rounds.append(pair(more, self.rewards.score_groups(more)))
        batch, dropped = assemble(rounds, n)
        counts = {"stale_dropped": stale, "dynamic_sampling_rounds": extra, "dynamic_sampling_dropped": dropped}
        return [g for g, _ in batch], [s for _, scores in batch for s in scores], counts

    def shutdown(self) -> None:
        """Nothing of its own to stop (self-play's sampler has a test pool)."""
