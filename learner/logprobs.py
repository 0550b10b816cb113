"""Per-token logprobs of completion tokens, without the full [tokens, vocab] float32 logits.

A causal LM's logits tensor is the largest activation in RL training (B x T x V floats: for a
16 x 2048 batch and a 128k vocabulary, 16 GiB in float32). Here only completion positions are
projected, in chunks of `chunk_tokens` positions, each chunk under activation checkpointing:
the backward pass recomputes one chunk's logits at a time instead of keeping all of them.
The LM head is called as a module (not through its `.weight`) so that ZeRO-3's parameter
gathering hooks run.

Logprobs are taken at the sampling temperature (logits / T), matching the engine's
`processed_logprobs`, so the GRPO ratio compares like with like.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint


def _upcast(logits: torch.Tensor) -> torch.Tensor:
    """bf16/fp16 logits -> float32 for the softmax; float64 stays (tests use it)."""
    return logits.float() if logits.element_size() < 4 else logits


class _TokenLogprobs(torch.autograd.Function):
    """logits [B, t, V] (any float dtype), targets [B, t] -> (logprob of each target at
    temperature T [B, t] float32+, entropy [B, t] with no gradient).

    The same values as log_softmax(logits / T).gather(targets), with a leaner backward: autograd
    would keep the upcast and scaled copies and make ~4 temporaries of the chunk's size; here
    backward rebuilds softmax in one float32 buffer and forms (one_hot - softmax) * grad / T in
    place, so a chunk costs its logits plus one float32 buffer."""

    @staticmethod
    def forward(
        ctx,
        logits: torch.Tensor,
        targets: torch.Tensor,
        temperature: float,
        with_entropy: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x = _upcast(logits) / temperature  # [B, t, V]
        logz = torch.logsumexp(x, dim=-1)  # [B, t]
        picked = x.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        if with_entropy:
            entropy = logz - (torch.softmax(x, dim=-1).mul_(x)).sum(dim=-1)
        else:
            entropy = torch.zeros_like(logz)
        ctx.save_for_backward(logits, targets, logz)
        ctx.temperature = temperature
        ctx.mark_non_differentiable(entropy)
        return picked - logz, entropy

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _grad_entropy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        logits, targets, logz = ctx.saved_tensors
        t = ctx.temperature
        # d(x_y - logsumexp x)/dx = one_hot(y) - softmax(x), and dx/dlogits = 1/T.
        g = _upcast(logits).div(t).sub_(logz.unsqueeze(-1)).exp_()  # softmax, [B, t, V], one buffer
        g.mul_(-grad.unsqueeze(-1)).scatter_add_(-1, targets.unsqueeze(-1), grad.unsqueeze(-1).to(g.dtype))
        return g.div_(t).to(logits.dtype), None, None, None


def _chunk_logprobs(
    lm_head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, temperature: float, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    return _TokenLogprobs.apply(lm_head(hidden), targets, temperature, with_entropy)  # one chunk only


def completion_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    prompt_lens: torch.Tensor,
    completion_len: int,
    *,
    temperature: float = 1.0,
    chunk_tokens: int = 1024,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logprobs of each row's completion tokens under `model`.

    input_ids, attention_mask: [B, L], each row = prompt + completion, right-padded.
    prompt_lens: [B] (long). completion_len: T, the width of the output.
    Returns (logprobs [B, T], entropy [B, T]); positions past a row's completion hold garbage
    that the caller's mask removes (they point at padding).
    """
    decoder = model.get_decoder()
    # use_cache=False: otherwise the decoder builds a KV cache (every layer's keys and values)
    # that nothing reads, which under no_grad (reference and old-policy passes) is pure waste.
    hidden = decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state  # [B, L, H]
    targets, source_pos = completion_targets(input_ids, prompt_lens, completion_len)
    picked_hidden = hidden.gather(1, source_pos.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))  # [B, T, H]
    return chunked_token_logprobs(
        model.get_output_embeddings(), picked_hidden, targets, temperature, chunk_tokens, with_entropy
    )


def completion_targets(
    input_ids: torch.Tensor, prompt_lens: torch.Tensor, completion_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(completion token ids [B, T], position of the hidden state predicting each [B, T])."""
    seq_len = input_ids.shape[1]
    steps = torch.arange(completion_len, device=input_ids.device)  # [T]
    # Token j of the completion sits at prompt_len + j and is predicted from the position before.
    target_pos = (prompt_lens[:, None] + steps[None, :]).clamp(max=seq_len - 1)  # [B, T]
    return input_ids.gather(1, target_pos), target_pos - 1


def chunked_token_logprobs(
    lm_head: torch.nn.Module,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    temperature: float,
    chunk_tokens: int,
    with_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden [B, T, H] -> (logprob of targets [B, T], entropy [B, T]), `chunk_tokens` positions
    of logits at a time (each chunk recomputed in the backward when gradients are on)."""
    outs, ents = [], []
    for start in range(0, targets.shape[1], chunk_tokens):
        h = hidden[:, start : start + chunk_tokens]
        y = targets[:, start : start + chunk_tokens]
        if torch.is_grad_enabled():
            lp, ent = checkpoint(_chunk_logprobs, lm_head, h, y, temperature, with_entropy, use_reentrant=False)
        else:
            lp, ent = _chunk_logprobs(lm_head, h, y, temperature, with_entropy)
        outs.append(lp)
        ents.append(ent)
    return torch.cat(outs, dim=1), torch.cat(ents, dim=1)


def sequence_logprobs_reference(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    prompt_lens: torch.Tensor,
    completion_len: int,
    temperature: float = 1.0,
) -> torch.Tensor:
    """The naive full-logits computation, kept as the test oracle and the benchmark baseline."""
    logits = _upcast(model(input_ids=input_ids).logits) / temperature  # [B, L, V]
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    tokens = input_ids[:, 1:]
    all_lp = logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)  # [B, L-1]
    steps = torch.arange(completion_len, device=input_ids.device)
    pos = (prompt_lens[:, None] - 1 + steps[None, :]).clamp(max=all_lp.shape[1] - 1)
    return all_lp.gather(1, pos)
