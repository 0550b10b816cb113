"""The shared-prefix path gives the per-sample path's loss and gradient (learner/shared_prefix.py).

One learner step is replayed here without DeepSpeed, exactly as a rank does it (learner/worker.py's
`logprobs_of`, `loss_inputs` and the registered loss, summed over every rank's micro-batches),
once with micro-batches of samples (`micro_batch_size`) and once with shared-prefix segments
(`max_tokens_per_micro_batch`). The batch has what the real ones have: GRPO groups sharing a
prompt (two completions alike at their start, one duplicated), an agent group with loss masks,
truncated samples, samples with and without behaviour logprobs, and a sample alone.

float64 with `sdpa`: agreement to 1e-10 of the largest gradient entry. Transformers' RMSNorm
computes in float32 whatever the model's dtype, and the two paths add the rows' gradients
before (shared) and after (per sample) it, which is float32 round-off (~1e-8 measured); the
float64 model here gets an RMSNorm that keeps its dtype. The `eager` attention also takes its
softmax in float32, so it is compared at float32 round-off, as is the stock float32 model.
"""

from __future__ import annotations

import types
from dataclasses import replace

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from conf.config import LearnerConfig
from learner.batch import TrainSample, shard
from learner.objectives.advantages import ADVANTAGES
from learner.objectives.losses import LOSSES
from learner.objectives.overlong import keep_untruncated, length_penalty
from learner.shared_prefix import shared_prefix_logprobs, unsupported_reason
from learner.worker import logprobs_of, loss_inputs, micro_batch_tensors

VOCAB = 61
MAX_NEW = 9  # rollout.max_new_tokens of these samples (Dr. GRPO's constant, DAPO's overlong)


def _rms_norm_keeping_dtype(self: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def tiny_llama(dtype: torch.dtype, attn: str = "sdpa", seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        attn_implementation=attn,
    )
    model = LlamaForCausalLM(cfg).to(dtype)
    if dtype == torch.float64:
        for mod in model.modules():
            if type(mod).__name__ == "LlamaRMSNorm":
                mod.forward = types.MethodType(_rms_norm_keeping_dtype, mod)
    return model


def make_groups(seed: int = 0) -> list[list[TrainSample]]:
    """GRPO groups and an agent group; advantages are filled in by `with_advantages`."""
    g = torch.Generator().manual_seed(seed)

    def toks(n: int) -> list[int]:
        return torch.randint(3, VOCAB, (n,), generator=g).tolist()

    def old(n: int) -> list[float]:
        return (-2.0 - torch.rand(n, generator=g, dtype=torch.float64)).tolist()

    p1, p2, p3, p4 = toks(11), toks(8), toks(10), toks(6)
    start = toks(3)
    c = [start + toks(4), start + toks(6), toks(MAX_NEW), toks(2)]
    grpo_a = [TrainSample(p1, ci, old(len(ci)) if i % 2 == 0 else None, 0.0) for i, ci in enumerate(c)]
    grpo_a[2] = replace(grpo_a[2], truncated=True)  # cut at the limit
    grpo_a.append(replace(grpo_a[0]))  # the same completion twice
    c2 = [toks(n) for n in (5, 9, 3)]
    grpo_b = [TrainSample(p2, ci, old(len(ci)), 0.0, truncated=len(ci) == MAX_NEW) for ci in c2]
    # An agent episode: sampled turns (1) and observations between them (0).
    agent = []
    for n_obs in (2, 4, 3):
        turn1, obs, turn2 = toks(3), toks(n_obs), toks(2)
        mask = [1.0] * 3 + [0.0] * n_obs + [1.0] * 2
        agent.append(TrainSample(p3, turn1 + obs + turn2, old(len(mask)), 0.0, loss_mask=mask))
    alone = [TrainSample(p4, toks(4), None, 0.0)]
    return [grpo_a, grpo_b, agent, alone]


def with_advantages(groups: list[list[TrainSample]], cfg: LearnerConfig) -> list[TrainSample]:
    """Each group's advantages from rewards by the configured estimator (and DAPO's soft penalty)."""
    g = torch.Generator().manual_seed(7)
    out = []
    for group in groups:
        rewards = torch.randn(len(group), generator=g, dtype=torch.float64)
        if cfg.overlong == "soft":
            lengths = torch.tensor([len(s.completion_ids) for s in group])
            rewards = rewards + length_penalty(lengths, max_new_tokens=MAX_NEW, buffer=cfg.overlong_buffer)
        if len(group) == 1:
            adv = rewards  # a sample alone: no baseline (e.g. an injected oracle answer)
        else:
            adv = ADVANTAGES.get(cfg.advantage)(rewards, len(group), cfg)
        out += [replace(s, advantage=float(a)) for s, a in zip(group, adv, strict=True)]
    return keep_untruncated(out) if cfg.overlong == "filter" else out


def run_step(
    model: torch.nn.Module,
    ref: torch.nn.Module | None,
    cfg: LearnerConfig,
    samples: list[TrainSample],
    *,
    max_tokens: int | None,
    num_ranks: int = 2,
    min_segments: int = 0,
) -> tuple[float, np.ndarray, list]:
    """One step's loss, gradient and rank batches, as the learner ranks compute them."""
    batches, _ = shard(
        samples,
        num_ranks=num_ranks,
        micro_batch_size=2,
        pad_id=0,
        drop_zero_advantage=cfg.kl_coef == 0,
        max_tokens_per_micro_batch=max_tokens,
    )
    model.zero_grad()
    total = 0.0
    for batch in batches:
        for mb in batch.micro_batches:
            t = micro_batch_tensors(mb, "cpu")
            t["logprobs_old"] = t["logprobs_old"].to(model.dtype)
            calls = dict(
                completion_len=t["completion_mask"].shape[1],
                min_segments=min_segments if t["segments"] is not None else 0,
                temperature=0.8,
                chunk_tokens=3,
            )
            lp, _ = logprobs_of(model, t, with_entropy=True, **calls)
            ref_lp = None
            if ref is not None:
                with torch.no_grad():
                    ref_lp = logprobs_of(ref, t, **calls)[0]
            inputs = loss_inputs(
                cfg, lp, t, ref_lp, num_seqs=batch.num_seqs, num_tokens=batch.num_tokens, max_new_tokens=MAX_NEW
            )
            loss, _ = LOSSES.get(cfg.loss)(inputs, cfg)
            loss.backward()
            total += float(loss.detach())
    grad = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    return total, grad.detach().numpy().copy(), batches


def assert_same_step(got: tuple, want: tuple, rtol: float) -> None:
    (loss, grad, _), (loss_ref, grad_ref, _) = got, want
    scale = float(np.abs(grad_ref).max())
    assert scale > 1e-3  # a real gradient
    err = float(np.abs(grad - grad_ref).max())
    assert err <= rtol * scale, f"gradient: max |diff| {err:.3g} > {rtol:g} x {scale:.3g}"
    assert loss == pytest.approx(loss_ref, rel=rtol, abs=rtol * 1e-3)


@pytest.fixture(scope="module")
def model64() -> LlamaForCausalLM:
    return tiny_llama(torch.float64)


@pytest.fixture(scope="module")
def ref64() -> LlamaForCausalLM:
    """A reference model that differs from the policy, so the KL term has a gradient."""
    ref = tiny_llama(torch.float64, seed=1)
    ref.requires_grad_(False)
    return ref


BASE = LearnerConfig(clip_eps=0.1)
CASES = {
    "grpo": replace(BASE, advantage="grpo"),
    "dr_grpo": replace(BASE, advantage="dr_grpo", aggregation="seq_mean_token_sum_norm"),
    "rloo_token_mean": replace(BASE, advantage="rloo", aggregation="token_mean"),
    "gspo": replace(BASE, loss="gspo"),
    "dapo_filter": replace(BASE, clip_eps_low=0.1, clip_eps_high=0.28, aggregation="token_mean", overlong="filter"),
    "dapo_soft": replace(BASE, clip_eps_high=0.28, aggregation="token_mean", overlong="soft", overlong_buffer=4),
    "kl": replace(BASE, kl_coef=0.3),
    "tis": replace(BASE, tis_cap=1.5),
    "gspo_kl_tis": replace(BASE, loss="gspo", kl_coef=0.3, tis_cap=1.5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_float64_loss_and_gradient_equal_per_sample(model64, ref64, name):
    cfg = CASES[name]
    samples = with_advantages(make_groups(), cfg)
    ref = ref64 if cfg.kl_coef > 0 else None
    per_sample = run_step(model64, ref, cfg, samples, max_tokens=None)
    shared = run_step(model64, ref, cfg, samples, max_tokens=10_000)
    assert_same_step(shared, per_sample, rtol=1e-10)
    # The shared path did share: fewer micro-batches, and segments of several rows.
    spans = [s for b in shared[2] for mb in b.micro_batches for s in mb.segments]
    assert max(rows for _, rows, _ in spans) >= 3


def test_every_registered_loss_and_estimator_is_covered():
    assert {c.loss for c in CASES.values()} == set(LOSSES.names())
    assert {c.advantage for c in CASES.values()} == set(ADVANTAGES.names())


def test_update_does_not_depend_on_the_token_budget(model64, ref64):
    """Budgets that split groups over micro-batches and ranks give the same step."""
    cfg = CASES["kl"]
    samples = with_advantages(make_groups(), cfg)
    whole = run_step(model64, ref64, cfg, samples, max_tokens=10_000, num_ranks=1)
    assert len(whole[2][0].micro_batches) == 1
    for budget in (40, 25, 12):
        split = run_step(model64, ref64, cfg, samples, max_tokens=budget)
        mbs = [mb for b in split[2] for mb in b.micro_batches]
        # Every micro-batch keeps to the budget (distinct tokens), and some group was split.
        for mb in mbs:
            lengths = mb.attention_mask.sum(axis=1)
            distinct = sum(p + int(lengths[a : a + n].sum()) - n * p for a, n, p in mb.segments)
            assert distinct <= budget or (len(mb.segments) == 1 and mb.segments[0][1] == 1)
        assert len([s for mb in mbs for s in mb.segments if s[1] > 0]) > 4
        assert_same_step(split, whole, rtol=1e-10)


def test_gradient_checkpointing_gives_the_same_step(ref64):
    cfg = CASES["kl"]
    samples = with_advantages(make_groups(), cfg)
    plain = run_step(tiny_llama(torch.float64), ref64, cfg, samples, max_tokens=None)
    model = tiny_llama(torch.float64)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    shared = run_step(model, ref64, cfg, samples, max_tokens=30)
    assert_same_step(shared, plain, rtol=1e-10)


def test_empty_segments_for_zero3_change_nothing(model64):
    """Ranks with fewer segments run empty ones (ZeRO-3 call counts): no effect on the step."""
    cfg = CASES["grpo"]
    samples = with_advantages(make_groups(), cfg)
    want = run_step(model64, None, cfg, samples, max_tokens=10_000)
    assert_same_step(run_step(model64, None, cfg, samples, max_tokens=10_000, min_segments=5), want, rtol=1e-10)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_float32_equal_to_round_off(attn):
    """The stock model (float32 RMSNorm; eager's float32 softmax) at float32 round-off."""
    model = tiny_llama(torch.float32, attn=attn)
    cfg = CASES["tis"]
    samples = with_advantages(make_groups(), cfg)
    want = run_step(model, None, cfg, samples, max_tokens=None)
    assert_same_step(run_step(model, None, cfg, samples, max_tokens=10_000), want, rtol=2e-5)


def test_logprobs_inside_the_prefix_come_from_the_prefix(model64):
    """Rows whose completions start alike: tokens inside the shared prefix, and the first token
    after it, are scored from the prefix's hidden states; they equal the per-sample values."""
    from learner.logprobs import completion_logprobs

    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 0], [5, 6, 7, 8, 9, 12, 13, 14]])
    mask = torch.tensor([[1] * 7 + [0], [1] * 8])
    prompt_lens = torch.tensor([3, 2])
    want, _ = completion_logprobs(model64, ids, mask, prompt_lens, 6)
    got, _ = shared_prefix_logprobs(model64, ids, mask, prompt_lens, [(0, 2, 5)], 6)
    valid = torch.tensor([[1] * 4 + [0, 0], [1] * 6], dtype=torch.bool)  # 4 and 6 tokens after the prompts
    torch.testing.assert_close(got[valid], want[valid], rtol=0, atol=1e-12)
    # A wrong prefix length (rows differ at position 5) would not agree: the test can fail.
    bad, _ = shared_prefix_logprobs(model64, ids, mask, prompt_lens, [(0, 2, 6)], 6)
    assert (bad[valid] - want[valid]).abs().max() > 1e-3


def test_unsupported_models_are_named():
    assert unsupported_reason(tiny_llama(torch.float32)) is None
    assert unsupported_reason(tiny_llama(torch.float32, attn="eager")) is None
    model = tiny_llama(torch.float32)
    model.config._attn_implementation = "flash_attention_2"
    assert "flash_attention_2" in (unsupported_reason(model) or "")
    model = tiny_llama(torch.float32)
    model.config.sliding_window = 4
    assert "sliding-window" in (unsupported_reason(model) or "")
