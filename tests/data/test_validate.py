"""`python -m data.validate` as a user meets it: instances without an environment are derived
from a clone or refused by name, and a test patch for another tree is said as such."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow.parquet as pq
import pytest

from data import validate
from data.demo import load_demo_rows
from data.schema import to_table


@dataclass
class Run:
    status: str
    reason: str = ""
    outcomes: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


def test_a_test_patch_that_does_not_apply_before_the_fix_is_not_an_environment_failure():
    wrong_tree = Run("patch_failed", "the patch changes a file that is not in the context")
    assert validate.label(wrong_tree, [Run("ok"), Run("ok")]) == validate.Labels(
        "test_patch_fails", reason="the patch changes a file that is not in the context"
    )
    # after the fix it is the oracle that fails; an environment failure stays one
    assert validate.label(Run("ok"), [Run("patch_failed", "x"), Run("ok")]).outcome == "oracle_fails"
    assert validate.label(Run("env_failed", "uv"), [Run("ok"), Run("ok")]).outcome == "env_failed"


def test_a_test_patch_whose_files_the_runner_does_not_take_is_said_as_such():
    karma = Run("no_tests", "none of ['test/specs/a.spec.js'] is in the runner's selection ['test/unit/**/*.js']")
    labels = validate.label(karma, [karma, karma])
    assert labels.outcome == "no_tests" and "runner's selection" in labels.reason


def test_tests_that_failed_on_the_network_are_named_not_silently_dropped():
    """requests' suites call live hosts: such a test fails before and after the fix here and is
    in neither label; it is named in needs_network (an ordinary failure, or a flaky test, is not)."""
    before = Run("ok", outcomes={"t::f2p": "failed", "t::p2p": "passed", "t::net": "failed", "t::bug": "failed"})
    outcomes = {"t::f2p": "passed", "t::p2p": "passed", "t::net": "failed", "t::bug": "failed"}
    failures = {
        "t::net": "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='httpbin.org', port=443): "
        "Max retries exceeded",
        "t::bug": "AttributeError: 'KeyError' object has no attribute 'message'",
    }
    labels = validate.label(before, [Run("ok", outcomes=outcomes, failures=failures)] * 2)
    assert labels == validate.Labels("kept", ("t::f2p",), ("t::p2p",), needs_network=("t::net",))
    none = validate.label(before, [Run("ok", outcomes={**outcomes, "t::f2p": "failed"}, failures=failures)] * 2)
    assert none.outcome == "no_fail_to_pass" and none.needs_network == ("t::net",)


def test_validated_instances_carry_needs_network_and_execute_reports_it():
    from data.schema import Instance
    from reward.execution.predictions import network_tests

    row = dict(load_demo_rows()[0], needs_network=["t::net"])
    inst = Instance.from_row(row)
    assert inst.needs_network == ("t::net",) and inst.to_row()["needs_network"] == ["t::net"]
    assert Instance.from_row(load_demo_rows()[0]).needs_network is None  # a v3 row: not known
    ids = {"a": ("t::net",), "b": (), "c": None, "d": ("x::y",)}
    assert network_tests(ids, ["c", "b", "a"]) == {"a": ["t::net"]}  # only instances run, only non-empty


def test_instances_without_an_environment_and_no_clone_are_refused_naming_the_switch(tmp_path, capsys):
    rows = [dict(r, environment=None) for r in load_demo_rows()[:2]]
    pq.write_table(to_table(rows), tmp_path / "in.parquet")
    with pytest.raises(SystemExit) as exit_:
        validate.main(["--data", str(tmp_path / "in.parquet"), "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert (
        "2 of 2 instances carry no environment: give reward.execution.repos=[CLONE]" in err and "--environment" in err
    )


def test_the_after_runs_wall_follows_the_before_run_and_a_timeout_is_retried_doubled():
    from data.schema import Instance
    from reward.execution.runner import TestRun

    class Pool:
        def __init__(self) -> None:
            self.walls: list = []

        def run(self, jobs, what=""):
            out = []
            for job in jobs:
                wall = job.wall(300.0)
                self.walls.append((job.job_id, wall))
                if job.job_id == "0/after0" and wall < 500:  # the machine's load: once
                    out.append(TestRun(job.job_id, "i", "timeout", reason="timeout", wall_s=wall))
                    continue
                outcome = "failed" if job.job_id.endswith("before") else "passed"
                out.append(TestRun(job.job_id, "i", "ok", {"t::f2p": outcome}, seconds=100.0, wall_s=wall))
            return out

    inst = Instance("i", "a/b", "c", "", "fix", "test patch", {}, {})
    pool = Pool()
    (labels,) = validate.validate([inst], pool)
    assert labels.outcome == "kept" and labels.fail_to_pass == ("t::f2p",)
    assert pool.walls == [("0/before", 300.0), ("0/after0", 400.0), ("0/after1", 400.0), ("0/after0", 800.0)]
