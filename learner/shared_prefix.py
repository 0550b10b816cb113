"""Completion logprobs of samples that share a token prefix, the prefix computed once.

The samples of a GRPO group share their prompt (~1,100 tokens in the default job) and differ
in their completions (~250): per sample, the learner would forward and back-propagate the
prompt once per sample. Here a *segment* (k rows of a micro-batch with a common prefix of p
tokens, learner/segments.py) costs p + sum of the suffixes:

1. the prefix is forwarded once (batch 1) with a recording cache: each layer's keys and
   values are kept (`_RecordLayer`);
2. the k suffixes are forwarded on top (right-padded, position ids continuing at p) with a
   serving cache: each layer's attention sees cat(prefix keys expanded to k rows, own keys)
   (`_ServeLayer`);
3. a completion token's logprob comes from the hidden state before it: the prefix's for the
   first completion token and for completion tokens inside the prefix, the suffix's otherwise.

With gradients on, the backward of (2) flows into the prefix's keys and values and sums the k
rows' gradients through (1): the same gradient as k separate sequences, up to round-off.

Gradient checkpointing: transformers drops `past_key_values` in a checkpointed layer unless it
declares `_can_checkpoint_with_cache`, because a cache that appends would be appended to again
by the backward's recompute. Both caches here are idempotent (the recording one overwrites a
layer's entry with equal values, the serving one stores nothing), so the flag is set on the
decoder layers for the duration of these calls.

Supported: Llama-style decoders (one full-attention cache layer per decoder layer, no sliding
window) with the `sdpa` or `eager` attention implementation (tested on CPU, float32 and
float64). `unsupported_reason` names the reason otherwise, and the learner then uses the
per-sample path (learner/logprobs.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from transformers.cache_utils import Cache, DynamicLayer

from learner.logprobs import chunked_token_logprobs, completion_targets

# (first row, rows, prefix length) of one segment of a micro-batch; rows are contiguous.
SegmentSpan = tuple[int, int, int]

# Attention implementations whose mask creation honours a cache's past length and a right-padded
# 2D mask over past + new positions (transformers' masking_utils). flash_attention_2 unpads from
# the same 2D mask and aligns causality bottom-right, which is what the suffix needs; it was
# read in the code, not run (no GPU here), so it is not listed.
SUPPORTED_ATTENTION = ("sdpa", "eager")


class _RecordLayer(DynamicLayer):
    """Keeps the keys and values a layer computed (overwriting: a recompute stores equal ones)."""

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.keys, self.values = key_states, value_states
        return key_states, value_states


class _ServeLayer(DynamicLayer):
    """Serves a recorded prefix to `rows` rows: returns cat(prefix, new) and stores nothing, so
    its past length stays the prefix's and a recompute sees the same inputs."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, rows: int) -> None:
        super().__init__()
        self.lazy_initialization(keys, values)
        self.keys, self.values, self.rows = keys, values, rows  # [1, heads, p, head_dim]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (self.rows, *self.keys.shape[1:])
        return (
            torch.cat([self.keys.expand(shape), key_states], dim=-2),
            torch.cat([self.values.expand(shape), value_states], dim=-2),
        )


def unsupported_reason(model: torch.nn.Module) -> str | None:
    """Why the shared-prefix path cannot serve `model` (None: it can)."""
    config = model.config.get_text_config()
    attn = getattr(config, "_attn_implementation", None)
    if attn not in SUPPORTED_ATTENTION:
        return f"attention implementation {attn!r} (supported: {', '.join(SUPPORTED_ATTENTION)})"
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    if set(layer_types) != {"full_attention"} or getattr(config, "sliding_window", None):
        return f"model type {config.model_type!r} has sliding-window or non-attention layers"
    layers = getattr(model.get_decoder(), "layers", None)
    if layers is None or not all(hasattr(layer, "_can_checkpoint_with_cache") for layer in layers):
        return f"model type {config.model_type!r}: decoder layers are not transformers' checkpointing layers"
    return None


@contextmanager
def _cache_under_checkpointing(decoder: torch.nn.Module) -> Iterator[None]:
    """Let checkpointed decoder layers keep our (idempotent) caches, for these calls only."""
    layers = list(decoder.layers)
    for layer in layers:
        layer._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for layer in layers:
            del layer._can_checkpoint_with_cache  # back to the class's False


def _segment_hidden(
    decoder: torch.nn.Module, num_layers: int, ids: torch.Tensor, mask: torch.Tensor, p: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """ids, mask [k, L] (rows sharing ids[:, :p]) -> (prefix hidden [p, H], suffix hidden [k, w, H])."""
    k = ids.shape[0]
    record = Cache(layers=[_RecordLayer() for _ in range(num_layers)])
    prefix = decoder(input_ids=ids[:1, :p], past_key_values=record, use_cache=False).last_hidden_state[0]
    width = int(mask.sum(dim=1).max()) - p  # >= 1: segments leave every row a suffix token
    serve = Cache(layers=[_ServeLayer(layer.keys, layer.values, k) for layer in record.layers])
    positions = torch.arange(p, p + width, device=ids.device).expand(k, width)
    suffix = decoder(
        input_ids=ids[:, p : p + width],
        attention_mask=mask[:, : p + width],
        position_ids=positions,
        past_key_values=serve,
        use_cache=False,
    ).last_hidden_state
    return prefix, suffix


def shared_prefix_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    prompt_lens: torch.Tensor,
    segments: Sequence[SegmentSpan],
    completion_len: int,
    *,
    temperature: float = 1.0,
    chunk_tokens: int = 1024,
    with_entropy: bool = False,
    min_segments: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`learner.logprobs.completion_logprobs` with each segment's prefix computed once.

    input_ids, attention_mask: [B, L], prompt + completion, right-padded; `segments` cover the B
    rows in order. `min_segments`: run empty segments up to this count, so that every ZeRO-3
    rank makes the same number of decoder calls (each gathers the layers' shards).
    Returns (logprobs [B, T], entropy [B, T]), positions past a row's completion garbage."""
    decoder = model.get_decoder()
    num_layers = model.config.get_text_config().num_hidden_layers
    targets, source_pos = completion_targets(input_ids, prompt_lens, completion_len)  # [B, T] each
    picked = []
    with _cache_under_checkpointing(decoder):
        for first, rows, p in segments:
            ids, mask = input_ids[first : first + rows], attention_mask[first : first + rows]
            prefix, suffix = _segment_hidden(decoder, num_layers, ids, mask, p)
            src = source_pos[first : first + rows]  # [k, T]
            from_prefix = prefix[src.clamp(max=p - 1)]  # [k, T, H]
            in_suffix = (src - p).clamp(min=0, max=suffix.shape[1] - 1)
            from_suffix = suffix.gather(1, in_suffix.unsqueeze(-1).expand(-1, -1, suffix.shape[-1]))
            picked.append(torch.where((src < p).unsqueeze(-1), from_prefix, from_suffix))
        hidden = torch.cat(picked, dim=0)  # [B, T, H]
        for _ in range(min_segments - len(segments)):
            pad = input_ids.new_zeros((1, 2))
            prefix, suffix = _segment_hidden(decoder, num_layers, pad, torch.ones_like(pad), 1)
            hidden = hidden + 0.0 * (prefix.sum() + suffix.sum())  # in the graph: its backward runs too
    return chunked_token_logprobs(
        model.get_output_embeddings(), hidden, targets, temperature, chunk_tokens, with_entropy
    )
