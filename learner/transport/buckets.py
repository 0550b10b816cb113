"""The bucket format every weight transport carries: a fixed plan, and flat buffers packed from it.

A plan is the model's parameters, in order, grouped into buckets of at most
`trainer.sync_bucket_mb` (one dtype per bucket, so a bucket is one flat tensor; a larger tensor
gets a bucket of its own). It is computed once from the learner's parameter names and shapes,
deterministically, so every member of a sync computes or receives the same plan and no
per-tensor metadata travels with the weights. Sender: `pack` one bucket's tensors into a flat
buffer. Receiver: `unpack` views of it, by name, for the engine's loader.

Parameter names are Hugging Face's (what the engine's loader expects). A tied lm_head is not
in the plan (named_parameters lists a tied weight once): the engine re-ties it after loading.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class TensorSlot:
    name: str  # Hugging Face parameter name, as the engine's loader expects it
    shape: tuple[int, ...]
    offset: int  # in elements, inside the bucket's flat buffer
    numel: int


@dataclass(frozen=True)
class Bucket:
    dtype: str  # one dtype per bucket, so the buffer is a single flat tensor
    numel: int
    slots: tuple[TensorSlot, ...]

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPES[self.dtype].itemsize


def plan_buckets(params: Iterable[tuple[str, Sequence[int], str]], bucket_bytes: int) -> list[Bucket]:
    """Group (name, shape, dtype) in order into buckets of at most `bucket_bytes` (a larger
    tensor gets a bucket of its own). Deterministic: every member computes the same plan."""
    buckets: list[Bucket] = []
    slots: list[TensorSlot] = []
    cur_dtype, cur_numel = "", 0

    def close() -> None:
        if slots:
            buckets.append(Bucket(cur_dtype, cur_numel, tuple(slots)))

    for name, shape, dtype in params:
        numel = int(np.prod(shape)) if len(shape) else 1
        size = numel * DTYPES[dtype].itemsize
        if slots and (dtype != cur_dtype or (cur_numel * DTYPES[dtype].itemsize + size) > bucket_bytes):
            close()
            slots, cur_numel = [], 0
        cur_dtype = dtype
        slots.append(TensorSlot(name, tuple(int(s) for s in shape), cur_numel, numel))
        cur_numel += numel
    close()
    return buckets


def pack(bucket: Bucket, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The bucket's tensors, in slot order, as one contiguous flat buffer."""
    flat = torch.empty(bucket.numel, dtype=DTYPES[bucket.dtype], device=tensors[0].device if tensors else "cpu")
    for slot, t in zip(bucket.slots, tensors, strict=True):
        flat[slot.offset : slot.offset + slot.numel].copy_(t.detach().reshape(-1))
    return flat


def unpack(bucket: Bucket, flat: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """Views into `flat`, one per slot, with the slot's name and shape."""
    return [(s.name, flat[s.offset : s.offset + s.numel].view(s.shape)) for s in bucket.slots]


def digest(flat: torch.Tensor) -> str:
    """Content hash of a bucket buffer (the bytes of its slots in order)."""
    return hashlib.sha256(flat.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
