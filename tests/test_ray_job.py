"""The smoke run submitted as a Ray Job (working_dir upload, RAY_ADDRESS join) to a local
cluster, and its metrics read back from the cluster's Prometheus endpoint."""

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
