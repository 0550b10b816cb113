"""Reward actors: a pool of Ray actor processes scoring rollouts with the configured reward kind.

The workers are generic: each holds the run's reward kind (reward/kinds/__init__.py, `reward.kind`),
prepares an instance once and scores outputs against it. The paper's similarity reward is pure
CPU work, quadratic in the diff size, and holds the GIL, so rewards run in processes (Ray
actors), never threads. The pool owns:

- placement: `reward.num_workers` actors of `reward.num_cpus` CPUs each, independent of the
  rollout and learner actors, so reward capacity scales on its own;
- batching by load: jobs are cut into batches of `reward.batch_size`; each worker holds one
  batch at a time and gets the next when it returns one, so a slow batch never idles the
  others. Results are written back by job index: they return in input order, with their
  rollout ids, whatever the completion order;
- data movement: each instance (shared by the group's 16 rollouts) is put in the object store
  once per call; batches carry ObjectRefs and a worker fetches an instance and prepares it
  (the similarity kind: the oracle's diffs) once per call, not once per batch;
- failures: a worker that dies, or whose call exceeds `reward.call_timeout_s`, is killed and
  replaced, and its batch is redone. The deadline measures the call alone: a replacement
  worker gets work only once its process has started (a process start on a loaded machine
  takes seconds, and counting it made healthy jobs miss a short deadline). A batch that fails
  twice is split into single jobs, and a single job that fails twice is given up with reward 0
  and a reason (counted in
  `reward_lost_jobs`), so one poisonous output cannot stall training. A call that raises (a
  bug) is redone the same way without replacing the worker.

Bounds on one answer, from the first to the last resort (the paper has none of them; it does
not say how its reward workers were run):
- decided inside the scorer from sizes alone, deterministic: the work cap of rule 3
  (`reward.apply.MAX_APPLY_WORK`: -1) and the pair cap (`reward.max_pair_seconds`: 0, counted
  as a timeout), see `reward.apply` and `reward.similarity`;
- the CPU budget, for what those estimates cannot foresee: each answer is scored under a soft
  RLIMIT_CPU of `reward.max_pair_seconds` x `reward.answer_cpu_factor` seconds (rounded up to a
  whole second) on top of what the worker process has used (`reward.workers.cpu_limit`); past
  it the kernel ends the worker wherever it is (SIGXCPU, a C loop included), and the failure
  path above replaces it and redoes its batch. So one try of an answer costs at most its budget
  plus one second of CPU, and an answer that passes it every time is tried three times at most
  (twice in its batch, once alone) before it is given up with reward 0 and a reason. Kinds
  whose scoring waits on the test-runner pool score a batch at once (their tests run in
  parallel): their budget is the batch's, the per-answer budget times its answers, as for the
  patches of agent episodes;
- `call_timeout_s`, a wall clock per call: a call that waits without using CPU.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import RayError, RayTaskError

from conf.config import RewardConfig
from data.schema import Instance
from reward import RewardResult
from reward.kinds import RewardKind, make_reward
from reward.workers import cpu_limit

if TYPE_CHECKING:
    from actors.driver.generation import Group

# A batch (then a single job) is tried this many times before its jobs are given up.
_MAX_ATTEMPTS = 2
# Instances a worker keeps fetched and prepared (a step has prompts_per_step of them; 32 in the paper).
_PREPARED_INSTANCES = 256
# A worker process that has not started after this long will not: its node cannot run it.
# Not a knob: a start takes seconds; this bound only turns a hang into an error.
START_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class ScoreJob:
    rollout_id: str  # opaque id chosen by the caller, returned with the result
    instance_id: str  # key into the `instances` mapping of the call
    output: str  # the model's completion text; with `is_patch`, an agent episode's final patch
    is_patch: bool = False  # score it as a patch (RewardKind.score_patches), not as an answer


@dataclass(frozen=True)
class ScoredJob:
    rollout_id: str
    result: RewardResult


class RewardWorker:
    """Scores batches of jobs with one reward kind; a plain class, made a Ray actor by the pool
    (testable without Ray)."""

    def __init__(self, kind: RewardKind):
        self.kind = kind
        # ObjectRef hex -> prepared state. A pool call puts each instance once and sends this
        # worker several batches of its group: fetch and prepare it once, not per batch.
        self._prepared: OrderedDict[str, Any] = OrderedDict()

    def pid(self) -> int:
        """The worker's process id (a readiness probe, and lets tests see replacements)."""
        return os.getpid()

    def _prepare(self, value: Instance | ray.ObjectRef) -> Any:
        if not isinstance(value, ray.ObjectRef):
            return self.kind.prepare(value)
        key = value.hex()
        if key in self._prepared:
            self._prepared.move_to_end(key)
            return self._prepared[key]
        # Nested ObjectRefs are not resolved by Ray: fetch here (a failure fails the call, and
        # the pool redoes the batch).
        state = self._prepared[key] = self.kind.prepare(ray.get(value))
        if len(self._prepared) > _PREPARED_INSTANCES:
            self._prepared.popitem(last=False)
        return state

    @staticmethod
    def _instance(value: Instance | ray.ObjectRef) -> Instance:
        return value if isinstance(value, Instance) else ray.get(value)

    def _cpu_s(self, answers: int) -> float:
        """The CPU budget of a call that scores `answers` answers (the module docstring)."""
        return self.kind.cfg.max_pair_seconds * self.kind.cfg.answer_cpu_factor * answers

    def _score_items(self, pairs: list[tuple[Any, str]]) -> list[RewardResult]:
        """kind.score_batch under the CPU budget: one answer at a time, or the whole batch for a
        kind that waits on the test-runner pool for it at once."""
        if self.kind.uses_test_pool:
            with cpu_limit(self._cpu_s(len(pairs))):
                return self.kind.score_batch(pairs)
        results = []
        for pair in pairs:
            with cpu_limit(self._cpu_s(1)):
                results += self.kind.score_batch([pair])
        return results

    def score(self, jobs: list[ScoreJob], instances: Mapping[str, Instance | ray.ObjectRef]) -> list[ScoredJob]:
        """Score every job against its instance; an output never makes this raise (one over its
        CPU budget ends this process instead: the pool redoes the batch)."""
        results: list[RewardResult | None] = [None] * len(jobs)
        items = []
        patches = [i for i, job in enumerate(jobs) if job.is_patch]
        if patches:
            try:
                with cpu_limit(self._cpu_s(len(patches))):
                    scored = self.kind.score_patches([(self._instance(instances[jobs[i].instance_id]), jobs[i].output)
                                                      for i in patches])  # fmt: skip
            except RayError:
                raise
            except Exception as exc:
                scored = [RewardResult(0.0, f"internal error: {exc!r}")] * len(patches)
            for i, result in zip(patches, scored, strict=True):
                results[i] = result
        for i, job in enumerate(jobs):
            if job.is_patch:
                continue
            try:
                items.append((i, self._prepare(instances[job.instance_id]), job.output))
            except RayError:
                raise  # the object store failed, not the scorer: let the pool redo the batch
            except Exception as exc:  # a bug costs this rollout its reward, not the step
                results[i] = RewardResult(0.0, f"internal error: {exc!r}")
        try:
            batch = self._score_items([(state, output) for _, state, output in items])
        except RayError:
            raise
        except Exception as exc:
            batch = [RewardResult(0.0, f"internal error: {exc!r}")] * len(items)
        for (i, _, _), result in zip(items, batch, strict=True):
            results[i] = result
        return [ScoredJob(job.rollout_id, result) for job, result in zip(jobs, results, strict=True) if result]


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
        self.kind = make_reward(cfg)
        # max_restarts=0: Ray must not restart a dead worker behind our back; the pool replaces it
        # and knows which batch to redo.
        self._remote_cls = ray.remote(RewardWorker).options(num_cpus=cfg.num_cpus, max_restarts=0)
        self._workers: list[Any] = [None] * cfg.num_workers
        self._starting: dict[Any, tuple[int, float]] = {}  # readiness ref -> (worker index, deadline)
        self._stats = {"reward_timeouts": 0, "reward_actor_restarts": 0, "reward_lost_jobs": 0}
        for index in range(cfg.num_workers):
            self._start(index)
        while self._starting:
            self._await_start(None)

    def _start(self, index: int) -> None:
        """(Re)place worker `index`; it takes work once its readiness probe answers."""
        self._workers[index] = self._remote_cls.remote(self.kind)
        self._starting[self._workers[index].pid.remote()] = (index, time.monotonic() + START_TIMEOUT_S)

    def _replace(self, index: int) -> None:
        ray.kill(self._workers[index], no_restart=True)
        self._start(index)
        self._stats["reward_actor_restarts"] += 1

    def _await_start(self, idle: deque[int] | None, timeout: float | None = None) -> None:
        """Wait (up to `timeout`, default the earliest start deadline) for starting workers;
        those that answered become idle."""
        wait_s = min(d for _, d in self._starting.values()) - time.monotonic() if timeout is None else timeout
        ready, _ = ray.wait(list(self._starting), num_returns=len(self._starting), timeout=max(0.0, wait_s))
        for ref in ready:
            index, _ = self._starting.pop(ref)
            try:
                ray.get(ref)
            except RayError as exc:
                raise RuntimeError(f"reward worker {index} could not start: {exc}") from exc
            if idle is not None:
                idle.append(index)
        late = [index for index, deadline in self._starting.values() if deadline <= time.monotonic()]
        if late:
            raise RuntimeError(
                f"reward worker(s) {late} did not start within {START_TIMEOUT_S:.0f} s "
                f"(reward.num_cpus={self.cfg.num_cpus} each)"
            )

    @property
    def workers(self) -> list[Any]:
        """The current worker handles (for tests that inject faults, and debugging)."""
        return list(self._workers)

    def worker_pids(self) -> list[int]:
        """Process ids of the current workers (for tests and debugging)."""
        return ray.get([worker.pid.remote() for worker in self._workers], timeout=START_TIMEOUT_S)

    def score_groups(self, groups: Sequence[Group]) -> list[ScoredJob]:
        """Every completion of every group, in order; rollout ids "<request id>/<sample>"."""
        jobs = [
            ScoreJob(f"{g.request_id}/{j}", g.item.instance_id, c.text, is_patch=c.episode is not None)
            for g in groups
            for j, c in enumerate(g.completions)
        ]
        return self.score(jobs, {g.item.instance_id: g.item.instance for g in groups})

    def score(self, jobs: Sequence[ScoreJob], instances: Mapping[str, Instance]) -> list[ScoredJob]:
        """Score jobs on the workers; results in input order. Raises only for unknown instance ids."""
        missing = sorted({job.instance_id for job in jobs} - instances.keys())
        if missing:
            raise KeyError(f"jobs name instance_id(s) missing from instances: {missing[:5]}")
        refs = {iid: ray.put(instances[iid]) for iid in dict.fromkeys(job.instance_id for job in jobs)}
        size = self.cfg.batch_size
        queue = deque(_Batch(tuple(range(start, min(start + size, len(jobs))))) for start in range(0, len(jobs), size))
        results: list[ScoredJob | None] = [None] * len(jobs)
        in_flight: dict[Any, _Call] = {}
        starting = {index for index, _ in self._starting.values()}
        idle = deque(i for i in range(len(self._workers)) if i not in starting)
        while queue or in_flight:
            while queue and idle:
                worker, batch = idle.popleft(), queue.popleft()
                batch_jobs = [jobs[i] for i in batch.indices]
                batch_refs = {job.instance_id: refs[job.instance_id] for job in batch_jobs}
                ref = self._workers[worker].score.remote(batch_jobs, batch_refs)
                # The deadline starts now: the worker is known to be up.
                in_flight[ref] = _Call(worker, batch, time.monotonic() + self.cfg.call_timeout_s)
            deadlines = [call.deadline for call in in_flight.values()] + [d for _, d in self._starting.values()]
            wait_s = max(0.0, min(deadlines) - time.monotonic())
            done, _ = ray.wait(list(in_flight) + list(self._starting), num_returns=1, timeout=wait_s)
            if self._starting:
                self._await_start(idle, timeout=0.0)
            for ref in done:
                if ref in in_flight:
                    call = in_flight.pop(ref)
                    if self._collect(ref, call, jobs, results, queue):
                        idle.append(call.worker)
            self._expire(in_flight, jobs, results, queue)
        complete = [scored for scored in results if scored is not None]
        assert len(complete) == len(jobs), "every batch ends scored or given up"
        self._stats["reward_timeouts"] += sum(scored.result.timed_out for scored in complete)
        return complete

    def _collect(
        self, ref: Any, call: _Call, jobs: Sequence[ScoreJob], results: list[ScoredJob | None], queue: deque[_Batch]
    ) -> bool:
        """Store a finished call's results; returns whether its worker is alive and idle."""
        try:
            scored = ray.get(ref)
        except RayTaskError as exc:  # the method raised; the process is alive
            self._retry(call.batch, f"the reward call raised {exc.cause!r}", jobs, results, queue)
            return True
        except RayError as exc:  # the process died (or its result was lost): replace it
            self._replace(call.worker)
            # Ray does not say which signal ended it; the CPU budget is the one the pool sets.
            why = f"the reward worker died ({type(exc).__name__}; over the CPU budget of {self._budget()}, or killed)"
            self._retry(call.batch, why, jobs, results, queue)
            return False
        for index, item in zip(call.batch.indices, scored, strict=True):
            results[index] = item
        return True

    def _budget(self) -> str:
        seconds = self.cfg.max_pair_seconds * self.cfg.answer_cpu_factor
        return f"{seconds:g} s per answer"

    def _expire(
        self,
        in_flight: dict[Any, _Call],
        jobs: Sequence[ScoreJob],
        results: list[ScoredJob | None],
        queue: deque[_Batch],
    ) -> None:
        now = time.monotonic()
        for ref, call in list(in_flight.items()):
            if call.deadline <= now:
                del in_flight[ref]
                self._replace(call.worker)  # a stuck C loop cannot be interrupted: kill the process
                self._retry(call.batch, f"the reward call exceeded {self.cfg.call_timeout_s:g} s", jobs, results, queue)

    def _retry(
        self,
        batch: _Batch,
        reason: str,
        jobs: Sequence[ScoreJob],
        results: list[ScoredJob | None],
        queue: deque[_Batch],
    ) -> None:
        """Redo a failed batch first; after repeated failures isolate its jobs, then give them up."""
        if batch.attempt + 1 < _MAX_ATTEMPTS:
            queue.appendleft(_Batch(batch.indices, batch.attempt + 1))
        elif len(batch.indices) > 1:
            queue.extendleft(_Batch((index,), _MAX_ATTEMPTS - 1) for index in reversed(batch.indices))
        else:
            (index,) = batch.indices
            results[index] = ScoredJob(jobs[index].rollout_id, RewardResult(0.0, f"lost: {reason}, twice"))
            self._stats["reward_lost_jobs"] += 1

    def stats(self) -> dict[str, float]:
        """Cumulative counters for the metrics: timeouts, actor restarts, jobs given up, and the
        kind's own (the test-runner pool's, for kinds that run tests)."""
        return {**self._stats, **self.kind.stats()}

    def shutdown(self) -> None:
        """Kill the workers (their state is disposable) and what the kind started."""
        for worker in self._workers:
            ray.kill(worker, no_restart=True)
        self.kind.shutdown()
        self._workers = []
        self._starting.clear()
