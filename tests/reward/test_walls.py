"""Wall clocks that follow the measured baseline (walls.py): the policy on values, the one retry
with a doubled wall on a fake runner, and a real run whose wall its job's baseline sets."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conf.config import ExecutionConfig
from data.demo import load_demo_rows
from data.patching import make_patch
from data.schema import Instance
from reward.execution import sandbox, walls
from reward.execution.runner import Runner, TestJob, TestRun, run_retried

needs_sandbox = pytest.mark.skipif(
    sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}"
)


def test_a_wall_is_a_multiple_of_the_baseline_never_under_the_floor():
    assert walls.wall_for(None, 30.0) == 30.0  # nothing measured: the configured wall
    assert walls.wall_for(0.0, 30.0) == 30.0
    assert walls.wall_for(5.0, 30.0) == 30.0  # a quick suite keeps the floor
    assert walls.wall_for(17.0, 30.0) == 68.0  # the injector's baseline that met 30 s on a loaded machine
    assert walls.wall_for(17.0, 30.0, factor=2.0) == 34.0
    assert walls.retry_wall(68.0) == 136.0


def test_a_jobs_wall_is_its_own_or_follows_its_baseline():
    inst = Instance("i", "a/b", "c", "", "", "", {}, {})
    assert TestJob(inst, "").wall(30.0) == 30.0
    assert TestJob(inst, "", baseline_s=20.0).wall(30.0) == 80.0
    assert TestJob(inst, "", baseline_s=20.0, wall_s=200.0).wall(30.0) == 200.0


class FakeRuns:
    """Each job times out under walls below `needs_s`, else passes; records every call."""

    def __init__(self, needs_s: dict[str, float]) -> None:
        self.needs_s, self.calls = needs_s, []

    def __call__(self, jobs):
        self.calls.append([(j.job_id, j.wall(30.0)) for j in jobs])
        out = []
        for job in jobs:
            wall = job.wall(30.0)
            status = "timeout" if wall < self.needs_s.get(job.job_id, 0.0) else "ok"
            out.append(TestRun(job.job_id, "i", status, {"t": "passed"} if status == "ok" else {}, wall_s=wall))
        return out


def test_a_timeout_runs_once_more_with_its_wall_doubled_and_only_once():
    inst = Instance("i", "a/b", "c", "", "", "", {}, {})
    jobs = [TestJob(inst, "", "quick"), TestJob(inst, "", "loaded", baseline_s=10.0), TestJob(inst, "", "loops")]
    fake = FakeRuns({"loaded": 50.0, "loops": 1e9})
    runs = run_retried(fake, jobs)
    assert [(r.job_id, r.status, r.wall_s) for r in runs] == [
        ("quick", "ok", 30.0),
        ("loaded", "ok", 80.0),  # 40 s ran out; 80 s did not
        ("loops", "timeout", 60.0),  # a bug that loops forever: its wall and the retry's, no third run
    ]
    assert fake.calls == [[("quick", 30.0), ("loaded", 40.0), ("loops", 30.0)], [("loaded", 80.0), ("loops", 60.0)]]
    assert run_retried(fake, []) == [] and len(fake.calls) == 2


SLOW = "calspan/months.py"  # the module the demo instance's tests import


@needs_sandbox
def test_a_runner_runs_a_job_under_the_wall_its_baseline_sets(tmp_path):
    """A module that takes 3 s to import: over a 1 s wall it times out, under the wall a 10 s
    baseline sets (4x) it runs; the run says which wall it had."""
    inst = Instance.from_row(next(r for r in load_demo_rows() if r["instance_id"] == "demo__calspan-3"))
    original = inst.code_context[SLOW]
    slow = make_patch({SLOW: original}, {SLOW: original + "\nimport time\n\ntime.sleep(3)\n"})
    runner = Runner(ExecutionConfig(cache_dir=str(tmp_path / "cache"), wall_s=1.0))
    short = runner.run(TestJob(inst, slow))
    assert (short.status, short.wall_s) == ("timeout", 1.0), short.reason
    followed = runner.run(replace(TestJob(inst, slow), baseline_s=10.0))
    assert (followed.status, followed.wall_s) == ("ok", 40.0), followed.reason
    assert followed.outcomes and followed.seconds > 3.0
