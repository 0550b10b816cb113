"""reward/execution/predictions.py: a predictions file is read whole or refused by its line."""

from __future__ import annotations

import json

import pytest

from conf.errors import UserError
from reward.execution.predictions import read_predictions


def _write(tmp_path, rows):
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_one_prediction_per_instance_reads_in_order(tmp_path):
    rows = [{"instance_id": "a", "model_patch": "x"}, {"instance_id": "b", "model_patch": ""}]
    assert read_predictions(_write(tmp_path, rows)) == rows


def test_two_predictions_for_one_instance_are_refused_naming_both(tmp_path):
    rows = [{"instance_id": i, "model_patch": p} for i, p in (("a", "1"), ("b", "2"), ("a", "3"))]
    with pytest.raises(UserError, match=r"predictions 0 and 2 are both for instance 'a'"):
        read_predictions(_write(tmp_path, rows))
