"""The run's Grafana dashboard: time-series panels of the training gauges, generated from the
list of exported gauges (actors/observe/telemetry.py `EXPORTED`) and installed where Ray's Grafana
provisioning reads dashboards on the head node, so that a Grafana started with Ray's
generated config shows "SWE-RL training" in the Ray folder next to Ray's own dashboards.

Plain JSON built by code, no library: a panel here is a title, a unit and one PromQL query per
gauge, about a dozen fields of Grafana's dashboard model (stable since Grafana 7). grafanalib
or grafana-foundation-sdk would add a dependency, and their own object model, to write those
same fields. `build()` refuses a gauge that is on no panel or on two, so adding a metric
without placing it fails in the tests rather than silently missing from the dashboard.

Where Ray looks (ray/dashboard/modules/metrics/metrics_head.py, Ray 2.x): its dashboard head
writes a provisioning file that points Grafana at `$RAY_METRICS_GRAFANA_DASHBOARD_OUTPUT_DIR`,
by default `<metrics root>/grafana/dashboards` with the metrics root `$RAY_METRICS_OUTPUT_ROOT`
or `<session dir>/metrics`. Grafana rescans that folder (every 10 s by default), so a file
written there after it started appears without a restart.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.observe.telemetry import ACTOR_TOKENS_GAUGE, EXPORTED, PREFIX
from conf.io import atomic_write
from data.bugs.injector import REJECTIONS

log = logging.getLogger(__name__)

UID = "swe-rl-training"  # fixed: reinstalling replaces the dashboard instead of adding one
FILE_NAME = "swe_rl_grafana_dashboard.json"
HEAD_RESOURCE = "node:__internal_head__"  # Ray's resource that only the head node has


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str  # Grafana's unit id: percentunit (0-1), s, short, MBs
    keys: tuple[str, ...]  # metrics.jsonl keys; one query each, legend = the key
    description: str


PANELS: tuple[Panel, ...] = (
    Panel("Reward", "short", ("reward_mean", "reward_std", "resolve_rate"), "policy samples; resolve_rate with tests"),
    Panel("Format errors and truncation", "percentunit", ("format_error_rate", "truncated_frac"), "share of samples"),
    Panel("Zero-signal groups", "percentunit", ("zero_signal_frac",), "groups whose rewards are all equal"),
    Panel(
        "Dynamic sampling",
        "short",
        ("dynamic_sampling_rounds", "dynamic_sampling_dropped"),
        "extra rounds run and flat groups left out (trainer.dynamic_sampling)",
    ),
    Panel(
        "Rollout/learner mismatch",
        "short",
        ("logprob_diff_mean", "logprob_diff_max"),
        "absolute logprob difference, engine vs learner, before the update",
    ),
    Panel("Completions", "short", ("completion_len_mean", "overlong_penalty_mean", "overlong_filtered"), "tokens"),
    Panel("Loss", "short", ("loss", "grad_norm"), "learner statistics, token-weighted"),
    Panel(
        "Policy drift",
        "short",
        ("clip_frac", "approx_kl_old", "ratio_mean", "kl_ref", "entropy"),
        "clipping and KL against the rollout and reference policies",
    ),
    Panel(
        "Rows and padding",
        "short",
        ("num_rollouts", "rows_trained", "pad_frac", "pad_frac_unsorted"),
        "rollouts per step, rows sent to the learner, padding share",
    ),
    Panel(
        "Phase times",
        "s",
        (
            *("data_s", "generate_s", "prove_s", "reward_s", "tests_s", "advantages_s", "train_s", "sync_s"),
            *("checkpoint_s", "step_s"),
        ),
        "wall seconds of each phase and of the whole step; prove_s with trainer.selfplay",
    ),
    Panel("Generation tokens/s", "short", ("gen_tokens_per_s",), "the step's generated tokens over generate_s"),
    Panel(
        "Staleness and queue depth",
        "short",
        ("staleness_max", "stale_dropped", "queue_depth", "prompts_too_long"),
        "version lag of consumed rollouts; groups dropped as too stale; prompts waiting; prompts skipped",
    ),
    Panel("Weight sync bandwidth", "MBs", ("sync_mb_per_s",), "broadcast of the new weights to the engines"),
    Panel(
        "Weight sync check",
        "short",
        ("params_changed", "sync_probe_diff_before", "sync_probe_diff_after"),
        "trainer.verify_sync=true only",
    ),
    Panel(
        "Engines and restarts",
        "short",
        (
            "rollout_actors",
            "rollout_actor_restarts",
            "requeued_prompts",
            "reward_actor_restarts",
            "test_runner_restarts",
        ),
        "live engines; deaths survived (cumulative)",
    ),
    Panel(
        "Reward and test pools",
        "short",
        (
            *("reward_timeouts", "reward_lost_jobs", "test_runs", "test_timeouts", "env_builds", "test_lost_jobs"),
            *("test_tampered", "test_bad_reports", "test_unsafe_paths", "test_guarded_files", "test_uncapped"),
        ),
        "cumulative counters; test_* with reward kinds that run tests; test_tampered, test_bad_reports, "
        "test_unsafe_paths, test_guarded_files count hostile patches (docs/security.md): a policy "
        "learning to forge its verdict shows there first; test_uncapped counts runs without memory "
        "and pids caps (reward.execution.limits=best_effort): above 0, a fork bomb reaches the node",
    ),
    Panel(
        "Agent episodes",
        "short",
        ("agent_turns_mean", "agent_turns_max", "agent_format_errors", "agent_command_timeouts"),
        "rollout.mode=agent: turns per episode, invalid turns and command timeouts in the step",
    ),
    Panel(
        "Agent actions and endings",
        "short",
        (
            *("agent_actions_bash", "agent_actions_edit", "agent_actions_submit", "agent_actions_invalid"),
            *("agent_ended_submit", "agent_ended_format_errors", "agent_ended_max_turns"),
            *("agent_ended_max_tokens", "agent_ended_timeout", "agent_ended_limit", "agent_ended_infra"),
        ),
        "actions by kind; episodes by how they ended (limit: a session limit, the policy's; infra: the session failed)",
    ),
    Panel(
        "Agent time",
        "s",
        ("agent_generation_s", "agent_command_s"),
        "per episode: waiting for its turns to be generated; its commands running",
    ),
    Panel(
        "Agent engine",
        "percentunit",
        ("agent_engine_busy_fraction", "agent_prefix_cache_hit_rate"),
        "share of the episodes' wall time the engine generated; of the turns' prompt tokens the prefix cache served",
    ),
    Panel(
        "Self-play bugs",
        "short",
        (
            *("selfplay_bugs_proposed", "selfplay_bugs_guided", "selfplay_bugs_valid"),
            *("selfplay_bugs_solved_groups", "selfplay_left_out"),
        ),
        "trainer.selfplay: the injector's answers, the rules bugs among them, those proved, "
        "those the solver got, valid ones past selfplay.max_bugs (left out of the loss)",
    ),
    Panel(
        "Self-play rejections",
        "short",
        tuple(f"selfplay_rejected_{r}" for r in REJECTIONS if r != "duplicate"),
        "trainer.selfplay: the step's bugs (or sources) not kept, by reason (data/bugs/injector.py REJECTIONS)",
    ),
    Panel(
        "Self-play rewards",
        "short",
        ("selfplay_solve_rate", "selfplay_injector_reward"),
        "trainer.selfplay: mean solve rate of the proved bugs (the solver's own samples); the injector's mean reward",
    ),
    Panel("Progress", "short", ("step", "policy_version"), "step number and updates applied"),
)


def query(key: str, run: str = "$run") -> str:
    """The PromQL of one metrics.jsonl gauge for the runs matching `run` (a Grafana variable)."""
    return f'ray_{PREFIX}{key}{{run=~"{run}"}}'


# Per-engine throughput has no run tag (the engine does not know the run): the datasource's whole
# cluster, one series per engine.
ENGINE_QUERY = f"ray_{ACTOR_TOKENS_GAUGE}"


def _panel(pid: int, title: str, unit: str, description: str, targets: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": "${datasource}",
        "gridPos": {"h": 8, "w": 12, "x": 12 * ((pid - 1) % 2), "y": 8 * ((pid - 1) // 2)},
        "fieldConfig": {"defaults": {"unit": unit, "custom": {"showPoints": "always"}}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
        "targets": targets,
    }


def _variables() -> list[dict[str, Any]]:
    runs = f"label_values(ray_{PREFIX}step, run)"
    return [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "hide": 0, "current": {}},
        {
            "name": "run",
            "label": "run",
            "type": "query",
            "datasource": "${datasource}",
            "definition": runs,
            "query": {"query": runs, "refId": "runs"},
            "refresh": 2,  # on time-range change: new runs appear without reloading
            "includeAll": True,
            "allValue": ".+",
            "multi": True,
            "current": {"text": ["All"], "value": ["$__all"]},
        },
    ]


def build(panels: tuple[Panel, ...] = PANELS, exported: tuple[str, ...] = EXPORTED) -> dict[str, Any]:
    """Grafana's JSON model of the dashboard: one panel per entry of `panels` plus per-engine
    throughput. Every gauge of `exported` must be on exactly one panel."""
    placed = [key for p in panels for key in p.keys]
    unplaced, twice = set(exported) - set(placed), {k for k in placed if placed.count(k) > 1}
    unknown = set(placed) - set(exported)
    if unplaced or twice or unknown:
        raise ValueError(
            f"dashboard panels: on no panel {sorted(unplaced)}, twice {sorted(twice)}, not exported {sorted(unknown)}"
        )
    out = [
        _panel(
            i,
            p.title,
            p.unit,
            p.description,
            [{"refId": chr(65 + j), "expr": query(k), "legendFormat": k} for j, k in enumerate(p.keys)],
        )
        for i, p in enumerate(panels, start=1)
    ]
    engine = [{"refId": "A", "expr": ENGINE_QUERY, "legendFormat": "engine {{actor_id}}"}]
    out.append(
        _panel(len(out) + 1, "Per-engine throughput", "short", "tokens/s of each engine's last generate call", engine)
    )
    return {
        "uid": UID,
        "title": "SWE-RL training",
        "tags": ["swe-rl"],
        "editable": True,
        "schemaVersion": 27,  # as Ray's own dashboards: Grafana migrates it forward on load
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "10s",
        "templating": {"list": _variables()},
        "panels": out,
    }


def dashboards_dir(session_dir: Path) -> Path:
    """The folder Ray's Grafana provisioning reads dashboards from, on the node whose session
    directory is `session_dir` (the head node's: only its dashboard writes the provisioning)."""
    if out := os.environ.get("RAY_METRICS_GRAFANA_DASHBOARD_OUTPUT_DIR"):
        return Path(out)
    root = os.environ.get("RAY_METRICS_OUTPUT_ROOT") or str(session_dir / "metrics")
    return Path(root) / "grafana" / "dashboards"


def install(session_dir: Path) -> Path:
    """Write the dashboard where Ray's provisioning reads it; returns the file."""
    path = dashboards_dir(session_dir) / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as f:
        json.dump(build(), f, indent=1)
    return path


def _install_here() -> str:
    # Ray: the dashboard's JSON is written (and tested) without it
    import ray

    return str(install(Path(ray._private.worker._global_node.get_session_dir_path())))


def install_on_head() -> Path | None:
    """Install the dashboard on the head node: here when the driver runs there (a local run, a
    Ray Job), else through a zero-CPU task placed on it. A failure costs the dashboard, not the
    run: it is logged as a warning."""
    # Ray: the dashboard's JSON is written (and tested) without it
    import ray

    if not ray.is_initialized():
        return None
    try:
        head = next(n for n in ray.nodes() if n["Alive"] and HEAD_RESOURCE in n["Resources"])
        if head["NodeID"] == ray.get_runtime_context().get_node_id():
            path = _install_here()
        else:
            task = ray.remote(num_cpus=0, resources={HEAD_RESOURCE: 0.001})(_install_here)
            path = ray.get(task.remote(), timeout=60)
    except Exception as exc:  # any failure here must not stop training
        log.warning("the Grafana dashboard was not installed on the head node: %s", exc)
        return None
    log.debug("Grafana dashboard installed at %s", path)
    return Path(path)
