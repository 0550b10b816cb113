"""Rollout/learner mismatch: how far the engine's sampling logprobs are from the learner's, and
truncated importance sampling (TIS) to correct for it. Pure torch.

The engine (vLLM) and the learner (DeepSpeed) compute the same policy with different kernels,
so the logprob of a sampled token differs slightly between them (float32 on CPU: ~1e-4,
bf16 on GPU: far more; bench/logprobs.py). Every step measures it on the tokens the learner
trains on, before the update:
    logprob_diff_mean = mean_t |logprobs_learner_t - logprobs_engine_t|
    logprob_diff_max  = max_t  |logprobs_learner_t - logprobs_engine_t|
over completion tokens whose engine logprob is known (injected oracle answers have none). The
learner makes one optimizer step per trainer step, so every micro-batch's forward pass sees
the weights before the update: the metric covers all the trained tokens at no extra cost
(the issue asked for the first micro-batch; all of them cost the same: nothing).

Without TIS (`learner.tis_cap` null, the paper's), the PPO ratio is taken against the engine's
logprobs: rho_t = exp(logprobs_t - logprobs_engine_t), which folds the mismatch into the
clipped ratio. With TIS (veRL's and TRL's correction, Yao et al. 2025, "Your efficient RL
framework secretly brings you off-policy RL training"), the ratio is taken against the
learner's own logprobs before the update (the proximal policy, logprobs_old = the learner's,
detached), and each token's loss is weighted by the capped ratio of learner to engine:
    w_t = min(exp(logprobs_old_t - logprobs_engine_t), C)       C = learner.tis_cap, detached
so tokens the engine sampled more often than the learner would have are down-weighted, and
the cap bounds the variance of the rare opposite case. With one update per step the PPO ratio
is then exactly 1 and never clips: the loss is the capped-IS policy gradient. GSPO, whose ratio
is per sequence, takes the per-sequence analogue (its geometric mean over the sequence's tokens):
    w_i = min(exp(mean_t(logprobs_old_t - logprobs_engine_t)), C)
Tokens without an engine logprob get weight 1 (their behaviour policy is the learner's).

Sampling settings the learner cannot reproduce: top-p and top-k truncate the distribution the
engine samples from, and the learner computes logprobs over the whole vocabulary, so neither
the ratio nor w_t would be the ratio of sampling probabilities. conf/config.py refuses
rollout.top_p < 1 and rollout.top_k > 0 for training. Temperature is reproduced (the learner
divides its logits by it; actors/rollout/actor.py asks vLLM for logprobs at the temperature).
"""

from __future__ import annotations

import torch


@torch.no_grad()
def logprob_diff(
    logprobs: torch.Tensor, logprobs_engine: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """|learner - engine| over masked tokens with a known (non-NaN) engine logprob.

    logprobs, logprobs_engine, mask: [B, T]. Returns (sum, count, max) as 0-d tensors, so that
    micro-batches and ranks combine: mean = sum of sums / sum of counts, max = max of maxes
    (0 when no token has an engine logprob)."""
    known = (mask > 0) & ~torch.isnan(logprobs_engine)
    diff = torch.where(known, (logprobs - logprobs_engine).abs(), torch.zeros_like(logprobs))
    top = diff.max() if diff.numel() else torch.zeros((), dtype=logprobs.dtype)
    return diff.sum(), known.sum().to(logprobs.dtype), top


def tis_log_weights(logprobs_old: torch.Tensor, logprobs_engine: torch.Tensor) -> torch.Tensor:
    """[B, T] log(pi_learner_old / pi_engine) per token, detached; 0 where the engine's is NaN."""
    known = ~torch.isnan(logprobs_engine)
    return torch.where(known, logprobs_old - logprobs_engine, torch.zeros_like(logprobs_old)).detach()


def token_weights(log_weights: torch.Tensor, cap: float) -> torch.Tensor:
    """[B, T] w_t = min(exp(log_weights_t), cap), detached (the per-token TIS weight)."""
    return torch.exp(log_weights.detach()).clamp(max=cap)


def sequence_weights(log_weights: torch.Tensor, mask: torch.Tensor, cap: float) -> torch.Tensor:
    """[B] w_i = min(exp(mean_t log_weights_t over the sequence's tokens), cap), detached (GSPO)."""
    mask = mask.to(log_weights.dtype)
    mean = (log_weights.detach() * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    return torch.exp(mean).clamp(max=cap)
