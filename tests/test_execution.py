"""Running the tests, end to end on the demo set: training with reward.kind=tests, validation
(`python -m data.validate`), the harness (`python -m reward.execute`) and evaluation, all on
the test-runner pool and the sandbox. The sandbox's containment: tests/reward/test_containment.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data.demo import load_demo_rows
from data.patching import make_patch
from data.schema import Instance, to_table
from reward.execution import sandbox

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sandbox.available() is not None, reason=f"no sandbox: {sandbox.available()}"),
]
REPO = Path(__file__).resolve().parent.parent


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**__import__("os").environ, **env},
    )


def test_training_with_the_tests_reward_scores_by_resolution(tests_run):
    (metrics,) = tests_run.metrics()
    rows = tests_run.rollouts(1)
    oracle = [r for r in rows if r["finish_reason"] == "oracle"]
    # The run trains on instances data.inject made from the demo set (conftest `injected`).
    assert rows and all(".inject" in r["instance_id"] for r in rows)
    # The oracle answers (the inverse of each bug) resolve (their edits are the fix; the instance's tests pass); the
    # random model's outputs are malformed (-1) and never reach the sandbox.
    assert len(oracle) == 2 and all(r["reward"] == 1.0 and r["error"] is None for r in oracle)
    assert {r["reward"] for r in rows if r["finish_reason"] != "oracle"} == {-1.0}
    assert metrics["resolve_rate"] == 0.0 and metrics["zero_signal_frac"] == 0.0
    assert metrics["test_runs"] == 2 and metrics["tests_s"] > 0 and metrics["test_lost_jobs"] == 0


def test_validation_derives_the_demo_labels_and_counts_what_it_drops(tmp_path):
    rows = load_demo_rows()[:3]
    untested = dict(rows[0], instance_id="demo__calspan-9999", test_patch=None)  # v2-like: no tests
    pq.write_table(to_table([*rows, untested]), tmp_path / "in.parquet")
    proc = _cli("data.validate", "--data", str(tmp_path / "in.parquet"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads((tmp_path / "out" / "_manifest.json").read_text())
    assert manifest["counts"] == {"kept": 3, "no_test_patch": 1} and manifest["flaky_tests"] == 0
    kept = {r["instance_id"]: r for r in pq.read_table(tmp_path / "out").to_pylist()}
    for row in rows:  # the labels committed with the demo set are reproduced
        assert kept[row["instance_id"]]["FAIL_TO_PASS"] == row["FAIL_TO_PASS"]
        assert kept[row["instance_id"]]["PASS_TO_PASS"] == row["PASS_TO_PASS"]
    shown = proc.stdout + proc.stderr  # progress: the before runs, then the after runs (2 each)
    assert "[tests] 3/3 validation runs before the fix" in shown and "[tests] 6/6 validation runs with the fix" in shown


def test_the_harness_writes_a_swebench_style_report(tmp_path):
    a, b, c, d, e, f = (Instance.from_row(r) for r in load_demo_rows()[:6])
    broken = c.patch.replace("@@ -", "@@ -9", 1)  # its hunk's lines are not where it says
    # Hostile predictions (docs/security.md): a path outside the repository, and a patch whose
    # module forces every report to "passed" when the tests import it.
    escape = f"--- /dev/null\n+++ b/../{tmp_path.name}-planted.py\n@@ -0,0 +1 @@\n+x = 1\n"
    module = next(iter(f.code_context))
    force = (
        "\nfrom _pytest import reports as _r\n_make = _r.TestReport.from_item_and_call.__func__\n"
        "def _all_pass(cls, item, call):\n    report = _make(cls, item, call)\n"
        "    report.outcome, report.longrepr = 'passed', None\n    return report\n"
        "_r.TestReport.from_item_and_call = classmethod(_all_pass)\n"
    )
    forged = make_patch({module: f.code_context[module]}, {module: f.code_context[module] + force})
    predictions = [
        {"instance_id": a.instance_id, "model_name_or_path": "gold", "model_patch": a.patch},
        {"instance_id": b.instance_id, "model_name_or_path": "gold", "model_patch": b.patch},
        {"instance_id": c.instance_id, "model_name_or_path": "broken", "model_patch": broken},
        {"instance_id": d.instance_id, "model_name_or_path": "empty", "model_patch": ""},
        {"instance_id": e.instance_id, "model_name_or_path": "escape", "model_patch": escape},
        {"instance_id": f.instance_id, "model_name_or_path": "forged", "model_patch": forged},
        {"instance_id": "demo__nowhere-1", "model_name_or_path": "x", "model_patch": a.patch},
    ]
    (tmp_path / "preds.json").write_text(json.dumps(predictions))  # a JSON list (JSONL reads too)
    proc = _cli(
        "reward.execute",
        "--instances",
        "demo",
        "--predictions",
        str(tmp_path / "preds.json"),
        "--out",
        str(tmp_path / "out"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["resolved_ids"] == sorted([a.instance_id, b.instance_id]) and report["unresolved_ids"] == []
    errors = report["error_ids"]
    assert sorted(errors) == sorted([c.instance_id, e.instance_id, f.instance_id])
    assert errors[c.instance_id].startswith("patch_failed") and "unsafe path" not in errors[c.instance_id]
    assert errors[e.instance_id].startswith("patch_failed: unsafe path")
    assert errors[f.instance_id].startswith("tampered") and report["tampered_ids"] == [f.instance_id]
    assert not (tmp_path.parent / f"{tmp_path.name}-planted.py").exists()
    assert report["empty_patch_ids"] == [d.instance_id] and report["missing_instance_ids"] == ["demo__nowhere-1"]
    assert (report["total_predictions"], report["submitted"], report["resolved"], report["error"]) == (7, 5, 2, 3)
    assert report["needs_network"] == {}  # the demo set's tests need no network
    logged = json.loads((tmp_path / "out" / "logs" / f"{a.instance_id}.json").read_text())
    assert logged["resolved"] is True and set(a.fail_to_pass or ()) <= set(logged["tests"])


def test_evaluation_reports_resolution_when_the_instances_carry_tests(injected):
    """On instances data.inject made (conftest `injected`): they evaluate as mined ones do."""
    from actors.eval import oracle_context
    from conf import eval as eval_config
    from conf.config import ModelConfig
    from learner.models import resolve

    tiny = resolve(ModelConfig(name="tiny"))
    args = [f"model.name={tiny}", f"data={injected[0]}", "--oracle", "group_size=2", "limit=2"]
    report = oracle_context.evaluate(eval_config.parse_args(args))
    assert report.summary["tests"]["resolve_rate"] == 1.0 and report.summary["tests"]["resolved_any"] == 1.0
    assert report.summary["tests"]["test_runs"] == 2  # greedy and samples share one patch per instance
