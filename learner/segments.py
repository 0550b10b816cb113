"""Shared-prefix segments and token-budget micro-batches (pure Python: no torch, no Ray).

A *segment* is a set of a step's samples with a common token prefix, which the learner
forwards once for all of them (learner/shared_prefix.py). Segments are found from the token
ids, not assumed from the layout: samples are grouped by identical prompt ids (a GRPO group,
an agent group's first turn), and each segment's prefix is the longest common prefix of its
samples' full sequences (prompt + completion), so completions that start alike share more.
The prefix always leaves each sample at least one token of its own (the suffix forward needs
one), and a sample alone is a segment of one (its prompt is its prefix: nothing is shared,
the cost is that of the per-sample path).

Token budget: a segment costs its *distinct* tokens, prefix + suffixes. A micro-batch holds
whole segments up to `max_tokens` distinct tokens; a segment larger than that is split into
several, each with the prefix once (and its own, possibly longer, common prefix). Segments
are dealt to ranks largest first to the rank with the fewest distinct tokens, then packed
into micro-batches first-fit decreasing; learner/batch.py pads every rank to the same number
of micro-batches (a backward pass is a collective under ZeRO-2/3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Segment:
    rows: tuple[int, ...]  # indices into the step's samples
    prefix_len: int  # tokens shared by every row, computed once
    lengths: tuple[int, ...]  # each row's prompt + completion length

    @property
    def tokens(self) -> int:
        """Distinct tokens: the prefix once, then each row's own suffix."""
        return self.prefix_len + sum(n - self.prefix_len for n in self.lengths)


def common_prefix_len(seqs: Sequence[Sequence[int]]) -> int:
    first, n = seqs[0], min(len(s) for s in seqs)
    for i in range(n):
        token = first[i]
        if any(s[i] != token for s in seqs[1:]):
            return i
    return n


def make_segment(rows: Sequence[int], seqs: Sequence[Sequence[int]]) -> Segment:
    """The segment of `rows` (indices into `seqs`): their common prefix, capped so that every
    row keeps >= 1 token after it (and >= 1 in it: the prefix forward needs one)."""
    mine = [seqs[i] for i in rows]
    lengths = tuple(len(s) for s in mine)
    prefix = max(1, min(common_prefix_len(mine), min(lengths) - 1))
    return Segment(tuple(rows), prefix, lengths)


def group_rows(prompts: Sequence[Sequence[int]]) -> list[list[int]]:
    """Row indices grouped by identical prompt ids, in order of first appearance."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(tuple(p), []).append(i)
    return list(groups.values())


def split_to_budget(seg: Segment, seqs: Sequence[Sequence[int]], max_tokens: int) -> list[Segment]:
    """`seg` as pieces of at most `max_tokens` distinct tokens each (a piece holds >= 1 row);
    rows keep their order, so neighbours (often alike) share a piece."""
    if seg.tokens <= max_tokens or len(seg.rows) == 1:
        return [seg]
    pieces: list[Segment] = []
    current: list[int] = []
    for row in seg.rows:
        trial = make_segment([*current, row], seqs)
        if current and trial.tokens > max_tokens:
            pieces.append(make_segment(current, seqs))
            current = [row]
        else:
            current.append(row)
    pieces.append(make_segment(current, seqs))
    return pieces


def _halve(seg: Segment, seqs: Sequence[Sequence[int]]) -> list[Segment]:
    mid = len(seg.rows) // 2
    return [make_segment(seg.rows[:mid], seqs), make_segment(seg.rows[mid:], seqs)]


def plan(
    prompts: Sequence[Sequence[int]], seqs: Sequence[Sequence[int]], *, num_ranks: int, max_tokens: int
) -> list[list[list[Segment]]]:
    """Segments of the samples (prompt ids, full sequences), per rank, per micro-batch."""
    segments = [
        piece for rows in group_rows(prompts) for piece in split_to_budget(make_segment(rows, seqs), seqs, max_tokens)
    ]
    # Fewer segments than ranks would leave ranks idle: split the largest while it has rows.
    while 0 < len(segments) < num_ranks:
        largest = max(segments, key=lambda s: (len(s.rows) > 1, s.tokens))
        if len(largest.rows) == 1:
            break
        segments.remove(largest)
        segments += _halve(largest, seqs)
    segments.sort(key=lambda s: (-s.tokens, s.rows))
    per_rank: list[list[Segment]] = [[] for _ in range(num_ranks)]
    load = [0] * num_ranks
    for seg in segments:
        r = min(range(num_ranks), key=lambda k: (load[k], k))
        per_rank[r].append(seg)
        load[r] += seg.tokens
    return [_pack(segs, max_tokens) for segs in per_rank]


def _pack(segments: Sequence[Segment], max_tokens: int) -> list[list[Segment]]:
    """First-fit decreasing into micro-batches of at most `max_tokens` distinct tokens."""
    bins: list[list[Segment]] = []
    loads: list[int] = []
    for seg in sorted(segments, key=lambda s: (-s.tokens, s.rows)):
        for i, used in enumerate(loads):
            if used + seg.tokens <= max_tokens:
                bins[i].append(seg)
                loads[i] += seg.tokens
                break
        else:
            bins.append([seg])
            loads.append(seg.tokens)
    return bins
