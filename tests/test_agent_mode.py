"""rollout.mode=agent end to end: the tiny model trains for 2 steps on the demo set, each group
16 episodes of up to 3 turns in sandbox sessions, generated on the rollout fleet, scored on
their final patches, trained by the same GRPO learner (a small KL term keeps every row in the
batch, so the learner's logprobs of the episodes' sampled tokens are compared with the engine's)."""

from __future__ import annotations

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
        # Turn 2's and 3's prompts are turn 1's plus what came since: the cache serves most of them.
        assert 0.3 < m["agent_prefix_cache_hit_rate"] <= 1.0
        rollouts = agent_run.rollouts(m["step"])
        assert len(rollouts) == 32 and all(r["reward"] == 0.0 or r["text"] for r in rollouts)
        for r in rollouts:  # every turn is in the log, replayable (actors/replay.py)
            turns = r["episode"]["turns"]
            assert 1 <= len(turns) <= 3 and all({"text", "kind", "observation"} <= set(t) for t in turns)
            assert r["finish_reason"] == r["episode"]["ended_by"]
            assert r["policy_version"] == m["step"] - 1  # sync mode: on-policy episodes
