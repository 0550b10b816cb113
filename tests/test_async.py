"""Asynchronous mode end to end: generation runs ahead while the learner trains, rollouts stay
within the staleness bound, and every step trains on a complete batch. The run trains on the
discrete reward (reward.kind=discrete), which rides along at no cost: its smoke run is the
issue's "discrete trains" check."""

from __future__ import annotations

import json


def test_async_mode_overlaps_and_bounds_staleness(tmp_path, train_cli):
    proc = train_cli(
        tmp_path / "run",
        "trainer.mode=async",
        "trainer.max_staleness=1",
        "trainer.steps=3",
        "trainer.verify_sync=false",
        "reward.kind=discrete",
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    for m in metrics:
        assert m["num_rollouts"] == 32 and m["staleness_max"] <= 1
        rows = [
            json.loads(line)
            for line in (tmp_path / "run" / "rollouts" / f"step_{m['step']:06d}.jsonl").read_text().splitlines()
        ]
        versions = {r["policy_version"] for r in rows if r["finish_reason"] != "oracle"}
        assert all(m["policy_version"] - 1 - v <= 1 for v in versions)
        # The discrete kind scored them: the oracle answer is the exact change (1), the random
        # model's outputs are malformed (-1); no output lands between.
        assert {(r["finish_reason"] == "oracle", r["reward"]) for r in rows} == {(True, 1.0), (False, -1.0)}
        assert m["rows_trained"] == 32 and m["zero_signal_frac"] == 0.0  # every group had a spread to learn
    # Steps 2 and 3 consumed rollouts generated before the previous update finished: the
    # generation of step k+1 overlapped the training of step k.
    assert all(m["staleness_max"] == 1 for m in metrics[1:])
