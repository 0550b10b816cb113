"""Collation: a step's samples -> per-rank lists of padded micro-batches (numpy, for Ray).

Balancing and padding: samples are sorted by length (longest first) and dealt to the ranks in
snake order (0, 1, ..., N-1, N-1, ..., 0), so ranks get similar token counts; each rank's
micro-batches then hold neighbours in length, which cuts padding. `padding_stats` reports
the padded fraction of the batch with this order and with the original order, so the saving is
measured, not assumed.

Shared prefixes (`learner.shared_prefix`, the default): samples that share a token prefix are
grouped into segments and micro-batches are filled by distinct tokens up to
`learner.max_tokens_per_micro_batch` (learner/segments.py); each micro-batch then carries its
segments' spans, and the learner computes each prefix once (learner/shared_prefix.py).
`micro_batch_size` applies to the per-sample path only.

The loss normalisers (`num_seqs`, `num_tokens`) are those of the whole step's batch and travel
with every rank's share: the update then does not depend on how the batch is split.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from learner import segments as seg


@dataclass(frozen=True)
class TrainSample:
    prompt_ids: list[int]
    completion_ids: list[int]
    # Behaviour-policy logprob of each completion token (the engine's); None = not known, the
    # learner's own logprobs stand in (valid on-policy only: injected oracle samples, SFT).
    logprobs_old: list[float] | None
    advantage: float
    # Cut at the generation limit (finish_reason "length"): `learner.overlong=filter` leaves it out.
    truncated: bool = False
    # Which completion tokens the loss sees (1) and which it does not (0), one per token; None:
    # all of them. An agent's episode is one completion of many turns: its sampled tokens are 1,
    # the observations and template tokens appended between turns 0 (their logprobs_old entries
    # are then placeholders the mask hides).
    loss_mask: list[float] | None = None

    def mask(self) -> list[float]:
        if self.loss_mask is None:
            return [1.0] * len(self.completion_ids)
        if len(self.loss_mask) != len(self.completion_ids):
            raise ValueError(f"a loss mask of {len(self.loss_mask)} for {len(self.completion_ids)} completion tokens")
        return self.loss_mask

    @property
    def loss_tokens(self) -> float:
        """Completion tokens the loss sees (the step's normaliser counts these)."""
        return float(len(self.completion_ids)) if self.loss_mask is None else float(sum(self.mask()))


def save_samples(path: str | Path, samples: Sequence[TrainSample]) -> None:
    """A step's samples as JSON lines (`trainer.record_batch`; bench/learner.py reads them)."""
    with open(path, "w") as f:
        for s in samples:
            f.write(json.dumps(asdict(s)) + "\n")


def load_samples(path: str | Path) -> list[TrainSample]:
    return [TrainSample(**json.loads(line)) for line in Path(path).read_text().splitlines() if line.strip()]


@dataclass
class MicroBatch:
    input_ids: np.ndarray  # [b, L] int64, prompt + completion, right-padded
    attention_mask: np.ndarray  # [b, L] int64
    prompt_lens: np.ndarray  # [b] int64
    completion_mask: np.ndarray  # [b, T] float32, 1 = a completion token the loss sees (TrainSample.loss_mask)
    logprobs_old: np.ndarray  # [b, T] float32; NaN where the learner's own logprobs stand in
    advantages: np.ndarray  # [b] float32
    # [s, 3] int64 (first row, rows, prefix length) of each shared-prefix segment, covering the
    # rows in order; None: the per-sample path (learner/shared_prefix.py).
    segments: np.ndarray | None = None


@dataclass
class RankBatch:
    micro_batches: list[MicroBatch]
    num_seqs: float  # sequences with >= 1 loss token in the whole step (all ranks)
    num_tokens: float  # completion tokens the loss sees in the whole step (all ranks)


def collate(samples: Sequence[TrainSample], pad_id: int) -> MicroBatch:
    lengths = [len(s.prompt_ids) + len(s.completion_ids) for s in samples]
    width, comp_width = max(lengths), max(1, max(len(s.completion_ids) for s in samples))
    b = len(samples)
    input_ids = np.full((b, width), pad_id, dtype=np.int64)
    attention = np.zeros((b, width), dtype=np.int64)
    mask = np.zeros((b, comp_width), dtype=np.float32)
    old = np.full((b, comp_width), np.nan, dtype=np.float32)
    for i, s in enumerate(samples):
        seq = s.prompt_ids + s.completion_ids
        input_ids[i, : len(seq)] = seq
        attention[i, : len(seq)] = 1
        mask[i, : len(s.completion_ids)] = s.mask()
        if s.logprobs_old is not None:
            if len(s.logprobs_old) != len(s.completion_ids):
                raise ValueError(f"sample {i}: {len(s.logprobs_old)} logprobs for {len(s.completion_ids)} tokens")
            old[i, : len(s.completion_ids)] = s.logprobs_old
    return MicroBatch(
        input_ids=input_ids,
        attention_mask=attention,
        prompt_lens=np.array([len(s.prompt_ids) for s in samples], dtype=np.int64),
        completion_mask=mask,
        logprobs_old=old,
        advantages=np.array([s.advantage for s in samples], dtype=np.float32),
    )


def nominal_micro_batches(rows: int, num_ranks: int, micro_batch_size: int) -> int:
    """DeepSpeed's `gradient_accumulation_steps` for a step of `rows` samples (its config needs
    one). Nominal only: the worker owns the accumulation boundary (learner/worker.py), and
    `shard` decides the micro-batches each step actually has."""
    return max(1, rows // num_ranks // micro_batch_size)


def snake_order(lengths: Sequence[int], num_ranks: int) -> list[list[int]]:
    """Indices per rank: longest first, dealt 0..N-1 then N-1..0, each rank longest first."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    ranks: list[list[int]] = [[] for _ in range(num_ranks)]
    for pos, idx in enumerate(order):
        lap, k = divmod(pos, num_ranks)
        ranks[k if lap % 2 == 0 else num_ranks - 1 - k].append(idx)
    return ranks


def _dummy(pad_id: int, shared: bool) -> MicroBatch:
    """A micro-batch with no completion token: zero loss, zero gradient, negligible cost. It
    keeps every rank at the same number of backward passes."""
    mb = collate([TrainSample([pad_id, pad_id], [], None, 0.0)], pad_id)
    if shared:
        mb.segments = np.array([[0, 1, 1]], dtype=np.int64)
    return mb


def collate_segments(samples: Sequence[TrainSample], segments: Sequence[seg.Segment], pad_id: int) -> MicroBatch:
    """The rows of `segments`, segment by segment, with their spans."""
    mb = collate([samples[i] for s in segments for i in s.rows], pad_id)
    spans, first = [], 0
    for s in segments:
        spans.append((first, len(s.rows), s.prefix_len))
        first += len(s.rows)
    mb.segments = np.array(spans, dtype=np.int64)
    return mb


def shard(
    samples: Sequence[TrainSample],
    *,
    num_ranks: int,
    micro_batch_size: int,
    pad_id: int,
    drop_zero_advantage: bool,
    max_tokens_per_micro_batch: int | None = None,
) -> tuple[list[RankBatch], dict[str, float]]:
    """Split a step's samples over ranks into micro-batches; every rank gets the same number of
    micro-batches (at least one), since each backward pass is a collective under ZeRO-2/3.
    Returns the rank batches and their padding statistics. Micro-batches hold at most
    `micro_batch_size` samples, or, with `max_tokens_per_micro_batch` (the shared-prefix path),
    whole shared-prefix segments up to that many distinct tokens (learner/segments.py).

    With `drop_zero_advantage` (exact only without a KL term: such a row's loss and gradient
    are then exactly zero), rows whose advantage is 0, e.g. every row of a zero-signal group,
    are not sent through the model at all. The normalisers still count them, so the update is
    identical to training on the full batch.
    """
    num_tokens = float(sum(s.loss_tokens for s in samples))
    num_seqs = float(sum(1 for s in samples if s.loss_tokens > 0))
    keep = [s for s in samples if not (drop_zero_advantage and s.advantage == 0.0)]
    if max_tokens_per_micro_batch is not None:
        return _shard_shared(keep, num_ranks, pad_id, max_tokens_per_micro_batch, num_seqs, num_tokens)
    lengths = [len(s.prompt_ids) + len(s.completion_ids) for s in keep]
    per_rank = snake_order(lengths, num_ranks)
    micro_batches = max(1, max(-(-len(idx) // micro_batch_size) for idx in per_rank))
    batches = []
    for idx in per_rank:
        chunks = [idx[j : j + micro_batch_size] for j in range(0, len(idx), micro_batch_size)]
        micro = [collate([keep[i] for i in c], pad_id) for c in chunks]
        micro += [_dummy(pad_id, shared=False) for _ in range(micro_batches - len(micro))]
        batches.append(RankBatch(micro, num_seqs=num_seqs, num_tokens=num_tokens))
    return batches, padding_stats(batches, keep, micro_batch_size)


def _shard_shared(
    keep: Sequence[TrainSample], num_ranks: int, pad_id: int, max_tokens: int, num_seqs: float, num_tokens: float
) -> tuple[list[RankBatch], dict[str, float]]:
    seqs = [s.prompt_ids + s.completion_ids for s in keep]
    if any(len(q) < 2 for q in seqs):
        raise ValueError("a sample of fewer than 2 tokens (prompt + completion)")
    per_rank = seg.plan([s.prompt_ids for s in keep], seqs, num_ranks=num_ranks, max_tokens=max_tokens)
    micro_batches = max(1, max(len(m) for m in per_rank))
    batches = []
    for rank in per_rank:
        micro = [collate_segments(keep, segs, pad_id) for segs in rank]
        micro += [_dummy(pad_id, shared=True) for _ in range(micro_batches - len(micro))]
        batches.append(RankBatch(micro, num_seqs=num_seqs, num_tokens=num_tokens))
    return batches, padding_stats(batches, keep, 1)


def padding_stats(
    batches: Sequence[RankBatch], samples: Sequence[TrainSample], micro_batch_size: int
) -> dict[str, float]:
    """Padded fraction of the token slots the learner computes, and of the same rows in their
    original order (`samples`, in micro-batches of consecutive rows): the saving of sorting."""
    real = slots = 0
    for b in batches:
        for mb in b.micro_batches:
            if mb.completion_mask.any():
                real += int(mb.attention_mask.sum())
                slots += mb.attention_mask.size
    lengths = [len(s.prompt_ids) + len(s.completion_ids) for s in samples]
    naive = sum(
        len(c) * max(c) for c in (lengths[j : j + micro_batch_size] for j in range(0, len(lengths), micro_batch_size))
    )
    return {
        "pad_frac": 1.0 - real / slots if slots else 0.0,
        "pad_frac_unsorted": 1.0 - sum(lengths) / naive if naive else 0.0,
        "rows_trained": float(
            sum(int(mb.completion_mask.any(axis=1).sum()) for b in batches for mb in b.micro_batches)
        ),
    }
