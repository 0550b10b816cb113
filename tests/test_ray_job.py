"""The smoke run submitted as a Ray Job (working_dir upload, RAY_ADDRESS join) to a local
cluster, and its metrics read back from the cluster's Prometheus endpoint, and through the
Grafana dashboard's queries from a real Prometheus scraping the cluster."""

import json
from pathlib import Path

import pytest

COMPARED = (
    "reward_mean",
    "reward_std",
    "format_error_rate",
    "zero_signal_frac",
    "gen_tokens_per_s",
    "queue_depth",
    "staleness_max",
    "generate_s",
    "reward_s",
    "train_s",
    "sync_s",
    "sync_mb_per_s",
    "reward_timeouts",
    "rollout_actor_restarts",
    "policy_version",
)


def test_job_succeeds_and_writes_its_run(job_run):
    assert "SUCCEEDED" in job_run.status, job_run.logs[-4000:]
    assert [m["step"] for m in job_run.metrics()] == [1, 2, 3]
    assert "[step 3/3]" in job_run.logs
    assert (job_run.run_dir / "hf" / "config.json").is_file()


def test_prometheus_endpoint_shows_the_metrics_jsonl_values(job_run):
    by_step = {m["step"]: m for m in job_run.metrics()}
    assert job_run.scrapes, "no swe_rl_* gauge was seen on the Prometheus endpoint during the run"
    assert all(1 <= s["step"] <= 3 for s in job_run.scrapes)
    # A scrape can fall between two gauges' updates; the ones taken between steps must equal
    # metrics.jsonl exactly (gauges hold floats; metrics.jsonl rounds nothing these keys use).
    matching = [
        s
        for s in job_run.scrapes
        if all(abs(s[k] - float(by_step[int(s["step"])][k])) < 1e-9 for k in COMPARED if k in s)
    ]
    assert matching, f"no scrape equals its step's metrics line: {job_run.scrapes[-1]}"
    assert set(COMPARED) <= set(matching[-1])


def test_every_dashboard_panel_shows_the_run_in_a_real_prometheus(job_run):
    """Debian's Prometheus, fed Ray's service discovery file, scraped the job: each panel of the
    Grafana dashboard has data, and each gauge's last value is the last metrics line's."""
    if job_run.no_prometheus:
        pytest.skip(job_run.no_prometheus)
    from actors.observe.dashboard import build, query

    run = job_run.run_dir.name
    # The agent panels show rollout.mode=agent runs only, the self-play ones trainer.selfplay runs;
    # this job is the single-answer smoke run.
    modes = ("agent_", "selfplay_")
    single = [p for p in build()["panels"] if not all(t["legendFormat"].startswith(modes) for t in p["targets"])]
    empty = [
        p["title"] for p in single if not any(job_run.panels[t["expr"].replace("$run", run)] for t in p["targets"])
    ]
    assert empty == [], "panels without data"
    last = job_run.metrics()[-1]
    numeric = {k: float(v) for k, v in last.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert len(numeric) > 30
    shown = {}
    for key in numeric:
        (series,) = job_run.panels[query(key, run)]  # one series: this run's gauge
        shown[key] = float(series["values"][-1][1])
    assert shown == pytest.approx(numeric, rel=1e-9, abs=1e-12)


def test_the_dashboard_is_installed_where_ray_s_grafana_provisioning_reads(job_run):
    import yaml

    from actors.observe.dashboard import FILE_NAME, build

    provisioning = job_run.session_dir / "metrics" / "grafana" / "provisioning" / "dashboards" / "default.yml"
    (provider,) = yaml.safe_load(provisioning.read_text())["providers"]
    assert json.loads((Path(provider["options"]["path"]) / FILE_NAME).read_text()) == build()
