"""Rollout actors that die, join and leave while training runs, on a real multi-node Ray
cluster (ray.cluster_utils.Cluster, every node on 127.0.0.1), driven through the real Trainer."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
import ray
from hydra import compose, initialize
from ray.cluster_utils import Cluster

from actors.cluster.join import loopback_only
from conf import config

REPO = __import__("pathlib").Path(__file__).resolve().parent.parent


def smoke_config(run_dir, *overrides: str) -> config.TrainConfig:
    config.register()
    with initialize(config_path="../conf", version_base=None):
        return config.load(compose("config", overrides=["experiment=smoke", f"run_dir={run_dir}", *overrides]))


@pytest.fixture(scope="module")
def cluster():
    loopback_only()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "node_ip_address": "127.0.0.1"})
    ray.init(address=c.address)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def trainer(cluster, tmp_path_factory):
    import train

    t = train.Trainer(smoke_config(tmp_path_factory.mktemp("fleet") / "run", "trainer.steps=10"))
    t.weights.push(t.fleet, t.policy_version)
    yield t
    t.shutdown()


def _rollouts(trainer, step):
    import json

    path = trainer.run_dir / "rollouts" / f"step_{step:06d}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _check_complete(trainer, metrics):
    rows = _rollouts(trainer, metrics["step"])
    assert metrics["num_rollouts"] == len(rows) == 2 * 16
    assert set(Counter(r["instance_id"] for r in rows).values()) == {16}
    assert all(isinstance(r["reward"], float) for r in rows)
    # Sync mode: every sampled rollout came from the weights of the previous update.
    assert {r["policy_version"] for r in rows if r["finish_reason"] != "oracle"} == {metrics["policy_version"] - 1}
    return rows


def test_killed_rollout_actor_is_restarted_with_current_weights_and_the_batch_completes(trainer):
    victim = trainer.fleet.members[0]
    killed = []

    def kill_once(member):  # fault injection: kill the engine once, while it generates
        if member is victim and not killed:
            killed.append(victim.actor_id)
            ray.kill(victim.handle, no_restart=False)

    trainer.fleet.on_dispatch.append(kill_once)
    try:
        metrics = trainer.train_step()
        trainer.step += 1
    finally:
        trainer.fleet.on_dispatch.remove(kill_once)
    assert metrics["rollout_actor_restarts"] == 1 and metrics["requeued_prompts"] >= 1
    _check_complete(trainer, metrics)
    # The restarted engine got the weights through the object store, then rejoined the group at
    # the sync: after the sync it holds the learner's new weights.
    assert metrics["sync_probe_diff_after"] < 1e-4


def test_actor_added_on_a_new_node_shares_the_work_then_leaves(trainer, cluster):
    node = cluster.add_node(num_cpus=1, resources={"rollout_node": 1}, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    new_id = trainer.fleet.add_actor(resources={"rollout_node": 1})
    new = next(m for m in trainer.fleet.members if m.actor_id == new_id)
    assert ray.get(new.handle.ready.remote())["policy_version"] == trainer.policy_version  # weights before any sample
    metrics = trainer.train_step()
    trainer.step += 1
    rows = _check_complete(trainer, metrics)
    assert {r["actor_id"] for r in rows if r["finish_reason"] != "oracle"} == {"rollout-0", new_id}  # by load
    assert metrics["rollout_actors"] == 2 and metrics["sync_probe_diff_after"] < 1e-4

    # Scale back down from outside the job: the control command talks to the named actor.
    cmd = [
        sys.executable,
        "-m",
        "actors.control",
        "--address",
        cluster.address,
        "--run",
        trainer.run_dir.name,
        "--actors",
        "1",
    ]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "'wanted': 1" in out.stdout
    trainer.scale_fleet()
    assert [m.actor_id for m in trainer.fleet.live] == ["rollout-0"]
    metrics = trainer.train_step()
    trainer.step += 1
    rows = _check_complete(trainer, metrics)
    assert {r["actor_id"] for r in rows if r["finish_reason"] != "oracle"} == {"rollout-0"}
    cluster.remove_node(node)


def test_object_store_path_delivers_the_group_path_weights_bit_for_bit(trainer):
    member = trainer.fleet.live[0]
    trainer.weights.push(trainer.fleet, trainer.policy_version)  # over the gloo sync group
    via_group = ray.get(member.handle.weight_digests.remote())
    trainer.weights.catch_up(member.handle)  # the path for actors outside the group
    via_store = ray.get(member.handle.weight_digests.remote())
    assert len(via_group) == len(trainer.weights.plan) and via_group == via_store
