"""GRPO math: group-relative advantages and the clipped policy loss. Pure torch, the only home.

What this computes, and where it departs from the papers:
- Group: each prompt's `group_size` samples (16 in SWE-RL) are contiguous in the batch.
- Advantage (GRPO, Shao et al. 2024): A_i = (r_i - mean(r)) / (std(r) + eps) over the sample's
  group, std the unbiased (N-1) sample std. `scale_rewards="none"` only centres (Dr. GRPO,
  Liu et al. 2025: the division up-weights groups whose rewards barely differ). A group whose
  rewards are all equal gets exactly 0 (not 0/eps noise) and is counted as zero-signal.
- Loss per completion token t (PPO-clip, Schulman et al. 2017, with GRPO's KL term):
      rho_t = exp(logprobs_t - logprobs_old_t)
      l_t   = -min(rho_t * A, clip(rho_t, 1 - clip_eps_low, 1 + clip_eps_high) * A) + kl_coef * k3_t
      k3_t  = exp(ref_t - logprobs_t) - (ref_t - logprobs_t) - 1   (Schulman's k3 estimator of
              KL(policy || ref): unbiased, always >= 0)
  `logprobs_old` are the behaviour policy's: the engine's, returned with each sample (with
  `learner.tis_cap` set, the learner's own before the update, and each token's policy term is
  multiplied by the detached capped weight w_t of learner/objectives/mismatch.py; the KL term is not).
  No dual clip, no entropy bonus. clip_eps_low and clip_eps_high are each clip_eps unless set
  (`clip_bounds`): DAPO's "clip-higher" (Yu et al. 2025) raises only the upper one (0.28 against
  0.2) so that a low-probability token with A > 0 can grow further before its gradient stops,
  which keeps the policy's entropy from collapsing; the lower one stays, since widening it would
  let an update push unlikely tokens' probabilities towards 0 and shrink what can be sampled.
- Aggregation over tokens (the length bias each has):
  "seq_mean_token_mean" (GRPO paper): mean over sequences of each sequence's token mean. Every
      sequence weighs the same, so a token of a long answer weighs less than a token of a short
      one: wrong long answers are penalised per token less (the length bias Dr. GRPO points at).
  "token_mean" (DAPO, Yu et al. 2025): sum of all token losses / number of tokens. Every token
      weighs the same; long sequences dominate the gradient, and the scale depends on the
      batch's total length.
  "seq_mean_token_sum_norm" (Dr. GRPO, Liu et al. 2025): mean over sequences of each
      sequence's token sum / norm_tokens, a constant (the generation limit,
      rollout.max_new_tokens, as in the paper's code). Every token weighs the same, as in
      token_mean, but the scale no longer depends on how long this batch's answers are: the
      normaliser is the same every step.
  Every normaliser is the whole step's (`num_seqs` / `num_tokens` arguments) or a constant
  (`norm_tokens`), never the micro-batch's, so that splitting a batch across micro-batches and
  ranks sums to the same gradient as one big batch.
"""

from __future__ import annotations

from typing import Literal

import torch

Aggregation = Literal["seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm"]
AGGREGATIONS: tuple[str, ...] = ("seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm")
SCALE_REWARDS: tuple[str, ...] = ("group", "none")


def advantages(
    rewards: torch.Tensor, group_size: int, *, eps: float = 1e-6, scale_rewards: str = "group"
) -> torch.Tensor:
    """Group-relative advantages. `rewards` [B] with B = num_prompts * group_size -> [B]."""
    if group_size < 2:
        raise ValueError(f"group_size={group_size}: GRPO needs at least 2 samples per group")
    if scale_rewards not in SCALE_REWARDS:
        raise ValueError(f"scale_rewards={scale_rewards!r}: accepted values are {SCALE_REWARDS}")
    if rewards.ndim != 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards of shape {tuple(rewards.shape)} is not [num_prompts * group_size={group_size}]")
    grouped = rewards.reshape(-1, group_size)  # [num_prompts, group_size]
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale_rewards == "group":
        centred = centred / (grouped.std(dim=1, unbiased=True, keepdim=True) + eps)
    flat = zero_signal_groups(rewards, group_size)  # [num_prompts]
    centred = torch.where(flat[:, None], torch.zeros_like(centred), centred)
    return centred.reshape(-1)


def zero_signal_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """[num_prompts] bool: groups whose rewards are all equal (they carry no gradient)."""
    grouped = rewards.reshape(-1, group_size)
    return grouped.max(dim=1).values == grouped.min(dim=1).values


def clip_bounds(clip_eps: float, clip_eps_low: float | None, clip_eps_high: float | None) -> tuple[float, float]:
    """(1 - low, 1 + high): the ratio's clip interval, each range clip_eps unless set (DAPO)."""
    low = clip_eps if clip_eps_low is None else clip_eps_low
    high = clip_eps if clip_eps_high is None else clip_eps_high
    return 1.0 - low, 1.0 + high


def policy_loss(
    logprobs: torch.Tensor,
    logprobs_old: torch.Tensor,
    logprobs_ref: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float,
    kl_coef: float,
    aggregation: str,
    clip_eps_low: float | None = None,
    clip_eps_high: float | None = None,
    num_seqs: float | None = None,
    num_tokens: float | None = None,
    norm_tokens: float | None = None,
    tis_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped GRPO loss over completion tokens.

    logprobs, logprobs_old, logprobs_ref: [B, T]; advantages: [B] or [B, T]; mask: [B, T] (bool or
    float, 1 = completion token). `num_seqs` (the seq_mean_* aggregations) or `num_tokens`
    (token_mean): the whole step's normaliser when this is one micro-batch of it; None = this
    batch's own. `norm_tokens`: the constant of seq_mean_token_sum_norm (required by it).
    `clip_eps_low` / `clip_eps_high`: DAPO's asymmetric ranges; None = clip_eps. `tis_weights`:
    [B, T] detached truncated-importance weights of the policy term (learner/objectives/mismatch.py); None = 1.
    Returns (loss, stats); stats are detached sums/means over this batch's masked tokens.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation={aggregation!r}: accepted values are {AGGREGATIONS}")
    if logprobs_ref is None and kl_coef != 0:
        raise ValueError("logprobs_ref is required when kl_coef != 0")
    if aggregation == "seq_mean_token_sum_norm" and (norm_tokens is None or norm_tokens <= 0):
        raise ValueError(f"norm_tokens={norm_tokens!r}: seq_mean_token_sum_norm needs a constant > 0")
    mask = mask.to(logprobs.dtype)
    adv = advantages[:, None] if advantages.ndim == 1 else advantages  # [B, 1] or [B, T]
    log_ratio = logprobs - logprobs_old
    ratio = torch.exp(log_ratio)  # [B, T]
    clipped = torch.clamp(ratio, *clip_bounds(clip_eps, clip_eps_low, clip_eps_high))
    per_token = -torch.minimum(ratio * adv, clipped * adv)  # [B, T]
    if tis_weights is not None:
        per_token = per_token * tis_weights.detach()
    kl = None
    if logprobs_ref is not None:
        kl = k3(logprobs_ref, logprobs)
        if kl_coef != 0:
            per_token = per_token + kl_coef * kl
    loss = _aggregate(per_token, mask, aggregation, num_seqs=num_seqs, num_tokens=num_tokens, norm_tokens=norm_tokens)
    stats = clip_stats(ratio, log_ratio, clipped, adv, mask, kl)
    return loss, stats


def k3(logprobs_ref: torch.Tensor, logprobs: torch.Tensor) -> torch.Tensor:
    """[B, T] Schulman's k3 estimate of KL(current || reference) per token, >= 0."""
    delta = logprobs_ref - logprobs
    return torch.exp(delta) - delta - 1.0


def _aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    aggregation: str,
    *,
    num_seqs: float | None,
    num_tokens: float | None,
    norm_tokens: float | None = None,
) -> torch.Tensor:
    tokens_per_seq = mask.sum(dim=1)  # [B]
    if aggregation == "token_mean":
        denom = tokens_per_seq.sum() if num_tokens is None else torch.as_tensor(num_tokens, dtype=per_token.dtype)
        return (per_token * mask).sum() / denom.clamp(min=1.0)
    has_tokens = tokens_per_seq > 0  # rows with no completion token are left out
    # Dr. GRPO divides every sequence by the same constant: no per-sequence length in the weight.
    seq_len = tokens_per_seq
    if aggregation == "seq_mean_token_sum_norm":
        assert norm_tokens is not None  # checked by policy_loss
        seq_len = torch.full_like(tokens_per_seq, float(norm_tokens))
    seq_means = (per_token * mask).sum(dim=1) / seq_len.clamp(min=1.0)  # [B]
    seq_means = torch.where(has_tokens, seq_means, torch.zeros_like(seq_means))
    denom = (
        has_tokens.sum().to(per_token.dtype) if num_seqs is None else torch.as_tensor(num_seqs, dtype=per_token.dtype)
    )
    return seq_means.sum() / denom.clamp(min=1.0)


@torch.no_grad()
def clip_stats(
    ratio: torch.Tensor,
    log_ratio: torch.Tensor,
    clipped: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    kl: torch.Tensor | None,
) -> dict[str, torch.Tensor]:
    """Token-weighted statistics of a clipped ratio (GSPO passes its sequence ratio broadcast
    over each sequence's tokens, so both losses report them the same way)."""
    n = mask.sum().clamp(min=1.0)
    # A token is clipped when the clipped branch is the one min() picked and it differs.
    clip_active = ((ratio * adv) > (clipped * adv)) & (ratio != clipped)
    stats = {
        "clip_frac": (clip_active.to(mask.dtype) * mask).sum() / n,
        # k3 estimate of KL(behaviour || current): how far the update moved from the sampler.
        "approx_kl_old": ((torch.exp(-log_ratio) + log_ratio - 1.0) * mask).sum() / n,
        "ratio_mean": (ratio * mask).sum() / n,
        "num_tokens": mask.sum(),
    }
    if kl is not None:
        stats["kl_ref"] = (kl * mask).sum() / n
    return stats
