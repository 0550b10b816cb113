"""Advantage estimators and policy losses by name: values by hand, flat groups, the registry's errors."""

from __future__ import annotations

import pytest
import torch

from conf.config import LearnerConfig
from conf.registry import RegistryError
from learner.objectives import grpo
from learner.objectives.advantages import ADVANTAGES
from learner.objectives.losses import LOSSES, LossInputs

CFG = LearnerConfig(adv_eps=0.0)
# Two groups of 4: rewards with a spread, and a flat group (no signal).
REWARDS = torch.tensor([1.0, 0.0, 0.0, -1.0, 0.5, 0.5, 0.5, 0.5], dtype=torch.float64)


def test_grpo_divides_by_the_group_std():
    # mean 0, unbiased std sqrt(2/3): (r - 0) / 0.8165
    got = ADVANTAGES.get("grpo")(REWARDS, 4, CFG)
    std = (2 / 3) ** 0.5
    assert torch.allclose(got, torch.tensor([1 / std, 0, 0, -1 / std, 0, 0, 0, 0], dtype=torch.float64))


def test_dr_grpo_only_centres():
    got = ADVANTAGES.get("dr_grpo")(REWARDS, 4, CFG)
    assert got.tolist() == [1.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0]


def test_rloo_subtracts_the_mean_of_the_others():
    got = ADVANTAGES.get("rloo")(REWARDS, 4, CFG)
    # sample 0: 1 - mean(0, 0, -1) = 4/3; sample 1: 0 - mean(1, 0, -1) = 0; sample 3: -1 - mean(1, 0, 0) = -4/3
    assert torch.allclose(got[:4], torch.tensor([4 / 3, 0.0, 0.0, -4 / 3], dtype=torch.float64))
    assert got[4:].tolist() == [0.0] * 4  # a flat group is exactly 0, not rounding noise
    leave_one_out = torch.stack(
        [REWARDS[:4][i] - torch.cat([REWARDS[:i], REWARDS[i + 1 : 4]]).mean() for i in range(4)]
    )
    assert torch.allclose(got[:4], leave_one_out)


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo"])
def test_every_estimator_is_zero_on_flat_groups_and_rejects_a_ragged_batch(name):
    assert ADVANTAGES.get(name)(torch.ones(8, dtype=torch.float64), 4, CFG).tolist() == [0.0] * 8
    with pytest.raises(ValueError, match="group_size=4"):
        ADVANTAGES.get(name)(torch.ones(6), 4, CFG)


def test_ppo_token_is_the_grpo_policy_loss():
    g = torch.Generator().manual_seed(0)
    lp, old = torch.randn(3, 5, generator=g), torch.randn(3, 5, generator=g)
    adv, mask = torch.randn(3, generator=g), (torch.rand(3, 5, generator=g) > 0.3).float()
    cfg = LearnerConfig(clip_eps=0.2, aggregation="token_mean")
    inputs = LossInputs(lp, old, None, adv, mask, num_seqs=3.0, num_tokens=10.0, max_new_tokens=8)
    got, _ = LOSSES.get("ppo_token")(inputs, cfg)
    want, _ = grpo.policy_loss(
        lp, old, None, adv, mask, clip_eps=0.2, kl_coef=0.0, aggregation="token_mean", num_seqs=3.0, num_tokens=10.0
    )
    assert torch.equal(got, want)


@pytest.mark.parametrize("name", ["ppo_token", "gspo"])
def test_registered_losses_take_the_clip_ranges_from_the_config(name):
    # Ratios e^0.5 where A > 0 (only an upper range can clip them) and e^-0.5 where A < 0 (only a
    # lower one): a wide upper range changes the loss, and so does a wide lower one, differently.
    lp = torch.randn(4, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    old = lp - torch.tensor([0.5, -0.5, 0.5, -0.5], dtype=torch.float64)[:, None]
    adv, mask = torch.tensor([1.0, -1.0, 2.0, -0.5], dtype=torch.float64), torch.ones(4, 6, dtype=torch.float64)
    inputs = LossInputs(lp, old, None, adv, mask, num_seqs=4.0, num_tokens=24.0, max_new_tokens=8)
    loss = LOSSES.get(name)
    sym, _ = loss(inputs, LearnerConfig(clip_eps=0.01))
    unset, _ = loss(inputs, LearnerConfig(clip_eps=0.01, clip_eps_low=0.01, clip_eps_high=0.01))
    high, _ = loss(inputs, LearnerConfig(clip_eps=0.01, clip_eps_high=5.0))
    low, _ = loss(inputs, LearnerConfig(clip_eps=0.01, clip_eps_low=0.99))
    assert torch.equal(sym, unset)
    assert not torch.isclose(sym, high) and not torch.isclose(sym, low) and not torch.isclose(high, low)


def test_unknown_and_duplicate_names_are_one_line_errors():
    with pytest.raises(
        RegistryError, match=r"learner.advantage='gae': unknown advantage estimator; registered: grpo, dr_grpo, rloo"
    ):
        ADVANTAGES.get("gae")
    with pytest.raises(RegistryError, match="registered twice"):
        ADVANTAGES.register("grpo")(lambda r, g, c: r)
