"""Plug-ins by name: config keys take their accepted values from the registries."""

from __future__ import annotations

import dataclasses

import pytest

from actors import plugins
from conf import config
from conf.registry import Registry, RegistryError
from reward.kinds import REWARDS, RewardKind


def _with(**changes: dict) -> config.TrainConfig:
    cfg = config.TrainConfig()
    for section, values in changes.items():
        setattr(cfg, section, dataclasses.replace(getattr(cfg, section), **values))
    return cfg


@pytest.mark.parametrize(
    "section, key, registered",
    [
        ("reward", "kind", "'similarity'"),
        ("learner", "advantage", "'grpo', 'dr_grpo', 'rloo'"),
        ("learner", "loss", "'ppo_token'"),
        ("trainer", "weight_transport", "'collective', 'object_store'"),
    ],
)
def test_an_unknown_name_lists_the_registered_ones(section, key, registered):
    with pytest.raises(config.ConfigError, match=f"{section}.{key}='nope': accepted values are {registered}"):
        plugins.checked(_with(**{section: {key: "nope"}}))


def test_a_newly_registered_kind_is_accepted_without_touching_the_schema():
    @REWARDS.register("always_one")
    class AlwaysOne(RewardKind):
        def prepare(self, instance):
            return None

        def score(self, state, output):
            from reward import RewardResult

            return RewardResult(1.0)

    try:
        plugins.checked(_with(reward={"kind": "always_one"}))
    finally:
        REWARDS.unregister("always_one")
    with pytest.raises(config.ConfigError, match="reward.kind='always_one'"):
        plugins.checked(_with(reward={"kind": "always_one"}))


def test_registry_errors_name_the_key():
    registry: Registry[int] = Registry("widget", "x.widget")
    registry.register("a")(1)
    with pytest.raises(RegistryError, match="widget 'a' is registered twice"):
        registry.register("a")(2)
    with pytest.raises(RegistryError) as err:
        registry.get("b")
    assert str(err.value) == "x.widget='b': unknown widget; registered: a"


def test_a_gpu_run_needs_gpus_on_both_sides():
    with pytest.raises(config.ConfigError, match="rollout.num_gpus=8 and learner.num_gpus_per_rank=0.0"):
        config.validate(_with(rollout={"num_gpus": 8}))
