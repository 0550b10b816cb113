"""Extension by registration: a reward kind, an advantage estimator and a weight transport
defined in this file, selected by config, run a real smoke step (Ray, vLLM, DeepSpeed) without
an edit anywhere else in the project.

The plug-ins are shipped to the actors by value (this test module is not importable by Ray's
worker processes), which is what `register_pickle_by_value` arranges; a plug-in that lives in
the project's own packages travels by reference like any other class.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import ray
import torch
from hydra import compose, initialize
from ray import cloudpickle

from conf import config
from conf.config import LearnerConfig
from learner.objectives.advantages import ADVANTAGES
from learner.transport import TRANSPORTS, WeightTransport
from learner.transport.buckets import DTYPES, Bucket, unpack
from reward import RewardResult
from reward.kinds import REWARDS, RewardKind

pytestmark = pytest.mark.slow


class HasSolution(RewardKind):
    """1 when the output closes a <solution> block that names a file of the context, else -1."""

    def prepare(self, instance: Any) -> list[str]:
        return sorted(instance.code_context)

    def score(self, state: list[str], output: str) -> RewardResult:
        body = output.partition("<solution>")[2].partition("</solution>")[0]
        ok = any(f"### {path}" in body for path in state)
        return RewardResult(1.0 if ok else -1.0, None if ok else "no file edited")


class Files(WeightTransport):
    """Each bucket through a file on the node's disk (a shared file system on a cluster)."""

    rendezvous = False
    root = ""  # set by the test before the run: a pytest temporary directory

    def send(self, flats: Iterable[torch.Tensor]) -> list[str]:
        paths = []
        for flat in flats:
            path = Path(self.root) / f"bucket-{len(list(Path(self.root).iterdir()))}.bin"
            path.write_bytes(flat.contiguous().view(torch.uint8).numpy().tobytes())
            paths.append(str(path))
        return paths

    def receive(
        self, plan: Sequence[Bucket], payload: list[str], device: torch.device
    ) -> Iterator[tuple[str, torch.Tensor]]:
        for bucket, path in zip(plan, payload, strict=True):
            flat = torch.frombuffer(bytearray(Path(path).read_bytes()), dtype=DTYPES[bucket.dtype]).to(device)
            yield from unpack(bucket, flat)


CALLS: list[int] = []


def signs(rewards: torch.Tensor, group_size: int, cfg: LearnerConfig) -> torch.Tensor:
    """+1 above the group's mean, -1 below, 0 at it."""
    CALLS.append(rewards.numel())
    grouped = rewards.reshape(-1, group_size)
    return torch.sign(grouped - grouped.mean(dim=1, keepdim=True)).reshape(-1)


@pytest.fixture(scope="module")
def registered():
    REWARDS.register("has_solution")(HasSolution)
    TRANSPORTS.register("files")(Files)
    ADVANTAGES.register("signs")(signs)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    REWARDS.unregister("has_solution")
    TRANSPORTS.unregister("files")
    ADVANTAGES.unregister("signs")


def test_plugins_defined_here_run_a_training_step(registered, tmp_path):
    import train
    from actors.cluster.join import loopback_only

    Files.root = str(tmp_path / "buckets")
    Path(Files.root).mkdir()
    config.register()
    with initialize(config_path="../conf", version_base=None):
        cfg = config.load(
            compose(
                "config",
                overrides=[
                    "experiment=smoke",
                    f"run_dir={tmp_path / 'run'}",
                    "trainer.steps=1",
                    "reward.kind=has_solution",
                    "trainer.weight_transport=files",
                    "learner.advantage=signs",
                ],
            )
        )
    loopback_only()
    trainer = train.Trainer(cfg)
    try:
        trainer.fit()
        plan_size = len(trainer.weights.plan)
    finally:
        trainer.shutdown()
        ray.shutdown()
    (metrics,) = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    rows = [json.loads(line) for line in (tmp_path / "run" / "rollouts" / "step_000001.jsonl").read_text().splitlines()]
    # The reward kind scored every rollout: the oracle answers edit a context file, the random
    # model's outputs do not.
    assert {(r["finish_reason"] == "oracle", r["reward"]) for r in rows} == {(True, 1.0), (False, -1.0)}
    assert metrics["zero_signal_frac"] == 0.0
    # The estimator ran in the driver on the step's 32 rewards.
    assert CALLS == [32]
    # The transport carried both pushes (the initial one and the step's), and the engine holds
    # the learner's updated weights.
    assert len(list(Path(Files.root).iterdir())) == 2 * plan_size
    assert metrics["params_changed"] == 1.0 and metrics["sync_probe_diff_after"] < 1e-4
