"""SWE-bench predictions: reading a predictions file, and the report of their test runs with
SWE-bench's field names (reward/execute.py's report.json, the Agentless evaluation's resolution)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conf.errors import UserError


def read_predictions(path: str) -> list[dict[str, Any]]:
    """SWE-bench predictions (JSONL or a JSON list); UserError naming the line or field."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        rows = (
            json.loads(text)
            if text.lstrip().startswith("[")
            else [json.loads(s) for s in text.splitlines() if s.strip()]
        )
    except ValueError as exc:
        raise UserError(f"--predictions {path}: not JSON or JSONL ({exc})") from None
    first: dict[str, int] = {}
    for i, row in enumerate(rows):
        for key in ("instance_id", "model_patch"):
            if not isinstance(row, dict) or not isinstance(row.get(key), str):
                raise UserError(f"--predictions {path}: prediction {i}: field {key!r} missing or not a string")
        # Two answers for one instance: which one the report shows would be a guess (each run
        # is keyed by its instance), so neither is run.
        if (seen := first.setdefault(row["instance_id"], i)) != i:
            raise UserError(
                f"--predictions {path}: predictions {seen} and {i} are both for instance "
                f"{row['instance_id']!r}: keep one prediction per instance"
            )
    return rows


def report(predictions: list[dict[str, Any]], runs: dict[str, Any], missing: list[str]) -> dict[str, Any]:
    empty = [p["instance_id"] for p in predictions if not p["model_patch"].strip()]
    resolved = sorted(i for i, r in runs.items() if r.status == "ok" and r.resolved)
    unresolved = sorted(i for i, r in runs.items() if r.status == "ok" and not r.resolved)
    errors = {i: f"{r.status}: {r.reason}" for i, r in sorted(runs.items()) if r.status != "ok"}
    return {
        "total_predictions": len(predictions),
        "submitted": len(runs),
        "completed": len(resolved) + len(unresolved),
        "resolved": len(resolved),
        "unresolved": len(unresolved),
        "error": len(errors),
        "empty_patch": len(empty),
        "resolved_ids": resolved,
        "unresolved_ids": unresolved,
        "error_ids": errors,
        "tampered_ids": sorted(i for i, r in runs.items() if r.status == "tampered"),
        "empty_patch_ids": sorted(empty),
        "missing_instance_ids": sorted(missing),
    }


def network_tests(needs_network: dict[str, tuple[str, ...] | None], run_ids: list[str]) -> dict[str, list[str]]:
    """{instance_id: its needs_network tests} of the instances run that have any: tests their
    labels leave out because they need the internet (data.validate), so a patch that breaks
    what they check still resolves here; the report names them beside the verdict."""
    return {i: list(tests) for i in sorted(run_ids) if (tests := needs_network.get(i))}
