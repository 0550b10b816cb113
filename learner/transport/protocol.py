"""Weight transports: how the learner's weights travel to the rollout engines after an update.

Who is who. The sender is learner rank 0 (LearnerWorker; under ZeRO-3 every rank takes part
in gathering each bucket, rank 0 alone packs and sends). The receivers are the engines'
workers, one per tensor-parallel rank (actors/rollout/vllm_ext.py, inside vLLM). The driver
(actors/driver/weight_sync.py, `WeightSync.push`) only starts the calls on both sides and awaits them.
What travels is the bucket plan's flat buffers (buckets.py), in plan order, with the
`policy_version` of the weights (a `Shipment`).

A transport is one class; the driver resolves `trainer.weight_transport` to it once and hands
the class to both sides, which instantiate it (`TransportCache`) and keep the instance (a
collective one holds its group between syncs):

    sender   prepare(world_size, backend, timeout_s) -> spec   rendezvous transports only
    both     join(spec, rank)                                   rendezvous transports only; rank 0 = sender
    sender   send(flats) -> payload                              flats: the packed buckets, in plan order
    receiver receive(plan, payload, device) -> (name, tensor)*   fed to the engine's loader as they arrive

`rendezvous = True` (collective.py, the default: gloo on CPU, NCCL on GPU): receivers take
part in the send, so the members first join a group (re-formed by the driver when the set of
engines changes) and the driver starts send and receive together; `send` returns nothing.
`rendezvous = False` (object_store.py): `send` returns a payload (numpy arrays in Ray's object
store) that the driver hands to each receiver; Ray resolves it before the receiver runs, so
no group is needed and any single engine can be served (a new or restarted one catches up
this way whatever the configured transport).

Adding a transport: one file here with a `WeightTransport` subclass registered under a name
(`@TRANSPORTS.register("name")`), and its name in the package's import line (__init__.py);
`trainer.weight_transport` accepts every registered name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from conf.registry import Registry
from learner.transport.buckets import Bucket


@dataclass(frozen=True)
class Shipment:
    """What a receiver is handed for one sync: the weights' policy_version and the payload
    (None for rendezvous transports, whose bytes arrive through the group)."""

    version: int
    payload: Any = None


class WeightTransport(ABC):
    # Receivers take part in the send (see the module docstring).
    rendezvous: ClassVar[bool] = False

    def prepare(self, world_size: int, backend: str, timeout_s: float) -> Any:
        """Sender: open what receivers join (rendezvous transports); returns the join spec."""
        raise NotImplementedError(f"{type(self).__name__} needs no group")

    def join(self, spec: Any, rank: int) -> None:
        """Every member joins as `rank` (0 = the sender); blocks until all have joined."""
        raise NotImplementedError(f"{type(self).__name__} needs no group")

    @abstractmethod
    def send(self, flats: Iterable[torch.Tensor]) -> Any:
        """Sender: deliver every packed bucket, in plan order; returns the payload for receivers."""

    @abstractmethod
    def receive(self, plan: Sequence[Bucket], payload: Any, device: torch.device) -> Iterator[tuple[str, torch.Tensor]]:
        """Receiver: (name, tensor) of every slot, bucket by bucket, as they arrive."""


TRANSPORTS: Registry[type[WeightTransport]] = Registry("weight transport", "trainer.weight_transport")
# The transport that serves a single engine outside the group (new or restarted).
CATCH_UP = "object_store"


class TransportCache:
    """One instance per transport class in a process (sender or receiver side)."""

    def __init__(self) -> None:
        self._instances: dict[type[WeightTransport], WeightTransport] = {}

    def __call__(self, cls: type[WeightTransport]) -> WeightTransport:
        if cls not in self._instances:
            self._instances[cls] = cls()
        return self._instances[cls]
