"""The engine that answers `--context model`'s questions: one rollout worker, greedy decoding.

data/context_model.py writes the questions (which unchanged files are relevant to an issue and
its changed files) and reads the answers; this puts them to a model through the trainer's own
engine set-up (actors/rollout.py: RolloutWorker, engine_args), as evaluation does. When the
build runs on Ray (`--workers`, `--ray-address`) the worker is a Ray actor, so on a cluster it
lands on a GPU node (`--context-gpus`); otherwise it runs in this process. Each call sends a
whole batch of questions, which vLLM schedules together; a question whose prompt does not fit
the engine's context (max_model_len - max_new_tokens) is not sent and comes back as None.
"""

from __future__ import annotations

import os
from typing import Any

from actors.rollout import GenerationRequest, RolloutWorker, engine_env
from conf import device as devices
from conf.config import ModelConfig, RolloutConfig
from conf.logs import actor_env
from conf.runtime import Runtime
from data.prompt import encode_prompt
from learner.models import resolve, tokenizer


class ContextEngine:
    def __init__(self, model: str, engine: RolloutConfig, *, dtype: str, seed: int, on_ray: bool) -> None:
        """`model`: a known model name (ModelConfig.name) or a Hugging Face directory."""
        self.path = resolve(ModelConfig(name=model))
        self.cfg, self.seed = engine, seed
        self.tokenizer = tokenizer(self.path)
        self.budget = engine.max_model_len - engine.max_new_tokens  # prompt tokens that fit
        device = "cuda" if on_ray and engine.num_gpus > 0 else devices.present()
        run = Runtime(self.path, dtype, seed, device, timeout_s=float("inf"))
        self.handle: Any = None
        self.worker: RolloutWorker | None = None
        if on_ray:
            import ray

            env = engine_env(engine, device, verbose=False)
            cls = ray.remote(RolloutWorker).options(
                num_cpus=engine.num_cpus, num_gpus=engine.num_gpus, runtime_env={"env_vars": env}, max_restarts=0
            )
            self.handle = cls.remote(engine, run, "context", seed=seed)
            ray.get(self.handle.ready.remote())
        else:
            # In this process vLLM would print its INFO lines into the build's output; quiet it
            # as an actor is (a caller's own setting wins).
            for key, value in actor_env(False).items():
                os.environ.setdefault(key, value)
            self.worker = RolloutWorker(engine, run, "context", seed=seed)

    def ask(self, ids: list[str], messages: list[list[dict[str, str]]]) -> list[str | None]:
        """Greedy answers to the chat `messages` (one conversation per id), in order; None for a
        prompt over the budget."""
        from actors.generation import request_seed  # its module starts Ray's imports: only when asked

        prompts = [encode_prompt(self.tokenizer, m) for m in messages]
        requests = [
            GenerationRequest(f"context/{i}", p, 1, request_seed(self.seed, i), 0.0)
            for i, p in zip(ids, prompts, strict=True)
            if len(p) <= self.budget
        ]
        if not requests:
            return [None] * len(ids)
        if self.handle is not None:
            import ray

            results = ray.get(self.handle.generate.remote(requests))
        else:
            assert self.worker is not None
            results = self.worker.generate(requests)
        texts = {r.request_id: r.completions[0].text for r in results}
        return [texts.get(f"context/{i}") for i in ids]

    def close(self) -> None:
        if self.worker is not None:
            self.worker.shutdown()
            self.worker = None
        if self.handle is not None:
            import ray

            ray.get(self.handle.shutdown.remote())
            ray.kill(self.handle)
            self.handle = None
