"""bench/swebench_coverage.py's summary: each patch that does not resolve is named with the
labelled tests that did not pass (or its run's error), a gold run that errored is counted, and
every command gets the cache directory given, not the checkout's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import swebench_coverage
from bench.swebench_coverage import misses, not_passed

LABELS = {"a": {"FAIL_TO_PASS": ["t.py::f2p"], "PASS_TO_PASS": ["t.py::p1", "t.py::p2"]}}


def test_the_labelled_tests_that_did_not_pass_are_named_with_their_outcome():
    tests = {"t.py::f2p": "failed", "t.py::p1": "passed", "t.py::other": "failed"}
    assert not_passed(LABELS["a"], tests) == {"t.py::f2p": "failed", "t.py::p2": "missing"}


def test_misses_name_failing_tests_and_errors(tmp_path: Path):
    (tmp_path / "a.json").write_text(json.dumps({"tests": {"t.py::f2p": "error", "t.py::p1": "passed"}}))
    preds = [
        {"instance_id": "a", "model_name_or_path": "sys1", "model_patch": "x"},
        {"instance_id": "b", "model_name_or_path": "sys2", "model_patch": "y"},
        {"instance_id": "c", "model_name_or_path": "sys3", "model_patch": "z"},
    ]
    report = {
        "resolved_ids": ["c"],
        "error_ids": {"b": "env_failed: no wheel"},
        "empty_patch_ids": [],
        "missing_instance_ids": [],
    }
    assert misses(preds, report, tmp_path, {**LABELS, "b": LABELS["a"]}) == [
        {"instance_id": "a", "system": "sys1", "not_passed": {"t.py::f2p": "error", "t.py::p2": "missing"}},
        {"instance_id": "b", "system": "sys2", "error": "env_failed: no wheel"},
    ]


def test_a_gold_run_that_errored_is_counted_and_the_cache_is_the_one_given(tmp_path, monkeypatch):
    """The commands are faked: each writes what the real one would, and the calls are kept."""
    rows = [{"instance_id": "o__r-1", "repo": "o/r", "golden_patch": "diff", "resolved_by": []}]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    work, calls = tmp_path / "work", []

    def fake_run(args: list[str], log: Path) -> None:
        calls.append(args)
        out = Path(args[args.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        if args[0] == "data.swebench_exec":
            manifest = {"instances": 1, "counts": {"kept": 1}, "notes": {}}
        elif args[0] == "data.validate":
            manifest = {"kept": 1, "counts": {"kept": 1}, "examples": {}}
            labels = [{"instance_id": "o__r-1", "outcome": "kept", **LABELS["a"]}]
            (out / "_labels.json").write_text(json.dumps(labels))
        else:
            report = {"submitted": 1, "resolved": 0, "unresolved": 0, "error": 1, "resolved_ids": [],
                      "error_ids": {"o__r-1": "timeout: 300 s"}, "empty_patch_ids": [], "missing_instance_ids": []}  # fmt: skip
            (out / "report.json").write_text(json.dumps(report))
            return
        (out / "_manifest.json").write_text(json.dumps(manifest))

    monkeypatch.setattr(swebench_coverage, "_run", fake_run)
    cache = tmp_path / "cache"
    argv = ["--repo", "o/r", "--git", "o/r=/clone", "--rows", str(tmp_path / "rows.json"), "--work", str(work)]
    swebench_coverage.main([*argv, "--cache-dir", str(cache)])
    summary = json.loads((work / "summary.json").read_text())
    assert (summary["gold_run"], summary["gold_resolved"], summary["gold_error"]) == (1, 0, 1)
    assert summary["gold_misses"] == [{"instance_id": "o__r-1", "system": "gold", "error": "timeout: 300 s"}]
    pool_commands = [c for c in calls if c[0] != "data.swebench_exec"]
    assert len(pool_commands) == 2
    assert all(f"reward.execution.cache_dir={cache.resolve()}" in c for c in pool_commands)
    with pytest.raises(SystemExit):  # an id that is not a row is refused
        swebench_coverage.main([*argv, "--ids", "o__r-2"])


def test_the_gold_patch_is_read_from_either_row_format():
    # SWE-bench's own rows (swebench_dev_rows.json) name it `patch`; the Lite export `golden_patch`.
    assert swebench_coverage._gold_patch({"patch": "diff a"}) == "diff a"
    assert swebench_coverage._gold_patch({"golden_patch": "diff b"}) == "diff b"
