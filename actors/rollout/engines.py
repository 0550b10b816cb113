"""The policy's engines for the commands that only generate: the trainer's rollout worker in
this process, or a fleet of rollout actors on Ray. Evaluation (actors/eval/session.py) and
`data.build --context model` (actors/rollout/context_engine.py) both go through `Engines`.

    count = 0   one RolloutWorker in this process: no Ray (a laptop, CI, a single GPU box)
    count >= 1  a RolloutFleet (actors/rollout/fleet.py) of `count` rollout actors, started exactly as
                the trainer starts them (engine_env, num_cpus / num_gpus per actor, restarts);
                every request is queued and dealt in chunks to the least loaded actor, so the
                engines share one stage's prompts and scale with the cluster

Every request carries its own sampling seed (actors/driver/generation.py request_seed), so an answer
does not depend on which engine produced it or how many there are. The weights are the
checkpoint's and never change: an actor that Ray restarts loads them again from the checkpoint,
so the fleet's catch-up (the trainer's push of the current weights) has nothing to do.

Ray itself (start or join, shut down) belongs to the caller: one session serves the engines and
the test-runner pool of a command.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from actors.rollout.actor import GenerationRequest, GenerationResult, RolloutWorker
from actors.rollout.fleet import RolloutFleet
from conf import device as devices
from conf.config import RolloutConfig
from conf.logs import actor_env
from conf.runtime import Runtime

if TYPE_CHECKING:
    from actors.rollout.fleet import RolloutFleet


def engine_device(count: int, num_gpus: float) -> devices.Device:
    """A fleet's device comes from its config, as the trainer's (the driver may sit on a node
    without GPUs: a cluster's head); an in-process engine uses what this process has."""
    if count:
        return "cuda" if num_gpus > 0 else "cpu"
    return devices.present()


def _unchanged_weights(handle: Any) -> int:
    """The fleet's catch-up: a restarted actor already holds the checkpoint (policy version 0)."""
    return 0


class Engines:
    def __init__(self, engine: RolloutConfig, run: Runtime, *, count: int, name: str) -> None:
        """`count` rollout actors on Ray (Ray initialised by the caller), or 0: one worker here.
        `engine.max_prompts_per_call` is the chunk one generate call gets (vLLM batches it)."""
        self.engine, self.count, self.device = engine, count, run.device
        self.worker: RolloutWorker | None = None
        self.fleet: RolloutFleet | None = None
        if count:
            self.fleet = RolloutFleet(replace(engine, num_actors=count), run, catch_up=_unchanged_weights)
            self.fleet.wait_ready()
        else:
            # vLLM would print its INFO lines into the command's output; quiet it as an actor is
            # (conf/logs.py; a caller's own setting wins).
            for key, value in actor_env(run.verbose).items():
                os.environ.setdefault(key, value)
            self.worker = RolloutWorker(engine, run, f"{name}-0", seed=run.seed)

    def generate(
        self, requests: list[GenerationRequest], done: Callable[[int], None] = lambda n: None
    ) -> list[GenerationResult]:
        """Results in request order; `done(k)` after each k of them (a progress line's feed).
        On a fleet every request is queued at once and the results are taken in order, a chunk
        at a time, while the fleet keeps every engine busy."""
        step = self.engine.max_prompts_per_call
        results: list[GenerationResult] = []
        if self.fleet is not None:
            self.fleet.submit(requests)
        for start in range(0, len(requests), step):
            chunk = requests[start : start + step]
            if self.fleet is not None:
                results += self.fleet.results([r.request_id for r in chunk])
            else:
                assert self.worker is not None
                results += self.worker.generate(chunk)
            done(len(chunk))
        return results

    def describe(self) -> dict[str, Any]:
        """What summary files record: where the answers came from."""
        where = {"engines": self.count, "where": "ray" if self.count else "in-process", "device": self.device}
        if self.fleet is None:
            return where | {"tensor_parallel_size": self.engine.tensor_parallel_size}
        fleet = self.fleet.metrics()
        return where | {
            "tensor_parallel_size": self.engine.tensor_parallel_size,
            "gpus_per_engine": self.engine.num_gpus,
            "rollout_actor_restarts": fleet["rollout_actor_restarts"],
            "requeued_prompts": fleet["requeued_prompts"],
        }

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.shutdown()
            self.worker = None
        if self.fleet is not None:
            self.fleet.shutdown()
            self.fleet = None
