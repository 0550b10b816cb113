"""GPU memory per device of a GPU run, estimated from the model's architecture and the config.

Pure arithmetic in bytes (no torch), so that a config that cannot fit its GPUs fails in a CPU
test (tests/test_gpu_preset.py holds the p5_512 and gpu_node presets against an 80 GB H100)
instead of after a launch. ESTIMATES, not measurements: conf/cluster/p5_512.yaml and
docs/capacity.md (bench/capacity.py) make the same budget in fewer terms; docs/capacity.md
says where the two differ.

Symbols: P parameters, L layers, d hidden size, f MLP size, V vocabulary, b micro-batch size,
S sequence length (prompt + completion, at most rollout.max_model_len), t tensor parallel size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GB = 10**9
# An H100 SXM's 80 GB (nvidia-smi shows 81,559 MiB; the round figure leaves a little margin).
H100_BYTES = 80 * GB
BF16 = 2
# ASSUMED, not derived: CUDA context, NCCL's buffers and the caching allocator's fragmentation
# on a learner rank.
LEARNER_RUNTIME_BYTES = 4 * GB
# ASSUMED: what a vLLM engine's GPU holds besides weights and KV cache inside its
# gpu_memory_utilization budget: the profiling forward's peak activations, the sampler's
# logits, CUDA graphs, NCCL and custom all-reduce buffers.
ENGINE_OVERHEAD_BYTES = 4 * GB


@dataclass(frozen=True)
class Architecture:
    """A Llama-layout decoder (bias-free projections, RMSNorm weights), as its config.json says."""

    layers: int  # num_hidden_layers (L)
    hidden: int  # hidden_size (d)
    intermediate: int  # intermediate_size (f)
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads
    head_dim: int  # head_dim, else hidden_size / num_attention_heads
    vocab: int  # vocab_size (V)
    tied_embeddings: bool  # tie_word_embeddings: the LM head is the embedding matrix

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any]) -> Architecture:
        return cls(
            layers=config["num_hidden_layers"],
            hidden=config["hidden_size"],
            intermediate=config["intermediate_size"],
            heads=config["num_attention_heads"],
            kv_heads=config.get("num_key_value_heads", config["num_attention_heads"]),
            head_dim=config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"],
            vocab=config["vocab_size"],
            tied_embeddings=config.get("tie_word_embeddings", False),
        )

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def layer_params(self) -> int:
        """q, k, v, o projections, gate, up and down projections, two RMSNorm weights."""
        attention = 2 * self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim
        return attention + 3 * self.hidden * self.intermediate + 2 * self.hidden

    @property
    def params(self) -> int:
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return embeddings + self.layers * self.layer_params + self.hidden  # + the final norm

    @property
    def largest_module(self) -> int:
        """Parameters of the largest module ZeRO-3 gathers at once (it gathers per module that
        owns parameters: the embedding or LM head, else one projection)."""
        return max(self.vocab * self.hidden, self.hidden * self.intermediate, self.hidden * self.q_dim)


@dataclass(frozen=True)
class LearnerMemory:
    """Bytes on one learner GPU, by what holds them."""

    states: int
    activations: int
    mask: int
    logits: int
    gathered: int
    runtime: int

    @property
    def total(self) -> int:
        return self.states + self.activations + self.mask + self.logits + self.gathered + self.runtime


def learner_memory(
    arch: Architecture,
    *,
    ranks: int,
    micro_batch_size: int,
    seq_len: int,
    gradient_checkpointing: bool,
    logprob_chunk_tokens: int,
    prefetch_bucket: int,
    reduce_bucket: int,
    kl_reference: bool = False,
    runtime_bytes: int = LEARNER_RUNTIME_BYTES,
) -> LearnerMemory:
    """One data-parallel rank of a ZeRO-3 bf16 learner at its largest micro-batch.

    Inputs: learner.num_ranks (`ranks`), learner.micro_batch_size (b), rollout.max_model_len
    (`seq_len`, S: the longest row a rank can get), learner.gradient_checkpointing,
    learner.logprob_chunk_tokens (c), DeepSpeed's ZeRO-3 `prefetch_bucket_size` and
    `reduce_bucket_size` (elements), kl_coef > 0 (`kl_reference`).

        states       16 P / ranks        bf16 weights and gradients (2 + 2 bytes), fp32 master weights
                                         and Adam's two moments (4 + 8), ZeRO-3 shards; + 2 P / ranks for
                                         a bf16 reference model
        activations  with checkpointing: b S (L + 1) d 2  (each layer's input and the final hidden
                     states) + b S a 2, one layer recomputed in its backward, a = 4 d + q + 2 kv + 4 f
                     per token (2 norm outputs, attention output, residual; q, k, v; gate, up, silu(gate),
                     silu(gate) x up); without: b S (L (a + d) + d) 2
        mask         b S^2               the boolean [S, S] attention mask SDPA gets for a padded batch
        logits       b c V 4 2           one LM-head chunk (learner/logprobs.py): float32 logits and the
                                         backward's float32 buffer
        gathered     2 (2 M + prefetch + 2 reduce)   the largest gathered module (M parameters) and its
                                         bf16 gradient before the reduce-scatter, the prefetched next
                                         modules, two reduce buckets (overlap_comm: one filling, one in flight)
        runtime      `runtime_bytes`     ASSUMED (LEARNER_RUNTIME_BYTES)
    """
    states = (16 + (BF16 if kl_reference else 0)) * arch.params // ranks
    tokens = micro_batch_size * seq_len
    per_layer = 4 * arch.hidden + arch.q_dim + 2 * arch.kv_dim + 4 * arch.intermediate
    if gradient_checkpointing:
        activations = tokens * ((arch.layers + 1) * arch.hidden + per_layer) * BF16
    else:
        activations = tokens * (arch.layers * (per_layer + arch.hidden) + arch.hidden) * BF16
    return LearnerMemory(
        states=states,
        activations=activations,
        mask=micro_batch_size * seq_len * seq_len,
        logits=micro_batch_size * min(logprob_chunk_tokens, seq_len) * arch.vocab * 4 * 2,
        gathered=BF16 * (2 * arch.largest_module + prefetch_bucket + 2 * reduce_bucket),
        runtime=runtime_bytes,
    )


@dataclass(frozen=True)
class EngineMemory:
    """Bytes on one GPU of a tensor-parallel vLLM engine."""

    budget: int  # gpu_memory_utilization x the GPU's memory: what vLLM lets itself use
    weights: int
    overhead: int
    kv_bytes_per_token: int  # this GPU's share of one token's K and V over all layers

    @property
    def kv_cache(self) -> int:
        """What is left of the budget for the KV cache (negative: the weights do not fit)."""
        return self.budget - self.weights - self.overhead

    @property
    def kv_tokens(self) -> int:
        """Tokens the engine's KV cache holds (every GPU holds its heads of every token)."""
        return max(0, self.kv_cache) // self.kv_bytes_per_token

    @property
    def total(self) -> int:
        return self.weights + self.overhead + max(0, self.kv_cache)


def engine_memory(
    arch: Architecture,
    *,
    tensor_parallel_size: int,
    gpu_memory_utilization: float,
    gpu_bytes: int = H100_BYTES,
    overhead_bytes: int = ENGINE_OVERHEAD_BYTES,
) -> EngineMemory:
    """One GPU of a bf16 engine: vLLM fills `gpu_memory_utilization` of the GPU, weights first,
    then the KV cache.

    Inputs: rollout.tensor_parallel_size (t), rollout.gpu_memory_utilization (u), the GPU's memory.

        budget       u x gpu_bytes
        weights      2 P / t
        overhead     `overhead_bytes`, ASSUMED (ENGINE_OVERHEAD_BYTES)
        KV cache     budget - weights - overhead
        per token    L x kv_heads_per_gpu x head_dim x 2 (K and V) x 2 bytes, where
                     kv_heads_per_gpu = max(1, kv_heads / t) (vLLM replicates KV heads when t > kv_heads)
    """
    kv_heads_per_gpu = max(1, arch.kv_heads // tensor_parallel_size)
    return EngineMemory(
        budget=int(gpu_memory_utilization * gpu_bytes),
        weights=BF16 * arch.params // tensor_parallel_size,
        overhead=overhead_bytes,
        kv_bytes_per_token=arch.layers * kv_heads_per_gpu * arch.head_dim * 2 * BF16,
    )


def engine_share(prompts_per_step: int, group_size: int, engines: int, max_prompts_per_call: int) -> int:
    """Sequences one engine generates at once in a sync step: the fleet (actors/rollout/fleet.py) hands
    each engine one chunk at a time of ceil(prompts / engines) prompts, at most
    max_prompts_per_call, each with its group_size samples."""
    return min(math.ceil(prompts_per_step / engines), max_prompts_per_call) * group_size
