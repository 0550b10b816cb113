"""Training's keys on the commands that start a test-runner pool or an engine outside training.

`python -m reward.execute`, `data.validate`, `data.inject` and `actors.replay` run tests on the
pool (or one Runner) that `reward.kind=tests` trains with, so they take its settings under
training's own names, as `key=value` overrides beside their flags:

    python -m reward.execute --instances demo --predictions P.jsonl --out DIR \\
        "reward.execution.repos=['psf/requests=/clones/requests']" reward.execution.num_runners=4

Accepted: every `reward.execution.*` key (conf/config.py ExecutionConfig: runners, their CPUs,
the cache, the clones, the sandbox's limits) and `ray.address`. The flags these commands had for
the same things (`--git`, `--workers`, `--wall-s`, `--cache-dir`, `--ray-address`) are refused
with the new key in one line. Lists as in training: `reward.execution.repos=[A,'owner/name=B']`
(an element with an `=` quoted, as Hydra's grammar wants).

The data commands that start one engine (data.build's context model, data.inject's model
injector) take `model.*` and the `rollout.*` keys that set one engine (ENGINE_KEYS), their former
flags (`--context-model`, `--model`, ...) refused likewise. `actors.evaluate` composes the same
sections in its own schema (conf/eval.py).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from conf.config import ConfigError, ExecutionConfig, RayConfig
from conf.errors import UserError, fail

# A dotted schema key's override (`reward.execution.wall_s=30`): what is not a flag or its value.
_OVERRIDE = re.compile(r"^\+?[A-Za-z_]\w*(\.\w+)+=")

# The rollout keys that set the one engine a data command starts (data.build's context model,
# greedy, and data.inject's model injector, which samples): the others (actors, restarts, the
# rollout mode, ...) are the trainer's fleet's, refused there.
GREEDY_ENGINE_KEYS = (
    "max_new_tokens",
    "max_model_len",
    "num_gpus",
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "kv_cache_gib",
    "max_prompts_per_call",
)
ENGINE_KEYS = ("temperature", *GREEDY_ENGINE_KEYS, "cpu_threads")
# The model keys such an engine reads (the model is resolved by name, learner/models.py).
ENGINE_MODEL_KEYS = ("name", "dtype")
# data.inject's former engine flags.
ENGINE_FLAGS = {
    "--model": "model.name",
    "--temperature": "rollout.temperature",
    "--max-new-tokens": "rollout.max_new_tokens",
}

# data.build's context engine's former flags and the training keys that replace them.
CONTEXT_FLAGS = {
    "--context-model": "model.name",
    "--context-dtype": "model.dtype",
    "--context-batch": "rollout.max_prompts_per_call",
    "--context-max-new-tokens": "rollout.max_new_tokens",
    "--context-max-model-len": "rollout.max_model_len",
    "--context-gpus": "rollout.num_gpus",
    "--context-tensor-parallel-size": "rollout.tensor_parallel_size",
    "--context-gpu-memory-utilization": "rollout.gpu_memory_utilization",
    "--context-kv-cache-gib": "rollout.kv_cache_gib",
}

# The pool commands' former flags and the training keys that replace them.
FORMER_FLAGS = {
    "--git": "reward.execution.repos=[CLONE,...]",
    "--workers": "reward.execution.num_runners",
    "--wall-s": "reward.execution.wall_s",
    "--cache-dir": "reward.execution.cache_dir",
    "--ray-address": "ray.address",
}


@dataclass
class RayJoin:
    # "" = RAY_ADDRESS if set (`ray job submit`), else a local cluster on 127.0.0.1 sized to the
    # command's actors; "auto" or "ray://..." = join that cluster (training's ray.address).
    address: str = RayConfig.address


@dataclass
class _Reward:
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)


@dataclass
class PoolOverrides:
    reward: _Reward = field(default_factory=_Reward)
    ray: RayJoin = field(default_factory=RayJoin)


def split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the flags and their values, the `key=value` overrides of dotted keys), in order."""
    overrides = [a for a in argv if _OVERRIDE.match(a)]
    return [a for a in argv if not _OVERRIDE.match(a)], overrides


def refuse_former(argv: list[str], former: dict[str, str], command: str) -> None:
    """One line naming the new key for the first former flag among `argv` (`--git X` or `--git=X`)."""
    for arg in argv:
        flag = arg.split("=", 1)[0]
        if flag in former:
            raise ConfigError(f"`{flag}` is now `{former[flag]}` ({command}: the training schema's name)")


def parse(
    argv: list[str], command: str, sections: dict[str, Any], former: dict[str, str], engine: tuple[str, ...] = ()
) -> tuple[list[str], dict[str, Any]]:
    """(the command's own arguments, each section's typed value) of `argv`. `sections`: name ->
    the dataclass instance of its defaults (the command's, where they differ from training's);
    `former`: the command's former flags and their keys. `engine`: the only `rollout.*` keys
    accepted (those that set the one engine a data command starts; empty = all)."""
    refuse_former(argv, former, command)
    rest, dotlist = split(argv)
    keys = [a.lstrip("+").split("=", 1)[0] for a in dotlist]
    if engine:
        for key in keys:
            if key.startswith("rollout.") and key.removeprefix("rollout.") not in engine:
                raise ConfigError(
                    f"{key}: not read by {command} (one engine; it reads rollout.{', rollout.'.join(engine)})"
                )
            if key.startswith("model.") and key.removeprefix("model.") not in ENGINE_MODEL_KEYS:
                raise ConfigError(f"{key}: not read by {command} (it reads model.{', model.'.join(ENGINE_MODEL_KEYS)})")
    schema = OmegaConf.create({name: OmegaConf.structured(value) for name, value in sections.items()})
    OmegaConf.set_struct(schema, True)
    try:
        merged: Any = OmegaConf.merge(schema, OmegaConf.from_dotlist([a.lstrip("+") for a in dotlist]))
    except OmegaConfBaseException as exc:  # an unknown key or a value of the wrong type
        raise ConfigError(
            f"{exc.full_key}: {str(exc).splitlines()[0]} ({command} takes {', '.join(f'{n}.*' for n in sections)})"
        ) from exc
    return rest, {name: OmegaConf.to_object(merged[name]) for name in sections}


def pool_sections(base: ExecutionConfig | None = None) -> dict[str, Any]:
    """The test-pool commands' sections: `reward.execution` (from `base`, the command's defaults
    where they differ from training's) and `ray`."""
    return {"reward": _Reward(execution=base or ExecutionConfig()), "ray": RayJoin()}


def check_pool(execution: ExecutionConfig) -> ExecutionConfig:
    if execution.num_runners < 0 or execution.wall_s <= 0:
        raise ConfigError(
            f"reward.execution.num_runners={execution.num_runners}, reward.execution.wall_s={execution.wall_s}: "
            "must be >= 0 and > 0"
        )
    return execution


def pool_config(
    argv: list[str], command: str, base: ExecutionConfig | None = None
) -> tuple[list[str], ExecutionConfig, str]:
    """(the command's own arguments, the pool's ExecutionConfig, the Ray address) of `argv`."""
    rest, typed = parse(argv, command, pool_sections(base), FORMER_FLAGS)
    return rest, check_pool(typed["reward"].execution), typed["ray"].address


def parse_pool_command(
    parser: argparse.ArgumentParser, argv: list[str] | None, base: ExecutionConfig | None = None
) -> tuple[argparse.Namespace, ExecutionConfig, str]:
    """A test-pool command's (flags, pool, Ray address) from `argv` (None: the process's own):
    its own flags through `parser`, the overrides through pool_config, a bad one ending the
    command with one line."""
    parser.epilog = "and key=value overrides of reward.execution.* and ray.address, as in training (conf/overrides.py)"
    try:
        rest, execution, address = pool_config(sys.argv[1:] if argv is None else argv, parser.prog, base)
    except UserError as exc:
        fail(parser.prog, str(exc))
    return parser.parse_args(rest), execution, address
