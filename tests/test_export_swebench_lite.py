"""scripts/export_swebench_lite.py on two fake hub rows: the file's form, read back by the
build's SWE-bench reader as the shared file is."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from data.mining.sources import iter_swebench_rows

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "export_swebench_lite.py"
_spec = importlib.util.spec_from_file_location("export_swebench_lite", SCRIPT)
assert _spec is not None and _spec.loader is not None
exporter = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(exporter)

PATCH = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


def _hub_row(n: int) -> dict:
    return {
        "instance_id": f"o__r-{n}",
        "repo": "o/r",
        "base_commit": f"{n:040x}",
        "problem_statement": f"Issue {n}",
        "patch": PATCH,
        "test_patch": "diff --git a/test_m.py b/test_m.py\n",
        "FAIL_TO_PASS": '["test_m.py::test_x"]',
        "version": "1.0",
    }


def test_the_export_has_the_shared_files_fields_and_no_labels(tmp_path):
    out = tmp_path / "lite" / "swebench_lite.json"
    assert exporter.export([_hub_row(1), _hub_row(2)], out) == 2
    rows = json.loads(out.read_text())
    assert [r["instance_id"] for r in rows] == ["o__r-1", "o__r-2"]
    assert set(rows[0]) == {"instance_id", "repo", "base_commit", "problem_statement", "golden_patch", "resolved_by"}
    assert rows[0]["golden_patch"] == PATCH and rows[0]["resolved_by"] == []
    read = [row for _, row in iter_swebench_rows(out)]  # as data.build --swebench reads it
    assert [(r["instance_id"], r["patch"]) for r in read] == [("o__r-1", PATCH), ("o__r-2", PATCH)]


def test_a_row_without_a_patch_is_refused_by_its_id(tmp_path):
    bad = {k: v for k, v in _hub_row(3).items() if k != "patch"}
    with pytest.raises(ValueError, match="o__r-3: no patch"):
        exporter.export([bad], tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()
