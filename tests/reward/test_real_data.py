"""The reward on real instances (../shared/data): oracles score 1.0, real alternatives in [0, 1].

Skipped with a reason where the shared data is absent (it is never copied into the project).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from data.patching import PatchError, apply_patch
from reward import oracle_answer, score_output, score_patches
from reward.patches import file_changes
from reward.spec import reference_file_changes, reference_score_output, reference_score_patches

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared real data not found at {DATA}")


def load_requests() -> list[dict[str, Any]]:
    with open(DATA / "requests_lite.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_lite() -> list[dict[str, Any]]:
    with open(DATA / "swebench_lite.json", encoding="utf-8") as f:
        return json.load(f)


def resolved_patches(row: dict[str, Any]) -> list[str]:
    """`resolved_by` is a list of {name, patch}, or that list as a Python literal string."""
    entries = row["resolved_by"]
    entries = ast.literal_eval(entries) if isinstance(entries, str) else entries
    return [entry["patch"] if isinstance(entry, dict) else entry for entry in entries]


def test_requests_instances_oracle_answers_score_one() -> None:
    rows = load_requests()
    assert rows, "requests_lite.jsonl is empty"
    for row in rows:
        context, oracle = row["code_context"], row["oracle_new_content"]
        assert apply_patch(context, row["patch"]) == oracle, row["instance_id"]
        answer = oracle_answer(context, oracle)
        assert score_output(context, oracle, answer).reward == 1.0, row["instance_id"]
        assert reference_score_output(context, oracle, answer) == 1.0, row["instance_id"]
        assert score_patches(row["patch"], row["patch"]).reward == 1.0


def test_requests_resolved_by_as_answers_and_as_patches() -> None:
    scored = 0
    for row in load_requests():
        context, oracle = row["code_context"], row["oracle_new_content"]
        for patch in resolved_patches(row):
            by_patch = score_patches(row["patch"], patch).reward
            assert 0.0 <= by_patch <= 1.0
            assert by_patch == reference_score_patches([row["patch"]], [patch])
            try:
                new_content = apply_patch(context, patch)
            except PatchError:
                continue  # it also edits files outside the code context (tests, other modules)
            answer = oracle_answer(context, new_content)
            reward = score_output(context, oracle, answer).reward
            assert 0.0 <= reward <= 1.0
            assert abs(reward - reference_score_output(context, oracle, answer)) <= 1e-12
            scored += 1
    assert scored >= 15  # most alternatives apply to the context


def test_swebench_lite_golden_and_resolved_patches() -> None:
    rows = load_lite()
    assert len(rows) == 300
    pairs = 0
    for row in rows:
        golden = row["golden_patch"]
        assert score_patches(golden, golden).reward == 1.0, row["instance_id"]
        for patch in resolved_patches(row):
            result = score_patches(golden, patch)
            assert 0.0 <= result.reward <= 1.0 and result.error is None
            assert file_changes(patch) == reference_file_changes([patch])
            pairs += 1
    assert pairs > 300


def test_swebench_lite_resolved_patches_match_the_literal_rule_on_a_sample() -> None:
    # The pure-Python SequenceMatcher is slow: every 7th instance keeps this under a few seconds.
    for row in load_lite()[::7]:
        for patch in resolved_patches(row):
            got = score_patches(row["golden_patch"], patch).reward
            assert abs(got - reference_score_patches([row["golden_patch"]], [patch])) <= 1e-12
