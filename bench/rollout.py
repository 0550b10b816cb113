"""Generation speed of vLLM inside the project's rollout actor vs bare vLLM in one process.

    python bench/rollout.py [--prompts 2 --samples 16 --tokens 128 --repeats 2 --rounds 2]
                            [--variants actor,quiet] [--default-job]

Both sides get the same engine arguments (actors/rollout/actor.py `engine_args`: SmolLM2, float32,
the default RolloutConfig), the same token-id prompts, sampling seeds and thread count:
- "bare": `vllm.LLM` in this process, `generate` timed around the call;
- "actor": `RolloutWorker` made remote as the fleet makes it (actors/rollout/fleet.py: its CPU share,
  its runtime env, OMP_NUM_THREADS = rollout.cpu_threads), `generate.remote` timed from this
  driver until the results arrive (so the per-call path and result serialization count).
Each round measures the bare engine with no Ray running, then, per variant, starts Ray,
measures the bare engine with Ray up and no actor, starts the actor and alternates bare and
actor calls, and stops Ray. Rounds separate a drift of the machine (a shared one) from Ray's
effect; each figure is the best of `--repeats` calls, and the summary takes the median over
rounds as a fraction of the bare engine with no Ray. Variants (`--variants`):
- "actor":  Ray as before `ray.quiet` (dashboard on, ray.quiet=false);
- "nodash": the same without the dashboard;
- "quiet":  the trainer's default (dashboard on, ray.quiet: actors/cluster/quiet.py).
Tokens/s counts the sampled tokens. The last line is `actor/bare = X`: the last variant's
actor against the bare engine with no Ray running.

`--default-job` gives both sides the default job's own generation instead (`make run`: the
first step's prompts from the demo set as the trainer's loader yields them, `group_size`
samples each, the default `rollout.max_new_tokens`, the trainer's request seeds), and the last
line reads `default job: actor/bare = X`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conf.config import ModelConfig, RolloutConfig  # noqa: E402


def requests(tokenizer: Any, prompts: int, samples: int) -> list[Any]:
    from actors.rollout.actor import GenerationRequest

    texts = [f"Write a Python function number {i} that parses a config file and explain it." for i in range(prompts)]
    chats = [
        tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True, tokenize=False)
        for t in texts
    ]
    ids = [tokenizer(chat, add_special_tokens=False)["input_ids"] for chat in chats]
    return [GenerationRequest(f"bench/{i}", list(p), samples, 1234 + i) for i, p in enumerate(ids)]


def default_job(tokenizer: Any) -> tuple[list[Any], RolloutConfig]:
    """The default job's first generation: its prompts, group size, seeds and rollout config."""
    from actors.driver.generation import request_id
    from actors.rollout.actor import GenerationRequest, request_seed
    from conf.config import TrainConfig
    from data.loader import InstanceLoader

    cfg = TrainConfig()
    items = InstanceLoader.from_config(cfg.data, tokenizer, seed=cfg.seed).next_batch(cfg.trainer.prompts_per_step)
    rids = [request_id(1, slot, item.instance_id) for slot, item in enumerate(items)]
    reqs = [
        GenerationRequest(rid, item.prompt_ids, cfg.group_size, request_seed(cfg.seed, rid))
        for rid, item in zip(rids, items, strict=True)
    ]
    return reqs, dataclasses.replace(cfg.rollout, num_actors=1)


class Bare:
    """vLLM in this process, with the rollout actor's engine arguments and sampling."""

    def __init__(self, cfg: RolloutConfig, model_path: str) -> None:
        from vllm import LLM

        from actors.rollout.actor import RolloutWorker, engine_args

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

        from actors.rollout.fleet import RolloutFleet
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
) -> dict[str, float]:
    """Best tokens/s of the bare engine with Ray up but no actor yet ("ray"), then of the bare
    engine and the actor, calls alternated ("bare", "actor"), Ray started as `variant` says."""
    import ray

    from actors.cluster.join import init_ray

    init_ray("", num_cpus=4, include_dashboard=variant != "nodash", quiet=variant == "quiet")
    time.sleep(args.settle)  # Ray's start-up work (agents, prestarted workers) is not steady state
    ray_only = max(best_rate(bare, reqs) for _ in range(args.repeats))
    actor = InActor(cfg, bare.model_path)
    actor.tokens(reqs)  # warm-up: first-call allocation
    rates: dict[str, list[float]] = {"bare": [], "actor": []}
    for _ in range(args.repeats):
        rates["bare"].append(best_rate(bare, reqs))
        rates["actor"].append(best_rate(actor, reqs))
    actor.close()
    ray.shutdown()
    return {"ray": ray_only, "bare": max(rates["bare"]), "actor": max(rates["actor"])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2, help="rounds of (no Ray, then each variant)")
    p.add_argument("--settle", type=float, default=10.0, help="seconds after Ray starts before measuring")
    p.add_argument("--variants", default="actor,quiet", help="comma-separated: actor, nodash, quiet")
    p.add_argument("--default-job", action="store_true", help="the default job's prompts, group size and tokens")
    args = p.parse_args()
    from learner import models

    model_path = models.resolve(ModelConfig())
    if args.default_job:
        reqs, cfg = default_job(models.tokenizer(model_path))
        lengths = ", ".join(str(len(r.prompt_ids)) for r in reqs)
        shape = f"the default job: prompts of {lengths} tokens x {reqs[0].n} samples x {cfg.max_new_tokens} tokens"
    else:
        cfg = RolloutConfig(max_new_tokens=args.tokens, num_actors=1)
        reqs = requests(models.tokenizer(model_path), args.prompts, args.samples)
        shape = f"{args.prompts} prompts x {args.samples} samples x {args.tokens} tokens"
    print(f"model {model_path}; {shape}; best of {args.repeats}; {args.rounds} rounds")
    bare = Bare(cfg, model_path)
    bare.tokens(reqs)  # warm-up
    variants = args.variants.split(",")
    alone: list[float] = []
    got: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for r in range(args.rounds):
        alone.append(max(best_rate(bare, reqs) for _ in range(args.repeats)))
        print(f"round {r + 1}: bare, no Ray running {alone[-1]:7.1f} tok/s", flush=True)
        for v in variants:
            got[v].append(measure(v, args, cfg, bare, reqs))
            m = got[v][-1]
            print(
                f"  {v:7s} bare (Ray up, no actor) {m['ray']:7.1f}   bare (Ray up, actor idle) {m['bare']:7.1f}"
                f"   actor {m['actor']:7.1f} tok/s",
                flush=True,
            )
    bare.llm.llm_engine.engine_core.shutdown()
    base = statistics.median(alone)
    print(f"median over rounds, as a fraction of bare with no Ray ({base:.1f} tok/s):")
    for v in variants:
        ratio = {k: statistics.median(m[k] for m in got[v]) / base for k in ("ray", "bare", "actor")}
        print(
            f"  {v:7s} bare (Ray up, no actor) {ratio['ray']:.3f}   bare (Ray up, actor idle) {ratio['bare']:.3f}"
            f"   actor {ratio['actor']:.3f}"
        )
    last = variants[-1]
    label = "default job: actor/bare" if args.default_job else "actor/bare"
    print(f"{label} = {statistics.median(m['actor'] for m in got[last]) / base:.3f}")


if __name__ == "__main__":
    main()
