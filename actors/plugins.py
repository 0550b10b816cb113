"""The trainer's plug-ins, resolved by name where they are loaded: the config keys whose values
are registered names (conf/registry.py), checked once at start-up, before Ray starts.

conf/config.py validates the schema's static choices and imports no plug-in (conf is the
bottom layer, docs/architecture.md); the registries are filled by the modules that register
into them, which this module imports. A bad name is one line listing the registered names.
"""

from __future__ import annotations

from typing import Any

from actors.observe.loggers import LOGGERS, check_installed
from conf.config import ConfigError, TrainConfig, validate, value_at
from conf.config import load as load_schema
from conf.registry import Registry
from learner.objectives.advantages import ADVANTAGES
from learner.objectives.losses import LOSSES
from learner.transport import TRANSPORTS
from reward.kinds import REWARDS

REGISTRIES: tuple[Registry[Any], ...] = (REWARDS, ADVANTAGES, LOSSES, TRANSPORTS)


def check(cfg: TrainConfig) -> None:
    """Every plug-in the config names is registered; the loggers are known, each named once,
    their packages installed. Raises ConfigError naming the key and the accepted names."""
    for registry in REGISTRIES:
        if (value := value_at(cfg, registry.key)) not in registry:
            names = ", ".join(map(repr, registry.names()))
            raise ConfigError(f"{registry.key}={value!r}: accepted values are {names}")
    loggers = cfg.trainer.loggers
    for name in loggers:
        LOGGERS.get(name)  # an unknown name: one line listing the registered ones
    if len(set(loggers)) != len(loggers):
        raise ConfigError(f"trainer.loggers={loggers}: a logger is named twice")
    check_installed(loggers)


def checked(cfg: TrainConfig) -> TrainConfig:
    """The schema's own checks, then the plug-ins'."""
    validate(cfg)
    check(cfg)
    return cfg


def load(cfg: Any) -> TrainConfig:
    """Hydra's composed config -> the typed TrainConfig, its schema and its plug-ins checked."""
    typed = load_schema(cfg)
    check(typed)
    return typed
