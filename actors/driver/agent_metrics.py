"""A step's agent-mode metrics (rollout.mode=agent), from its groups' episode records: how long
episodes ran, what they did, how they ended, and how busy the engines were."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from actors.agent.episode import time_split
from actors.driver.generation import Group
from reward.execution.workspace import LIMITS

ACTIONS = ("bash", "edit", "submit", "invalid")
ENDINGS = ("submit", "format_errors", "max_turns", "max_tokens", "timeout", "infra")


def agent_metrics(groups: Sequence[Group]) -> dict[str, float]:
    """{} outside agent mode; else per step: turns per episode (mean, max), actions by kind,
    format errors, command timeouts, episodes by how they ended (every session limit together
    as `limit`), where an episode's time went
    (waiting for its turns to be generated vs its commands running, means per episode), the
    engines' busy fraction and the share of the turns' prompt tokens their prefix cache served."""
    episodes = [c for g in groups for c in g.completions if c.episode is not None]
    if not episodes:
        return {}
    turns = [len(c.episode.get("turns", [])) for c in episodes if c.episode is not None]
    split = [time_split(c.episode.get("turns", [])) for c in episodes if c.episode is not None]
    actions = Counter(t["kind"] for c in episodes if c.episode is not None for t in c.episode.get("turns", []))
    ended = Counter(c.finish_reason for c in episodes)
    engines = [c.episode["engine"] for c in episodes if c.episode and "engine" in c.episode]
    busy = [float(e["busy_fraction"]) for e in engines]
    hits = [float(e.get("prefix_hit_rate", 0.0)) for e in engines]
    out = {
        "agent_turns_mean": sum(turns) / len(turns),
        "agent_turns_max": float(max(turns)),
        "agent_format_errors": float(sum(c.episode.get("format_errors", 0) for c in episodes if c.episode)),
        "agent_command_timeouts": float(sum(c.episode.get("command_timeouts", 0) for c in episodes if c.episode)),
        "agent_generation_s": sum(g for g, _ in split) / len(split),
        "agent_command_s": sum(c for _, c in split) / len(split),
        "agent_engine_busy_fraction": sum(busy) / len(busy) if busy else 0.0,
        "agent_prefix_cache_hit_rate": sum(hits) / len(hits) if hits else 0.0,
    }
    out.update({f"agent_actions_{kind}": float(actions[kind]) for kind in ACTIONS})
    out.update({f"agent_ended_{how}": float(ended[how]) for how in ENDINGS})
    out["agent_ended_limit"] = float(sum(ended[limit] for limit in LIMITS))  # any session limit
    return out
