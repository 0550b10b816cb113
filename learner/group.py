"""The learner group: N LearnerWorker ranks gang-scheduled in one Ray placement group.

Placement: one bundle per rank ({CPU: num_cpus_per_rank, GPU: num_gpus_per_rank}), strategy
PACK (ranks on as few nodes as possible: DeepSpeed's collectives are fastest intra-node). The
group waits for the placement group with a timeout and names the missing resources instead of
hanging when the cluster cannot hold it.

Every call fans out to all ranks and awaits all of them (a collective needs every rank; an
un-awaited ref would hide a rank's failure). `train` takes the driver's waiting function, so
that the rollout fleet keeps generating while the learner trains (async mode).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from conf import device as devices
from conf.config import LearnerConfig, RolloutConfig
from conf.errors import UserError
from conf.logs import actor_env
from conf.runtime import Runtime
from learner.batch import RankBatch, TrainSample, save_samples, shard
from learner.objectives.losses import LOSSES
from learner.objectives.overlong import keep_untruncated
from learner.transport import Shipment, WeightTransport
from learner.transport.buckets import Bucket
from learner.worker import LearnerWorker

# Waits for refs and returns their values (the driver's: it keeps the rollout fleet working).
Wait = Callable[[list[Any]], list[Any]]


class PlacementError(UserError, RuntimeError):
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
            f"the cluster has {ray.cluster_resources()} in total, {ray.available_resources()} free"
        )
    return pg


class LearnerGroup:
    def __init__(
        self, cfg: LearnerConfig, run: Runtime, *, rollout: RolloutConfig, micro_batches: int, pad_id: int = 0
    ) -> None:
        """`micro_batches`: DeepSpeed's nominal accumulation steps per update; `rollout`: the
        sampling the samples came from (its temperature is the one the logprobs are taken at, its
        max_new_tokens the constant of seq_mean_token_sum_norm); `pad_id`: the tokenizer's padding id."""
        self.cfg, self.timeout_s, self.pad_id = cfg, run.timeout_s, pad_id
        self.pg = reserve(
            bundles_for(cfg.num_ranks, cfg.num_cpus_per_rank, cfg.num_gpus_per_rank),
            "PACK",
            "learner group (learner.num_ranks x learner.num_cpus_per_rank/num_gpus_per_rank)",
            run.timeout_s,
        )
        remote_cls = ray.remote(LearnerWorker)
        self.workers = [
            remote_cls.options(
                num_cpus=cfg.num_cpus_per_rank,
                num_gpus=cfg.num_gpus_per_rank,
                name=None,
                scheduling_strategy=PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=rank),
                # Read by DeepSpeed at import: without it DeepSpeed probes for CUDA on CPU machines.
                runtime_env={
                    "env_vars": {"DS_ACCELERATOR": devices.ds_accelerator(run.device)} | actor_env(run.verbose)
                },
            ).remote(
                cfg,
                run,
                temperature=rollout.temperature,
                max_new_tokens=rollout.max_new_tokens,
                rank=rank,
                world_size=cfg.num_ranks,
                micro_batches=micro_batches,
                loss=LOSSES.get(cfg.loss),
            )
            for rank in range(cfg.num_ranks)
        ]
        host, port = self._get(self.workers[0].reserve_port.remote())
        self.info = self._all("setup", host, port)
        self._recorded = False  # learner.record_batch written

    def _get(self, refs: Any) -> Any:
        return ray.get(refs, timeout=self.timeout_s)

    def _all(self, method: str, *args: Any) -> list[Any]:
        return self._get([getattr(w, method).remote(*args) for w in self.workers])

    def shard(
        self, samples: Sequence[TrainSample], drop_zero_advantage: bool
    ) -> tuple[list[RankBatch], dict[str, float]]:
        """The step's samples as every rank's micro-batches, and their padding statistics."""
        # Every rank reports whether the shared-prefix path serves its model (setup's info).
        shared = all(info["shared_prefix"] for info in self.info)
        return shard(
            samples,
            num_ranks=self.cfg.num_ranks,
            micro_batch_size=self.cfg.micro_batch_size,
            pad_id=self.pad_id,
            drop_zero_advantage=drop_zero_advantage,
            max_tokens_per_micro_batch=self.cfg.max_tokens_per_micro_batch if shared else None,
        )

    def train(self, samples: Sequence[TrainSample], wait: Wait | None = None) -> dict[str, float]:
        """One policy update over the step's samples (every rank, one optimizer step). Rows whose
        advantage is 0 are not sent through the model when that is exact (no KL term). Returns
        the loss statistics and the padding statistics. With `learner.overlong=filter` the
        samples cut at the generation limit are left out (learner/objectives/overlong.py)."""
        if self.cfg.record_batch and not self._recorded:  # the first RL step's, for bench/learner.py
            save_samples(self.cfg.record_batch, samples)
            self._recorded = True
        kept = keep_untruncated(samples) if self.cfg.overlong == "filter" else list(samples)
        batches, pad_stats = self.shard(kept, drop_zero_advantage=self.cfg.kl_coef == 0)
        refs = [w.train_step.remote(b) for w, b in zip(self.workers, batches, strict=True)]
        return combine_stats((wait or self._get)(refs)) | pad_stats | {"overlong_filtered": len(samples) - len(kept)}

    def train_step(self, batches: list[RankBatch]) -> dict[str, float]:
        """One update on already sharded batches; returns the step's loss and token-weighted
        means of the loss stats."""
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

    def weight_plan(self, bucket_bytes: int, dtype: str) -> list[Bucket]:
        """Fix the weight-sync bucket plan on every rank; returns it."""
        return self._all("set_weight_plan", bucket_bytes, dtype)[0]

    def prepare_weights(self, transport: type[WeightTransport], world_size: int) -> Any:
        """Rank 0 opens the group of a rendezvous transport; returns the spec receivers join with."""
        return self._get(self.workers[0].weights_prepare.remote(transport, world_size))

    def join_weights(self, transport: type[WeightTransport], spec: Any) -> Any:
        """Ref of rank 0 joining as the sender (awaited together with the receivers' joins)."""
        return self.workers[0].weights_join.remote(transport, spec)

    def send_weights(self, transport: type[WeightTransport]) -> list[Any]:
        """Refs of one send (every rank: ZeRO-3 gathers); the first resolves to rank 0's Shipment."""
        return [w.weights_send.remote(transport) for w in self.workers]

    def shipment(self, transport: type[WeightTransport]) -> Shipment:
        """Send and wait: the shipment of a non-rendezvous transport (tests, catch-ups)."""
        return self._get(self.send_weights(transport))[0]

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
    # The rollout/learner mismatch over the tokens with engine logprobs (learner/objectives/mismatch.py).
    out["logprob_diff_mean"] = sum(p["logprob_diff_sum"] for p in parts) / (
        sum(p["logprob_diff_tokens"] for p in parts) or 1.0
    )
    out["logprob_diff_max"] = max(p["logprob_diff_max"] for p in parts)
    return out
