"""The rollout/learner mismatch metric and truncated importance sampling, against hand-computed
values, autograd and micro-batch splits."""

import math

import pytest
import torch

from conf.config import LearnerConfig
from learner.objectives import mismatch
from learner.objectives.losses import LOSSES, LossInputs

NAN = float("nan")


def _inputs():
    # Learner logprobs (before the update), the engine's (NaN: an oracle token), the mask.
    lp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, -9.0]], dtype=torch.float64)
    engine = torch.tensor([[-1.5, -1.9, NAN], [-0.3, -2.2, -1.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.float64)
    return lp, engine, mask


def test_logprob_diff_by_hand():
    lp, engine, mask = _inputs()
    total, count, top = mismatch.logprob_diff(lp, engine, mask)
    # Known and unmasked: |0.5|, |0.1|, |0|, |1.0|; the NaN token and the masked (8.0) are left out.
    assert total.item() == pytest.approx(1.6)
    assert count.item() == 4
    assert top.item() == pytest.approx(1.0)


def test_token_and_sequence_weights_by_hand():
    lp, engine, mask = _inputs()
    logw = mismatch.tis_log_weights(lp, engine)
    assert logw[0].tolist() == pytest.approx([0.5, -0.1, 0.0])  # the NaN token: weight 1
    w = mismatch.token_weights(logw, cap=1.5)
    assert w[0].tolist() == pytest.approx([1.5, math.exp(-0.1), 1.0])  # e^0.5 = 1.65 capped
    assert w[1, :2].tolist() == pytest.approx([1.0, 1.5])  # e^1.0 capped
    s = mismatch.sequence_weights(logw, mask, cap=1.5)
    # Row 0: mean(0.5, -0.1, 0) = 0.1333; row 1: mean(0, 1.0) = 0.5 -> e^0.5 = 1.65, capped.
    assert s.tolist() == pytest.approx([math.exp(0.4 / 3), 1.5])


def _loss(name, lp, old, adv, mask, cap, logw, **norms):
    cfg = LearnerConfig(tis_cap=cap)
    defaults = dict(num_seqs=None, num_tokens=None, max_new_tokens=3)
    return LOSSES.get(name)(LossInputs(lp, old, None, adv, mask, **(defaults | norms), tis_log_weights=logw), cfg)


def test_ppo_token_tis_loss_and_gradient_by_hand():
    lp, engine, mask = _inputs()
    lp = lp.clone().requires_grad_(True)
    old = lp.detach()  # with TIS the ratio is against the learner's own logprobs: rho = 1
    logw = mismatch.tis_log_weights(old, engine)
    adv = torch.tensor([1.0, -2.0], dtype=torch.float64)
    loss, stats = _loss("ppo_token", lp, old, adv, mask, 1.5, logw)
    w = [[1.5, math.exp(-0.1), 1.0], [1.0, 1.5]]
    # seq_mean_token_mean: row 0 mean(-1 * w), row 1 mean(+2 * w), halved.
    want = (-sum(w[0]) / 3 + 2 * sum(w[1]) / 2) / 2
    assert loss.item() == pytest.approx(want, rel=1e-12)
    assert stats["clip_frac"].item() == 0.0  # rho = 1 never clips
    loss.backward()
    # d/dlp of -A w rho / |y| / num_seqs, with rho = 1 and w detached.
    assert lp.grad[0].tolist() == pytest.approx([-wt / 3 / 2 for wt in w[0]], rel=1e-12)
    assert lp.grad[1, :2].tolist() == pytest.approx([2 * wt / 2 / 2 for wt in w[1]], rel=1e-12)


def test_gspo_tis_loss_by_hand():
    lp, engine, mask = _inputs()
    old = lp.clone()
    logw = mismatch.tis_log_weights(old, engine)
    adv = torch.tensor([1.0, -2.0], dtype=torch.float64)
    loss, _ = _loss("gspo", lp, old, adv, mask, 1.5, logw)
    # s_i = 1; l_i = -A_i w_i; w = (e^(0.4/3), 1.5).
    assert loss.item() == pytest.approx((-math.exp(0.4 / 3) + 2 * 1.5) / 2, rel=1e-12)


def test_tis_off_ignores_the_weights():
    lp, engine, mask = _inputs()
    adv = torch.tensor([1.0, -2.0], dtype=torch.float64)
    logw = mismatch.tis_log_weights(lp, engine)
    for name in ("ppo_token", "gspo"):
        on, _ = _loss(name, lp, lp, adv, mask, None, logw)
        off, _ = _loss(name, lp, lp, adv, mask, None, None)
        assert on.item() == off.item()


@pytest.mark.parametrize("name", ["ppo_token", "gspo"])
@pytest.mark.parametrize("aggregation", ["seq_mean_token_mean", "token_mean"])
def test_tis_micro_batches_sum_to_the_full_batch_gradient(name, aggregation):
    torch.manual_seed(0)
    b, t = 6, 5
    lp = torch.randn(b, t, dtype=torch.float64, requires_grad=True)
    engine = lp.detach() + 0.3 * torch.randn(b, t, dtype=torch.float64)
    engine[1, 2] = NAN
    mask = (torch.rand(b, t) > 0.3).double()
    mask[2] = 0
    adv = torch.randn(b, dtype=torch.float64)
    cfg = LearnerConfig(tis_cap=1.2, aggregation=aggregation)
    loss_fn = LOSSES.get(name)
    norms = dict(num_seqs=float((mask.sum(1) > 0).sum()), num_tokens=float(mask.sum()), max_new_tokens=t)

    def run(rows):
        old = lp.detach()[rows]
        logw = mismatch.tis_log_weights(old, engine[rows])
        return loss_fn(LossInputs(lp[rows], old, None, adv[rows], mask[rows], **norms, tis_log_weights=logw), cfg)[0]

    full = run(list(range(b)))
    (g_full,) = torch.autograd.grad(full, lp)
    total = run([0, 1]) + run([2, 3, 4]) + run([5])
    (g_parts,) = torch.autograd.grad(total, lp)
    assert torch.allclose(full, total, atol=1e-14)
    assert torch.allclose(g_full, g_parts, atol=1e-14)
    assert g_full.abs().sum() > 0
