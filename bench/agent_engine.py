"""Agent episodes in flight vs the engine's busy fraction (actors/agent/rollout.py).

    python bench/agent_engine.py [--model tiny|smollm2-135m-instruct|DIR] [--episodes 1,4,16]
                                 [--turns 4] [--max-new-tokens 48]

One vLLM engine in this process (a RolloutWorker, as the rollout actor and `engines=0`
evaluation run it) and N episodes of one demo instance in flight, each in its own sandbox
session. Every turn is a real request to the engine (`--max-new-tokens` sampled tokens at most);
its action is scripted, since a model that writes none (the tiny one, SmolLM2-135M) would run no
command: `ls`, `cat` of a source file and the instance's test files with pytest, cycled, then a
submit. So an episode alternates generation and commands as an agent's does, with commands of
milliseconds to about a second.

Two ways to serve the same turns, with the same engine, in the same process (baseline first):

  drain       a turn that arrives while the engine is generating waits until every request in
              it is done, then joins the next batch (what the TurnBatcher did with
              `LLM.generate`);
  continuous  the TurnServer as training runs it: a turn joins the engine at its next step.

Per N: wall seconds of the N episodes, the engine's busy fraction, its mean batch (requests per
step), turns per second; and the ratio of the two walls. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.agent.episode import Message, run_episode, task_messages  # noqa: E402
from actors.agent.rollout import EnginePolicy, Sample, TurnEngine, TurnRequest, TurnServer  # noqa: E402
from actors.agent.tokens import EpisodeTokens, Template  # noqa: E402
from actors.rollout.actor import EngineTurns, RolloutWorker, engine_env  # noqa: E402
from conf.config import AgentConfig, ExecutionConfig, ModelConfig, engine_config  # noqa: E402
from conf.runtime import Runtime  # noqa: E402
from data.loader import read_instances  # noqa: E402
from data.prompt import encode_prompt  # noqa: E402
from learner.models import resolve  # noqa: E402
from reward.execution.runner import Runner  # noqa: E402

INSTANCE = "demo__calspan-3"


class DrainEngine:
    """A TurnEngine that admits new requests only once the engine is empty (the baseline)."""

    def __init__(self, inner: TurnEngine) -> None:
        self.inner, self.running = inner, 0
        self.waiting: list[tuple[int, TurnRequest]] = []

    def add(self, key: int, request: TurnRequest) -> None:
        if self.running:
            self.waiting.append((key, request))
        else:
            self.inner.add(key, request)
            self.running += 1

    def step(self) -> list[tuple[int, Sample]]:
        done = self.inner.step()
        self.running -= len(done)
        if not self.running:
            for key, request in self.waiting:
                self.inner.add(key, request)
            self.running, self.waiting = len(self.waiting), []
        return done


class ScriptedActions:
    """The engine answers every turn; the episode acts on a scripted turn instead (docstring)."""

    def __init__(self, policy: EnginePolicy, script: list[str]) -> None:
        self.policy, self.script = policy, script

    def next_turn(self, messages: list[Message]) -> str:
        self.policy.next_turn(messages)  # a real request: its tokens stay in the episode's context
        return self.script[len([m for m in messages if m.role == "assistant"])]


def _script(instance: Any, turns: int) -> list[str]:
    source = next(iter(instance.code_context))  # a file of the instance's code context
    tests = " ".join(sorted({t.split("::")[0] for t in instance.fail_to_pass or ()})) or "."
    cycle = ["ls -R", f"cat {source}", f"python -m pytest -q {tests}"]
    return [f"```bash\n{cycle[k % len(cycle)]}\n```" for k in range(turns - 1)] + ["```submit\n```"]


def _measure(worker: RolloutWorker, runner: Runner, instance: Any, n: int, args: Any, drain: bool) -> dict[str, Any]:
    # Both ways run the same episodes (same seeds, same prompts): the second would find the
    # first's turns in the prefix cache. Each starts with an empty cache.
    worker.llm.reset_prefix_cache()
    tokenizer = worker.llm.get_tokenizer()
    template = Template.of(tokenizer)
    engine = EngineTurns(worker)
    server = TurnServer(DrainEngine(engine) if drain else engine)
    context = args.max_model_len  # the episode's context limit: the engine's whole context
    cfg = AgentConfig(max_turns=args.turns, max_tokens=context)
    script = _script(instance, args.turns)
    prompt = encode_prompt(tokenizer, task_messages(cfg, instance))

    def one(k: int) -> int:
        tokens = EpisodeTokens(list(prompt))
        policy = EnginePolicy(
            server, tokenizer, template, tokens, max_new_tokens=args.max_new_tokens, max_tokens=context, seed=k
        )
        with runner.session(instance) as session:
            episode = run_episode(ScriptedActions(policy, script), session, instance.problem_statement, cfg)
        assert episode.ended_by == "submit", episode.ended_by
        return len(episode.turns)

    start = time.monotonic()
    results = server.run([functools.partial(one, k) for k in range(n)])
    wall = time.monotonic() - start
    for r in results:
        if isinstance(r, BaseException):
            raise r
    stats = server.stats
    return {
        "wall_s": round(wall, 2),
        "busy_fraction": round(stats.busy_fraction, 3),
        "mean_batch": round(stats.mean_batch, 2),
        "turns_per_s": round(sum(results) / wall, 2),
        "tokens": engine.tokens,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny, smollm2-135m-instruct or a model directory")
    parser.add_argument("--episodes", default="1,4,16", help="episodes in flight, comma-separated")
    parser.add_argument("--turns", type=int, default=4, help="turns per episode, the last a submit")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--max-model-len", type=int, default=4096)
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.episodes.split(",")]
    instance = next(i for i in read_instances("demo", 0) if i.instance_id == INSTANCE)
    model = resolve(ModelConfig(name=args.model))
    rollout = engine_config(
        max_new_tokens=args.max_new_tokens,
        max_model_len=args.max_model_len,
        num_gpus=0,
        tensor_parallel_size=1,
        gpu_memory_utilization=0.9,
        kv_cache_gib=2,
        max_prompts_per_call=64,
    )
    os.environ.update(engine_env(rollout, "cpu", verbose=False))  # the rollout actor's threads
    worker = RolloutWorker(rollout, Runtime(model, "float32", 0, "cpu", timeout_s=600), "bench", seed=0)
    out: dict[str, Any] = {"model": args.model, "turns": args.turns, "max_new_tokens": args.max_new_tokens}
    try:
        with tempfile.TemporaryDirectory() as cache:
            runner = Runner(ExecutionConfig(cache_dir=cache))
            _measure(worker, runner, instance, 2, args, drain=False)  # warm: environment, engine's first batch
            for n in counts:
                drained = _measure(worker, runner, instance, n, args, drain=True)
                continuous = _measure(worker, runner, instance, n, args, drain=False)
                ratio = round(drained["wall_s"] / continuous["wall_s"], 2)
                out[str(n)] = {"drain": drained, "continuous": continuous, "wall_drain_over_continuous": ratio}
                print(json.dumps({n: out[str(n)]}), file=sys.stderr, flush=True)
    finally:
        worker.shutdown()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
