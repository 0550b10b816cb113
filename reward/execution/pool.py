"""The test-runner pool: Ray actors that run tests in sandboxes, shared by everything that runs tests.

Validation (`python -m data.validate`), the harness (`python -m reward.execute`), training
(`reward.kind=tests` / `hybrid`: the reward workers submit their outputs here) and evaluation
all go through one pool:

    runners      `reward.execution.num_runners` actors (reward/execution/runner.py `Runner`), each
                 `num_cpus` CPUs, independent of the rollout and reward actors; each holds its
                 node's caches of environments and snapshots, and first runs the node check
                 (check.py): a node that cannot run the sandbox stops the pool's start with
                 NodeNotReady naming the node and why
    coordinator  one async actor (`PoolCoordinator`) that owns the runners: any process holding
                 its handle (the driver, a reward worker, a command) submits `run(job)`; it hands
                 the job to an idle runner and awaits it
    failures     a runner that dies, or whose call outlives its deadline (the sandbox's wall
                 clock plus an environment build plus a margin: the sandbox stops the tests
                 itself, this is the backstop), is killed and replaced and the job redone once
                 on another runner; a job that fails twice comes back as status "lost" with
                 the reason. One stuck job never stalls the pool.
    counters     test runs, their sandbox seconds, timeouts, environment builds, runner
                 restarts, lost jobs, forged (tampered) and unreadable reports, unsafe paths,
                 guarded files, runs without caps: `stats()`, in the trainer's metrics when it runs tests; a
                 tampered or unreadable report is logged with its patch

`TestPool` is the driver's handle: it starts the coordinator, submits a list of jobs, shows
progress on long lists, and returns the results in input order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from conf.config import ExecutionConfig
from conf.errors import UserError
from conf.progress import Progress
from reward.execution.runner import Runner, TestJob, TestRun

log = logging.getLogger(__name__)

# Seconds beyond the sandbox's wall clock and one environment build before a call is given up.
_MARGIN_S = 60.0
PROGRESS_INTERVAL_S = 10.0


class PoolCoordinator:
    """Owns the runners (a plain class; TestPool makes it an async Ray actor)."""

    def __init__(self, cfg: ExecutionConfig) -> None:
        self.cfg = cfg
        self.remote_cls = ray.remote(Runner).options(num_cpus=cfg.num_cpus, max_restarts=0)
        # At least one: `num_runners=0` (in-process where a command offers it) would leave a pool
        # with no runner, and data.validate's and reward.execute's first call waiting forever.
        self.runners: list[Any] = [self.remote_cls.remote(cfg) for _ in range(max(cfg.num_runners, 1))]
        self.idle: asyncio.Queue[int] | None = None
        self.counters = {
            "test_runs": 0,
            "tests_s": 0.0,
            "test_timeouts": 0,
            "env_builds": 0,
            "test_runner_restarts": 0,
            "test_lost_jobs": 0,
            "test_tampered": 0,  # canaries wrong: the report was forged (runner.py)
            "test_bad_reports": 0,  # a report stream the recorder does not write
            "test_unsafe_paths": 0,  # patches naming a path outside the repository
            "test_guarded_files": 0,  # candidate files not applied (conftest.py, pytest.ini, ...)
            "test_uncapped": 0,  # runs without memory and pids caps (the best_effort policy)
        }
        self.deadline_s = cfg.wall_s + cfg.build_timeout_s + _MARGIN_S

    async def ready(self) -> int:
        if self.idle is None:  # the queue belongs to the actor's event loop: made here, not in __init__
            self.idle = asyncio.Queue()  # before the await: concurrent callers wait on the queue
            await asyncio.gather(*[r.ready.remote() for r in self.runners])
            for index in range(len(self.runners)):
                self.idle.put_nowait(index)
        return len(self.runners)

    async def run(self, job: TestJob) -> TestRun:
        await self.ready()
        assert self.idle is not None
        reason = ""
        # The job's own wall clock (it may follow a measured baseline: walls.py) sets its deadline.
        deadline_s = self.deadline_s - self.cfg.wall_s + job.wall(self.cfg.wall_s)
        for _ in range(2):
            index = await self.idle.get()
            broken = False
            try:
                result: TestRun = await asyncio.wait_for(self.runners[index].run.remote(job), deadline_s)
            except (TimeoutError, RayActorError) as exc:
                what = "timed out" if isinstance(exc, asyncio.TimeoutError) else "died"
                reason = f"the test runner {what} ({deadline_s:.0f} s deadline)"
                broken = True
                continue
            except Exception as exc:  # the runner raised (Runner.run returns statuses; this is the backstop)
                result = TestRun(job.job_id, job.instance.instance_id, "error", reason=f"{exc}"[-500:])
            finally:
                # Whatever the job did, the runner goes back to the queue (or a new one takes its
                # place): one hostile job never shrinks the pool or strands the jobs behind it.
                if broken:
                    await self._replace(index)
                else:
                    self.idle.put_nowait(index)
            self._count(result, job)
            return result
        self.counters["test_lost_jobs"] += 1
        return TestRun(job.job_id, job.instance.instance_id, "lost", reason=f"lost: {reason}, twice")

    async def _replace(self, index: int) -> None:
        assert self.idle is not None
        ray.kill(self.runners[index], no_restart=True)
        self.runners[index] = self.remote_cls.remote(self.cfg)
        self.counters["test_runner_restarts"] += 1
        await self.runners[index].ready.remote()
        self.idle.put_nowait(index)

    def _count(self, run: TestRun, job: TestJob) -> None:
        self.counters["test_runs"] += 1
        self.counters["tests_s"] = round(self.counters["tests_s"] + run.seconds, 3)
        self.counters["test_timeouts"] += run.status == "timeout"
        self.counters["env_builds"] += run.env_build_s > 0
        self.counters["test_tampered"] += run.status == "tampered"
        self.counters["test_bad_reports"] += run.status == "bad_report"
        self.counters["test_unsafe_paths"] += run.status == "patch_failed" and "unsafe path" in (run.reason or "")
        self.counters["test_guarded_files"] += len(run.guarded)
        self.counters["test_uncapped"] += run.uncapped
        if run.status in ("tampered", "bad_report"):
            # The patch that forged (or broke) its report, for whoever reads the run's log.
            log.warning(
                "%s on %s (job %s): %s\n%s", run.status, run.instance_id, run.job_id, run.reason, job.patch[:4000]
            )

    def stats(self) -> dict[str, float]:
        return dict(self.counters)

    def runner_handles(self) -> list[Any]:
        """The current runners (a seam for tests that inject faults, and for debugging)."""
        return list(self.runners)

    def shutdown(self) -> None:
        for runner in self.runners:
            ray.kill(runner, no_restart=True)


class TestPool:
    """The driver's handle on the coordinator (Ray must already be initialised)."""

    __test__ = False  # not a pytest test class

    def __init__(self, cfg: ExecutionConfig) -> None:
        self.cfg = cfg
        # Concurrency: every job in flight is one waiting coroutine on the coordinator.
        self.actor = ray.remote(PoolCoordinator).options(num_cpus=0, max_concurrency=10_000).remote(cfg)
        try:
            ray.get(self.actor.ready.remote())
        except RayTaskError as exc:
            ray.kill(self.actor, no_restart=True)  # and with it the runners it owns
            # A runner's node failed its check (check.py): the driver shows its one line, not Ray's traceback.
            if isinstance(exc.cause, UserError):
                raise exc.cause from None
            raise

    def run(self, jobs: Sequence[TestJob], what: str = "test runs") -> list[TestRun]:
        """Run every job; results in input order. Shows progress (conf/progress.py)."""
        refs = [self.actor.run.remote(job) for job in jobs]
        pending = list(refs)
        with Progress("tests", what, len(refs), every_s=PROGRESS_INTERVAL_S, emit=log.info) as progress:
            while pending:
                ready, pending = ray.wait(pending, num_returns=len(pending), timeout=1.0)
                progress.update(len(ready))
        return list(ray.get(refs))

    def stats(self) -> dict[str, float]:
        return dict(ray.get(self.actor.stats.remote()))

    def shutdown(self) -> None:
        ray.get(self.actor.shutdown.remote())
        ray.kill(self.actor, no_restart=True)
