"""SWE-RL on Ray: the driver (Hydra main). `python train.py [overrides]`.

One step is a pipeline of named, timed phases:
    data -> generate -> reward -> advantages -> train -> sync -> log
Each phase awaits every ObjectRef it creates, so a failed actor surfaces in the phase that
used it. Where the run departs from the paper (SWE-RL, arXiv 2502.18449) it is a config
choice documented in conf/config.py (e.g. rollout.oracle_samples_per_group, learner.kl_coef).
"""

from __future__ import annotations

import json
import os
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import ray
import torch
from omegaconf import DictConfig

from actors import weight_sync
from actors.cluster import init_ray
from actors.fleet import RolloutFleet
from actors.reward_pool import RewardInstance, RewardPool, ScoreJob
from actors.rollout import Completion, GenerationRequest, GenerationResult
from conf import config
from data.loader import InstanceLoader, PromptItem
from data.schema import files_to_dict
from learner import grpo, models
from learner.batch import TrainSample, shard
from learner.group import LearnerGroup
from reward import OracleAnswerError, oracle_answer

config.register()


class PhaseTimer:
    """Wall time per named phase of one step."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[f"{name}_s"] = round(time.perf_counter() - start, 3)


def request_seed(seed: int, step: int, instance_id: str) -> int:
    return zlib.crc32(f"{seed}/{step}/{instance_id}".encode()) & 0x7FFFFFFF


class Trainer:
    def __init__(self, cfg: config.TrainConfig) -> None:
        self.cfg = cfg
        self.run_dir = Path(cfg.run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.step, self.policy_version = 0, 0
        init_ray(cfg.ray.address, num_cpus=cfg.ray.num_cpus, include_dashboard=cfg.ray.include_dashboard)
        self.model_path = models.resolve(cfg.model)
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.loader = InstanceLoader(cfg.data.path, self.tokenizer, seed=cfg.seed, heldout_fraction=cfg.data.heldout_fraction,
                                     max_prompt_tokens=cfg.data.max_prompt_tokens)
        timeout = cfg.trainer.phase_timeout_s
        print(f"[setup] model {self.model_path}; starting {cfg.rollout.num_actors} rollout actor(s), "
              f"{cfg.reward.num_workers} reward actor(s), {cfg.learner.num_ranks} learner rank(s)", flush=True)
        self.fleet = RolloutFleet(cfg.rollout, model_path=self.model_path, dtype=cfg.model.dtype, seed=cfg.seed,
                                  timeout_s=timeout)
        self.rewards = RewardPool(cfg.reward)
        # Nominal accumulation steps per rank (DeepSpeed's batch-size bookkeeping; the real count
        # varies per step and the worker owns the boundary).
        micro_batches = cfg.trainer.prompts_per_step * cfg.group_size // cfg.learner.num_ranks // cfg.learner.micro_batch_size
        self.learner = LearnerGroup(cfg.learner, model_path=self.model_path, dtype=cfg.model.dtype,
                                    temperature=cfg.rollout.temperature, seed=cfg.seed, timeout_s=timeout,
                                    micro_batches=micro_batches)
        self._join_weight_sync()

    def _join_weight_sync(self) -> None:
        """Form the sync group: learner rank 0 hosts it on a free port of its own node."""
        plan = self.learner.weight_plan(self.cfg.trainer.sync_bucket_mb << 20, self.cfg.model.dtype)
        host, port = ray.get(self.learner.workers[0].reserve_port.remote("sync"))
        spec = weight_sync.SyncGroupSpec(host=host, port=port, world_size=1 + self.fleet.engine_ranks,
                                         backend="nccl" if self.cfg.learner.num_gpus_per_rank > 0 else "gloo",
                                         timeout_s=self.cfg.trainer.phase_timeout_s)
        ray.get(self.learner.sync_join(spec, plan) + self.fleet.sync_join(spec, plan),
                timeout=self.cfg.trainer.phase_timeout_s)
        self.sync_bytes = sum(b.numel for b in plan) * (2 if self.cfg.model.dtype == "bfloat16" else 4)

    def sync_weights(self, version: int) -> list[dict[str, Any]]:
        """Broadcast the learner's weights to every engine; returns each engine's report."""
        send, receive = self.learner.sync_send(), self.fleet.receive_weights(version)
        done = ray.get(send + receive, timeout=self.cfg.trainer.phase_timeout_s)
        reports = done[len(send):]
        if any(r["policy_version"] != version for r in reports):
            raise RuntimeError(f"weight sync: engines report versions {[r['policy_version'] for r in reports]}, expected {version}")
        return reports

    # -- the step -------------------------------------------------------------------------

    def fit(self) -> None:
        while self.step < self.cfg.trainer.steps:
            metrics = self.train_step()
            self.log(metrics)
            self.step += 1
        out = self.learner.save_hf(str(self.run_dir / "hf"))
        print(f"[done] {self.step} steps; Hugging Face export in {out}", flush=True)

    def train_step(self) -> dict[str, Any]:
        cfg, timer = self.cfg, PhaseTimer()
        with timer("data"):
            items = self.loader.next_batch(cfg.trainer.prompts_per_step)
        with timer("generate"):
            results = self.fleet.generate([GenerationRequest(f"{self.step}/{it.instance_id}", it.prompt_ids,
                                                             cfg.group_size, request_seed(cfg.seed, self.step, it.instance_id))
                                           for it in items])
            groups = [self._with_oracle(it, res) for it, res in zip(items, results, strict=True)]
        with timer("reward"):
            scored = self._score(items, groups)
            rewards = torch.tensor([s.result.reward for s in scored], dtype=torch.float64)
        with timer("advantages"):
            adv = grpo.advantages(rewards, cfg.group_size, eps=cfg.learner.adv_eps, scale_rewards=cfg.learner.scale_rewards)
            flat = [(it, c) for it, group in zip(items, groups, strict=True) for c in group]
            # Oracle samples carry no engine logprobs (None): the learner's own stand in.
            samples = [TrainSample(it.prompt_ids, c.token_ids, c.logprobs if c.finish_reason != "oracle" else None, float(a))
                       for (it, c), a in zip(flat, adv.tolist(), strict=True)]
        digest = self.learner.param_digest() if cfg.trainer.verify_sync else ""
        with timer("train"):
            batches, pad_stats = shard(samples, num_ranks=cfg.learner.num_ranks, micro_batch_size=cfg.learner.micro_batch_size,
                                       pad_id=self.tokenizer.pad_token_id, drop_zero_advantage=cfg.learner.kl_coef == 0)
            stats = self.learner.train_step(batches) | pad_stats
        if cfg.trainer.verify_sync:
            stats["params_changed"] = float(digest != self.learner.param_digest())
            probe = samples[0].prompt_ids + samples[0].completion_ids
            stats["sync_probe_diff_before"] = self._probe_diff(probe)
        with timer("sync"):
            self.sync_weights(self.policy_version + 1)
        if cfg.trainer.verify_sync:
            stats["sync_probe_diff_after"] = self._probe_diff(probe)
        self.policy_version += 1
        self._log_rollouts(items, results, groups, scored)
        return self._metrics(groups, rewards, samples, stats, timer)

    # -- phases' helpers --------------------------------------------------------------------

    def _probe_diff(self, token_ids: list[int]) -> float:
        """Largest |engine - learner| logprob over a token sequence (temperature 1)."""
        engine = np.array(self.fleet.prompt_logprobs(token_ids))
        learner = np.array(self.learner.sequence_logprobs(token_ids))
        return float(np.abs(engine - learner).max())

    def _with_oracle(self, item: PromptItem, result: GenerationResult) -> list[Completion]:
        """The group, its last `oracle_samples_per_group` samples replaced by the oracle answer."""
        k = self.cfg.rollout.oracle_samples_per_group
        if k == 0:
            return result.completions
        try:
            text = oracle_answer(files_to_dict(item.instance["code_context"]),
                                 files_to_dict(item.instance["oracle_new_content"]))
        except OracleAnswerError as exc:  # the format cannot express this change: stay on-policy
            print(f"[oracle] {item.instance_id}: no oracle answer ({exc}); the group stays on-policy", flush=True)
            return result.completions
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return result.completions[:-k] + [Completion(ids, [], text, "oracle")] * k

    def _score(self, items: list[PromptItem], groups: list[list[Completion]]) -> list[Any]:
        instances = {it.instance_id: RewardInstance(files_to_dict(it.instance["code_context"]),
                                                    files_to_dict(it.instance["oracle_new_content"])) for it in items}
        jobs = [ScoreJob(f"{self.step}/{it.instance_id}/{j}", it.instance_id, c.text)
                for it, group in zip(items, groups) for j, c in enumerate(group)]
        return self.rewards.score(jobs, instances)

    def _metrics(self, groups: list[list[Completion]], rewards: torch.Tensor, samples: list[TrainSample],
                 stats: dict[str, float], timer: PhaseTimer) -> dict[str, Any]:
        cfg = self.cfg
        policy = [c.finish_reason != "oracle" for g in groups for c in g]
        r = rewards[torch.tensor(policy)]
        generated = sum(len(c.token_ids) for g in groups for c in g if c.finish_reason != "oracle")
        gen_s = timer.seconds["generate_s"]
        zero = grpo.zero_signal_groups(rewards, cfg.group_size)
        return {
            "step": self.step + 1,
            "policy_version": self.policy_version,
            "num_rollouts": len(samples),
            "reward_mean": float(r.mean()),
            "reward_std": float(r.std()) if r.numel() > 1 else 0.0,
            "format_error_rate": float((r == -1).double().mean()),
            "zero_signal_frac": float(zero.double().mean()),
            "truncated_frac": float(np.mean([c.finish_reason == "length" for g in groups for c in g])),
            "completion_len_mean": float(np.mean([len(s.completion_ids) for s in samples])),
            **{k: round(v, 6) for k, v in stats.items()},
            **timer.seconds,
            "gen_tokens_per_s": round(generated / gen_s, 2) if gen_s > 0 else 0.0,
            "sync_mb_per_s": round(self.sync_bytes / 2**20 / timer.seconds["sync_s"], 2) if timer.seconds["sync_s"] else 0.0,
            **self.rewards.stats(),
        }

    def _log_rollouts(self, items: list[PromptItem], results: list[GenerationResult], groups: list[list[Completion]],
                      scored: list[Any]) -> None:
        every = self.cfg.trainer.rollout_log_every
        if every <= 0 or (self.step + 1) % every:
            return
        out = self.run_dir / "rollouts" / f"step_{self.step + 1:06d}.jsonl"
        out.parent.mkdir(exist_ok=True)
        rows = iter(scored)
        with open(out, "w") as f:
            for item, res, group in zip(items, results, groups, strict=True):
                for j, c in enumerate(group):
                    s = next(rows)
                    f.write(json.dumps({
                        "rollout_id": s.rollout_id, "instance_id": item.instance_id, "sample": j,
                        "policy_version": None if c.finish_reason == "oracle" else res.policy_version,
                        "actor_id": res.actor_id, "finish_reason": c.finish_reason, "prompt_tokens": len(item.prompt_ids),
                        "completion_tokens": len(c.token_ids), "reward": s.result.reward, "error": s.result.error,
                        "text": c.text}) + "\n")

    def log(self, metrics: dict[str, Any]) -> None:
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(metrics) + "\n")
        m = metrics
        print(f"[step {m['step']}/{self.cfg.trainer.steps}] v{m['policy_version']} reward {m['reward_mean']:+.3f} "
              f"(std {m['reward_std']:.3f}, format errors {m['format_error_rate']:.0%}) loss {m['loss']:+.4f} | "
              f"generate {m['generate_s']:.1f}s ({m['gen_tokens_per_s']:.0f} tok/s) reward {m['reward_s']:.1f}s "
              f"train {m['train_s']:.1f}s sync {m['sync_s']:.1f}s", flush=True)

    def shutdown(self) -> None:
        self.fleet.shutdown()
        self.rewards.shutdown()
        self.learner.shutdown()


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(dcfg: DictConfig) -> None:
    cfg = config.load(dcfg)
    trainer = Trainer(cfg)
    try:
        trainer.fit()
    finally:
        trainer.shutdown()


if __name__ == "__main__":
    sys.exit(main())
