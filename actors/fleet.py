"""The rollout fleet: the driver's handle on every rollout actor.

It creates the actors (each with its own resources, so rollout capacity scales independently
of the learner), spreads a step's prompts over them, and makes them members of the weight-sync
group (sync ranks 1.., in actor order; see actors/weight_sync.py).
"""

from __future__ import annotations

import math
from typing import Any

import ray

from actors import weight_sync
from actors.rollout import GenerationRequest, GenerationResult, RolloutWorker
from conf.config import RolloutConfig


class RolloutFleet:
    def __init__(self, cfg: RolloutConfig, *, model_path: str, dtype: str, seed: int, timeout_s: float) -> None:
        self.cfg, self.model_path, self.dtype, self.seed, self.timeout_s = cfg, model_path, dtype, seed, timeout_s
        self.remote_cls = ray.remote(RolloutWorker)
        self.actors: list[Any] = [self._spawn(i) for i in range(cfg.num_actors)]
        self.info = ray.get([a.ready.remote() for a in self.actors], timeout=timeout_s)

    def _spawn(self, index: int) -> Any:
        # Ray caps an actor's OMP_NUM_THREADS at its (fractional) CPU share; a CPU engine gets
        # cpu_threads instead (vLLM-CPU sizes its torch thread pool from this variable).
        env = {} if self.cfg.num_gpus > 0 else {"OMP_NUM_THREADS": str(self.cfg.cpu_threads)}
        return self.remote_cls.options(num_cpus=self.cfg.num_cpus, num_gpus=self.cfg.num_gpus,
                                       runtime_env={"env_vars": env}).remote(
            self.cfg, self.model_path, self.dtype, self.seed + index, f"rollout-{index}")

    @property
    def engine_ranks(self) -> int:
        """Sync-group ranks the fleet takes (TP workers per engine, 1 on CPU)."""
        return len(self.actors) * (self.cfg.tensor_parallel_size if self.cfg.num_gpus > 0 else 1)

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Split requests evenly over the actors (one call each, so each engine batches its
        share), await all, and return results in request order."""
        per_actor = math.ceil(len(requests) / len(self.actors))
        chunks = [requests[i : i + per_actor] for i in range(0, len(requests), per_actor)]
        refs = [a.generate.remote(chunk) for a, chunk in zip(self.actors, chunks)]
        results = [r for part in ray.get(refs, timeout=self.timeout_s) for r in part]
        by_id = {r.request_id: r for r in results}
        return [by_id[r.request_id] for r in requests]

    def sync_join(self, spec: weight_sync.SyncGroupSpec, plan: list[weight_sync.Bucket]) -> list[Any]:
        per_engine = self.engine_ranks // len(self.actors)
        return [a.join_weight_sync.remote(spec, 1 + i * per_engine, plan) for i, a in enumerate(self.actors)]

    def receive_weights(self, version: int) -> list[Any]:
        return [a.receive_weights.remote(version) for a in self.actors]

    def prompt_logprobs(self, token_ids: list[int], actor: int = 0) -> list[float]:
        return ray.get(self.actors[actor].prompt_logprobs.remote(token_ids), timeout=self.timeout_s)

    def stats(self) -> list[dict[str, float]]:
        return ray.get([a.stats.remote() for a in self.actors], timeout=self.timeout_s)

    def shutdown(self) -> None:
        ray.get([a.shutdown.remote() for a in self.actors], timeout=self.timeout_s)
        for a in self.actors:
            ray.kill(a)
