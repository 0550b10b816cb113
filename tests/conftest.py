"""Shared fixtures. The smoke run is expensive (Ray + vLLM + DeepSpeed, ~1 min), so one run per
test session serves every test that needs it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@dataclass
class SmokeRun:
    run_dir: Path
    output: str  # the driver's stdout + stderr
    loggers: tuple[str, ...] = ("console", "jsonl")  # trainer.loggers of the run

    def metrics(self) -> list[dict]:
        return [json.loads(line) for line in (self.run_dir / "metrics.jsonl").read_text().splitlines()]

    def rollouts(self, step: int) -> list[dict]:
        path = self.run_dir / "rollouts" / f"step_{step:06d}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]


def run_train(run_dir: Path, *overrides: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python train.py experiment=smoke run_dir=... overrides` in a fresh process, as a user runs it."""
    # W&B offline: these machines reach no W&B server (a run with the wandb logger writes locally).
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", PYTHONUNBUFFERED="1", WANDB_MODE="offline")
    cmd = [sys.executable, str(REPO / "train.py"), "experiment=smoke", f"run_dir={run_dir}", *overrides]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def train_cli():
    """`run_train` for tests that need their own run of the driver."""
    return run_train


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> SmokeRun:
    """The smoke run also logs to TensorBoard and W&B (offline) where their extras are installed
    (`make setup` installs them): a few seconds, and no second run for the loggers' tests."""
    run_dir = tmp_path_factory.mktemp("smoke") / "run"
    extras = (("tensorboard", "tensorboardX"), ("wandb", "wandb"))
    loggers = ("console", "jsonl", *(name for name, module in extras if importlib.util.find_spec(module)))
    proc = run_train(run_dir, f"trainer.loggers=[{','.join(loggers)}]")
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"the smoke run failed (exit {proc.returncode}):\n{output[-6000:]}")
    return SmokeRun(run_dir, output, loggers)


@pytest.fixture(scope="session")
def tests_run(tmp_path_factory) -> SmokeRun:
    """The smoke preset with the reward that runs the tests (reward.kind=tests), one step."""
    run_dir = tmp_path_factory.mktemp("tests_reward") / "run"
    # Issue 17's switches ride along at no extra cost: TIS changes the loss, not the scoring, and
    # every group has the oracle answer's reward spread, so dynamic sampling keeps the step as is.
    proc = run_train(
        run_dir, "reward.kind=tests", "trainer.steps=1", "learner.tis_cap=2", "trainer.dynamic_sampling=true"
    )
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"the smoke run with reward.kind=tests failed (exit {proc.returncode}):\n{output[-6000:]}")
    return SmokeRun(run_dir, output)


@dataclass
class JobRun(SmokeRun):
    status: str = ""
    logs: str = ""
    scrapes: list[dict[str, float]] | None = None  # swe_rl_* gauges seen on the Prometheus endpoint


def _scrape(port: int, run: str) -> dict[str, float]:
    """The driver's swe_rl_* gauges for `run` from a node's Prometheus endpoint."""
    import re
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^ray_swe_rl_(\w+)\{(.*)\} (\S+)$", line)
        if m and f'run="{run}"' in m.group(2):
            out[m.group(1)] = float(m.group(3))
    return out


@pytest.fixture(scope="session")
def job_run(tmp_path_factory) -> JobRun:
    """The smoke preset for 3 steps, submitted as a Ray Job to a local cluster that this
    fixture starts (127.0.0.1, dashboard on) and shuts down through its handle. The
    Prometheus endpoint is scraped while the job runs."""
    import time

    from ray.cluster_utils import Cluster
    from ray.job_submission import JobSubmissionClient

    from actors.cluster import loopback_only
    from learner.transport.collective import listen_socket

    loopback_only()
    # Free ports for the dashboard and its node agent: another Ray on this machine (a user's
    # run) holds the defaults, and an agent that cannot bind its port takes no jobs.
    socks = [listen_socket("127.0.0.1") for _ in range(2)]
    dashboard_port, agent_port = (s.getsockname()[1] for s in socks)
    for s in socks:
        s.close()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "node_ip_address": "127.0.0.1",
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": dashboard_port,
            "dashboard_agent_listen_port": agent_port,
            "_system_config": {"metrics_report_interval_ms": 500},
        },
    )
    run_dir = tmp_path_factory.mktemp("job") / "job"
    try:
        client = JobSubmissionClient(f"http://127.0.0.1:{dashboard_port}")
        submit = dict(
            entrypoint=f"{sys.executable} train.py experiment=smoke trainer.steps=3 run_dir={run_dir}",
            # The code travels with the job; data, weights and caches do not (they live on
            # shared storage on a cluster; here the model cache is rebuilt in the job's copy).
            runtime_env={
                "working_dir": str(REPO),
                "excludes": [
                    ".venv",
                    ".cache",
                    ".git",
                    "runs",
                    "outputs",
                    ".pytest_cache",
                    ".hypothesis",
                    "__pycache__",
                ],
            },
        )
        # The dashboard answers before the node's job agent has registered (seconds; more on a
        # loaded machine), and refuses jobs until then: retry that one refusal for a while.
        agent_deadline = time.monotonic() + 60
        while True:
            try:
                job_id = client.submit_job(**submit)
                break
            except RuntimeError as exc:
                if "No available agent" not in str(exc) or time.monotonic() > agent_deadline:
                    raise
                time.sleep(2)
        scrapes, deadline = [], time.monotonic() + 900
        while not client.get_job_status(job_id).is_terminal() and time.monotonic() < deadline:
            try:
                snapshot = _scrape(cluster.head_node.metrics_export_port, run_dir.name)
            except OSError:
                snapshot = {}
            if "step" in snapshot:
                scrapes.append(snapshot)
            time.sleep(0.3)
        status, logs = str(client.get_job_status(job_id)), client.get_job_logs(job_id)
    finally:
        cluster.shutdown()
    return JobRun(run_dir, logs, status=status, logs=logs, scrapes=scrapes)
