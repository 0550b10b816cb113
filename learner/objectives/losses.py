"""Policy losses, chosen by `learner.loss`. Pure torch.

A loss maps one micro-batch's per-token logprobs under the current policy, the behaviour
policy's (the engine's) and optionally the reference model's, the per-sample advantages and
the completion mask, and with `learner.tis_cap` set the per-token log(pi_learner_old / pi_engine)
(learner/objectives/mismatch.py; None otherwise), to (loss, stats): the loss already normalised by the whole step's
`num_seqs` / `num_tokens` or by the constant `max_new_tokens` (so that micro-batches and ranks
sum to the step's loss), the stats detached sums over this micro-batch (clip_frac,
approx_kl_old, ratio_mean, kl_ref, num_tokens).
The learner rank calls it once per micro-batch and backpropagates the loss.

Registered:
    ppo_token  GRPO's clipped-ratio objective per token with the k3 KL penalty and the
               `learner.aggregation` of token losses (formulas and length biases: learner/objectives/grpo.py)
    gspo       GSPO (Zheng et al. 2025): one length-normalised importance ratio per sequence,
               s_i = exp(mean_t(logprobs_t - logprobs_old_t)), clipped per sequence, averaged over
               sequences; `learner.aggregation` does not apply (formula: learner/objectives/gspo.py)
Adding a loss: a function of this signature with `@LOSSES.register("name")` above it, here
or in a new module of learner/objectives/ that the package's __init__.py imports (an import at
the end of this module would be a cycle).
"""

from __future__ import annotations

from typing import Protocol

import torch

from conf.config import LearnerConfig
from conf.registry import Registry
from learner.objectives import grpo, gspo, mismatch


class PolicyLoss(Protocol):
    def __call__(
        self,
        logprobs: torch.Tensor,
        logprobs_old: torch.Tensor,
        logprobs_ref: torch.Tensor | None,
        advantages: torch.Tensor,
        mask: torch.Tensor,
        *,
        cfg: LearnerConfig,
        num_seqs: float,
        num_tokens: float,
        max_new_tokens: int,
        tis_log_weights: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]: ...


LOSSES: Registry[PolicyLoss] = Registry("policy loss", "learner.loss")


@LOSSES.register("ppo_token")
def ppo_token_loss(
    logprobs: torch.Tensor,
    logprobs_old: torch.Tensor,
    logprobs_ref: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    cfg: LearnerConfig,
    num_seqs: float,
    num_tokens: float,
    max_new_tokens: int,
    tis_log_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """[B, T] logprobs (all three), [B] advantages, [B, T] mask -> GRPO's clipped loss."""
    tis = None
    if tis_log_weights is not None and cfg.tis_cap:
        tis = mismatch.token_weights(tis_log_weights, cfg.tis_cap)
    return grpo.policy_loss(
        logprobs,
        logprobs_old,
        logprobs_ref,
        advantages,
        mask,
        clip_eps=cfg.clip_eps,
        clip_eps_low=cfg.clip_eps_low,
        clip_eps_high=cfg.clip_eps_high,
        kl_coef=cfg.kl_coef,
        aggregation=cfg.aggregation,
        num_seqs=num_seqs,
        num_tokens=num_tokens,
        # Dr. GRPO's constant: the generation limit (used by seq_mean_token_sum_norm only).
        norm_tokens=float(max_new_tokens),
        tis_weights=tis,
    )


@LOSSES.register("gspo")
def gspo_loss(
    logprobs: torch.Tensor,
    logprobs_old: torch.Tensor,
    logprobs_ref: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    cfg: LearnerConfig,
    num_seqs: float,
    num_tokens: float,
    max_new_tokens: int,
    tis_log_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """[B, T] logprobs (all three), [B] advantages, [B, T] mask -> GSPO's sequence-level loss."""
    tis = None
    if tis_log_weights is not None and cfg.tis_cap:
        tis = mismatch.sequence_weights(tis_log_weights, mask, cfg.tis_cap)
    return gspo.policy_loss(
        logprobs,
        logprobs_old,
        logprobs_ref,
        advantages,
        mask,
        clip_eps=cfg.clip_eps,
        clip_eps_low=cfg.clip_eps_low,
        clip_eps_high=cfg.clip_eps_high,
        kl_coef=cfg.kl_coef,
        num_seqs=num_seqs,
        tis_weights=tis,
    )
