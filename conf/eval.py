"""The evaluation's config schema: `python -m actors.evaluate key=value ...` (actors/evaluate.py).

Its defaults are the trainer's (conf/config.py), so that an evaluation scores what training
scored, and so are its names: the model, the engines and the test-runner pool are training's own
sections (`model.*`, `rollout.*`, `reward.execution.*`) and the samples per instance training's
`group_size`. `parse_args` refuses an unknown key or a bad value with a ConfigError naming it,
and a former flat name (`engines`, `samples`, `git`, ...: RENAMED) with the new one.
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
    ExecutionConfig,
    ModelConfig,
    RewardConfig,
    RolloutConfig,
    TrainConfig,
    TrainerConfig,
)
from conf.overrides import RayJoin

# The evaluation's modes (actors/evaluate.py dispatches on them).
MODES = ("oracle_context", "agentless", "agent", "ood")


@dataclass
class EvalRewardConfig:
    # The reward's time cap per diff pair (reward.max_pair_seconds of training).
    max_pair_seconds: float = RewardConfig.max_pair_seconds
    # The test-runner pool and the sandbox's limits, training's own section: `num_runners` test
    # runners on the engines' Ray (with mode=agentless or agent, 0 runs the tests one by one in
    # this process), `repos` the local clones of the instances' repositories ("PATH" or
    # "owner/name=PATH": the agentless view of the repository and the sandbox's snapshots).
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)


@dataclass
class EvalConfig:
    # Samples per instance, sampled at rollout.temperature beside the greedy answer (training's
    # group size).
    group_size: int = TrainConfig.group_size
    # The policy to evaluate, training's own section: `name` is a known name or a Hugging Face
    # model directory (the trainer writes one to <run_dir>/hf), `dtype` its weights dtype.
    model: ModelConfig = field(default_factory=ModelConfig)
    # The engines, training's own section: `num_actors` rollout actors on Ray, each with
    # `num_gpus` GPUs (0 = CPU engines), started as the trainer starts them; num_actors=0 runs
    # one engine in this process, without Ray, on whatever this process has. Sampling
    # (temperature, top_p: evaluation may sample with top_p < 1) and lengths as in training.
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    # The reward's time cap and the test-runner pool (reward.execution), as in training.
    reward: EvalRewardConfig = field(default_factory=EvalRewardConfig)
    # Instances: a Parquet file or directory of the schema, or "demo" / "demo-js" (as data.path).
    data: str = DataConfig.path
    # "heldout": the instances training held out; "train": the others (needs heldout_fraction > 0).
    split: str = "heldout"
    # The trainer's data.heldout_fraction; 0 = evaluate every instance.
    heldout_fraction: float = DataConfig.heldout_fraction
    # Prompts longer than this many tokens are dropped and counted (as in training).
    max_prompt_tokens: int = DataConfig.max_prompt_tokens
    # Evaluate at most this many instances (in file order); 0 = all.
    limit: int = 0
    # Seeds the engine, each instance's samples and the order of its files in the prompt.
    seed: int = 0
    # Output directory: summary.json, predictions.jsonl, answers.jsonl.
    out: str = "runs/eval"
    # model_name_or_path in the predictions file; "" = model.name.
    predictions_name: str = ""
    # Replace the model's answers by the oracle answer (a self-check of data, reward and diffs).
    oracle: bool = False
    # Run the instances' tests on the answers whose edits apply, when the instances carry
    # FAIL_TO_PASS (schema v3): resolve_rate (greedy) and resolved_any (any sample resolves).
    tests: bool = True
    # Ray for the engines and the test runners (`ray.address`, as in training).
    ray: RayJoin = field(default_factory=RayJoin)
    # Seconds an engine's start, or one call of 64 prompts, may take on the fleet.
    timeout_s: float = TrainerConfig.phase_timeout_s
    # "oracle_context" (the default): the quick proxy; the model is handed the files the oracle
    # patch changes and scored by the reward, so its figures are no SWE-bench score.
    # "agentless": the paper's Agentless-Mini pipeline on whole repositories, resolved by tests
    # (actors/eval/agentless_mini.py); "agent": one greedy episode per instance in a sandbox
    # session, its final patch resolved by tests (actors/eval/episodes.py); "ood": the paper's
    # out-of-domain suites, zero-shot (actors/eval/out_of_domain.py).
    mode: str = "oracle_context"
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
    # or folder ("" unless given: HumanEval reads its PyPI package's), and `group_size` is 0
    # (greedy only) unless given.
    suite: str = ""
    # mode=ood: grade these answers (evalplus's samples.jsonl: task_id with solution, completion
    # or answer) instead of generating; no model needed.
    samples_file: str = ""


# The evaluation's former flat keys, refused with the training schema's name for the same thing.
RENAMED = {
    "checkpoint": "model.name",
    "dtype": "model.dtype",
    "model_name": "predictions_name",
    "samples": "group_size",
    "engines": "rollout.num_actors",
    "engine_gpus": "rollout.num_gpus",
    "temperature": "rollout.temperature",
    "top_p": "rollout.top_p",
    "max_new_tokens": "rollout.max_new_tokens",
    "max_model_len": "rollout.max_model_len",
    "tensor_parallel_size": "rollout.tensor_parallel_size",
    "gpu_memory_utilization": "rollout.gpu_memory_utilization",
    "kv_cache_gib": "rollout.kv_cache_gib",
    "max_pair_seconds": "reward.max_pair_seconds",
    "test_workers": "reward.execution.num_runners",
    "git": "reward.execution.repos",
    "ray_address": "ray.address",
}
# Training's rollout keys that an evaluation does not read: refused when given, not ignored.
NOT_READ = {
    "rollout.mode": "the evaluation's mode is `mode=agent`",
    "rollout.oracle_samples_per_group": "`oracle=true` replaces every answer by the oracle's",
    "rollout.max_prompts_per_call": "an evaluation sends 64 prompts a call",
}


def refuse_renamed(keys: list[str], renamed: dict[str, str], command: str) -> None:
    """One line naming the new key for the first former name among `keys`."""
    for key in keys:
        if key in renamed:
            raise ConfigError(f"`{key}` is now `{renamed[key]}` ({command}: the training schema's name)")


def parse_args(argv: list[str]) -> EvalConfig:
    """`key=value` arguments (and `--oracle`) -> a validated EvalConfig; unknown keys are named,
    former names are refused with the new one. Lists as in training: `reward.execution.repos=[A,B]`."""
    dotlist = ["oracle=true" if a == "--oracle" else a for a in argv]
    bad = [a for a in dotlist if "=" not in a]
    if bad:
        raise ConfigError(f"arguments must be key=value, got {bad}; keys: docs/config.md (python -m actors.evaluate)")
    given = [a.split("=", 1)[0].lstrip("+") for a in dotlist]
    refuse_renamed(given, RENAMED, "python -m actors.evaluate")
    for key in given:
        if key in NOT_READ:
            raise ConfigError(f"{key}: not read by an evaluation ({NOT_READ[key]})")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(EvalConfig), OmegaConf.from_dotlist(dotlist))
    except OmegaConfBaseException as exc:  # an unknown key or a value of the wrong type
        raise ConfigError(f"{exc.full_key}: {str(exc).splitlines()[0]}") from exc
    cfg = OmegaConf.to_object(merged)
    assert isinstance(cfg, EvalConfig)
    if cfg.mode == "ood":  # the issue sets' defaults differ from the trainer's: see the fields
        cfg.group_size = cfg.group_size if "group_size" in given else 0
        cfg.data = cfg.data if "data" in given else ""
    validate(cfg)
    return cfg


def needs_model(cfg: EvalConfig) -> bool:
    """Whether the evaluation loads the model (mode=ood grading given answers does not)."""
    return not (cfg.mode == "ood" and (cfg.oracle or cfg.samples_file))


def validate(cfg: EvalConfig) -> None:
    if cfg.mode == "ood":
        validate_ood(cfg)
        if not needs_model(cfg):
            return  # nothing is generated: no model, engines or sampling settings
    if not cfg.model.name:
        raise ConfigError("model.name: empty (a known name or a Hugging Face model directory, e.g. <run_dir>/hf)")
    if cfg.split not in ("heldout", "train"):
        raise ConfigError(f"split={cfg.split!r}: accepted values are 'heldout', 'train'")
    if not 0.0 <= cfg.heldout_fraction < 1.0:
        raise ConfigError(f"heldout_fraction={cfg.heldout_fraction}: must be in [0, 1)")
    if cfg.split == "train" and cfg.heldout_fraction == 0:
        raise ConfigError("split=train needs heldout_fraction > 0 (with 0 every instance is evaluated)")
    ro, ex = cfg.rollout, cfg.reward.execution
    if cfg.group_size < (0 if cfg.mode == "ood" else 1) or ro.max_new_tokens < 1 or cfg.limit < 0:
        raise ConfigError(
            "group_size and rollout.max_new_tokens must be >= 1 (group_size >= 0 with mode=ood), limit >= 0"
        )
    if ro.temperature <= 0:
        raise ConfigError(f"rollout.temperature={ro.temperature}: must be > 0 (greedy answers are always made too)")
    if cfg.model.dtype not in ("float32", "bfloat16"):
        raise ConfigError(f"model.dtype={cfg.model.dtype!r}: accepted values are 'float32', 'bfloat16'")
    if cfg.mode not in MODES:
        raise ConfigError(f"mode={cfg.mode!r}: accepted values are {', '.join(map(repr, MODES))}")
    if cfg.max_turns < 1 or cfg.command_timeout_s <= 0:
        raise ConfigError("max_turns must be >= 1, command_timeout_s > 0")
    if cfg.localize_top < 1 or cfg.repro_tests < 0:
        raise ConfigError("localize_top must be >= 1, repro_tests >= 0")
    if ex.num_runners < (0 if cfg.mode in ("agentless", "agent") else 1):
        raise ConfigError(
            f"reward.execution.num_runners={ex.num_runners}: must be >= 1 (>= 0 with mode=agentless or agent)"
        )
    if ro.num_actors < 0 or ro.num_gpus < 0 or cfg.timeout_s <= 0:
        raise ConfigError("rollout.num_actors and rollout.num_gpus must be >= 0, timeout_s > 0")
    if ro.num_gpus and (ro.num_actors == 0 or ro.num_gpus < ro.tensor_parallel_size):
        raise ConfigError(
            f"rollout.num_gpus={ro.num_gpus}: GPUs of each rollout actor, so rollout.num_actors >= 1 and at "
            f"least rollout.tensor_parallel_size={ro.tensor_parallel_size} (rollout.num_actors=0 uses this "
            "process's GPUs)"
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
    if cfg.reward.execution.num_runners < 1:
        raise ConfigError(
            f"reward.execution.num_runners={cfg.reward.execution.num_runners}: with mode=ood, the programs run "
            "at a time (>= 1)"
        )
