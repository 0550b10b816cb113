"""Collation: padding, masks, NaN for unknown behaviour logprobs, balanced snake dealing."""

import numpy as np
import pytest
import torch

from learner.batch import TrainSample, collate, shard, snake_order


def test_collate_pads_and_masks():
    a = TrainSample([5, 6], [7, 8, 9], [-0.1, -0.2, -0.3], 1.5)
    b = TrainSample([5], [4], None, -0.5)
    mb = collate([a, b], pad_id=0)
    assert mb.input_ids.tolist() == [[5, 6, 7, 8, 9], [5, 4, 0, 0, 0]]
    assert mb.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert mb.prompt_lens.tolist() == [2, 1]
    assert mb.completion_mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert np.allclose(mb.logprobs_old[0], [-0.1, -0.2, -0.3])
    assert np.isnan(mb.logprobs_old[1]).all()  # learner's own logprobs stand in
    assert mb.advantages.tolist() == [1.5, -0.5]


def test_collate_rejects_mismatched_logprobs():
    with pytest.raises(ValueError, match="2 logprobs for 3 tokens"):
        collate([TrainSample([1], [2, 3, 4], [-1.0, -1.0], 0.0)], pad_id=0)


def test_snake_order_balances_ranks():
    lengths = [10, 9, 8, 7, 6, 5, 4, 3]
    ranks = snake_order(lengths, 2)
    assert ranks == [[0, 3, 4, 7], [1, 2, 5, 6]]
    assert sum(lengths[i] for i in ranks[0]) == sum(lengths[i] for i in ranks[1]) == 26


def test_shard_keeps_global_normalisers_and_every_sample():
    samples = [TrainSample([1] * (i + 1), [2] * (i % 3), [-1.0] * (i % 3), float(i)) for i in range(8)]
    batches, _ = shard(samples, num_ranks=2, micro_batch_size=2, pad_id=0, drop_zero_advantage=False)
    assert len(batches) == 2 and all(len(b.micro_batches) == 2 for b in batches)
    assert all(b.num_tokens == sum(i % 3 for i in range(8)) for b in batches)
    assert all(b.num_seqs == sum(1 for i in range(8) if i % 3) for b in batches)
    advs = sorted(a for b in batches for mb in b.micro_batches for a in mb.advantages.tolist())
    assert advs == [float(i) for i in range(8)]
    uneven, _ = shard(samples[:5], num_ranks=2, micro_batch_size=2, pad_id=0, drop_zero_advantage=False)
    assert [len(b.micro_batches) for b in uneven] == [2, 2]  # 3 + 2 rows: the short rank is padded


def test_zero_advantage_rows_are_dropped_but_still_normalise():
    samples = [TrainSample([1, 2], [3, 4, 5], [-1.0] * 3, a) for a in (0.0, 0.0, 1.0, -1.0, 0.0, 0.0, 0.0, 0.0)]
    batches, stats = shard(samples, num_ranks=2, micro_batch_size=2, pad_id=0, drop_zero_advantage=True)
    # One row per rank is left: one micro-batch each, not the 2 the full batch would need.
    assert [len(b.micro_batches) for b in batches] == [1, 1]
    trained = [
        a for b in batches for mb in b.micro_batches for a, m in zip(mb.advantages, mb.completion_mask) if m.any()
    ]
    assert sorted(trained) == [-1.0, 1.0] and stats["rows_trained"] == 2
    # The normalisers are the full batch's: 8 sequences, 24 tokens.
    assert all(b.num_seqs == 8 and b.num_tokens == 24 for b in batches)
    nothing, _ = shard(samples[:2], num_ranks=2, micro_batch_size=2, pad_id=0, drop_zero_advantage=True)
    # A zero-signal step still runs one empty micro-batch per rank (the optimizer steps in lockstep).
    assert [len(b.micro_batches) for b in nothing] == [1, 1]
    assert not any(mb.completion_mask.any() for b in nothing for mb in b.micro_batches)


def test_sorting_cuts_padding():
    # Alternating long/short: the original order pads every micro-batch to the long length.
    samples = [TrainSample([1] * (100 if i % 2 else 10), [2], [-1.0], 1.0) for i in range(8)]
    _, stats = shard(samples, num_ranks=2, micro_batch_size=2, pad_id=0, drop_zero_advantage=True)
    assert stats["pad_frac"] == pytest.approx(0.0)
    assert stats["pad_frac_unsorted"] == pytest.approx(1 - (4 * 101 + 4 * 11) / (8 * 101))


def test_a_loss_mask_hides_the_tokens_between_turns_from_the_loss_and_its_normaliser():
    """An agent's episode: turn 1 (2 sampled), an observation (2 appended), turn 2 (1 sampled)."""
    from learner.objectives.grpo import policy_loss

    episode = TrainSample([5, 6], [7, 8, 90, 91, 9], [-0.1, -0.2, 0.0, 0.0, -0.3], 1.0, loss_mask=[1, 1, 0, 0, 1])
    single = TrainSample([5], [4, 3], [-0.5, -0.5], -1.0)
    mb = collate([episode, single], pad_id=0)
    assert mb.completion_mask.tolist() == [[1, 1, 0, 0, 1], [1, 1, 0, 0, 0]]
    (rank,), _ = shard([episode, single], num_ranks=1, micro_batch_size=2, pad_id=0, drop_zero_advantage=False)
    assert rank.num_tokens == 5.0 and rank.num_seqs == 2.0  # 3 + 2 tokens the loss sees
    logprobs = torch.tensor(mb.logprobs_old, requires_grad=True)
    loss, _ = policy_loss(
        logprobs,
        torch.tensor(mb.logprobs_old),
        None,
        torch.tensor(mb.advantages),
        torch.tensor(mb.completion_mask),
        clip_eps=0.2,
        kl_coef=0.0,
        aggregation="token_mean",
        num_tokens=rank.num_tokens,
    )
    loss.backward()
    assert logprobs.grad[0, 2:4].tolist() == [0.0, 0.0] and (logprobs.grad[0, [0, 1, 4]] != 0).all()
    with pytest.raises(ValueError, match="a loss mask of 2 for 5 completion tokens"):
        collate([TrainSample([1], [2, 3, 4, 5, 6], None, 0.0, loss_mask=[1, 0])], pad_id=0)


def test_recorded_samples_load_back_equal(tmp_path):
    """learner.record_batch's file (bench/learner.py reads it) keeps every field."""
    from learner.batch import load_samples, save_samples

    samples = [
        TrainSample([1, 2], [3, 4], [-0.5, -0.25], 1.5, truncated=True),
        TrainSample([1, 2], [5], None, -1.0, loss_mask=[0.0]),
    ]
    save_samples(tmp_path / "batch.jsonl", samples)
    assert load_samples(tmp_path / "batch.jsonl") == samples
