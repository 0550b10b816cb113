"""DAPO's overlong handling: the soft length penalty by hand, the filter, and their config."""

import dataclasses

import pytest
import torch

from actors.driver.generation import Group, overlong_penalty, train_samples
from actors.rollout.actor import Completion
from conf import config
from learner.batch import TrainSample
from learner.objectives.overlong import keep_untruncated, length_penalty


def test_length_penalty_by_hand():
    # L_max 10, buffer 4: no penalty up to 6 tokens, then (6 - |y|) / 4 down to -1 at 10; -1 beyond.
    lengths = torch.tensor([0, 5, 6, 7, 8, 9, 10, 12])
    got = length_penalty(lengths, max_new_tokens=10, buffer=4)
    assert got.tolist() == [0.0, 0.0, 0.0, -0.25, -0.5, -0.75, -1.0, -1.0]
    # A buffer as long as the limit ramps over every length.
    assert length_penalty(torch.tensor([0, 5, 10]), max_new_tokens=10, buffer=10).tolist() == [0.0, -0.5, -1.0]
    with pytest.raises(ValueError, match="buffer=0"):
        length_penalty(lengths, max_new_tokens=10, buffer=0)


def test_filter_keeps_the_samples_not_cut_at_the_limit():
    samples = [
        TrainSample([1], [2, 3], None, 1.0),
        TrainSample([1], [2, 3, 4], None, -1.0, truncated=True),
        TrainSample([1], [5], None, 0.5),
    ]
    assert keep_untruncated(samples) == [samples[0], samples[2]]


def _groups() -> list[Group]:
    item = type("Item", (), {"prompt_ids": [9]})()  # train_samples reads only prompt_ids
    completions = [
        Completion([1] * 3, [-0.1] * 3, "", "stop"),
        Completion([1] * 8, [-0.1] * 8, "", "length"),
        Completion([1] * 7, [-0.1] * 7, "", "stop"),
        Completion([1] * 12, [], "", "oracle"),  # an injected answer may exceed the limit
    ]
    return [Group("r0", item, completions, policy_version=0, actor_id="a")]  # type: ignore[arg-type]


def test_the_step_sees_the_penalty_only_when_soft_and_marks_truncated_samples():
    cfg = config.TrainConfig()
    cfg.rollout = dataclasses.replace(cfg.rollout, max_new_tokens=8)
    cfg.learner = dataclasses.replace(cfg.learner, overlong_buffer=4)
    assert overlong_penalty(_groups(), cfg).tolist() == [0.0] * 4  # the default, "none"
    cfg.learner = dataclasses.replace(cfg.learner, overlong="soft")
    # Lengths 3, 8, 7 against a ramp from 4 tokens: 0, -1, -0.75; the oracle answer (12 tokens,
    # -1 by the length rule) is not the policy's and gets no penalty.
    assert overlong_penalty(_groups(), cfg).tolist() == [0.0, -1.0, -0.75, 0.0]
    samples = train_samples(_groups(), [0.0] * 4)
    assert [s.truncated for s in samples] == [False, True, False, False]


def test_config_names_the_mode_and_checks_the_buffer():
    cfg = config.TrainConfig()
    cfg.learner = dataclasses.replace(cfg.learner, overlong="clip")
    with pytest.raises(
        config.ConfigError, match="learner.overlong='clip': accepted values are 'none', 'filter', 'soft'"
    ):
        config.validate(cfg)
    cfg.learner = dataclasses.replace(cfg.learner, overlong="soft", overlong_buffer=cfg.rollout.max_new_tokens + 1)
    with pytest.raises(config.ConfigError, match="learner.overlong_buffer=513"):
        config.validate(cfg)
