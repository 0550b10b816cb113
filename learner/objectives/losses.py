"""Policy losses, chosen by `learner.loss`. Pure torch.

A loss maps one micro-batch's `LossInputs` (per-token logprobs under the current policy, the
behaviour policy's (the engine's) and optionally the reference model's, the per-sample
advantages, the completion mask, the whole step's normalisers and, with `learner.tis_cap` set,
the per-token log(pi_learner_old / pi_engine) of learner/objectives/mismatch.py) and the
learner's config to (loss, stats): the loss already normalised by the whole step's
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
Adding a loss: a function `(inputs: LossInputs, cfg: LearnerConfig) -> (loss, stats)` with
`@LOSSES.register("name")` above it, here or in a new module of learner/objectives/ that the
package's __init__.py imports (an import at the end of this module would be a cycle). A new
input is a field of `LossInputs`, not a new argument of every loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from conf.config import LearnerConfig
from conf.registry import Registry
from learner.objectives import grpo, gspo, mismatch


@dataclass(frozen=True)
class LossInputs:
    """What a policy loss reads of one micro-batch, and the whole step's normalisers."""

    logprobs: torch.Tensor  # [B, T] under the current policy (with gradient)
    logprobs_old: torch.Tensor  # [B, T] under the behaviour policy (detached)
    logprobs_ref: torch.Tensor | None  # [B, T] under the reference model; None without one
    advantages: torch.Tensor  # [B]
    mask: torch.Tensor  # [B, T] 1 = completion token
    # The whole step's (all micro-batches, all ranks: learner/batch.py) so that the parts sum to
    # the step's loss; None = this batch's own, when it is the whole step.
    num_seqs: float | None  # sequences with >= 1 completion token
    num_tokens: float | None  # completion tokens
    max_new_tokens: int  # rollout.max_new_tokens: Dr. GRPO's constant normaliser
    tis_log_weights: torch.Tensor | None = None  # [B, T] with learner.tis_cap (mismatch.py); else None


class PolicyLoss(Protocol):
    def __call__(self, inputs: LossInputs, cfg: LearnerConfig) -> tuple[torch.Tensor, dict[str, torch.Tensor]]: ...


LOSSES: Registry[PolicyLoss] = Registry("policy loss", "learner.loss")


@LOSSES.register("ppo_token")
def ppo_token_loss(inputs: LossInputs, cfg: LearnerConfig) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GRPO's clipped loss per token (learner/objectives/grpo.py)."""
    tis = None
    if inputs.tis_log_weights is not None and cfg.tis_cap:
        tis = mismatch.token_weights(inputs.tis_log_weights, cfg.tis_cap)
    return grpo.policy_loss(
        inputs.logprobs,
        inputs.logprobs_old,
        inputs.logprobs_ref,
        inputs.advantages,
        inputs.mask,
        clip_eps=cfg.clip_eps,
        clip_eps_low=cfg.clip_eps_low,
        clip_eps_high=cfg.clip_eps_high,
        kl_coef=cfg.kl_coef,
        aggregation=cfg.aggregation,
        num_seqs=inputs.num_seqs,
        num_tokens=inputs.num_tokens,
        # Dr. GRPO's constant: the generation limit (used by seq_mean_token_sum_norm only).
        norm_tokens=float(inputs.max_new_tokens),
        tis_weights=tis,
    )


@LOSSES.register("gspo")
def gspo_loss(inputs: LossInputs, cfg: LearnerConfig) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GSPO's sequence-level loss (learner/objectives/gspo.py)."""
    tis = None
    if inputs.tis_log_weights is not None and cfg.tis_cap:
        tis = mismatch.sequence_weights(inputs.tis_log_weights, inputs.mask, cfg.tis_cap)
    return gspo.policy_loss(
        inputs.logprobs,
        inputs.logprobs_old,
        inputs.logprobs_ref,
        inputs.advantages,
        inputs.mask,
        clip_eps=cfg.clip_eps,
        clip_eps_low=cfg.clip_eps_low,
        clip_eps_high=cfg.clip_eps_high,
        kl_coef=cfg.kl_coef,
        num_seqs=inputs.num_seqs,
        tis_weights=tis,
    )
