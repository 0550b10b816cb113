"""GRPO math against values computed by hand and against autograd in float64."""

import math

import pytest
import torch

from learner.objectives import grpo


def test_advantages_by_hand():
    rewards = torch.tensor([1.0, 0.0, -1.0, 0.0, 0.5, 0.5, 0.5, 0.5], dtype=torch.float64)
    adv = grpo.advantages(rewards, group_size=4, eps=0.0)
    # Group 1: mean 0, unbiased std sqrt((1 + 0 + 1 + 0) / 3) = sqrt(2/3).
    s = math.sqrt(2 / 3)
    assert adv[:4].tolist() == pytest.approx([1 / s, 0.0, -1 / s, 0.0], abs=1e-12)
    # Group 2: all equal -> exactly zero, not 0/eps noise.
    assert adv[4:].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert grpo.zero_signal_groups(rewards, 4).tolist() == [False, True]


def test_advantages_eps_and_no_scaling():
    rewards = torch.tensor([1.0, 0.0], dtype=torch.float64)
    # mean 0.5, unbiased std sqrt(0.5)
    adv = grpo.advantages(rewards, 2, eps=0.1)
    assert adv.tolist() == pytest.approx([0.5 / (math.sqrt(0.5) + 0.1), -0.5 / (math.sqrt(0.5) + 0.1)])
    assert grpo.advantages(rewards, 2, scale_rewards="none").tolist() == [0.5, -0.5]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(group_size=1), "at least 2"),
        (dict(group_size=2, scale_rewards="batch"), "'group', 'none'"),
        (dict(group_size=3), "num_prompts"),
    ],
)
def test_advantages_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        grpo.advantages(torch.zeros(4), **kwargs)


def _inputs():
    lp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, -9.0]], dtype=torch.float64)
    old = torch.tensor([[-1.1, -2.5, -0.5], [-0.3, -2.0, -9.0]], dtype=torch.float64)
    ref = torch.tensor([[-1.0, -1.0, -1.0], [-0.5, -1.0, -9.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.float64)
    adv = torch.tensor([1.0, -2.0], dtype=torch.float64)
    return lp, old, ref, adv, mask


def _by_hand_token_losses(clip_eps, kl_coef):
    lp, old, ref, adv, mask = _inputs()
    out = []
    for b in range(2):
        row = []
        for t in range(3):
            rho = math.exp(lp[b, t] - old[b, t])
            a = adv[b].item()
            clipped = min(max(rho, 1 - clip_eps), 1 + clip_eps)
            d = (ref[b, t] - lp[b, t]).item()
            k3 = math.exp(d) - d - 1
            row.append(-min(rho * a, clipped * a) + kl_coef * k3)
        out.append(row)
    return out, mask


def test_policy_loss_seq_mean_token_mean_by_hand():
    lp, old, ref, adv, mask = _inputs()
    loss, stats = grpo.policy_loss(
        lp, old, ref, adv, mask, clip_eps=0.2, kl_coef=0.1, aggregation="seq_mean_token_mean"
    )
    l, _ = _by_hand_token_losses(0.2, 0.1)
    expected = ((l[0][0] + l[0][1] + l[0][2]) / 3 + (l[1][0] + l[1][1]) / 2) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    # Token (0, 1): rho = e^0.5 = 1.65 > 1.2 with A > 0 -> min picks the clipped branch. Token (1, 1):
    # rho = e^0.8 = 2.23 with A < 0 -> min picks rho * A (PPO never clips that side): 1 of 5 tokens.
    assert stats["clip_frac"].item() == pytest.approx(1 / 5)


def test_policy_loss_token_mean_by_hand():
    lp, old, ref, adv, mask = _inputs()
    loss, _ = grpo.policy_loss(lp, old, ref, adv, mask, clip_eps=0.2, kl_coef=0.0, aggregation="token_mean")
    l, _ = _by_hand_token_losses(0.2, 0.0)
    assert loss.item() == pytest.approx((sum(l[0]) + l[1][0] + l[1][1]) / 5, rel=1e-12)


def test_policy_loss_seq_mean_token_sum_norm_by_hand():
    lp, old, ref, adv, mask = _inputs()
    lp = lp.clone().requires_grad_(True)
    loss, _ = grpo.policy_loss(
        lp, old, ref, adv, mask, clip_eps=0.2, kl_coef=0.0, aggregation="seq_mean_token_sum_norm", norm_tokens=4.0
    )
    # Row 0 (A = 1): rho = e^0.1, e^0.5 (clipped to 1.2), 1 -> token losses -e^0.1, -1.2, -1.
    # Row 1 (A = -2): rho = 1, e^0.8 (the unclipped side) -> 2, 2 e^0.8; token 2 is masked.
    # Each row's token sum / 4 (the constant, not 3 or 2), then the mean over the 2 rows.
    row0 = -math.exp(0.1) - 1.2 - 1.0
    row1 = 2.0 + 2.0 * math.exp(0.8)
    assert loss.item() == pytest.approx((row0 / 4 + row1 / 4) / 2, rel=1e-12)
    loss.backward()
    # Length-unbiased: a token at rho = 1 gets -A / (num_seqs * 4) whatever its row's length (the
    # paper's aggregation would give row 0's token -1 / (2 * 3) and row 1's 2 / (2 * 2)).
    assert lp.grad[0, 2].item() == pytest.approx(-1.0 / 8, rel=1e-12)
    assert lp.grad[1, 0].item() == pytest.approx(2.0 / 8, rel=1e-12)
    assert lp.grad[0, 1] == 0  # clipped
    assert lp.grad[1, 2] == 0  # masked


def test_asymmetric_clip_by_hand():
    lp, old, ref, adv, mask = _inputs()
    # Unset ranges are clip_eps: the symmetric loss, bit for bit (backward compatibility).
    sym, _ = grpo.policy_loss(lp, old, ref, adv, mask, clip_eps=0.2, kl_coef=0.0, aggregation="token_mean")
    same, _ = grpo.policy_loss(
        lp,
        old,
        ref,
        adv,
        mask,
        clip_eps=0.3,
        kl_coef=0.0,
        aggregation="token_mean",
        clip_eps_low=0.2,
        clip_eps_high=0.2,
    )
    assert torch.equal(sym, same)
    # clip-higher 0.7: token (0, 1)'s rho = e^0.5 = 1.649 < 1.7 is no longer clipped; the other
    # tokens do not change (row 1's rho = e^0.8 has A < 0, where only the lower range can bite).
    loss, stats = grpo.policy_loss(
        lp, old, ref, adv, mask, clip_eps=0.2, kl_coef=0.0, aggregation="token_mean", clip_eps_high=0.7
    )
    l, _ = _by_hand_token_losses(0.2, 0.0)
    assert loss.item() == pytest.approx((l[0][0] - math.exp(0.5) + l[0][2] + l[1][0] + l[1][1]) / 5, rel=1e-12)
    assert stats["clip_frac"].item() == 0.0
    # A lower range bites where A < 0: clip_eps_low 0.1 on ratios 0.5 and 0.95 with A = -1.
    lp1 = torch.log(torch.tensor([[0.5, 0.95]], dtype=torch.float64))
    zero = torch.zeros_like(lp1)
    low, stats = grpo.policy_loss(
        lp1,
        zero,
        None,
        torch.tensor([-1.0], dtype=torch.float64),
        torch.ones_like(lp1),
        clip_eps=0.3,
        kl_coef=0.0,
        aggregation="seq_mean_token_mean",
        clip_eps_low=0.1,
    )
    # -min(-0.5, -0.9) = 0.9 (clipped at 1 - 0.1); -min(-0.95, -0.95) = 0.95.
    assert low.item() == pytest.approx((0.9 + 0.95) / 2, rel=1e-12)
    assert stats["clip_frac"].item() == pytest.approx(1 / 2)


def test_policy_loss_gradient_matches_autograd_reference():
    lp, old, ref, adv, mask = _inputs()
    lp = lp.clone().requires_grad_(True)
    loss, _ = grpo.policy_loss(lp, old, ref, adv, mask, clip_eps=0.2, kl_coef=0.1, aggregation="token_mean")
    loss.backward()
    # Reference written independently, straight from the formula.
    lp2 = lp.detach().clone().requires_grad_(True)
    rho = torch.exp(lp2 - old)
    a = adv[:, None]
    obj = torch.minimum(rho * a, rho.clamp(0.8, 1.2) * a)
    d = ref - lp2
    ref_loss = ((-obj + 0.1 * (torch.exp(d) - d - 1)) * mask).sum() / mask.sum()
    ref_loss.backward()
    assert torch.allclose(lp.grad, lp2.grad, atol=1e-14)
    # A clipped token's policy gradient is zero: token (0, 1) only feels the KL term.
    d01 = (ref[0, 1] - lp[0, 1]).item()
    assert lp.grad[0, 1].item() == pytest.approx(0.1 * (1 - math.exp(d01)) / 5, rel=1e-12)
    assert lp.grad[1, 2] == 0  # masked


def test_micro_batches_sum_to_the_full_batch_gradient():
    torch.manual_seed(0)
    b, t = 6, 5
    lp = torch.randn(b, t, dtype=torch.float64, requires_grad=True)
    old = lp.detach() + 0.1 * torch.randn(b, t, dtype=torch.float64)
    mask = (torch.rand(b, t) > 0.3).double()
    mask[2] = 0  # a row with no completion token is left out of the sequence mean
    adv = torch.randn(b, dtype=torch.float64)
    for agg in grpo.AGGREGATIONS:
        full, _ = grpo.policy_loss(
            lp, old, None, adv, mask, clip_eps=0.2, kl_coef=0.0, aggregation=agg, norm_tokens=float(t)
        )
        (g_full,) = torch.autograd.grad(full, lp)
        num_seqs, num_tokens = float((mask.sum(1) > 0).sum()), float(mask.sum())
        total = 0
        for rows in ([0, 1], [2, 3, 4], [5]):
            part, _ = grpo.policy_loss(
                lp[rows],
                old[rows],
                None,
                adv[rows],
                mask[rows],
                clip_eps=0.2,
                kl_coef=0.0,
                aggregation=agg,
                num_seqs=num_seqs,
                num_tokens=num_tokens,
                norm_tokens=float(t),
            )
            total = total + part
        (g_parts,) = torch.autograd.grad(total, lp)
        assert torch.allclose(full, total, atol=1e-14)
        assert torch.allclose(g_full, g_parts, atol=1e-14)


def test_policy_loss_errors():
    lp, old, ref, adv, mask = _inputs()
    with pytest.raises(ValueError, match="seq_mean_token_mean"):
        grpo.policy_loss(lp, old, ref, adv, mask, clip_eps=0.2, kl_coef=0.0, aggregation="sum")
    with pytest.raises(ValueError, match="logprobs_ref"):
        grpo.policy_loss(lp, old, None, adv, mask, clip_eps=0.2, kl_coef=0.1, aggregation="token_mean")
    with pytest.raises(ValueError, match="norm_tokens=None: seq_mean_token_sum_norm"):
        grpo.policy_loss(lp, old, ref, adv, mask, clip_eps=0.2, kl_coef=0.0, aggregation="seq_mean_token_sum_norm")
