"""The rollout fleet: the driver's handle on every rollout actor, their work queue and membership.

Work: prompts are queued and dispatched in chunks to the actor with the least outstanding work
(each actor holds at most one chunk; a chunk is one `generate` call, which vLLM batches). A
chunk is `ceil(queued / live actors)` prompts, capped by `rollout.max_prompts_per_call`, so one
engine gets the whole step in one call while several engines share it by load.

Waiting: `wait` is the driver's one way to wait for anything while engines work: for Ray refs
(a learner update, a weight sync) and/or generation results, with the phase's deadline. Each
turn it collects finished chunks and, unless told not to, hands queued prompts to idle
engines: during a weight sync nothing new is dispatched (a chunk sent then would queue on the
engine before its part of the collective and stall it); during training it is (async mode
generates the next steps meanwhile).

Failures: a chunk whose actor dies is re-queued whole (its samples are regenerated: a partially
generated group would be biased towards short answers). Ray restarts the actor
(`max_restarts`); the restarted actor has its initial weights, so before it samples again it
catches up (`catch_up`: the current weights through the object store, actors/driver/weight_sync.py).
Every call has a timeout.

Membership: actors can be added (`add_actor`) or removed (`remove_actor`, which lets the
actor finish its chunk) while training runs, and `scale_to` does either to reach a count. A
rendezvous weight-sync group cannot change members: `needs_group` tells the weight sync to
re-form it over the live actors before its next push.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from actors.observe.phases import PhaseTimeout
from actors.rollout.actor import GenerationRequest, GenerationResult, RolloutWorker, engine_env
from conf import device as devices
from conf.config import RolloutConfig
from conf.runtime import Runtime
from learner.transport import WeightTransport

log = logging.getLogger(__name__)


@dataclass
class Member:
    actor_id: str
    handle: Any
    chunk: tuple[Any, list[GenerationRequest]] | None = None  # (ref, requests) in flight
    retiring: bool = False  # removal requested: no new work; killed once idle


@dataclass
class FleetStats:
    restarts: int = 0
    requeued_prompts: int = 0
    added: int = 0
    removed: int = 0


class RolloutFleet:
    def __init__(self, cfg: RolloutConfig, run: Runtime, *, catch_up: Callable[[Any], int]) -> None:
        """Starts cfg.num_actors engines (call wait_ready before use). `catch_up(handle)` gives an
        engine outside the sync group the learner's current weights and returns their version."""
        self.cfg, self.run, self.timeout_s, self.device, self.catch_up = cfg, run, run.timeout_s, run.device, catch_up
        self.env = engine_env(cfg, run.device, verbose=run.verbose)
        self.remote_cls = ray.remote(RolloutWorker)
        self.members: list[Member] = []
        self.queue: deque[GenerationRequest] = deque()
        self.done: dict[str, GenerationResult] = {}
        self.stats = FleetStats()
        self.group: frozenset[str] | None = None  # actor ids of the current weight-sync group
        # Called with the member right after a chunk is dispatched to it: a seam for tests that
        # inject faults (kill an engine mid-generation) and for instrumentation.
        self.on_dispatch: list[Callable[[Member], None]] = []
        self._ids = itertools.count()
        for _ in range(cfg.num_actors):
            self._spawn()

    def wait_ready(self) -> list[dict[str, Any]]:
        return self._await([m.handle.ready.remote() for m in self.members], "start-up", "rollout actors")

    # -- membership -----------------------------------------------------------------------

    def _spawn(self, resources: dict[str, float] | None = None) -> Member:
        actor_id = f"rollout-{next(self._ids)}"
        handle = self.remote_cls.options(
            num_cpus=self.cfg.num_cpus,
            num_gpus=self.cfg.num_gpus,
            resources=resources or {},
            max_restarts=self.cfg.max_restarts,
            max_task_retries=0,
            runtime_env={"env_vars": self.env},
        ).remote(self.cfg, self.run, actor_id, seed=self.run.seed + len(self.members))
        member = Member(actor_id, handle)
        self.members.append(member)
        return member

    def add_actor(self, resources: dict[str, float] | None = None) -> str:
        """Start one more engine; it receives the current weights (object store) before any work."""
        member = self._spawn(resources)
        self._await(member.handle.ready.remote(), "scale-up", member.actor_id)
        self.catch_up(member.handle)
        self.stats.added += 1
        return member.actor_id

    def remove_actor(self, actor_id: str | None = None) -> str:
        """Retire an actor (the newest by default): it takes no new work and is killed once its
        chunk is done; the group is re-formed without it at the next sync."""
        live = self.live
        if len(live) <= 1:
            raise ValueError("cannot remove the last rollout actor")
        member = next(m for m in reversed(live) if actor_id in (None, m.actor_id))
        member.retiring = True
        self._reap()
        return member.actor_id

    def scale_to(self, wanted: int) -> None:
        """Add or retire actors until `wanted` (at least one) are live."""
        while len(self.live) < wanted:
            log.info("[fleet] adding a rollout actor (%d -> %d)", len(self.live), wanted)
            self.add_actor()
        while len(self.live) > max(1, wanted):
            log.info("[fleet] removing %s (%d -> %d)", self.remove_actor(), len(self.live) + 1, wanted)

    def _reap(self) -> None:
        for m in [m for m in self.members if m.retiring and m.chunk is None]:
            with contextlib.suppress(RayActorError, GetTimeoutError):  # it is being removed anyway
                ray.get(m.handle.shutdown.remote(), timeout=self.timeout_s)
            ray.kill(m.handle, no_restart=True)
            self.members.remove(m)
            self.stats.removed += 1

    @property
    def live(self) -> list[Member]:
        return [m for m in self.members if not m.retiring]

    # -- work -----------------------------------------------------------------------------

    def submit(self, requests: list[GenerationRequest]) -> None:
        self.queue.extend(requests)

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Submit and wait for exactly these requests; results in request order."""
        self.submit(requests)
        return self.results([r.request_id for r in requests])

    def results(self, request_ids: Sequence[str]) -> list[GenerationResult]:
        """Wait for (and take) the results of submitted requests, in the given order."""
        self.wait([], "generate", request_ids=request_ids)
        return [self.done.pop(r) for r in request_ids]

    def wait(
        self, refs: Sequence[Any], phase: str, *, dispatch: bool = True, request_ids: Sequence[str] = ()
    ) -> list[Any]:
        """Wait until `refs` are done and `request_ids` generated, within the phase deadline
        (`timeout_s`), while collecting finished chunks and (dispatch) handing out queued
        prompts; returns the refs' values."""
        deadline = time.monotonic() + self.timeout_s
        pending = list(refs)
        while pending or any(r not in self.done for r in request_ids):
            if time.monotonic() > deadline:
                missing = [r for r in request_ids if r not in self.done]
                raise PhaseTimeout(
                    f"phase {phase}: {len(pending)} call(s) and {len(missing)} prompt(s) not done within "
                    f"{self.timeout_s:.0f} s (rollout actors: {[m.actor_id for m in self.members]})"
                )
            if dispatch:
                self._dispatch()
            chunks = {m.chunk[0]: m for m in self.members if m.chunk is not None}
            if not pending and not chunks:  # nothing can make progress: the prompts were never submitted
                raise RuntimeError(f"phase {phase}: waiting for prompts that are neither queued nor in flight")
            ray.wait(pending + list(chunks), num_returns=1, timeout=0.5)
            ready, _ = ray.wait(list(chunks), num_returns=len(chunks), timeout=0) if chunks else ([], [])
            for ref in ready:
                self._collect(chunks[ref])
            pending = ray.wait(pending, num_returns=len(pending), timeout=0)[1] if pending else []
            self._reap()
        return ray.get(list(refs))

    def _dispatch(self) -> None:
        idle = [m for m in self.live if m.chunk is None]
        while self.queue and idle:
            size = min(self.cfg.max_prompts_per_call, math.ceil(len(self.queue) / len(self.live)))
            member = idle.pop(0)
            chunk = [self.queue.popleft() for _ in range(min(size, len(self.queue)))]
            member.chunk = (member.handle.generate.remote(chunk), chunk)
            for hook in self.on_dispatch:
                hook(member)

    def _collect(self, member: Member) -> None:
        assert member.chunk is not None
        ref, chunk = member.chunk
        member.chunk = None
        try:
            for result in ray.get(ref, timeout=self.timeout_s):
                self.done[result.request_id] = result
        except RayActorError:
            self._on_death(member, chunk)

    def _on_death(self, member: Member, chunk: list[GenerationRequest]) -> None:
        """Re-queue the chunk at the front; the actor restarts (Ray) with its initial weights."""
        log.warning("[fleet] %s died; re-queueing %d prompt(s)", member.actor_id, len(chunk))
        self.queue.extendleft(reversed(chunk))
        self.stats.restarts += 1
        self.stats.requeued_prompts += len(chunk)
        self.group = None  # the restarted process is in no group: re-form at the next sync
        if member.retiring:
            return
        self._wait_restarted(member)
        self.catch_up(member.handle)

    def _wait_restarted(self, member: Member) -> None:
        """Calls made while Ray restarts an actor fail fast: retry until it answers."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                ray.get(member.handle.ready.remote(), timeout=max(1.0, deadline - time.monotonic()))
                return
            except RayActorError as exc:
                if time.monotonic() > deadline:
                    raise PhaseTimeout(
                        f"phase restart: {member.actor_id} did not come back within "
                        f"{self.timeout_s:.0f} s (rollout.max_restarts={self.cfg.max_restarts})"
                    ) from exc
                time.sleep(1.0)
            except GetTimeoutError as exc:
                raise PhaseTimeout(
                    f"phase restart: {member.actor_id} did not come back within {self.timeout_s:.0f} s"
                ) from exc

    # -- weight-sync group ------------------------------------------------------------------

    @property
    def engine_ranks_per_actor(self) -> int:
        """Sync-group ranks per actor: the engine's TP workers (1 on CPU)."""
        return devices.engine_tensor_parallel(self.device, self.cfg.tensor_parallel_size)

    def needs_group(self) -> bool:
        return self.group != frozenset(m.actor_id for m in self.live)

    def join_group(self, transport: type[WeightTransport], spec: Any) -> list[Any]:
        """Refs of every live actor joining a new group (ranks 1.. in member order)."""
        per_engine = self.engine_ranks_per_actor
        self.group = frozenset(m.actor_id for m in self.live)
        return [m.handle.join_weights.remote(transport, spec, 1 + i * per_engine) for i, m in enumerate(self.live)]

    # -- misc -----------------------------------------------------------------------------

    def _await(self, refs: Any, phase: str, who: str) -> Any:
        try:
            return ray.get(refs, timeout=self.timeout_s)
        except GetTimeoutError as exc:
            raise PhaseTimeout(f"phase {phase}: {who} did not answer within {self.timeout_s:.0f} s") from exc

    def prompt_logprobs(self, token_ids: list[int]) -> list[float]:
        return self._await(self.live[0].handle.prompt_logprobs.remote(token_ids), "verify", self.live[0].actor_id)

    def metrics(self) -> dict[str, int]:
        return {
            "rollout_actors": len(self.live),
            "rollout_actor_restarts": self.stats.restarts,
            "requeued_prompts": self.stats.requeued_prompts,
            "queue_depth": len(self.queue),
        }

    def shutdown(self) -> None:
        for m in self.members:
            with contextlib.suppress(Exception):  # best effort: the actor may already be gone
                ray.get(m.handle.shutdown.remote(), timeout=60)
            ray.kill(m.handle, no_restart=True)
        self.members.clear()
