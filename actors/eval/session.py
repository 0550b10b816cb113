"""What an evaluation runs on: its engines, its test runners, and the one Ray session they share.

Both modes of `python -m actors.evaluate` (oracle_context and agentless) generate through
`EvalSession.generate` and run tests through `EvalSession.run_jobs`:

    engines       `rollout.num_actors=N` rollout actors on Ray, started as the trainer starts them
                  (actors/rollout/engines.py, actors/rollout/fleet.py), or `rollout.num_actors=0`: one
                  worker in this process. A stage's requests are all queued at once, so N engines share it.
    test runners  `reward.execution.num_runners=N` runners of the test-runner pool
                  (reward/execution/pool.py), or 0 (agentless and agent only): one Runner in this process.
    Ray           started (a local cluster on 127.0.0.1) or joined (`ray.address`, or
                  RAY_ADDRESS under `ray job submit`) when the engines or the pool first need
                  it, and shut down once, at the end. The engines are shut down as soon as
                  generation is done, so their CPUs and GPUs are free for the test runs.

A request's id is "<stage>/<key>" and its seed request_seed(seed, id): the answers do not depend
on the number of engines or on which one drew them (tests/actors/test_eval_session.py checks
two rollout actors against one engine in this process).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from contextlib import ExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any

from actors.cluster.join import ray_session
from actors.rollout.actor import GenerationRequest, request_seed
from actors.rollout.engines import Engines, engine_device
from conf.progress import Progress
from conf.runtime import Runtime
from reward.execution.pool import TestPool
from reward.execution.runner import Runner

if TYPE_CHECKING:
    from conf.eval import EvalConfig
    from reward.execution.runner import TestJob, TestRun

log = logging.getLogger(__name__)

# Prompts per generate call: progress is shown between calls; vLLM batches within each.
PROMPTS_PER_CALL = 64


def local_cpus(cfg: EvalConfig) -> int:
    """Logical CPUs of a local cluster: the engines' and the test runners' reservations."""
    ro, ex = cfg.rollout, cfg.reward.execution
    need = ro.num_actors * ro.num_cpus + ex.num_runners * ex.num_cpus
    return max(1, math.ceil(need))


class EvalSession:
    def __init__(self, cfg: EvalConfig) -> None:
        """Starts nothing: the engines, the pool and Ray start on first use."""
        self.cfg = cfg
        self.stack = ExitStack()
        self.on_ray = False
        self.engines: Engines | None = None
        self.engines_used: dict[str, Any] = {"engines": cfg.rollout.num_actors}  # summary.json's record
        self.pool: TestPool | None = None
        self.runner: Runner | None = None

    def _ray(self) -> None:
        if not self.on_ray:
            self.stack.enter_context(ray_session(self.cfg.ray.address, local_cpus(self.cfg)))
            self.on_ray = True

    # -- generation -------------------------------------------------------------------------------

    def start_engines(self) -> Engines:
        if self.engines is None:
            cfg = self.cfg
            if cfg.rollout.num_actors:
                self._ray()
            device = engine_device(cfg.rollout.num_actors, cfg.rollout.num_gpus)
            model = cfg.model
            run = Runtime(model.name, model.dtype, cfg.seed, device, cfg.timeout_s, chat_template=model.chat_template)
            # Training's rollout section as it is; greedy or sampled is per request (generate's
            # temperature), top_p applies to sampled ones.
            rollout = dataclasses.replace(cfg.rollout, max_prompts_per_call=PROMPTS_PER_CALL)
            self.engines = Engines(rollout, run, count=cfg.rollout.num_actors, name="eval")
            log.info("[eval] %s", self.engines.describe())
        return self.engines

    def generate(self, stage: str, prompts: list[tuple[str, list[int]]], n: int, temperature: float) -> list[list[str]]:
        """`n` completions of each (key, prompt ids), in order; request ids "<stage>/<key>"."""

        engines = self.start_engines()
        rids = [(f"{stage}/{key}", ids) for key, ids in prompts]
        seed = self.cfg.seed
        requests = [GenerationRequest(r, ids, n, request_seed(seed, r), temperature) for r, ids in rids]
        with Progress("eval", f"{stage} prompts", len(requests), emit=log.info) as progress:
            results = engines.generate(requests, progress.update)
        return [[c.text for c in r.completions] for r in results]

    def close_engines(self) -> None:
        if self.engines is not None:
            self.engines_used = self.engines.describe()
            self.engines.shutdown()
            self.engines = None

    # -- tests ------------------------------------------------------------------------------------

    def run_jobs(self, jobs: list[TestJob], what: str) -> list[TestRun]:
        """The jobs' results in order, on the pool (or, reward.execution.num_runners=0, one Runner here)."""
        if not jobs:
            return []
        exec_cfg = self.cfg.reward.execution
        if exec_cfg.num_runners == 0:
            self.runner = self.runner or Runner(exec_cfg)
            return [self.runner.run(job) for job in jobs]
        if self.pool is None:
            self._ray()
            self.pool = TestPool(exec_cfg)
            self.stack.callback(self.pool.shutdown)  # before Ray's shutdown (the stack unwinds)
        return self.pool.run(jobs, what=what)

    # -- the end ----------------------------------------------------------------------------------

    def close(self) -> None:
        try:
            self.close_engines()
        finally:
            self.stack.close()

    def __enter__(self) -> EvalSession:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
