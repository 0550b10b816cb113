"""DAPO's overlong handling (Yu et al. 2025, section 3.4), chosen by `learner.overlong`. Pure torch.

A sample cut at the generation limit (finish_reason "length") has no ending: rewarding or
punishing it for its content is noise, since a good answer cut short scores like a bad one.
DAPO offers two remedies:

- "filter" (overlong filtering): the truncated samples' loss is masked. They still count in
  their group's advantage baseline (their reward was computed), but they are left out of the
  update entirely, normalisers included, as if never generated (`keep_untruncated`).
- "soft" (soft overlong punishment): a length penalty added to the reward before the
  advantages, with L_max = rollout.max_new_tokens, L_buf = learner.overlong_buffer and |y| the
  completion's token count:
      penalty(|y|) = 0                             if |y| <= L_max - L_buf
                   = (L_max - L_buf - |y|) / L_buf  if L_max - L_buf < |y| <= L_max
                   = -1                            if |y| > L_max
  a linear ramp from 0 to -1 over the last L_buf tokens before the limit, so that the policy
  learns to finish before it is cut, without a cliff. It is logged as `overlong_penalty_mean`;
  `reward_mean` stays the task's reward alone. Injected oracle answers get no penalty (they were
  not generated under the limit; actors/driver/generation.py).
- "none" (the SWE-RL paper's): truncated samples are scored like any other.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from learner.batch import TrainSample

MODES: tuple[str, ...] = ("none", "filter", "soft")


def length_penalty(lengths: torch.Tensor, *, max_new_tokens: int, buffer: int) -> torch.Tensor:
    """DAPO's soft overlong punishment: completion lengths [B] -> penalties [B] in [-1, 0]."""
    if not 1 <= buffer <= max_new_tokens:
        raise ValueError(f"buffer={buffer}: must be in [1, max_new_tokens={max_new_tokens}]")
    start = max_new_tokens - buffer  # the last length without a penalty
    ramp = (start - lengths.to(torch.float64)) / buffer
    return torch.where(lengths > max_new_tokens, -1.0, ramp.clamp(max=0.0))


def keep_untruncated(samples: Sequence[TrainSample]) -> list[TrainSample]:
    """Overlong filtering: the samples the update keeps (those not cut at the limit)."""
    return [s for s in samples if not s.truncated]
