"""GSPO's sequence-level loss against values computed by hand, autograd and micro-batch splits."""

import math

import pytest
import torch

from conf.config import LearnerConfig
from learner.objectives import gspo
from learner.objectives.losses import LOSSES, LossInputs


def _inputs():
    # Row 0: log-ratios 0.1, 0.5, 0 (mean 0.2); row 1: 0, 0.8 and a masked token (mean 0.4).
    lp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, -9.0]], dtype=torch.float64)
    old = torch.tensor([[-1.1, -2.5, -0.5], [-0.3, -2.0, -5.0]], dtype=torch.float64)
    ref = torch.tensor([[-1.0, -1.0, -1.0], [-0.5, -1.0, -9.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.float64)
    adv = torch.tensor([1.0, -2.0], dtype=torch.float64)
    return lp, old, ref, adv, mask


def test_sequence_ratio_clip_and_gradient_by_hand():
    lp, old, ref, adv, mask = _inputs()
    lp = lp.clone().requires_grad_(True)
    loss, stats = gspo.policy_loss(lp, old, ref, adv, mask, clip_eps=0.2, kl_coef=0.0)
    # Row 0: s = e^0.2 = 1.221 > 1.2 with A = 1 -> clipped: l = -1.2. Row 1: s = e^0.4 = 1.492
    # with A = -2 -> min(-2 s, -2.4) = -2 s (the unclipped side): l = 2 e^0.4. Mean of the two.
    assert loss.item() == pytest.approx((-1.2 + 2 * math.exp(0.4)) / 2, rel=1e-12)
    loss.backward()
    # The clipped row gets no gradient; each token of row 1 the same -A s / |y| / num_seqs,
    # = 2 e^0.4 / 2 / 2 (a per-token ratio would give each token its own weight).
    assert lp.grad[0].tolist() == [0.0, 0.0, 0.0]
    assert lp.grad[1, 0].item() == pytest.approx(math.exp(0.4) / 2, rel=1e-12)
    assert lp.grad[1, 1].item() == pytest.approx(math.exp(0.4) / 2, rel=1e-12)
    assert lp.grad[1, 2] == 0  # masked
    # Stats per token: row 0's 3 tokens are clipped out of 5; each token carries its row's ratio.
    assert stats["clip_frac"].item() == pytest.approx(3 / 5)
    assert stats["ratio_mean"].item() == pytest.approx((3 * math.exp(0.2) + 2 * math.exp(0.4)) / 5)


def test_wider_clip_and_the_kl_term_by_hand():
    lp, old, ref, adv, mask = _inputs()
    loss, stats = gspo.policy_loss(lp, old, ref, adv, mask, clip_eps=0.3, kl_coef=0.1)
    # clip_eps 0.3: row 0's s = e^0.2 < 1.3 is no longer clipped: l = -e^0.2.
    kl = []
    for b, n in ((0, 3), (1, 2)):
        d = [(ref[b, t] - lp[b, t]).item() for t in range(n)]
        kl.append(sum(math.exp(x) - x - 1 for x in d) / n)  # the sequence's token mean of k3
    want = ((-math.exp(0.2) + 0.1 * kl[0]) + (2 * math.exp(0.4) + 0.1 * kl[1])) / 2
    assert loss.item() == pytest.approx(want, rel=1e-12)
    assert stats["clip_frac"].item() == 0.0


def test_asymmetric_clip_by_hand():
    lp, old, ref, adv, mask = _inputs()
    # Upper range 0.25: row 0's s = e^0.2 = 1.221 < 1.25 is no longer clipped; row 1 (A < 0) is
    # unclipped either way. Lower range 0.3: row 1 would clip below 0.7 only, and s > 1.
    loss, stats = gspo.policy_loss(lp, old, ref, adv, mask, clip_eps=0.2, kl_coef=0.0, clip_eps_high=0.25)
    assert loss.item() == pytest.approx((-math.exp(0.2) + 2 * math.exp(0.4)) / 2, rel=1e-12)
    assert stats["clip_frac"].item() == 0.0
    # Flip row 1's ratio below 1 (s = e^-0.4 = 0.670) with A = -2: clip_eps_low 0.2 bites at 0.8,
    # l = -min(-2 s, -1.6) = 1.6; clip_eps_low 0.4 does not (0.6 < s): l = 2 e^-0.4.
    flipped = old.clone()
    flipped[1, :2] = lp[1, :2] + torch.tensor([0.0, 0.8], dtype=torch.float64)
    for low, row1 in ((0.2, 1.6), (0.4, 2 * math.exp(-0.4))):
        loss, _ = gspo.policy_loss(
            lp, flipped, ref, adv, mask, clip_eps=0.2, kl_coef=0.0, clip_eps_low=low, clip_eps_high=0.25
        )
        assert loss.item() == pytest.approx((-math.exp(0.2) + row1) / 2, rel=1e-12)


def test_micro_batches_sum_to_the_full_batch_gradient():
    torch.manual_seed(0)
    b, t = 6, 5
    lp = torch.randn(b, t, dtype=torch.float64, requires_grad=True)
    old = lp.detach() + 0.1 * torch.randn(b, t, dtype=torch.float64)
    mask = (torch.rand(b, t) > 0.3).double()
    mask[2] = 0  # a row with no completion token is left out of the mean over sequences
    adv = torch.randn(b, dtype=torch.float64)
    full, _ = gspo.policy_loss(lp, old, None, adv, mask, clip_eps=0.05, kl_coef=0.0)
    (g_full,) = torch.autograd.grad(full, lp)
    num_seqs = float((mask.sum(1) > 0).sum())
    total = 0
    for rows in ([0, 1], [2, 3, 4], [5]):
        part, _ = gspo.policy_loss(
            lp[rows], old[rows], None, adv[rows], mask[rows], clip_eps=0.05, kl_coef=0.0, num_seqs=num_seqs
        )
        total = total + part
    (g_parts,) = torch.autograd.grad(total, lp)
    assert torch.allclose(full, total, atol=1e-14)
    assert torch.allclose(g_full, g_parts, atol=1e-14)
    assert g_full.abs().max() > 1e-3  # a real gradient
    # The empty row adds nothing, though its ratio exp(0) = 1 times its advantage is not 0.
    kept = [0, 1, 3, 4, 5]
    without, _ = gspo.policy_loss(lp[kept], old[kept], None, adv[kept], mask[kept], clip_eps=0.05, kl_coef=0.0)
    assert torch.allclose(full, without, atol=1e-14)


def test_registered_as_learner_loss_gspo_and_ignores_the_aggregation():
    lp, old, ref, adv, mask = _inputs()
    want, _ = gspo.policy_loss(lp, old, None, adv, mask, clip_eps=0.2, kl_coef=0.0, num_seqs=4.0)
    for aggregation in ("seq_mean_token_mean", "token_mean"):
        cfg = LearnerConfig(clip_eps=0.2, aggregation=aggregation, loss="gspo")
        inputs = LossInputs(lp, old, None, adv, mask, num_seqs=4.0, num_tokens=10.0, max_new_tokens=8)
        got, _ = LOSSES.get("gspo")(inputs, cfg)
        assert torch.equal(got, want)


def test_errors():
    lp, old, ref, adv, mask = _inputs()
    with pytest.raises(ValueError, match="one per sequence"):
        gspo.policy_loss(lp, old, ref, adv[:, None].expand(2, 3), mask, clip_eps=0.2, kl_coef=0.0)
    with pytest.raises(ValueError, match="logprobs_ref"):
        gspo.policy_loss(lp, old, None, adv, mask, clip_eps=0.2, kl_coef=0.1)
