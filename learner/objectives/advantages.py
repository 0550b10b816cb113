"""Advantage estimators, chosen by `learner.advantage`. Pure torch.

An estimator maps a step's rewards [num_prompts * group_size] (each prompt's group contiguous)
to one advantage per sample; every token of a sample gets its sample's advantage. Registered:

    grpo     (r_i - mean(r)) / (std(r) + adv_eps)   GRPO (Shao et al. 2024), the paper's; std is
                                                    the unbiased (N-1) sample std of the group
    dr_grpo  r_i - mean(r)                          Dr. GRPO (Liu et al. 2025): no std division, which
                                                    up-weights groups whose rewards barely differ
    rloo     r_i - mean_{j != i}(r_j)               RLOO (Ahmadian et al. 2024): leave-one-out baseline;
                                                    = N/(N-1) (r_i - mean(r)), unbiased for the sample's
                                                    own reward

A group whose rewards are all equal gets exactly 0 under each (no signal, counted as
zero-signal in the metrics). Adding an estimator: a function of this signature with
`@ADVANTAGES.register("name")` above it, here or in a new module of learner/objectives/ that
the package's __init__.py imports (an import at the end of this module would be a cycle).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from conf.config import LearnerConfig
from conf.registry import Registry
from learner.objectives import grpo

# (rewards [B], group_size, learner config) -> advantages [B]
Estimator = Callable[[torch.Tensor, int, LearnerConfig], torch.Tensor]

ADVANTAGES: Registry[Estimator] = Registry("advantage estimator", "learner.advantage")


@ADVANTAGES.register("grpo")
def grpo_advantages(rewards: torch.Tensor, group_size: int, cfg: LearnerConfig) -> torch.Tensor:
    return grpo.advantages(rewards, group_size, eps=cfg.adv_eps, scale_rewards="group")


@ADVANTAGES.register("dr_grpo")
def dr_grpo_advantages(rewards: torch.Tensor, group_size: int, cfg: LearnerConfig) -> torch.Tensor:
    return grpo.advantages(rewards, group_size, eps=cfg.adv_eps, scale_rewards="none")


@ADVANTAGES.register("rloo")
def rloo_advantages(rewards: torch.Tensor, group_size: int, cfg: LearnerConfig) -> torch.Tensor:
    centred = grpo.advantages(rewards, group_size, scale_rewards="none")  # validates the shape; 0 for flat groups
    return centred * (group_size / (group_size - 1))
