"""Learner state save/load (the checkpoints of the reliability issue) is an exact resume.

Run A trains step 1, saves, trains step 2; run B is a fresh group that loads A's state and
trains the same step 2: the parameters must be bit-identical, under ZeRO-2 (the default) and
ZeRO-3 (every rank writes its own shards). That needs the weights, AdamW's moments and step
count, and the worker's update counter (the learning-rate warmup reads it) to be restored:
loading without the optimizer states, for one, makes this test fail.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from conf.config import LearnerConfig, RolloutConfig
from conf.runtime import Runtime
from learner.batch import TrainSample, shard
from learner.transport.object_store import ObjectStoreTransport, from_arrays

pytestmark = pytest.mark.slow

VOCAB = 256
# warmup_steps: the learning rate of step 2 depends on the restored update counter.
BASE = LearnerConfig(
    num_ranks=2, num_cpus_per_rank=0.5, micro_batch_size=2, lr=1e-2, warmup_steps=3, logprob_chunk_tokens=4
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-llama")
    torch.manual_seed(0)
    LlamaForCausalLM(
        LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            tie_word_embeddings=True,
        )
    ).save_pretrained(out)
    return out


def samples(seed: int, n: int = 8) -> list[TrainSample]:
    g = torch.Generator().manual_seed(seed)

    def tokens(lo: int, hi: int) -> list[int]:
        return torch.randint(3, VOCAB, (int(torch.randint(lo, hi, (1,), generator=g)),), generator=g).tolist()

    return [TrainSample(tokens(3, 10), tokens(2, 14), None, float(torch.randn(1, generator=g))) for _ in range(n)]


def start(cfg: LearnerConfig, model_dir: Path):  # -> LearnerGroup
    from learner.group import LearnerGroup

    return LearnerGroup(
        cfg,
        Runtime(str(model_dir), "float32", 0, "cpu", timeout_s=300),
        rollout=RolloutConfig(temperature=1.0),
        micro_batches=2,
    )


def train(group, cfg: LearnerConfig, seed: int) -> dict[str, float]:
    batches, _ = shard(
        samples(seed),
        num_ranks=cfg.num_ranks,
        micro_batch_size=cfg.micro_batch_size,
        pad_id=0,
        drop_zero_advantage=False,
    )
    return group.train_step(batches)


def params(group) -> dict[str, np.ndarray]:
    plan = group.weight_plan(64 << 10, "float32")
    arrays = group.shipment(ObjectStoreTransport).payload
    return {n: t.numpy().copy() for n, t in from_arrays(plan, arrays, torch.device("cpu"))}


@pytest.mark.parametrize("stage", [2, 3])
def test_resume_from_saved_state_is_bit_exact(local_ray, model_dir, tmp_path, stage):
    cfg = replace(BASE, zero_stage=stage)
    state_dir = tmp_path / "ckpt" / "learner"
    a = start(cfg, model_dir)
    try:
        train(a, cfg, seed=1)
        after_step1 = a.param_digest()
        a.save_state(str(state_dir))
        stats_a = train(a, cfg, seed=2)
        params_a = params(a)
    finally:
        a.shutdown()
    # Everything lies inside the directory given (the driver renames it into place).
    assert [p.name for p in (tmp_path / "ckpt").iterdir()] == ["learner"]
    meta = json.loads((state_dir / "learner_state.json").read_text())
    assert meta == {"updates": 1, "num_ranks": 2, "zero_stage": stage, "dtype": "float32"}
    assert sorted(p.name for p in (state_dir / "deepspeed").glob("rng_rank*.json")) == [
        "rng_rank0.json",
        "rng_rank1.json",
    ]
    assert len(list((state_dir / "deepspeed").glob("*optim_states.pt"))) == 2  # one ZeRO shard per rank

    b = start(cfg, model_dir)
    try:
        assert b.param_digest() != after_step1
        assert b.load_state(str(state_dir)) == 1
        assert b.param_digest() == after_step1
        stats_b = train(b, cfg, seed=2)
        params_b = params(b)
    finally:
        b.shutdown()
    assert stats_b["grad_norm"] == stats_a["grad_norm"] and stats_b["loss"] == stats_a["loss"]
    assert params_b.keys() == params_a.keys()
    for name in params_a:
        np.testing.assert_array_equal(params_b[name], params_a[name], err_msg=name)


def test_load_names_what_does_not_match(local_ray, model_dir, tmp_path):
    cfg = replace(BASE, num_ranks=1, micro_batch_size=8)
    group = start(cfg, model_dir)
    try:
        with pytest.raises(Exception, match="learner_state.json: not a learner state directory"):
            group.load_state(str(tmp_path))
        state_dir = tmp_path / "other"
        state_dir.mkdir()
        (state_dir / "learner_state.json").write_text(
            json.dumps({"updates": 3, "num_ranks": 2, "zero_stage": 2, "dtype": "float32"})
        )
        with pytest.raises(Exception, match=r"learner.num_ranks=2, this group has 1"):
            group.load_state(str(state_dir))
    finally:
        group.shutdown()
