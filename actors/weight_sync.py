"""Weight sync: learner rank 0 -> every rollout engine, in buckets, over a dedicated group.

Rank layout of the sync group (separate from DeepSpeed's and from vLLM's own groups, so that
none of their collectives can interleave with ours):

    sync rank 0              learner DP rank 0 (sender; gathers ZeRO-3 shards bucket by bucket)
    sync rank 1 .. t         rollout actor 0, its engine's TP workers 0 .. t-1
    sync rank t+1 .. 2t      rollout actor 1, ...
    world_size = 1 + num_actors * tensor_parallel_size

    learner ranks 1..N-1 are not members: under ZeRO-3 they only take part in the gather that
    materialises each bucket's full parameters on rank 0 (inside DeepSpeed's own group).

The group is "stateless": a TCPStore hosted by the sender plus a gloo (CPU) or NCCL (GPU)
backend object built directly, without touching torch.distributed's default group, which
belongs to DeepSpeed on the learner and to vLLM on the engines. The one device-specific
line is `_new_backend`.

Protocol of one sync (version v):
  1. The plan (bucket list: names, shapes, dtypes, offsets) is fixed for a model; every member
     gets the same plan before the first sync, so no metadata travels per sync.
  2. For bucket k = 0, 1, ...: the sender packs the bucket's tensors into one flat buffer and
     broadcasts it; receivers unpack views of a fresh buffer and hand them to the engine's
     in-place loader, which processes a layer as soon as all its tensors have arrived. Both
     sides keep one bucket ahead in flight: the sender packs (and under ZeRO-3 gathers) bucket
     k+1 while k is on the wire, the receivers have k+1 posted while they load k.
  3. Receivers then reset the prefix cache (its KV entries were computed with the old weights),
     re-tie tied embeddings, and set their policy_version to v.
Ordering: collectives on one group complete in the order they are issued and every member
issues the same sequence (the plan), so bucket k on the sender is bucket k everywhere. Ray runs
a (non-async) actor's calls in submission order, so a sync submitted after a generate call
starts after that generate finished: no request ever sees half-updated weights.

Actors that cannot join the group (e.g. added after it was formed) get the same buckets through
the Ray object store (`pack_all`), as numpy arrays (~2 GB/s; torch tensors are copied twice).
"""

from __future__ import annotations

import datetime
import hashlib
import socket
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


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


@dataclass(frozen=True)
class SyncGroupSpec:
    host: str  # address of the sender's TCPStore
    port: int
    world_size: int
    backend: str  # "gloo" (CPU) or "nccl" (GPU)
    timeout_s: float


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
        size = numel * _DTYPES[dtype].itemsize
        if slots and (dtype != cur_dtype or (cur_numel * _DTYPES[dtype].itemsize + size) > bucket_bytes):
            close()
            slots, cur_numel = [], 0
        cur_dtype = dtype
        slots.append(TensorSlot(name, tuple(int(s) for s in shape), cur_numel, numel))
        cur_numel += numel
    close()
    return buckets


def pack(bucket: Bucket, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The bucket's tensors, in slot order, as one contiguous flat buffer."""
    flat = torch.empty(bucket.numel, dtype=_DTYPES[bucket.dtype], device=tensors[0].device if tensors else "cpu")
    for slot, t in zip(bucket.slots, tensors, strict=True):
        flat[slot.offset : slot.offset + slot.numel].copy_(t.detach().reshape(-1))
    return flat


def unpack(bucket: Bucket, flat: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """Views into `flat`, one per slot, with the slot's name and shape."""
    return [(s.name, flat[s.offset : s.offset + s.numel].view(s.shape)) for s in bucket.slots]


def digest(flat: torch.Tensor) -> str:
    """Content hash of a bucket buffer (tests compare group and object-store paths with it)."""
    return hashlib.sha256(flat.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def listen_socket(host: str) -> socket.socket:
    """A socket listening on (host, a free port), to host a TCPStore. torch's TCPStore binds to
    every interface when it opens its own port; handed this socket instead, it listens on
    `host` alone (127.0.0.1 on the laptop), and no other process can take the port meanwhile."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    sock.listen(128)
    return sock


def make_store(host: str, port: int, world_size: int, timeout_s: float, listen: socket.socket | None) -> dist.TCPStore:
    """The rendezvous store: hosted on `listen` by the master (listen given), joined by the others."""
    timeout = datetime.timedelta(seconds=timeout_s)
    if listen is None:
        return dist.TCPStore(host, port, world_size, is_master=False, timeout=timeout)
    return dist.TCPStore(host, port, world_size, is_master=True, timeout=timeout, master_listen_fd=listen.fileno())


def _new_backend(spec: SyncGroupSpec, store: dist.Store, rank: int) -> dist.ProcessGroup:
    timeout = datetime.timedelta(seconds=spec.timeout_s)
    if spec.backend == "gloo":
        return dist.ProcessGroupGloo(store, rank, spec.world_size, timeout)
    if spec.backend == "nccl":  # the only GPU-specific line of the protocol
        opts = dist.ProcessGroupNCCL.Options()
        opts._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, spec.world_size, opts)
    raise ValueError(f"sync backend {spec.backend!r}: accepted values are 'gloo', 'nccl'")


def join_group(spec: SyncGroupSpec, rank: int, listen: socket.socket | None = None) -> dist.ProcessGroup:
    """Join the sync group as `rank`; rank 0 hosts the store on `listen` (see listen_socket)
    and must pass it. Blocks until all members have joined."""
    if (rank == 0) != (listen is not None):
        raise ValueError("sync rank 0, and only it, hosts the store: pass its listen socket")
    store = make_store(spec.host, spec.port, spec.world_size, spec.timeout_s, listen)
    return _new_backend(spec, dist.PrefixStore("swe_rl_weight_sync", store), rank)


def send(group: dist.ProcessGroup, flats: Iterable[torch.Tensor]) -> int:
    """Sender side (sync rank 0): broadcast each packed bucket in plan order. `flats` is
    usually a generator that gathers (ZeRO-3) and packs one bucket at a time; bucket k+1 is
    packed while bucket k is on the wire (at most two buckets beyond the sender's shard exist
    at once). Returns the bytes sent."""
    sent, in_flight = 0, None
    for flat in flats:
        work = group.broadcast(flat, 0)
        if in_flight is not None:
            in_flight.wait()
        in_flight = work
        sent += flat.numel() * flat.element_size()
    if in_flight is not None:
        in_flight.wait()
    return sent


def receive(group: dist.ProcessGroup, plan: Sequence[Bucket], device: torch.device, digests: list[str] | None = None
            ) -> Iterator[tuple[str, torch.Tensor]]:
    """Receiver side: yields (name, tensor) bucket by bucket as broadcasts arrive. Bucket k+1
    is already posted while the engine loads bucket k (double buffering). A fresh buffer per
    bucket: the engine's layerwise loader may hold views until a layer is complete."""

    def post(bucket: Bucket) -> tuple[Bucket, torch.Tensor, Any]:
        flat = torch.empty(bucket.numel, dtype=_DTYPES[bucket.dtype], device=device)
        return bucket, flat, group.broadcast(flat, 0)

    buckets = iter(plan)
    nxt = next(buckets, None)
    posted = post(nxt) if nxt is not None else None
    while posted is not None:
        bucket, flat, work = posted
        work.wait()
        nxt = next(buckets, None)
        posted = post(nxt) if nxt is not None else None
        if digests is not None:
            digests.append(digest(flat))
        yield from unpack(bucket, flat)


def from_arrays(plan: Sequence[Bucket], arrays: Sequence[np.ndarray], device: torch.device,
                digests: list[str] | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """Object-store path: the same buckets, delivered as numpy arrays (bf16 travels as int16 bits)."""
    for bucket, arr in zip(plan, arrays, strict=True):
        flat = torch.from_numpy(np.array(arr, copy=True)).to(device)
        if bucket.dtype == "bfloat16":
            flat = flat.view(torch.bfloat16)
        if digests is not None:
            digests.append(digest(flat))
        yield from unpack(bucket, flat)


def to_array(flat: torch.Tensor) -> np.ndarray:
    """A packed bucket as a numpy array for the object store (numpy has no bfloat16)."""
    flat = flat.detach().cpu()
    return (flat.view(torch.int16) if flat.dtype == torch.bfloat16 else flat).numpy()
