"""The `collective` weight transport: one broadcast per bucket over a dedicated gloo or NCCL group.

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
belongs to DeepSpeed on the learner and to vLLM on the engines. The backend comes from
conf/device.py; `_new_backend` is the one place that builds it.

Protocol of one sync:
  1. Every member holds the same bucket plan (buckets.py), so no metadata travels per sync.
  2. For bucket k = 0, 1, ...: the sender broadcasts the packed buffer; receivers unpack views
     of a fresh buffer and hand them to the engine's in-place loader, which processes a layer
     as soon as all its tensors have arrived. Both sides keep one bucket ahead in flight: the
     sender packs (and under ZeRO-3 gathers) bucket k+1 while k is on the wire, the receivers
     have k+1 posted while they load k.
Ordering: collectives on one group complete in the order they are issued and every member
issues the same sequence (the plan), so bucket k on the sender is bucket k everywhere. Ray runs
a (non-async) actor's calls in submission order, so a sync submitted after a generate call
starts after that generate finished: no request ever sees half-updated weights.

The same file holds the stateless-store helpers the learner's own DeepSpeed rendezvous uses.
"""

from __future__ import annotations

import datetime
import os
import socket
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from learner.transport.buckets import DTYPES, Bucket, unpack
from learner.transport.protocol import TRANSPORTS, WeightTransport

# Set to "0" by actors.cluster.join.loopback_only for a local cluster: every socket on 127.0.0.1.
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@dataclass(frozen=True)
class SyncGroupSpec:
    host: str  # address of the sender's TCPStore
    port: int
    world_size: int
    backend: str  # "gloo" (CPU) or "nccl" (GPU)
    timeout_s: float


def node_host() -> str:
    """The address other processes reach this node's stores on (127.0.0.1 on a local cluster)."""
    if os.environ.get(LOOPBACK_ENV) == "0":
        return "127.0.0.1"
    # Ray: the transports import without it (bench/learner_gpu.py)
    import ray

    return str(ray.util.get_node_ip_address())


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


def receive(
    group: dist.ProcessGroup, plan: Sequence[Bucket], device: torch.device
) -> Iterator[tuple[str, torch.Tensor]]:
    """Receiver side: yields (name, tensor) bucket by bucket as broadcasts arrive. Bucket k+1
    is already posted while the engine loads bucket k (double buffering). A fresh buffer per
    bucket: the engine's layerwise loader may hold views until a layer is complete."""

    def post(bucket: Bucket) -> tuple[Bucket, torch.Tensor, Any]:
        flat = torch.empty(bucket.numel, dtype=DTYPES[bucket.dtype], device=device)
        return bucket, flat, group.broadcast(flat, 0)

    buckets = iter(plan)
    nxt = next(buckets, None)
    posted = post(nxt) if nxt is not None else None
    while posted is not None:
        bucket, flat, work = posted
        work.wait()
        nxt = next(buckets, None)
        posted = post(nxt) if nxt is not None else None
        yield from unpack(bucket, flat)


@TRANSPORTS.register("collective")
class CollectiveTransport(WeightTransport):
    """Buckets broadcast over a stateless gloo/NCCL group (the module docstring)."""

    rendezvous = True

    def __init__(self) -> None:
        self._listen: socket.socket | None = None  # the sender's store socket, prepare -> join
        self._group: dist.ProcessGroup | None = None

    def prepare(self, world_size: int, backend: str, timeout_s: float) -> SyncGroupSpec:
        self._listen = listen_socket(node_host())
        host, port = self._listen.getsockname()[:2]
        return SyncGroupSpec(host, port, world_size, backend, timeout_s)

    def join(self, spec: SyncGroupSpec, rank: int) -> None:
        listen, self._listen = (self._listen, None) if rank == 0 else (None, self._listen)
        self._group = join_group(spec, rank, listen)

    def send(self, flats: Iterable[torch.Tensor]) -> None:
        assert self._group is not None, "join the group first"
        send(self._group, flats)

    def receive(self, plan: Sequence[Bucket], payload: Any, device: torch.device) -> Iterator[tuple[str, torch.Tensor]]:
        assert self._group is not None, "join the group first"
        return receive(self._group, plan, device)
