"""The test-runner pool: results in input order, a runner killed mid-job is replaced and its job redone."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import ray

from actors.cluster.join import loopback_only
from conf.config import ExecutionConfig
from conf.errors import UserError
from data.demo import load_demo_rows
from data.schema import Instance
from reward.execution import check, sandbox
from reward.execution.check import NodeNotReady
from reward.execution.pool import TestPool
from reward.execution.runner import TestJob

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sandbox.available() is not None, reason="no sandbox here")]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    loopback_only()
    assert not ray.is_initialized(), "another test left Ray running"
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_a_killed_runner_is_replaced_and_its_job_redone(local_ray, tmp_path):
    instances = [Instance.from_row(r) for r in load_demo_rows()[:4]]
    pool = TestPool(ExecutionConfig(num_runners=2, num_cpus=0.5, cache_dir=str(tmp_path)))
    try:
        victim = ray.get(pool.actor.runner_handles.remote())[0]
        # The kill must land while jobs remain (a runner killed idle is replaced when its next
        # job finds it dead): 8 jobs of ~0.3-1 s on 2 runners outlast a kill at 0.5 s even on
        # a fast machine, where 4 jobs had all finished before a kill at 1 s.
        killer = threading.Timer(0.5, lambda: ray.kill(victim, no_restart=True))
        killer.start()
        jobs = [TestJob(i, i.patch, job_id=f"{i.instance_id}/{k}") for k in range(2) for i in instances]
        runs = pool.run(jobs)
        killer.join()
        assert [r.job_id for r in runs] == [j.job_id for j in jobs]  # input order
        assert all(r.status == "ok" and r.resolved for r in runs), [(r.status, r.reason) for r in runs]
        stats = pool.stats()
        assert stats["test_runner_restarts"] == 1 and stats["test_lost_jobs"] == 0 and stats["test_runs"] == len(jobs)
        assert stats["test_uncapped"] == (0 if check.verdict(check.gather()).verdict == "ready" else len(jobs))
        assert ray.get(pool.actor.runner_handles.remote())[0] != victim
    finally:
        pool.shutdown()


def _bad_report_job(inst: Instance, job_id: str) -> TestJob:
    """A candidate whose code under test garbles the report at exit (tests/reward/test_forgery.py)."""
    from tests.reward.test_forgery import GARBAGE, MONTHS, candidate, garbage_report, months_running

    patch = candidate({MONTHS: months_running(garbage_report(GARBAGE["binary garbage"]))})
    return TestJob(inst, patch, job_id=job_id)


def test_an_unreadable_report_does_not_stall_the_pool_or_its_batch(local_ray, tmp_path):
    """One runner: the hostile job, a gold job in the same batch, then one more. The runner
    must come back to the pool after the hostile job (a job that raises in the runner would
    keep its runner out of the idle queue for good)."""
    inst = next(i for i in map(Instance.from_row, load_demo_rows()) if i.instance_id == "demo__calspan-3")
    pool = TestPool(ExecutionConfig(num_runners=1, num_cpus=0.5, cache_dir=str(tmp_path), wall_s=30.0))
    try:
        refs = [
            pool.actor.run.remote(_bad_report_job(inst, "hostile")),
            pool.actor.run.remote(TestJob(inst, inst.patch, job_id="gold")),
        ]
        hostile, gold = ray.get(refs, timeout=120)
        assert hostile.resolved is not True and hostile.status in ("bad_report", "tampered"), (
            hostile.status,
            hostile.reason,
        )
        assert gold.status == "ok" and gold.resolved is True, (gold.status, gold.reason)
        after = ray.get(pool.actor.run.remote(TestJob(inst, inst.patch, job_id="after")), timeout=120)
        assert after.status == "ok" and after.resolved is True, (after.status, after.reason)
    finally:
        pool.shutdown()


def _answer(path: str) -> str:
    return (
        "<think>add a helper</think>\n<solution>\n```python\n"
        f"### {path}\n<<<<<<< SEARCH\n\n=======\nx = 1\n>>>>>>> REPLACE\n```\n</solution>"
    )


@pytest.mark.parametrize("kind", ["tests", "hybrid"])
def test_an_unsafe_answer_path_is_malformed_for_the_kinds_that_run_tests(local_ray, tmp_path, kind):
    """SEARCH/REPLACE paths that are not plain relative paths: -1 before any test runs, and
    nothing is written on the host (today the harness writes `{tmp_path}/abs.py` as root)."""
    from conf.config import RewardConfig
    from reward.kinds import make_reward

    inst = next(i for i in map(Instance.from_row, load_demo_rows()) if i.instance_id == "demo__calspan-3")
    host = tmp_path / "host"
    host.mkdir()
    paths = ["../x.py", f"{host}/abs.py", "./a.py", "a//b.py"]
    reward = make_reward(
        RewardConfig(
            kind=kind, execution=ExecutionConfig(num_runners=1, num_cpus=0.5, cache_dir=str(tmp_path / "cache"))
        )
    )
    try:
        state = reward.prepare(inst)
        results = reward.score_batch([(state, _answer(p)) for p in paths])
    finally:
        reward.shutdown()
    for path, result in zip(paths, results, strict=True):
        assert result.reward == -1.0 and "unsafe path" in (result.error or ""), (path, result)
    assert list(host.iterdir()) == []


@pytest.mark.parametrize(("kind", "rewards"), [("tests", [1.0, 0.0]), ("hybrid", [1.0, 0.0])])
def test_final_patches_are_scored_by_their_test_runs_and_an_empty_one_runs_none(local_ray, tmp_path, kind, rewards):
    """An agent episode's final patch (RewardKind.score_patches): the oracle patch resolves;
    an episode that changed nothing is unresolved without a test run."""
    from conf.config import RewardConfig
    from reward.kinds import make_reward

    inst = next(i for i in map(Instance.from_row, load_demo_rows()) if i.instance_id == "demo__calspan-3")
    execution = ExecutionConfig(num_runners=1, num_cpus=0.5, cache_dir=str(tmp_path / "cache"))
    reward = make_reward(RewardConfig(kind=kind, execution=execution))
    try:
        results = reward.score_patches([(inst, inst.patch), (inst, "")])
        runs = reward.stats()["test_runs"]
    finally:
        reward.shutdown()
    assert [r.reward for r in results] == rewards and [r.resolved for r in results] == [True, False]
    assert results[1].error == "unresolved" and runs == 1  # the oracle's run only


def test_a_node_that_fails_its_check_stops_the_pool_with_the_node_and_why(local_ray, tmp_path):
    """The runner's NodeNotReady crosses two actors (runner, coordinator) and reaches the driver
    as itself, its one-line message whole (pool.py unwraps Ray's RayTaskError), and the
    coordinator it started is gone (its CPUs are free for the next pool)."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(NodeNotReady) as info:
        TestPool(ExecutionConfig(num_runners=1, num_cpus=0.5, cache_dir=str(blocked / "cache")))
    assert type(info.value) is NodeNotReady and isinstance(info.value, UserError)
    assert str(info.value) == (
        f"node {ray.util.get_node_ip_address()} is not ready to run tests: {blocked} is not a folder "
        "(`python -m reward.execution.check` on it shows the node's state; docs/cluster.md)"
    )
    deadline = time.monotonic() + 60  # actors' resources come back asynchronously
    while ray.available_resources().get("CPU", 0.0) < 2.0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU", 0.0) == 2.0  # the failed pool's runner did not outlive it
