"""rollout.mode=agent end to end: the tiny model trains for 2 steps on the demo set, each group
16 episodes of up to 3 turns in sandbox sessions, generated on the rollout fleet, scored on
their final patches, trained by the same GRPO learner (a small KL term keeps every row in the
batch, so the learner's logprobs of the episodes' sampled tokens are compared with the engine's)."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from reward.execution import sandbox

pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}")


def test_each_group_is_16_episodes_and_the_learner_trains_on_their_sampled_tokens(agent_run):
    metrics = agent_run.metrics()
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        assert m["rows_trained"] == 32  # 2 prompts x 16 episodes, none cut (format errors end them)
        # The mask lines up with the sampled tokens: where it did not, the placeholders (0.0) of
        # the appended observation tokens would differ from the learner's logprobs by whole nats.
        assert 0.0 <= m["logprob_diff_mean"] <= m["logprob_diff_max"] < 1e-3
        ended = sum(
            m[f"agent_ended_{how}"] for how in ("submit", "format_errors", "max_turns", "max_tokens", "timeout")
        )
        assert ended == 32 and m["agent_ended_infra"] == 0 and 1 <= m["agent_turns_max"] <= 3
        assert 0.0 < m["agent_engine_busy_fraction"] <= 1.0
        # Every turn waited on the engine; commands took time only where the model wrote one.
        assert m["agent_generation_s"] > 0.0 and (m["agent_command_s"] > 0.0) == (m["agent_actions_bash"] > 0)
        # Turn 2's and 3's prompts are turn 1's plus what came since: the cache serves most of them.
        assert 0.3 < m["agent_prefix_cache_hit_rate"] <= 1.0
        rollouts = agent_run.rollouts(m["step"])
        assert len(rollouts) == 32 and all(r["reward"] == 0.0 or r["text"] for r in rollouts)
        for r in rollouts:  # every turn is in the log, replayable (actors/replay.py)
            turns = r["episode"]["turns"]
            assert 1 <= len(turns) <= 3 and all({"text", "kind", "observation"} <= set(t) for t in turns)
            assert r["finish_reason"] == r["episode"]["ended_by"]
            assert r["policy_version"] == m["step"] - 1  # sync mode: on-policy episodes


def test_an_agent_run_resumes_after_its_last_checkpoint_with_no_episode_lost_or_repeated(
    agent_run, job_run, train_cli, tmp_path
):
    """The 2-step agent run, as a driver killed after checkpoint 2 leaves it, started again for
    3 steps: step 3 is the uninterrupted run's, each of its groups 16 episodes, once."""
    run_dir = tmp_path / "run"
    shutil.copytree(agent_run.run_dir, run_dir, symlinks=True)
    proc = train_cli(run_dir, *agent_run.overrides, "trainer.steps=3")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "[resume] from" in proc.stdout and "step_000002" in proc.stdout
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3] and metrics[2]["agent_turns_mean"] >= 1
    for step in (1, 2, 3):  # the loader's order is the uninterrupted (non-agent) run's: same data, same seed
        rows = _rows(run_dir, step)
        assert [r["instance_id"] for r in rows if r["sample"] == 0] == [
            r["instance_id"] for r in _rows(job_run.run_dir, step) if r["sample"] == 0
        ]
        by_group = Counter((r["instance_id"], r["sample"]) for r in rows)
        assert set(by_group.values()) == {1} and len(by_group) == 16 * 2  # every episode once
    assert all(r["episode"]["turns"] for r in _rows(run_dir, 3))  # step 3's are episodes, with turns


def _rows(run_dir, step):
    return [json.loads(line) for line in (run_dir / "rollouts" / f"step_{step:06d}.jsonl").read_text().splitlines()]
