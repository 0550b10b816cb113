"""Training's keys on the commands that start a test-runner pool outside training.

`python -m reward.execute`, `data.validate`, `data.inject` and `actors.replay` run tests on the
pool (or one Runner) that `reward.kind=tests` trains with, so they take its settings under
training's own names, as `key=value` overrides beside their flags:

    python -m reward.execute --instances demo --predictions P.jsonl --out DIR \\
        reward.execution.repos=[/clones/requests] reward.execution.num_runners=4 ray.address=auto

Accepted: every `reward.execution.*` key (conf/config.py ExecutionConfig: runners, their CPUs,
the cache, the clones, the sandbox's limits) and `ray.address`. The flags these commands had for
the same things (`--git`, `--workers`, `--wall-s`, `--cache-dir`, `--ray-address`) are refused
with the new key in one line. Lists as in training: `reward.execution.repos=[A,owner/name=B]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from conf.config import ConfigError, ExecutionConfig, RayConfig

# A dotted schema key's override (`reward.execution.wall_s=30`): what is not a flag or its value.
_OVERRIDE = re.compile(r"^\+?[A-Za-z_]\w*(\.\w+)+=")

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


def pool_config(
    argv: list[str], command: str, base: ExecutionConfig | None = None
) -> tuple[list[str], ExecutionConfig, str]:
    """(the command's own arguments, the pool's ExecutionConfig, the Ray address) of `argv`.
    `base`: the command's defaults where they differ from training's (data.inject's short runs)."""
    refuse_former(argv, FORMER_FLAGS, command)
    rest, dotlist = split(argv)
    schema = OmegaConf.structured(PoolOverrides(reward=_Reward(execution=base or ExecutionConfig())))
    try:
        merged = OmegaConf.merge(schema, OmegaConf.from_dotlist([a.lstrip("+") for a in dotlist]))
    except OmegaConfBaseException as exc:  # an unknown key or a value of the wrong type
        raise ConfigError(
            f"{exc.full_key}: {str(exc).splitlines()[0]} ({command} takes reward.execution.* and ray.address)"
        ) from exc
    typed = OmegaConf.to_object(merged)
    assert isinstance(typed, PoolOverrides)
    execution = typed.reward.execution
    if execution.num_runners < 0 or execution.wall_s <= 0:
        raise ConfigError(
            f"reward.execution.num_runners={execution.num_runners}, reward.execution.wall_s={execution.wall_s}: "
            "must be >= 0 and > 0"
        )
    return rest, execution, typed.ray.address
