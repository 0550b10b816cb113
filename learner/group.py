"""The learner group: N LearnerWorker ranks gang-scheduled in one Ray placement group.

Placement: one bundle per rank ({CPU: num_cpus_per_rank, GPU: num_gpus_per_rank}), strategy
PACK (ranks on as few nodes as possible: DeepSpeed's collectives are fastest intra-node). The
group waits for the placement group with a timeout and names the missing resources instead of
hanging when the cluster cannot hold it.

Every call fans out to all ranks and awaits all of them (a collective needs every rank; an
un-awaited ref would hide a rank's failure).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from actors import weight_sync
from conf.config import LearnerConfig
from learner.batch import RankBatch
from learner.worker import LearnerWorker


class PlacementError(RuntimeError):
    """The cluster cannot hold what the config asks for; the message says what is missing."""


def bundles_for(num: int, cpus: float, gpus: float) -> list[dict[str, float]]:
    bundle = {"CPU": cpus} | ({"GPU": gpus} if gpus > 0 else {})
    return [dict(bundle) for _ in range(num)]


def reserve(bundles: list[dict[str, float]], strategy: str, what: str, timeout_s: float) -> Any:
    """Create a placement group or raise PlacementError naming the request and the cluster's resources."""
    pg = placement_group(bundles, strategy=strategy)
    ready, _ = ray.wait([pg.ready()], timeout=timeout_s)
    if not ready:
        remove_placement_group(pg)
        raise PlacementError(
            f"{what}: could not place {len(bundles)} bundles of {bundles[0]} ({strategy}) within {timeout_s:.0f} s; "
            f"the cluster has {ray.cluster_resources()} in total, {ray.available_resources()} free")
    return pg


class LearnerGroup:
    def __init__(self, cfg: LearnerConfig, *, model_path: str, dtype: str, temperature: float, micro_batches: int,
                 seed: int, timeout_s: float) -> None:
        self.cfg, self.timeout_s = cfg, timeout_s
        self.pg = reserve(bundles_for(cfg.num_ranks, cfg.num_cpus_per_rank, cfg.num_gpus_per_rank), "PACK",
                          "learner group (learner.num_ranks x learner.num_cpus_per_rank/num_gpus_per_rank)", timeout_s)
        remote_cls = ray.remote(LearnerWorker)
        self.workers = [
            remote_cls.options(
                num_cpus=cfg.num_cpus_per_rank, num_gpus=cfg.num_gpus_per_rank, name=None,
                scheduling_strategy=PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=rank),
                # Read by DeepSpeed at import: without it DeepSpeed probes for CUDA on CPU machines.
                runtime_env={"env_vars": {"DS_ACCELERATOR": "cuda" if cfg.num_gpus_per_rank > 0 else "cpu"}},
            ).remote(cfg, model_path=model_path, dtype=dtype, temperature=temperature, rank=rank,
                     world_size=cfg.num_ranks, micro_batches=micro_batches, seed=seed,
                     timeout_s=timeout_s)
            for rank in range(cfg.num_ranks)
        ]
        host, port = self._get(self.workers[0].reserve_port.remote("deepspeed"))
        self.info = self._all("setup", host, port)

    def _get(self, refs: Any) -> Any:
        return ray.get(refs, timeout=self.timeout_s)

    def _all(self, method: str, *args: Any) -> list[Any]:
        return self._get([getattr(w, method).remote(*args) for w in self.workers])

    def train_step(self, batches: list[RankBatch]) -> dict[str, float]:
        """One GRPO update; returns the step's loss and token-weighted means of the loss stats."""
        parts = self._get([w.train_step.remote(b) for w, b in zip(self.workers, batches, strict=True)])
        return combine_stats(parts)

    def probe_step(self, batches: list[RankBatch]) -> tuple[dict[str, float], np.ndarray]:
        """`train_step`, also returning the full flat gradient the optimizer received (tests)."""
        parts = self._get([w.probe_step.remote(b) for w, b in zip(self.workers, batches, strict=True)])
        return combine_stats([p[0] for p in parts]), parts[0][1]

    def sft_step(self, batches: list[RankBatch]) -> dict[str, float]:
        parts = self._get([w.sft_step.remote(b) for w, b in zip(self.workers, batches, strict=True)])
        return {"sft_loss": sum(p["loss"] for p in parts), "grad_norm": parts[0]["grad_norm"]}

    def reset_optimizer(self) -> None:
        self._all("reset_optimizer")

    def weight_plan(self, bucket_bytes: int, dtype: str) -> list[weight_sync.Bucket]:
        return self._get(self.workers[0].weight_plan.remote(bucket_bytes, dtype))

    def sync_join(self, spec: weight_sync.SyncGroupSpec, plan: list[weight_sync.Bucket]) -> list[Any]:
        """Refs of the join (the caller awaits them together with the receivers' joins)."""
        return [w.sync_join.remote(spec, plan) for w in self.workers]

    def sync_send(self) -> list[Any]:
        """Refs of one broadcast (rank 0 sends; under ZeRO-3 the other ranks help gather)."""
        return [w.sync_send.remote() for w in self.workers]

    def packed_arrays(self, plan: list[weight_sync.Bucket]) -> list[np.ndarray]:
        return self._all("packed_arrays", plan)[0]

    def param_digest(self) -> str:
        return self._all("param_digest")[0]

    def sequence_logprobs(self, token_ids: list[int], temperature: float = 1.0) -> list[float]:
        return self._all("sequence_logprobs", token_ids, temperature)[0]

    def save_hf(self, out_dir: str) -> str:
        return self._all("save_hf", out_dir)[0]

    def save_state(self, state_dir: str) -> None:
        """Every rank writes its part of the learner state (DeepSpeed's format, ZeRO shards per
        rank) under `state_dir` and nowhere else; on a cluster `state_dir` is shared storage."""
        self._all("save_state", state_dir)

    def load_state(self, state_dir: str) -> int:
        """Restore a state written by save_state with the same num_ranks and zero_stage;
        returns the number of updates it had applied (the policy_version of its weights)."""
        return self._all("load_state", state_dir)[0]

    def shutdown(self) -> None:
        for w in self.workers:
            ray.kill(w)
        remove_placement_group(self.pg)


def combine_stats(parts: list[dict[str, float]]) -> dict[str, float]:
    """Per-rank sums -> the step's values (loss: sum; token stats: token-weighted means)."""
    tokens = sum(p["tokens"] for p in parts) or 1.0
    out = {"loss": sum(p["loss"] for p in parts), "grad_norm": parts[0]["grad_norm"]}
    for key in ("clip_frac", "approx_kl_old", "ratio_mean", "kl_ref", "entropy"):
        out[key] = sum(p[key] for p in parts) / tokens
    return out
