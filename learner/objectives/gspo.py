"""GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization"): ratio and clip per sequence.

Pure torch. Where it departs from GRPO's per-token loss (learner/objectives/grpo.py):
- Advantage: one per sequence, from any registered estimator (the paper uses GRPO's
  group-normalised one, `learner.advantage=grpo`).
- Importance ratio of sequence i, over its |y_i| completion tokens:
      s_i = exp( (1/|y_i|) * sum_t (logprobs_t - logprobs_old_t) )
  the geometric mean of the token ratios. The reward is given to the whole sequence, so the
  paper weights the whole sequence by one ratio; the 1/|y_i| keeps s_i near 1 at any length,
  so that one clip range fits short and long answers alike (a product of token ratios would
  explode with length).
- Loss of sequence i (PPO-clip at the sequence level, plus GRPO's k3 KL when kl_coef > 0):
      l_i = -min(s_i * A_i, clip(s_i, 1 - clip_eps_low, 1 + clip_eps_high) * A_i) + kl_coef * KL_i
      KL_i = (1/|y_i|) * sum_t k3_t     (k3_t as in learner/objectives/grpo.py; the paper has no KL term)
  The gradient flows through the length-normalised log-ratio: when s_i is not clipped,
      d l_i / d logprobs_t = -A_i * s_i / |y_i|   for each of the sequence's tokens,
  the same weight for every token of the sequence (GRPO gives each token its own rho_t); a
  clipped sequence contributes no policy gradient at all.
- Truncated importance sampling (`learner.tis_cap`, learner/objectives/mismatch.py): l_i's policy term is
  multiplied by the detached per-sequence weight w_i; the KL term is not.
- Aggregation: the mean over sequences, L = sum_i l_i / num_seqs, `num_seqs` the whole step's
  (so micro-batches and ranks sum to the step's loss). `learner.aggregation` is not used: the
  loss is per sequence by construction.
- Clip range: s_i moves far less than a token ratio, so the paper clips tightly (3e-4 below and
  4e-4 above in its experiments: clip_eps_low=3e-4 clip_eps_high=4e-4); with the default
  clip_eps=0.2 the clip rarely bites. Each range is clip_eps unless set (grpo.clip_bounds).
"""

from __future__ import annotations

import torch

from learner.objectives import grpo


def policy_loss(
    logprobs: torch.Tensor,
    logprobs_old: torch.Tensor,
    logprobs_ref: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float,
    kl_coef: float,
    num_seqs: float | None = None,
    clip_eps_low: float | None = None,
    clip_eps_high: float | None = None,
    tis_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GSPO's loss over sequences.

    logprobs, logprobs_old, logprobs_ref: [B, T]; advantages: [B]; mask: [B, T] (1 = completion
    token). `num_seqs`: the whole step's sequences with >= 1 completion token when this is one
    micro-batch of it; None = this batch's own. `clip_eps_low` / `clip_eps_high`: None =
    clip_eps. `tis_weights`: [B] detached truncated-importance weights of the sequences (None = 1).
    Returns (loss, stats); the stats are per-token
    means over this batch's masked tokens (a sequence's ratio and clip counted once per token),
    as the learner weighs every loss's stats by tokens.
    """
    if advantages.ndim != 1:
        raise ValueError(f"advantages of shape {tuple(advantages.shape)}: GSPO needs one per sequence, [B]")
    if logprobs_ref is None and kl_coef != 0:
        raise ValueError("logprobs_ref is required when kl_coef != 0")
    mask = mask.to(logprobs.dtype)
    tokens_per_seq = mask.sum(dim=1)  # [B]
    has_tokens = tokens_per_seq > 0  # rows with no completion token are left out
    lengths = tokens_per_seq.clamp(min=1.0)
    log_ratio = (logprobs - logprobs_old) * mask  # [B, T]
    ratio = torch.exp(log_ratio.sum(dim=1) / lengths)  # [B], s_i
    clipped = torch.clamp(ratio, *grpo.clip_bounds(clip_eps, clip_eps_low, clip_eps_high))
    per_seq = -torch.minimum(ratio * advantages, clipped * advantages)  # [B]
    if tis_weights is not None:
        per_seq = per_seq * tis_weights.detach()
    kl = None
    if logprobs_ref is not None:
        kl = grpo.k3(logprobs_ref, logprobs)  # [B, T]
        if kl_coef != 0:
            per_seq = per_seq + kl_coef * (kl * mask).sum(dim=1) / lengths
    per_seq = torch.where(has_tokens, per_seq, torch.zeros_like(per_seq))
    denom = has_tokens.sum().to(per_seq.dtype) if num_seqs is None else torch.as_tensor(num_seqs, dtype=per_seq.dtype)
    loss = per_seq.sum() / denom.clamp(min=1.0)
    # Statistics per token, as the worker weights them: each sequence's ratio on its tokens.
    ratio_t, clipped_t = ratio[:, None].expand_as(mask), clipped[:, None].expand_as(mask)
    return loss, grpo.clip_stats(ratio_t, log_ratio, clipped_t, advantages[:, None], mask, kl)
