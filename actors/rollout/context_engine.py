"""The engine that answers `--context model`'s questions: one rollout engine, greedy decoding.

data/context/question.py writes the questions (which unchanged files are relevant to an issue and
its changed files) and reads the answers; this puts them to a model through the trainer's own
engine set-up, through the same `Engines` as evaluation (actors/rollout/engines.py). When the build
runs on Ray (`--workers`, `--ray-address`) the engine is one rollout actor (a fleet of one), so
on a cluster it lands on a GPU node (`rollout.num_gpus`); otherwise it runs in this process. Each
call sends a whole batch of questions (`rollout.max_prompts_per_call`: one generate call), which vLLM
schedules together; a question whose prompt does not fit the engine's context (max_model_len -
max_new_tokens) is not sent and comes back as None.
"""

from __future__ import annotations

from collections.abc import Callable

from actors.rollout.actor import GenerationRequest, request_seed
from actors.rollout.engines import Engines, engine_device
from conf.config import ModelConfig, RolloutConfig, TrainerConfig
from conf.runtime import Runtime
from data.mining.context_step import Asker, ContextConfig
from data.prompt import encode_prompt
from learner.models import chat_template, resolve, tokenizer

# Seconds the engine's start, or one batch of questions, may take on Ray (as a training phase).
TIMEOUT_S = TrainerConfig.phase_timeout_s


class ContextEngine:
    def __init__(self, model: str, engine: RolloutConfig, *, dtype: str, seed: int, on_ray: bool) -> None:
        """`model`: a known model name (ModelConfig.name), a Hugging Face directory or a hub id."""
        model_cfg = ModelConfig(name=model)
        self.path = resolve(model_cfg)
        self.cfg, self.seed = engine, seed
        self.tokenizer = tokenizer(self.path, chat_template(model_cfg, self.path))  # ChatML for a model without one
        self.budget = engine.max_model_len - engine.max_new_tokens  # prompt tokens that fit
        count = 1 if on_ray else 0
        run = Runtime(self.path, dtype, seed, engine_device(count, engine.num_gpus), timeout_s=TIMEOUT_S)
        self.engines: Engines | None = Engines(engine, run, count=count, name="context")

    def ask(self, ids: list[str], messages: list[list[dict[str, str]]]) -> list[str | None]:
        """Greedy answers to the chat `messages` (one conversation per id), in order; None for a
        prompt over the budget."""
        return [answers[0] if answers else None for answers in self.sample(ids, messages, 1, 0.0)]

    def sample(
        self, ids: list[str], messages: list[list[dict[str, str]]], n: int, temperature: float
    ) -> list[list[str]]:
        """`n` answers to each conversation at `temperature` (seeded per id), in order; [] for a
        prompt over the budget (data.inject's model injector asks for several bugs per source)."""
        prompts = [encode_prompt(self.tokenizer, m) for m in messages]
        requests = [
            GenerationRequest(f"context/{i}", p, n, request_seed(self.seed, i), temperature)
            for i, p in zip(ids, prompts, strict=True)
            if len(p) <= self.budget
        ]
        if not requests:
            return [[] for _ in ids]
        assert self.engines is not None, "ask after close"
        results = self.engines.generate(requests)
        texts = {r.request_id: [c.text for c in r.completions] for r in results}
        return [texts.get(f"context/{i}", []) for i in ids]

    def close(self) -> None:
        if self.engines is not None:
            self.engines.shutdown()
            self.engines = None


def engine_asker(cfg: ContextConfig, seed: int, on_ray: bool) -> Callable[[], Asker]:
    """A factory of the engine, started on first use (an imports-only build starts none)."""

    def start() -> Asker:
        return ContextEngine(cfg.model, cfg.engine(), dtype=cfg.dtype, seed=seed, on_ray=on_ray)

    return start
