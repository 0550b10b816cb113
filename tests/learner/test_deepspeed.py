"""The learner group under DeepSpeed, for real: ZeRO 1, 2 and 3 over gloo in Ray actors.

Every case starts a LearnerGroup on a tiny random Llama (float32, tied embeddings), trains one
step on the same 8 samples with `probe_step` (which also returns the full gradient the
optimizer received) and shuts the group down. The reference case is 1 rank with all 8 samples
in one micro-batch; the others split the batch over 2 ranks x 2 micro-batches. Claims:

- the gradient is the same at every ZeRO stage and however the batch is split (the
  world_size / scale_wrt_gas argument of learner/worker.py), and so is the updated model;
- gradient checkpointing changes nothing but memory;
- kl_coef > 0 loads a reference model (partitioned under ZeRO-3) and its KL enters the loss;
  kl_coef == 0 loads none;
- under ZeRO-3 the weight-sync object-store path, param_digest and the Hugging Face export
  all see the same gathered parameters;
- shared-prefix micro-batches (groups sharing a prompt, split by a token budget so that the
  ranks hold different numbers of segments) give the per-sample gradient at ZeRO 1, 2 and 3,
  with the reference model's pass and with gradient checkpointing.

Tolerances: gradients agree to 1e-5 of their largest entry (float32 round-off of different
matmul shapes measures ~3e-7 of it; a wrong scaling by 2, the world size, would be 0.5).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from conf.config import LearnerConfig, RolloutConfig
from conf.runtime import Runtime
from learner.batch import TrainSample, shard
from learner.logprobs import sequence_logprobs_reference
from learner.transport.object_store import ObjectStoreTransport, from_arrays

pytestmark = pytest.mark.slow

VOCAB = 256
BASE = LearnerConfig(
    num_ranks=2, num_cpus_per_rank=0.5, zero_stage=2, micro_batch_size=2, lr=1e-2, grad_clip=0.0, logprob_chunk_tokens=4
)
GRAD_RTOL = 1e-5


def build_tiny_llama(out: Path) -> None:
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(cfg).save_pretrained(out)


def make_samples(model_dir: Path, seed: int, n: int = 8, groups: tuple[int, ...] = ()) -> list[TrainSample]:
    """n samples of varied lengths; half carry behaviour logprobs that differ from the model's
    by noise (so the ratio moves and some tokens clip), half are on-policy (None). `groups`:
    sizes of runs of consecutive samples that share one prompt (GRPO groups)."""
    g = torch.Generator().manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    group_of = [k for k, size in enumerate(groups) for _ in range(size)]
    prompts: dict[int, list[int]] = {}
    samples = []
    for i in range(n):
        prompt = torch.randint(3, VOCAB, (int(torch.randint(3, 10, (1,), generator=g)),), generator=g).tolist()
        if i < len(group_of):
            prompt = prompts.setdefault(group_of[i], prompt)
        completion = torch.randint(3, VOCAB, (int(torch.randint(2, 14, (1,), generator=g)),), generator=g).tolist()
        old = None
        if i % 2 == 0:
            with torch.no_grad():
                lp = sequence_logprobs_reference(
                    model, torch.tensor([prompt + completion]), torch.tensor([len(prompt)]), len(completion)
                )[0]
            old = (lp + 0.3 * torch.randn(len(completion), generator=g)).tolist()
        samples.append(TrainSample(prompt, completion, old, float(torch.randn(1, generator=g))))
    return samples


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-llama")
    build_tiny_llama(out)
    return out


@pytest.fixture(scope="module")
def samples(model_dir: Path) -> dict[str, list[TrainSample]]:
    return {
        "a": make_samples(model_dir, seed=1),
        "b": make_samples(model_dir, seed=2),
        "groups": make_samples(model_dir, seed=3, groups=(4, 3)),  # and one sample alone
    }


def start_group(cfg: LearnerConfig, model_dir: Path):  # -> LearnerGroup
    from learner.group import LearnerGroup

    return LearnerGroup(
        cfg,
        Runtime(str(model_dir), "float32", 0, "cpu", timeout_s=300),
        rollout=RolloutConfig(temperature=1.0),
        micro_batches=2,
    )


SHARED_BUDGET = 50  # distinct tokens: one rank gets the 4-sample group, the other 2 segments


def batches_for(cfg: LearnerConfig, samples: list[TrainSample], shared: bool = False):
    return shard(
        samples,
        num_ranks=cfg.num_ranks,
        micro_batch_size=cfg.micro_batch_size,
        pad_id=0,
        drop_zero_advantage=False,
        max_tokens_per_micro_batch=SHARED_BUDGET if shared else None,
    )[0]


def params_of(group) -> dict[str, np.ndarray]:
    """Full parameters through the weight-sync object-store path (small buckets: several)."""
    plan = group.weight_plan(16 << 10, "float32")
    assert len(plan) > 3
    arrays = group.shipment(ObjectStoreTransport).payload
    return {name: t.numpy().copy() for name, t in from_arrays(plan, arrays, torch.device("cpu"))}


CASES: dict[str, LearnerConfig] = {
    "single": replace(BASE, num_ranks=1, micro_batch_size=8),  # the reference: 1 rank, 1 micro-batch
    "zero1": replace(BASE, zero_stage=1),
    "zero2": replace(BASE, zero_stage=2),
    "zero3": replace(BASE, zero_stage=3),
    "zero3_ckpt": replace(BASE, zero_stage=3, gradient_checkpointing=True),
    "single_kl": replace(BASE, num_ranks=1, micro_batch_size=8, kl_coef=0.5),
    "zero3_kl": replace(BASE, zero_stage=3, kl_coef=0.5),
}


TWO_STEPS = ("single", "single_kl", "zero3_kl")  # a second probed step, on batch "b"
# Shared-prefix cases train on batch "groups" in shared-prefix micro-batches; the reference is
# "single_groups" (1 rank, 1 micro-batch of all 8 samples, per sample).
SHARED_CASES: dict[str, LearnerConfig] = {
    "single_groups": replace(BASE, num_ranks=1, micro_batch_size=8, shared_prefix=False),
    "zero1_shared": replace(BASE, zero_stage=1),
    "zero2_shared": replace(BASE, zero_stage=2),
    # The reference model's pass and gradient checkpointing in one group (a group costs ~6 s).
    "zero3_shared_kl_ckpt": replace(BASE, zero_stage=3, kl_coef=0.5, gradient_checkpointing=True),
}


@pytest.fixture(scope="module")
def case(
    local_ray: None, model_dir: Path, samples: dict[str, list[TrainSample]], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], dict]:
    """case(name) -> what one group did (computed once per name): its setup info, the stats and
    probed gradient of each step ("steps"), and its full parameters after the first step."""
    done: dict[str, dict] = {}

    def run(name: str) -> dict:
        if name in done:
            return done[name]
        if name in SHARED_CASES:
            cfg = SHARED_CASES[name]
            batches = batches_for(cfg, samples["groups"], shared=name != "single_groups")
        else:
            cfg = CASES[name]
            batches = batches_for(cfg, samples["a"])
        group = start_group(cfg, model_dir)
        try:
            out: dict = {"info": group.info, "steps": [group.probe_step(batches)], "batches": batches}
            out["params"] = params_of(group)
            if name == "zero3":
                out["digest"] = group.param_digest()
                out["hf"] = group.save_hf(str(tmp_path_factory.mktemp("hf") / "export"))
            if name in TWO_STEPS:
                out["steps"].append(group.probe_step(batches_for(cfg, samples["b"])))
        finally:
            group.shutdown()
        done[name] = out
        return out

    return run


def assert_close(got: np.ndarray, want: np.ndarray, what: str, rtol: float = GRAD_RTOL) -> None:
    scale = float(np.abs(want).max())
    err = float(np.abs(got - want).max())
    assert err <= rtol * scale, f"{what}: max |diff| {err:.3g} > {rtol:g} x max |value| {scale:.3g}"


@pytest.mark.parametrize("name", ["zero1", "zero2", "zero3"])
def test_gradient_same_at_every_stage_and_split_as_one_rank_one_micro_batch(case, name):
    ((ref_stats, ref_grad),) = case("single")["steps"][:1]
    ((stats, grad),) = case(name)["steps"]
    assert np.abs(ref_grad).max() > 1e-2  # a real gradient, not zeros
    assert_close(grad, ref_grad, f"{name} (2 ranks x 2 micro-batches) vs 1 rank x 1 micro-batch")
    # DeepSpeed's own pre-clip norm agrees with the probed vector.
    assert stats["grad_norm"] == pytest.approx(float(np.linalg.norm(ref_grad)), rel=1e-5)
    assert stats["clip_frac"] > 0  # the noisy behaviour logprobs made the clip bite
    assert stats["loss"] == pytest.approx(ref_stats["loss"], rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("name", ["zero1", "zero3"])
def test_updated_parameters_same_at_every_stage(case, name, model_dir):
    """AdamW's first step moves each weight by ~lr * sign(gradient): the updated models agree
    to float32 round-off, except where a gradient entry is so small that its sign is noise."""
    base, got = case("zero2")["params"], case(name)["params"]
    initial = AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
    assert set(got) == set(base)
    lr = BASE.lr
    for key in base:
        moved = np.abs(base[key] - initial[key].numpy()).max()
        assert moved > 0.5 * lr, f"{key} did not move"
        diff = np.abs(got[key] - base[key])
        # Sign flips of noise-sized gradient entries may move a weight by up to 2 lr; allow a few.
        assert (diff > 1e-6).mean() < 1e-3, f"{key}: {(diff > 1e-6).sum()} of {diff.size} weights differ"
        assert diff.max() <= 2.05 * lr


def test_gradient_checkpointing_gives_the_same_gradient(case):
    assert_close(
        case("zero3_ckpt")["steps"][0][1], case("zero3")["steps"][0][1], "ZeRO-3 with vs without gradient checkpointing"
    )


def test_reference_model_only_with_kl_and_partitioned_under_zero3(case):
    for name in ("single", "zero3"):
        assert all(not info["reference"] for info in case(name)["info"])
    single = case("single_kl")["info"][0]
    assert single["reference"] and single["reference_params_local"] == single["params"]
    for info in case("zero3_kl")["info"]:  # each ZeRO-3 rank stores about half of the reference
        assert info["reference"] and 0 < info["reference_params_local"] < 0.6 * info["params"]


def test_kl_to_reference_is_zero_before_an_update_and_enters_the_loss_after(case):
    plain = case("single")["steps"]
    for name in ("single_kl", "zero3_kl"):
        (first, grad1), (second, _) = case(name)["steps"]
        # Before any update the reference is the policy: KL 0, and k3's gradient at 0 is 0.
        assert abs(first["kl_ref"]) < 1e-7, name
        assert_close(grad1, plain[0][1], f"{name} first step vs the same step without KL")
        assert second["kl_ref"] > 1e-5, name
    # After one update the KL term pulls: the second step's gradient differs from the plain one's.
    assert np.abs(case("single_kl")["steps"][1][1] - plain[1][1]).max() > 1e-3
    # ... and does not depend on the stage or the split.
    assert_close(
        case("zero3_kl")["steps"][1][1], case("single_kl")["steps"][1][1], "KL step 2: ZeRO-3 vs 1 rank", rtol=1e-4
    )


def test_zero3_digest_object_store_path_and_export_see_the_same_parameters(case):
    z3 = case("zero3")
    params = z3["params"]
    h = hashlib.sha256()
    for value in params.values():  # the plan keeps named_parameters() order, as param_digest does
        h.update(value.astype(np.float32).tobytes())
    assert z3["digest"] == h.hexdigest()
    exported = AutoModelForCausalLM.from_pretrained(z3["hf"]).state_dict()
    assert "lm_head.weight" not in params  # tied: sent once, re-tied by the receiver
    for name, value in params.items():
        np.testing.assert_array_equal(exported[name].numpy(), value, err_msg=name)
    np.testing.assert_array_equal(exported["lm_head.weight"].numpy(), params["model.embed_tokens.weight"])
    assert os.path.isfile(os.path.join(z3["hf"], "config.json"))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_token_logprobs_hand_written_backward_matches_autograd(temperature):
    """The chunk kernel every rank runs (learner/logprobs.py) has its own backward: check it
    against finite differences and its values against log_softmax, in float64."""
    from learner.logprobs import _TokenLogprobs

    torch.manual_seed(0)
    logits = torch.randn(2, 3, 11, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 11, (2, 3))
    assert torch.autograd.gradcheck(lambda x: _TokenLogprobs.apply(x, targets, temperature, False)[0], (logits,))
    lp, entropy = _TokenLogprobs.apply(logits, targets, temperature, True)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    torch.testing.assert_close(lp, logp.gather(-1, targets[..., None])[..., 0], rtol=0, atol=1e-12)
    torch.testing.assert_close(entropy, -(logp.exp() * logp).sum(-1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["zero1_shared", "zero2_shared", "zero3_shared_kl_ckpt"])
def test_shared_prefix_gradient_equals_per_sample_at_every_stage(case, name):
    ((ref_stats, ref_grad),) = case("single_groups")["steps"]
    ((stats, grad),) = case(name)["steps"]
    batches = case(name)["batches"]
    # The prefixes were shared, and the ranks ran different numbers of segments (ZeRO-3 pads).
    segments = [[len(mb.segments) for mb in b.micro_batches] for b in batches]
    assert segments[0] != segments[1], segments
    assert max(int(mb.segments[:, 1].max()) for b in batches for mb in b.micro_batches) >= 2
    assert all(info["shared_prefix"] for info in case(name)["info"])
    assert np.abs(ref_grad).max() > 1e-2
    assert_close(grad, ref_grad, f"{name} (shared prefixes) vs 1 rank x 1 micro-batch per sample")
    assert stats["loss"] == pytest.approx(ref_stats["loss"], rel=1e-5, abs=1e-7)
    # The mismatch metric comes from the same (shared) forward.
    assert stats["logprob_diff_mean"] == pytest.approx(ref_stats["logprob_diff_mean"], rel=1e-5)
    assert stats["entropy"] == pytest.approx(ref_stats["entropy"], rel=1e-5)
    if "_kl" in name:
        assert abs(stats["kl_ref"]) < 1e-7  # the reference's pass, shared too, equals the policy's
