"""Training metrics exported through Ray's metrics system (ray.util.metrics).

Every numeric value of a step's metrics line becomes a gauge `swe_rl_<key>` (Ray prefixes
`ray_` on its Prometheus endpoint), tagged with the run name, so the Ray dashboard's Metrics
view and any Prometheus scraping the cluster show the same numbers as metrics.jsonl. Rollout
actors export their own generation throughput (`ACTOR_TOKENS_GAUGE`, tagged with the actor id;
actors/rollout/actor.py). `EXPORTED` lists the keys: the Grafana dashboard is generated from it
(actors/observe/dashboard.py), and tests hold it equal to the keys the code emits
(tests/actors/test_dashboard.py reads them from the emitting functions), to the metrics table of
docs/metrics.md and to what a run logs. On its first step the driver installs that dashboard
where Ray's Grafana provisioning reads dashboards on the head node.
"""

from __future__ import annotations

from typing import Any

from ray.util.metrics import Gauge

PREFIX = "swe_rl_"  # every gauge's name; Prometheus sees it as ray_swe_rl_<key>
ACTOR_TOKENS_GAUGE = f"{PREFIX}actor_gen_tokens_per_s"  # per rollout engine, tag actor_id

# Every numeric metrics.jsonl key, in docs/metrics.md's order. `rerun` (a boolean) is not a gauge.
EXPORTED: tuple[str, ...] = (
    *("step", "policy_version", "num_rollouts", "reward_mean", "reward_std", "format_error_rate"),
    *("zero_signal_frac", "truncated_frac", "completion_len_mean", "overlong_filtered", "overlong_penalty_mean"),
    *("dynamic_sampling_rounds", "dynamic_sampling_dropped", "logprob_diff_mean", "logprob_diff_max"),
    *("loss", "grad_norm", "clip_frac", "approx_kl_old", "ratio_mean", "kl_ref", "entropy"),
    *("rows_trained", "pad_frac", "pad_frac_unsorted"),
    *("data_s", "generate_s", "prove_s", "reward_s", "advantages_s", "train_s", "sync_s", "checkpoint_s", "step_s"),
    *("staleness_max", "stale_dropped", "rollout_actors", "rollout_actor_restarts", "requeued_prompts"),
    *("queue_depth", "prompts_too_long", "gen_tokens_per_s", "sync_mb_per_s"),
    *("reward_timeouts", "reward_actor_restarts", "reward_lost_jobs", "resolve_rate", "tests_s"),
    *("test_runs", "test_timeouts", "env_builds", "test_runner_restarts", "test_lost_jobs"),
    *("test_tampered", "test_bad_reports", "test_unsafe_paths", "test_guarded_files", "test_uncapped"),
    *("params_changed", "sync_probe_diff_before", "sync_probe_diff_after"),
    *("agent_turns_mean", "agent_turns_max", "agent_format_errors", "agent_command_timeouts"),
    *("agent_engine_busy_fraction", "agent_actions_bash", "agent_actions_edit", "agent_actions_submit"),
    *("agent_actions_invalid", "agent_ended_submit", "agent_ended_format_errors", "agent_ended_max_turns"),
    *("agent_ended_max_tokens", "agent_ended_timeout", "agent_ended_infra", "agent_prefix_cache_hit_rate"),
    *("agent_generation_s", "agent_command_s", "agent_ended_limit"),
    *("selfplay_bugs_proposed", "selfplay_bugs_guided", "selfplay_bugs_valid", "selfplay_bugs_solved_groups"),
    *("selfplay_left_out", "selfplay_solve_rate", "selfplay_injector_reward"),
    *("selfplay_rejected_prompt_too_long", "selfplay_rejected_git_snapshot", "selfplay_rejected_no_tests"),
    *("selfplay_rejected_baseline_failed", "selfplay_rejected_malformed", "selfplay_rejected_edit_failed"),
    *("selfplay_rejected_edits_outside_code", "selfplay_rejected_run_failed", "selfplay_rejected_flaky"),
    *("selfplay_rejected_no_test_fails", "selfplay_rejected_file_does_not_matter"),
    *("selfplay_rejected_near_duplicate",),
)


class Telemetry:
    def __init__(self, run: str) -> None:
        self.run = run
        self._gauges: dict[str, Gauge] = {}

    def record(self, metrics: dict[str, Any]) -> None:
        for key, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            gauge = self._gauges.get(key)
            if gauge is None:
                gauge = self._gauges[key] = Gauge(
                    f"{PREFIX}{key}", description=f"metrics.jsonl field {key}", tag_keys=("run",)
                )
            gauge.set(float(value), tags={"run": self.run})
