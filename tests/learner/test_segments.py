"""Shared-prefix segments and token-budget micro-batches (learner/segments.py, learner/batch.py)."""

from learner.batch import TrainSample, shard
from learner.segments import common_prefix_len, make_segment, plan


def group(prompt: list[int], completions: list[list[int]]) -> list[TrainSample]:
    return [TrainSample(prompt, c, None, 1.0) for c in completions]


def test_prefix_is_found_from_the_ids_and_leaves_each_row_a_token():
    seqs = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6, 7], [1, 2, 3, 4, 5]]
    assert common_prefix_len(seqs) == 4
    assert make_segment([0, 1, 2], seqs).prefix_len == 4
    # Identical rows: the prefix stops one token short, so each row keeps one of its own.
    same = make_segment([0, 2], seqs)
    assert same.prefix_len == 4 and same.tokens == 4 + 1 + 1


def test_groups_by_prompt_share_into_the_completions():
    samples = group([1, 2, 3], [[9, 9, 4], [9, 9, 5, 6]]) + group([7, 8], [[1], [2, 3]])
    ((micro,),) = plan(
        [s.prompt_ids for s in samples],
        [s.prompt_ids + s.completion_ids for s in samples],
        num_ranks=1,
        max_tokens=100,
    )
    assert sorted((s.rows, s.prefix_len) for s in micro) == [((0, 1), 5), ((2, 3), 2)]
    assert sum(s.tokens for s in micro) == (5 + 1 + 2) + (2 + 1 + 2)  # 13 distinct of 17


def test_budget_splits_a_group_and_each_piece_carries_its_prefix():
    samples = group(list(range(10, 20)), [[i, i + 1] for i in range(1, 7)])  # 10 + 6 x 2 = 22 distinct
    batches, _ = shard(
        samples, num_ranks=1, micro_batch_size=1, pad_id=0, drop_zero_advantage=False, max_tokens_per_micro_batch=15
    )
    micro = batches[0].micro_batches
    assert len(micro) == 3  # 10 + 2 x 2 = 14 <= 15 per piece
    for mb in micro:
        ((first, rows, prefix),) = mb.segments.tolist()
        assert (first, rows, prefix) == (0, 2, 10)
    assert sorted(tuple(r) for mb in micro for r in mb.input_ids[:, 10:].tolist()) == [(i, i + 1) for i in range(1, 7)]


def test_ranks_balanced_in_distinct_tokens_and_padded_to_equal_counts():
    a = group(list(range(100, 140)), [[i, 1] for i in range(8)])  # 40 + 8 x 2 = 56 distinct (336 per sample)
    b = group(list(range(200, 210)), [[i, 2, 3] for i in range(4)])  # 10 + 4 x 3 = 22
    c = group(list(range(300, 330)), [[i, 4] for i in range(4)])  # 30 + 4 x 2 = 38
    batches, _ = shard(
        a + b + c,
        num_ranks=2,
        micro_batch_size=1,
        pad_id=0,
        drop_zero_advantage=False,
        max_tokens_per_micro_batch=59,
    )
    loads = []
    for rb in batches:
        load = 0
        for mb in rb.micro_batches:
            lengths = mb.attention_mask.sum(axis=1)
            load += sum(p + int(lengths[f : f + n].sum()) - n * p for f, n, p in mb.segments.tolist())
        loads.append(load)
    # a (56) on one rank, c (38) and b (22) on the other in two micro-batches (60 > 59); the
    # first rank gets an empty micro-batch (2 tokens) to match.
    assert sorted(loads) == [56 + 2, 60]
    assert len(batches[0].micro_batches) == len(batches[1].micro_batches) == 2
    assert batches[0].num_tokens == batches[1].num_tokens == 8 * 2 + 4 * 3 + 4 * 2  # the whole step's


def test_a_lone_group_is_split_so_no_rank_idles():
    samples = group([1, 2, 3], [[4], [5], [6], [7]])
    batches, _ = shard(
        samples, num_ranks=2, micro_batch_size=1, pad_id=0, drop_zero_advantage=False, max_tokens_per_micro_batch=99
    )
    assert [int(rb.micro_batches[0].completion_mask.sum()) for rb in batches] == [2, 2]
