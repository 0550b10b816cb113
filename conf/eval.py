"""The evaluation's config schema: `python -m actors.evaluate key=value ...` (actors/evaluate.py).

Its defaults are the trainer's (conf/config.py), so that an evaluation scores what training
scored; `parse_args` refuses an unknown key or a bad value with a ConfigError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from conf.config import (
    AgentConfig,
    ConfigError,
    DataConfig,
    ModelConfig,
    RewardConfig,
    RolloutConfig,
    TrainConfig,
    TrainerConfig,
    is_hub_id,
)

# The evaluation's modes (actors/evaluate.py dispatches on them).
MODES = ("oracle_context", "agentless", "agent", "ood")


@dataclass
class EvalConfig:
    # Hugging Face model directory to evaluate (the trainer writes one to <run_dir>/hf), or a hub
    # id (org/name, at main: from the cache, else downloaded; learner/hub.py).
    checkpoint: str = ""
    # Instances: a Parquet file or directory of the schema, or "demo" (as data.path).
    data: str = DataConfig.path
    # "heldout": the instances training held out; "train": the others (needs heldout_fraction > 0).
    split: str = "heldout"
    # The trainer's data.heldout_fraction; 0 = evaluate every instance.
    heldout_fraction: float = DataConfig.heldout_fraction
    # Prompts longer than this many tokens are dropped and counted (as in training).
    max_prompt_tokens: int = DataConfig.max_prompt_tokens
    # Evaluate at most this many instances (in file order); 0 = all.
    limit: int = 0
    # Sampled answers per instance (the trainer's group size by default).
    samples: int = TrainConfig.group_size
    # Sampling temperature of the sampled answers (greedy ones use none).
    temperature: float = RolloutConfig.temperature
    # Nucleus of the sampled answers (1.0 = off).
    top_p: float = RolloutConfig.top_p
    # Completion length limit in tokens.
    max_new_tokens: int = RolloutConfig.max_new_tokens
    # The engine's context length (prompt + completion).
    max_model_len: int = RolloutConfig.max_model_len
    # Weights dtype of the engines (float32 on CPU, bfloat16 on GPU).
    dtype: str = ModelConfig.dtype
    # vLLM tensor parallel size per engine, as rollout.tensor_parallel_size (GPU only).
    tensor_parallel_size: int = RolloutConfig.tensor_parallel_size
    # Fraction of GPU memory vLLM may use (GPU only).
    gpu_memory_utilization: float = RolloutConfig.gpu_memory_utilization
    # KV cache of a CPU engine in GiB.
    kv_cache_gib: int = RolloutConfig.kv_cache_gib
    # The reward's time cap per diff pair, as in training.
    max_pair_seconds: float = RewardConfig.max_pair_seconds
    # Seeds the engine, each instance's samples and the order of its files in the prompt.
    seed: int = 0
    # Output directory: summary.json, predictions.jsonl, answers.jsonl.
    out: str = "runs/eval"
    # model_name_or_path in the predictions file; "" = the checkpoint path.
    model_name: str = ""
    # Replace the model's answers by the oracle answer (a self-check of data, reward and diffs).
    oracle: bool = False
    # Run the instances' tests on the answers whose edits apply, when the instances carry
    # FAIL_TO_PASS (schema v3): resolve_rate (greedy) and resolved_any (any sample resolves).
    tests: bool = True
    # Test runners for those runs, on the engines' Ray (reward/execution/, reward/execution/pool.py);
    # with mode=agentless, 0 runs them one by one in this process.
    test_workers: int = 2
    # Rollout actors that generate, on Ray as in training (actors/rollout/engines.py: each stage's
    # prompts are shared among them); 0 = one engine in this process, without Ray.
    engines: int = 1
    # GPUs per rollout actor (= tensor_parallel_size on GPUs; 0 = CPU engines). With engines=0
    # the engine uses whatever this process has.
    engine_gpus: float = RolloutConfig.num_gpus
    # Ray for the engines and the test runners: "" = RAY_ADDRESS if set (`ray job submit`), else a
    # local cluster on 127.0.0.1; "auto" or "ray://..." = join that cluster (as ray.address).
    ray_address: str = ""
    # Seconds an engine's start, or one call of 64 prompts, may take on the fleet.
    timeout_s: float = TrainerConfig.phase_timeout_s
    # "oracle_context": the quick proxy (the oracle's files as context, scored by the reward);
    # "agentless": the paper's Agentless-Mini pipeline on whole repositories, resolved by tests
    # (actors/eval/agentless_mini.py); "agent": one greedy episode per instance in a sandbox
    # session, its final patch resolved by tests (actors/eval/episodes.py); "ood": the paper's
    # out-of-domain suites, zero-shot (actors/eval/out_of_domain.py).
    mode: str = "oracle_context"
    # Local clones of the instances' repositories ("PATH" or "owner/name=PATH", as
    # reward.execution.repos): the agentless view of the repository and the sandbox's snapshots.
    git: list[str] = field(default_factory=list)
    # Agentless: files the localization keeps (the top N the model names).
    localize_top: int = 3
    # Agentless: reproduction tests the model writes per instance (0 = none: no repro filter).
    repro_tests: int = 4
    # Agentless self-check: the oracle's changed files as the localization.
    oracle_localize: bool = False
    # Agentless self-check: the oracle's patch as every repair sample; with oracle_localize too,
    # every validated instance must resolve.
    oracle_repair: bool = False
    # mode=agent: most turns of an episode (the trainer's agent.max_turns).
    max_turns: int = AgentConfig.max_turns
    # mode=agent: wall-clock limit of one command in the sandbox (agent.command_timeout_s).
    command_timeout_s: float = AgentConfig.command_timeout_s
    # mode=ood: the suites, comma-separated (actors/eval/ood/: humaneval, humaneval_plus,
    # mbpp_plus, cruxeval_i, cruxeval_o, math, mmlu); `data` is then the suite's published file
    # or folder ("" unless given: HumanEval reads its PyPI package's), and `samples` is 0 (greedy
    # only) unless given.
    suite: str = ""
    # mode=ood: grade these answers (evalplus's samples.jsonl: task_id with solution, completion
    # or answer) instead of generating; no checkpoint needed.
    samples_file: str = ""


def parse_args(argv: list[str]) -> EvalConfig:
    """`key=value` arguments (and `--oracle`) -> a validated EvalConfig; unknown keys are named.
    `git=PATH` may be repeated, one clone each (as `--git` of reward.execute), or be a list."""
    clones = [a.split("=", 1)[1] for a in argv if a.startswith("git=") and not a.startswith("git=[")]
    argv = [a for a in argv if not a.startswith("git=") or a.startswith("git=[")]
    dotlist = ["oracle=true" if a == "--oracle" else a for a in argv]
    bad = [a for a in dotlist if "=" not in a]
    if bad:
        raise ConfigError(f"arguments must be key=value, got {bad}; keys: {', '.join(EvalConfig.__dataclass_fields__)}")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(EvalConfig), OmegaConf.from_dotlist(dotlist))
    except OmegaConfBaseException as exc:  # an unknown key or a value of the wrong type
        raise ConfigError(f"{exc.full_key}: {str(exc).splitlines()[0]}") from exc
    cfg = OmegaConf.to_object(merged)
    assert isinstance(cfg, EvalConfig)
    cfg.git = [*cfg.git, *clones]
    given = {a.split("=", 1)[0] for a in dotlist}
    if cfg.mode == "ood":  # the issue sets' defaults differ from the trainer's: see the fields
        cfg.samples = cfg.samples if "samples" in given else 0
        cfg.data = cfg.data if "data" in given else ""
    validate(cfg)
    return cfg


def validate(cfg: EvalConfig) -> None:
    if cfg.mode == "ood":
        validate_ood(cfg)
        if cfg.oracle or cfg.samples_file:
            return  # nothing is generated: no checkpoint, engines or sampling settings
    if not cfg.checkpoint:
        raise ConfigError("checkpoint=PATH is required (a Hugging Face model directory, e.g. <run_dir>/hf)")
    hub_id = is_hub_id(cfg.checkpoint) and not Path(cfg.checkpoint).exists()  # actors/evaluate.py fetches it
    if not hub_id and not (Path(cfg.checkpoint) / "config.json").is_file():
        raise ConfigError(f"checkpoint={cfg.checkpoint!r}: no config.json there (not a Hugging Face model directory)")
    if cfg.split not in ("heldout", "train"):
        raise ConfigError(f"split={cfg.split!r}: accepted values are 'heldout', 'train'")
    if not 0.0 <= cfg.heldout_fraction < 1.0:
        raise ConfigError(f"heldout_fraction={cfg.heldout_fraction}: must be in [0, 1)")
    if cfg.split == "train" and cfg.heldout_fraction == 0:
        raise ConfigError("split=train needs heldout_fraction > 0 (with 0 every instance is evaluated)")
    if cfg.samples < (0 if cfg.mode == "ood" else 1) or cfg.max_new_tokens < 1 or cfg.limit < 0:
        raise ConfigError("samples and max_new_tokens must be >= 1 (samples >= 0 with mode=ood), limit >= 0")
    if cfg.temperature <= 0:
        raise ConfigError(f"temperature={cfg.temperature}: must be > 0 (greedy answers are always made too)")
    if cfg.dtype not in ("float32", "bfloat16"):
        raise ConfigError(f"dtype={cfg.dtype!r}: accepted values are 'float32', 'bfloat16'")
    if cfg.mode not in MODES:
        raise ConfigError(f"mode={cfg.mode!r}: accepted values are {', '.join(map(repr, MODES))}")
    if cfg.max_turns < 1 or cfg.command_timeout_s <= 0:
        raise ConfigError("max_turns must be >= 1, command_timeout_s > 0")
    if cfg.localize_top < 1 or cfg.repro_tests < 0:
        raise ConfigError("localize_top must be >= 1, repro_tests >= 0")
    if cfg.test_workers < (0 if cfg.mode in ("agentless", "agent") else 1):
        raise ConfigError(f"test_workers={cfg.test_workers}: must be >= 1 (>= 0 with mode=agentless or agent)")
    if cfg.engines < 0 or cfg.engine_gpus < 0 or cfg.timeout_s <= 0:
        raise ConfigError("engines and engine_gpus must be >= 0, timeout_s > 0")
    if cfg.engine_gpus and (cfg.engines == 0 or cfg.engine_gpus < cfg.tensor_parallel_size):
        raise ConfigError(
            f"engine_gpus={cfg.engine_gpus}: GPUs of each rollout actor, so engines >= 1 and at least "
            f"tensor_parallel_size={cfg.tensor_parallel_size} (engines=0 uses this process's GPUs)"
        )
    if cfg.mode != "agentless" and (cfg.oracle_localize or cfg.oracle_repair):
        raise ConfigError("oracle_localize and oracle_repair are switches of mode=agentless")
    if cfg.mode != "ood" and (cfg.suite or cfg.samples_file):
        raise ConfigError("suite and samples_file are keys of mode=ood")


def validate_ood(cfg: EvalConfig) -> None:
    if not cfg.suite:
        raise ConfigError("mode=ood needs suite=NAME[,NAME...] (humaneval, humaneval_plus, mbpp_plus, ...)")
    if cfg.oracle and cfg.samples_file:
        raise ConfigError("oracle=true and samples_file=PATH are two ways to get answers: give one")
    if cfg.samples_file and not Path(cfg.samples_file).is_file():
        raise ConfigError(f"samples_file={cfg.samples_file!r}: no such file")
    if cfg.test_workers < 1:
        raise ConfigError(f"test_workers={cfg.test_workers}: with mode=ood, the programs run at a time (>= 1)")
