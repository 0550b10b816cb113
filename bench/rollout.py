"""Generation speed of vLLM inside the project's rollout actor vs bare vLLM in one process.

    python bench/rollout.py [--prompts 2 --samples 16 --tokens 128 --repeats 3] [--variants ...]

Both sides get the same engine arguments (actors/rollout.py `engine_args`: SmolLM2, float32,
the default RolloutConfig), the same token-id prompts, sampling seeds and thread count:
- "bare": `vllm.LLM` in this process, `generate` timed around the call;
- "actor": `RolloutWorker` made remote as the fleet makes it (actors/fleet.py: its CPU share,
  its runtime env, OMP_NUM_THREADS = rollout.cpu_threads), `generate.remote` timed from this
  driver until the results arrive (so the per-call path and result serialization count).
Variants of the actor side say where a gap comes from (`--variants`):
- "actor":        Ray started as the trainer starts it (dashboard on, trainer.include_dashboard);
- "nodash":       Ray without the dashboard and its agents' periodic work;
Calls alternate between the sides (bare, actor, ...) so that a load change on this shared
machine hits both; each side's figure is its best of `--repeats` calls. Tokens/s counts the
sampled tokens. The last line is `actor/bare = X` for the trainer's set-up ("actor").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conf.config import ModelConfig, RolloutConfig  # noqa: E402


def requests(tokenizer: Any, prompts: int, samples: int) -> list[Any]:
    from actors.rollout import GenerationRequest

    texts = [f"Write a Python function number {i} that parses a config file and explain it." for i in range(prompts)]
    chats = [
        tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True, tokenize=False)
        for t in texts
    ]
    ids = [tokenizer(chat, add_special_tokens=False)["input_ids"] for chat in chats]
    return [GenerationRequest(f"bench/{i}", list(p), samples, 1234 + i) for i, p in enumerate(ids)]


class Bare:
    """vLLM in this process, with the rollout actor's engine arguments and sampling."""

    def __init__(self, cfg: RolloutConfig, model_path: str) -> None:
        from vllm import LLM

        from actors.rollout import RolloutWorker, engine_args

        os.environ["OMP_NUM_THREADS"] = str(cfg.cpu_threads)
        self.cfg, self.model_path = cfg, model_path
        self.llm = LLM(**engine_args(cfg, model_path, "float32", 0, "cpu"))
        self._sampling = RolloutWorker._sampling.__get__(self)  # the actor's own SamplingParams

    def tokens(self, reqs: list[Any]) -> int:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        outs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=r.prompt_ids) for r in reqs],
            [self._sampling(r, SamplingParams) for r in reqs],
            use_tqdm=False,
        )
        return sum(len(c.token_ids) for o in outs for c in o.outputs)


class InActor:
    """RolloutWorker as the fleet starts it, called through Ray."""

    def __init__(self, cfg: RolloutConfig, model_path: str) -> None:
        import ray

        from actors.fleet import RolloutFleet
        from conf.runtime import Runtime

        run = Runtime(model_path=model_path, dtype="float32", seed=0, device="cpu", timeout_s=600.0)
        # The fleet's own spawn path (resources, runtime env, thread count), one member.
        self.fleet = RolloutFleet(cfg, run, catch_up=lambda handle: 0)
        self.fleet.wait_ready()
        self.handle = self.fleet.members[0].handle
        self._ray = ray

    def tokens(self, reqs: list[Any]) -> int:
        results = self._ray.get(self.handle.generate.remote(reqs))
        return sum(len(c.token_ids) for r in results for c in r.completions)

    def close(self) -> None:
        self._ray.get(self.handle.shutdown.remote())
        self.fleet.shutdown()


def best_rate(side: Any, reqs: list[Any]) -> float:
    start = time.perf_counter()
    tokens = side.tokens(reqs)
    return tokens / (time.perf_counter() - start)


def measure(
    variant: str, args: argparse.Namespace, cfg: RolloutConfig, bare: Bare, reqs: list[Any]
) -> tuple[float, float]:
    """Best tokens/s of the bare engine and of the actor, calls alternated, Ray up as `variant` says."""
    import ray

    from actors.cluster import init_ray

    init_ray("", num_cpus=4, include_dashboard=variant == "actor")
    actor = InActor(cfg, bare.model_path)
    actor.tokens(reqs)  # warm-up: first-call allocation
    rates: dict[str, list[float]] = {"bare": [], "actor": []}
    for _ in range(args.repeats):
        rates["bare"].append(best_rate(bare, reqs))
        rates["actor"].append(best_rate(actor, reqs))
    actor.close()
    ray.shutdown()
    return max(rates["bare"]), max(rates["actor"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--variants", default="nodash,actor", help="comma-separated: actor, nodash")
    args = p.parse_args()
    from learner import models

    model_path = models.resolve(ModelConfig())
    cfg = RolloutConfig(max_new_tokens=args.tokens, num_actors=1)
    reqs = requests(models.tokenizer(model_path), args.prompts, args.samples)
    shape = f"{args.prompts} prompts x {args.samples} samples x {args.tokens} tokens"
    print(f"model {model_path}; {shape}; best of {args.repeats}")
    bare = Bare(cfg, model_path)
    bare.tokens(reqs)  # warm-up
    alone = max(best_rate(bare, reqs) for _ in range(args.repeats))
    print(f"  bare, no Ray running: {alone:7.1f} tok/s")
    actor_rate = {}
    for variant in args.variants.split(","):
        with_ray, actor_rate[variant] = measure(variant, args, cfg, bare, reqs)
        print(
            f"  {variant:7s} bare (Ray up) {with_ray:7.1f} tok/s   actor {actor_rate[variant]:7.1f} tok/s   "
            f"actor/bare(Ray up) {actor_rate[variant] / with_ray:.3f}   "
            f"actor/bare(no Ray) {actor_rate[variant] / alone:.3f}"
        )
    bare.llm.llm_engine.engine_core.shutdown()
    print(f"actor/bare = {actor_rate.get('actor', next(iter(actor_rate.values()))) / alone:.3f}")


if __name__ == "__main__":
    main()
