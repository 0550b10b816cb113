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


def test_a_test_patch_that_does_not_apply_before_the_fix_is_not_an_environment_failure():
    wrong_tree = Run("patch_failed", "the patch changes a file that is not in the context")
    assert validate.label(wrong_tree, [Run("ok"), Run("ok")]) == validate.Labels(
        "test_patch_fails", reason="the patch changes a file that is not in the context"
    )
    # after the fix it is the oracle that fails; an environment failure stays one
    assert validate.label(Run("ok"), [Run("patch_failed", "x"), Run("ok")]).outcome == "oracle_fails"
    assert validate.label(Run("env_failed", "uv"), [Run("ok"), Run("ok")]).outcome == "env_failed"


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
