"""The test-runner pool: results in input order, a runner killed mid-job is replaced and its job redone."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import ray

from actors.cluster import loopback_only
from actors.test_pool import TestPool
from conf.config import ExecutionConfig
from data.demo import load_demo_rows
from data.schema import Instance
from reward.execution import sandbox
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
        killer = threading.Timer(1.0, lambda: ray.kill(victim, no_restart=True))
        killer.start()
        jobs = [TestJob(i, i.patch, job_id=i.instance_id) for i in instances]
        runs = pool.run(jobs)
        killer.join()
        assert [r.job_id for r in runs] == [i.instance_id for i in instances]  # input order
        assert all(r.status == "ok" and r.resolved for r in runs), [(r.status, r.reason) for r in runs]
        stats = pool.stats()
        assert stats["test_runner_restarts"] == 1 and stats["test_lost_jobs"] == 0 and stats["test_runs"] == 4
        assert ray.get(pool.actor.runner_handles.remote())[0] != victim
    finally:
        pool.shutdown()
