"""Reward actors: a pool of Ray actor processes scoring rollouts with the SWE-RL reward.

The reward (`reward/`) is pure CPU work, quadratic in the diff size, and holds the GIL, so it
runs in processes (Ray actors), never threads. The pool owns:

- placement: `reward.num_workers` actors of `reward.num_cpus` CPUs each, independent of the
  rollout and learner actors, so reward capacity scales on its own;
- batching by load: jobs are cut into batches of `reward.batch_size`; each worker holds one
  batch at a time and gets the next when it returns one, so a slow batch never idles the
  others. Results are written back by job index: they return in input order, with their
  rollout ids, whatever the completion order;
- data movement: each instance (code context + oracle files, shared by the group's 16
  rollouts) is put in the object store once per call; batches carry ObjectRefs and a worker
  fetches an instance and computes its oracle diffs once per call, not once per batch;
- failures: a worker that dies, or whose call exceeds `reward.call_timeout_s`, is killed and
  replaced, and its batch is redone. A batch that fails twice is split into single jobs, and a
  single job that fails twice is given up with reward 0 and a reason (counted in
  `reward_lost_jobs`), so one poisonous output cannot stall training. A call that raises (a
  bug) is redone the same way without replacing the worker.

Time cap: `reward.max_pair_seconds` is decided inside the scorer from the sizes alone (see
`reward.similarity`): deterministic, no preemption needed. `call_timeout_s` is the backstop
for what that estimate cannot foresee. The paper has neither (it does not say how its reward
workers were run).
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from conf.config import RewardConfig
from reward import RewardResult, oracle_diffs, score_with_oracle_diffs

# A batch (then a single job) is tried this many times before its jobs are given up.
_MAX_ATTEMPTS = 2
# Instances a worker keeps fetched and diffed (a step has prompts_per_step of them; 32 in the paper).
_PREPARED_INSTANCES = 256


@dataclass(frozen=True)
class ScoreJob:
    rollout_id: str  # opaque id chosen by the caller, returned with the result
    instance_id: str  # key into the `instances` mapping of the call
    output: str  # the model's completion text


@dataclass(frozen=True)
class RewardInstance:
    code_context: dict[str, str]  # path -> content at the base commit
    oracle_new_content: dict[str, str]  # path -> content after the oracle patch


@dataclass(frozen=True)
class ScoredJob:
    rollout_id: str
    result: RewardResult


class RewardWorker:
    """Scores batches of jobs; a plain class, made a Ray actor by the pool (testable without Ray)."""

    def __init__(self, max_pair_seconds: float):
        self.max_pair_seconds = max_pair_seconds
        # ObjectRef hex -> (instance, its oracle diffs). A pool call puts each instance once and
        # sends this worker several batches of its group: fetch and diff it once, not per batch.
        self._prepared: OrderedDict[str, tuple[RewardInstance, dict[str, str | None]]] = OrderedDict()

    def pid(self) -> int:
        """The worker's process id (a readiness probe, and lets tests see replacements)."""
        return os.getpid()

    def _prepare(self, value: RewardInstance | ray.ObjectRef) -> tuple[RewardInstance, dict[str, str | None]]:
        key = value.hex() if isinstance(value, ray.ObjectRef) else None
        if key is not None and key in self._prepared:
            self._prepared.move_to_end(key)
            return self._prepared[key]
        # Nested ObjectRefs are not resolved by Ray: fetch here (a failure fails the call, and
        # the pool redoes the batch).
        instance = ray.get(value) if key is not None else value
        entry = (instance, oracle_diffs(instance.code_context, instance.oracle_new_content))
        if key is not None:
            self._prepared[key] = entry
            if len(self._prepared) > _PREPARED_INSTANCES:
                self._prepared.popitem(last=False)
        return entry

    def score(self, jobs: list[ScoreJob], instances: dict[str, RewardInstance]) -> list[ScoredJob]:
        """Score every job against its instance; an output never makes this raise."""
        scored = []
        for job in jobs:
            try:
                instance, oracle = self._prepare(instances[job.instance_id])
                result = score_with_oracle_diffs(instance.code_context, oracle, job.output,
                                                 max_pair_seconds=self.max_pair_seconds)
            except RayError:
                raise  # the object store failed, not the scorer: let the pool redo the batch
            except Exception as exc:  # a scorer bug costs this rollout its reward, not the step
                result = RewardResult(0.0, f"internal error: {exc!r}")
            scored.append(ScoredJob(job.rollout_id, result))
        return scored


@dataclass(frozen=True)
class _Batch:
    indices: tuple[int, ...]  # positions of its jobs in the caller's list
    attempt: int = 0


@dataclass(frozen=True)
class _Call:
    worker: int
    batch: _Batch
    deadline: float


class RewardPool:
    """The driver's handle on the reward actors (Ray must already be initialised)."""

    def __init__(self, cfg: RewardConfig):
        self.cfg = cfg
        # max_restarts=0: Ray must not restart a dead worker behind our back; the pool replaces it
        # and knows which batch to redo.
        self._remote_cls = ray.remote(num_cpus=cfg.num_cpus, max_restarts=0)(RewardWorker)
        self._workers = [self._spawn() for _ in range(cfg.num_workers)]
        self._stats = {"reward_timeouts": 0, "reward_actor_restarts": 0, "reward_lost_jobs": 0}
        ray.get([worker.pid.remote() for worker in self._workers], timeout=cfg.call_timeout_s)

    def _spawn(self) -> Any:
        return self._remote_cls.remote(self.cfg.max_pair_seconds)

    def _replace(self, index: int) -> None:
        ray.kill(self._workers[index], no_restart=True)
        self._workers[index] = self._spawn()
        self._stats["reward_actor_restarts"] += 1

    def worker_pids(self) -> list[int]:
        """Process ids of the current workers (for tests and debugging)."""
        return ray.get([worker.pid.remote() for worker in self._workers], timeout=self.cfg.call_timeout_s)

    def score(self, jobs: Sequence[ScoreJob], instances: Mapping[str, RewardInstance]) -> list[ScoredJob]:
        """Score jobs on the workers; results in input order. Raises only for unknown instance ids."""
        missing = sorted({job.instance_id for job in jobs} - instances.keys())
        if missing:
            raise KeyError(f"jobs name instance_id(s) missing from instances: {missing[:5]}")
        refs = {iid: ray.put(instances[iid]) for iid in dict.fromkeys(job.instance_id for job in jobs)}
        size = self.cfg.batch_size
        queue = deque(_Batch(tuple(range(start, min(start + size, len(jobs))))) for start in range(0, len(jobs), size))
        results: list[ScoredJob | None] = [None] * len(jobs)
        in_flight: dict[Any, _Call] = {}
        idle = deque(range(len(self._workers)))
        while queue or in_flight:
            while queue and idle:
                worker, batch = idle.popleft(), queue.popleft()
                batch_jobs = [jobs[i] for i in batch.indices]
                batch_refs = {job.instance_id: refs[job.instance_id] for job in batch_jobs}
                ref = self._workers[worker].score.remote(batch_jobs, batch_refs)
                in_flight[ref] = _Call(worker, batch, time.monotonic() + self.cfg.call_timeout_s)
            wait_s = max(0.0, min(call.deadline for call in in_flight.values()) - time.monotonic())
            done, _ = ray.wait(list(in_flight), num_returns=1, timeout=wait_s)
            for ref in done:
                call = in_flight.pop(ref)
                idle.append(call.worker)
                self._collect(ref, call, jobs, results, queue)
            self._expire(in_flight, idle, jobs, results, queue)
        complete = [scored for scored in results if scored is not None]
        assert len(complete) == len(jobs), "every batch ends scored or given up"
        self._stats["reward_timeouts"] += sum(scored.result.timed_out for scored in complete)
        return complete

    def _collect(self, ref: Any, call: _Call, jobs: Sequence[ScoreJob], results: list[ScoredJob | None],
                 queue: deque[_Batch]) -> None:
        try:
            scored = ray.get(ref)
        except RayTaskError as exc:  # the method raised; the process is alive
            self._retry(call.batch, f"the reward call raised {exc.cause!r}", jobs, results, queue)
            return
        except RayError as exc:  # the process died (or its result was lost): replace it
            self._replace(call.worker)
            self._retry(call.batch, f"the reward worker died ({type(exc).__name__})", jobs, results, queue)
            return
        for index, item in zip(call.batch.indices, scored):
            results[index] = item

    def _expire(self, in_flight: dict[Any, _Call], idle: deque[int], jobs: Sequence[ScoreJob],
                results: list[ScoredJob | None], queue: deque[_Batch]) -> None:
        now = time.monotonic()
        for ref, call in list(in_flight.items()):
            if call.deadline <= now:
                del in_flight[ref]
                self._replace(call.worker)  # a stuck C loop cannot be interrupted: kill the process
                idle.append(call.worker)
                self._retry(call.batch, f"the reward call exceeded {self.cfg.call_timeout_s:g} s", jobs, results,
                            queue)

    def _retry(self, batch: _Batch, reason: str, jobs: Sequence[ScoreJob], results: list[ScoredJob | None],
               queue: deque[_Batch]) -> None:
        """Redo a failed batch first; after repeated failures isolate its jobs, then give them up."""
        if batch.attempt + 1 < _MAX_ATTEMPTS:
            queue.appendleft(_Batch(batch.indices, batch.attempt + 1))
        elif len(batch.indices) > 1:
            queue.extendleft(_Batch((index,), _MAX_ATTEMPTS - 1) for index in reversed(batch.indices))
        else:
            (index,) = batch.indices
            results[index] = ScoredJob(jobs[index].rollout_id, RewardResult(0.0, f"lost: {reason}, twice"))
            self._stats["reward_lost_jobs"] += 1

    def stats(self) -> dict[str, int]:
        """Cumulative counters for the metrics: timeouts, actor restarts, jobs given up."""
        return dict(self._stats)

    def shutdown(self) -> None:
        """Kill the workers (their state is disposable)."""
        for worker in self._workers:
            ray.kill(worker, no_restart=True)
        self._workers = []
