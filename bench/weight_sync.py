"""Weight-sync benchmark: the project's bucketed sync vs a bare torch.distributed broadcast.

    python bench/weight_sync.py [--model smollm2-135m-instruct] [--bucket-mb 64] [--repeats 3]

In one process (one Ray cluster), for 1 and then 2 rollout actors (vLLM engines):
  - ours: learner rank 0 (a DeepSpeed rank) packs its parameters into buckets and broadcasts
    them over the sync group; each engine receives and loads them in place (layerwise reload,
    re-tie) and resets its prefix cache: the whole `WeightSync.push` path (collective transport);
  - ours, transfer only: the same buckets broadcast and received, not loaded;
  - bare: one flat tensor of the same bytes broadcast over a gloo group between plain actors.
Prints seconds, MB/s and the ratios ours/bare (goal: within 10%).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ray
import torch

from actors.cluster.join import init_ray
from actors.driver.weight_sync import WeightSync
from actors.rollout.fleet import RolloutFleet
from conf.config import LearnerConfig, ModelConfig, RolloutConfig, TrainConfig
from conf.runtime import Runtime
from learner import models
from learner.group import LearnerGroup
from learner.transport import buckets, collective


class BareRank:
    """A plain process in a gloo group: the baseline's sender or receiver."""

    def __init__(self) -> None:
        self.listen: socket.socket | None = None

    def reserve(self) -> tuple[str, int]:
        self.listen = collective.listen_socket("127.0.0.1")
        return self.listen.getsockname()

    def join(self, spec: collective.SyncGroupSpec, rank: int) -> None:
        self.group = collective.join_group(spec, rank, self.listen if rank == 0 else None)

    def broadcast(self, numel: int, rank: int) -> float:
        flat = torch.ones(numel) if rank == 0 else torch.empty(numel)
        start = time.perf_counter()
        self.group.broadcast(flat, 0).wait()
        return time.perf_counter() - start

    def receive_buckets(self, plan: list[buckets.Bucket]) -> float:
        start = time.perf_counter()
        for _ in collective.receive(self.group, plan, torch.device("cpu")):
            pass
        return time.perf_counter() - start


def bare_broadcast(numel: int, receivers: int, repeats: int) -> float:
    ranks = [ray.remote(num_cpus=0)(BareRank).remote() for _ in range(receivers + 1)]
    host, port = ray.get(ranks[0].reserve.remote())
    spec = collective.SyncGroupSpec(host, port, receivers + 1, "gloo", 300)
    ray.get([r.join.remote(spec, i) for i, r in enumerate(ranks)])
    times = [max(ray.get([r.broadcast.remote(numel, i) for i, r in enumerate(ranks)])) for _ in range(repeats)]
    for r in ranks:
        ray.kill(r)
    return statistics.median(times)


def ours(weights: WeightSync, fleet: RolloutFleet, repeats: int) -> float:
    fleet.group = None  # a new group over the current actors, as after a membership change
    weights.push(fleet, 0)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        weights.push(fleet, 0)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def transfer_only(learner: LearnerGroup, plan: list[buckets.Bucket], receivers: int, repeats: int) -> float:
    """The learner's packing and bucketed broadcast, received by plain processes (no engine load)."""
    ranks = [ray.remote(num_cpus=0)(BareRank).remote() for _ in range(receivers)]
    spec = learner.prepare_weights(collective.CollectiveTransport, receivers + 1)
    ray.get(
        [learner.join_weights(collective.CollectiveTransport, spec)]
        + [r.join.remote(spec, i + 1) for i, r in enumerate(ranks)]
    )
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        ray.get(learner.send_weights(collective.CollectiveTransport) + [r.receive_buckets.remote(plan) for r in ranks])
        times.append(time.perf_counter() - start)
    for r in ranks:
        ray.kill(r)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--bucket-mb", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    init_ray("", num_cpus=4, include_dashboard=False, quiet=True)
    path = models.resolve(ModelConfig(name=args.model))
    run = Runtime(path, "float32", 0, "cpu", timeout_s=600)
    learner = LearnerGroup(
        LearnerConfig(num_ranks=1, num_cpus_per_rank=0.5), run, rollout=RolloutConfig(temperature=1.0), micro_batches=1
    )
    cfg = TrainConfig()
    cfg.trainer.sync_bucket_mb, cfg.trainer.phase_timeout_s = args.bucket_mb, 600
    weights = WeightSync(learner, cfg)
    plan = weights.plan
    numel = sum(b.numel for b in plan)
    mb = numel * 4 / 2**20
    fleet = RolloutFleet(
        RolloutConfig(num_actors=1, num_cpus=0.5, max_new_tokens=8, kv_cache_gib=1), run, catch_up=weights.catch_up
    )
    fleet.wait_ready()
    print(
        f"model {args.model}: {numel / 1e6:.1f}M parameters, {mb:.0f} MB float32, "
        f"{len(plan)} buckets of <= {args.bucket_mb} MiB"
    )
    for actors in (1, 2):
        if actors == 2:
            fleet.add_actor()
        t_ours = ours(weights, fleet, args.repeats)
        t_transfer = transfer_only(learner, plan, actors, args.repeats)
        t_bare = bare_broadcast(numel, actors, args.repeats)
        print(
            f"{actors} actor(s): ours {t_ours:.2f} s ({mb / t_ours:.0f} MB/s) | transfer only {t_transfer:.2f} s "
            f"({mb / t_transfer:.0f} MB/s) | bare broadcast {t_bare:.2f} s ({mb / t_bare:.0f} MB/s) | "
            f"ratio ours/bare {t_ours / t_bare:.2f}, transfer/bare {t_transfer / t_bare:.2f}"
        )
    fleet.shutdown()
    learner.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
