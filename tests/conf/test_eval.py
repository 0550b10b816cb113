"""The evaluation's keys (conf/eval.py) are the training schema's: the same override means the
same value in both, and a former flat name is refused with its new one."""

from __future__ import annotations

import dataclasses

import pytest
from hydra import compose, initialize

from conf import config
from conf.eval import NOT_READ, RENAMED, parse_args

config.register()

# The same things, named as training names them; a clone list with a named mirror.
SHARED = [
    "rollout.num_actors=2",
    "rollout.num_gpus=0",
    "rollout.max_new_tokens=64",
    "rollout.temperature=0.7",
    "group_size=4",
    "model.name=tiny",
    "model.dtype=float32",
    "reward.execution.repos=['psf/flask=/m/flask',/clones/requests]",  # quoted: an '=' inside, as Hydra wants
    "reward.execution.wall_s=30",
    "reward.max_pair_seconds=5",
]


def test_the_training_overrides_give_the_same_values_to_an_evaluation():
    with initialize(config_path="../../conf", version_base=None):
        train = config.load(compose("config", overrides=SHARED))
    ev = parse_args(SHARED)
    assert (ev.rollout.num_actors, ev.group_size, ev.model.name) == (2, 4, "tiny")  # the overrides took
    assert ev.reward.execution.repos == ["psf/flask=/m/flask", "/clones/requests"]
    # Whole sections equal: every default of the engines, the model and the pool is training's too.
    assert ev.rollout == train.rollout and ev.model == train.model
    # but the laptop preset's half CPU per test runner (conf/cluster/local.yaml): an evaluation
    # composes no presets
    assert ev.reward.execution == dataclasses.replace(train.reward.execution, num_cpus=1.0)
    assert (ev.group_size, ev.reward.max_pair_seconds) == (train.group_size, train.reward.max_pair_seconds)


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_a_former_name_is_refused_with_its_new_one(old):
    with pytest.raises(config.ConfigError) as err:
        parse_args(["model.name=tiny", f"{old}=1"])
    message = str(err.value)
    assert f"`{old}` is now `{RENAMED[old]}`" in message and "\n" not in message
    assert RENAMED[old] in config.schema_keys() or RENAMED[old] in ("predictions_name",)


@pytest.mark.parametrize("key", sorted(NOT_READ))
def test_a_training_key_an_evaluation_does_not_read_is_refused(key):
    with pytest.raises(config.ConfigError, match=f"{key}: not read by an evaluation"):
        parse_args([f"{key}=1"])
