"""Shared fixtures. The smoke run is expensive (Ray + vLLM + DeepSpeed, ~1 min), so one run per
test session serves every test that needs it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """End the process with the session's verdict once pytest is done with it. Tests load vLLM,
    torch, Ray and W&B into this process, and the interpreter's teardown with their threads
    alive can crash after every result is in: the fresh-clone run of 2026-12-02 printed
    "863 passed" and then died of SIGSEGV, and `make test` failed on it. Nothing is left to run
    or report here (this hook is the last), so the verdict is the session's, not the teardown's."""
    if _EXIT_STATUS and os.environ.get("SWE_RL_TEST_TEARDOWN") != "1":  # =1 keeps the normal exit, to debug it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])


@dataclass
class SmokeRun:
    run_dir: Path
    output: str  # the driver's stdout + stderr
    loggers: tuple[str, ...] = ("console", "jsonl")  # trainer.loggers of the run
    overrides: tuple[str, ...] = ()  # beyond experiment=smoke (a resumed run gives them again)

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
def injected(tmp_path_factory) -> tuple[Path, dict, subprocess.CompletedProcess]:
    """`python -m data.inject` on 2 demo instances, 3 rules bugs each, tests run in this process:
    its output, manifest and process (tests/data/test_inject.py; tests_run trains on it)."""
    from reward.execution import sandbox

    if (why := sandbox.available()) is not None:  # bugs are proved by running the tests
        pytest.skip(f"sandbox unavailable: {why}")
    out = tmp_path_factory.mktemp("inject") / "out"
    cache = tmp_path_factory.mktemp("inject-cache")
    cmd = [sys.executable, "-m", "data.inject", "--data", "demo", "--out", str(out), "--limit", "2"]
    # A demo run takes ~0.5 s; the 10 s wall bounds the drawn bug that loops forever, with room
    # for a loaded machine (tests_run needs both kept bugs).
    cmd += ["--per-instance", "3", "reward.execution.num_runners=0", "reward.execution.wall_s=10"]
    cmd += [f"reward.execution.cache_dir={cache}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return out, json.loads((out / "_manifest.json").read_text()), proc


@pytest.fixture(scope="session")
def tests_run(tmp_path_factory, injected) -> SmokeRun:
    """The smoke preset with the reward that runs the tests (reward.kind=tests), one step, on
    instances data.inject made (injected instances train)."""
    run_dir = tmp_path_factory.mktemp("tests_reward") / "run"
    # The recipe switches ride along at no extra cost: TIS changes the loss, not the scoring, and
    # every group has the oracle answer's reward spread, so dynamic sampling keeps the step as is.
    proc = run_train(
        run_dir,
        "reward.kind=tests",
        f"data.path={injected[0]}",
        "trainer.steps=1",
        "learner.tis_cap=2",
        "trainer.dynamic_sampling=true",
    )
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"the smoke run with reward.kind=tests failed (exit {proc.returncode}):\n{output[-6000:]}")
    return SmokeRun(run_dir, output)


@pytest.fixture(scope="session")
def agent_run(tmp_path_factory) -> SmokeRun:
    """The smoke preset with rollout.mode=agent: 16 episodes a group of up to 3 turns in sandbox
    sessions (tests/test_agent_mode.py); its agent_* metrics are held to docs/metrics.md's table too."""
    from reward.execution import sandbox

    if (why := sandbox.available()) is not None:  # episodes act in sandbox sessions
        pytest.skip(f"sandbox unavailable: {why}")
    run_dir = tmp_path_factory.mktemp("agent") / "run"
    overrides = (
        "rollout.mode=agent",
        "rollout.oracle_samples_per_group=0",
        "agent.max_turns=3",
        "agent.max_tokens=4096",
        "learner.kl_coef=0.001",
    )
    proc = run_train(run_dir, *overrides)
    if proc.returncode != 0:
        pytest.fail(f"the agent-mode run failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-6000:]}")
    return SmokeRun(run_dir, proc.stdout + proc.stderr, overrides=overrides)


class Prometheus:
    """Debian's Prometheus on 127.0.0.1 (a free port, storage in `tmp`), scraping every target
    of Ray's service discovery file `sd_file` every `scrape_s` seconds."""

    def __init__(self, binary: str, sd_file: Path, tmp: Path, scrape_s: float = 1.0) -> None:
        from learner.transport.collective import listen_socket

        sock = listen_socket("127.0.0.1")
        port = sock.getsockname()[1]
        sock.close()
        self.url, self.scrape_s = f"http://127.0.0.1:{port}", scrape_s
        config, every = tmp / "prometheus.yml", f"{round(scrape_s * 1000)}ms"  # Prometheus reads no "1.0s"
        config.write_text(
            f"global:\n  scrape_interval: {every}\n  scrape_timeout: {every}\n"
            f"scrape_configs:\n- job_name: ray\n  file_sd_configs:\n  - files: ['{sd_file}']\n"
            "    refresh_interval: 1s\n"
        )
        self.log = tmp / "prometheus.log"
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"),
        )

    def ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=2)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Prometheus did not start: {self.log.read_text()[-2000:]}") from None
                time.sleep(0.3)

    def query_range(self, expr: str, start: float, end: float) -> list[dict]:
        """Grafana's request for a time-series panel: one point per scrape interval."""
        args = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": self.scrape_s})
        reply = json.load(urllib.request.urlopen(f"{self.url}/api/v1/query_range?{args}", timeout=10))
        assert reply["status"] == "success", reply
        return reply["data"]["result"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class JobRun(SmokeRun):
    status: str = ""
    logs: str = ""
    scrapes: list[dict[str, float]] | None = None  # swe_rl_* gauges seen on the Prometheus endpoint
    # Prometheus's answer to each query of the Grafana dashboard (actors/observe/dashboard.py), the
    # `run` variable set to this run; empty with `no_prometheus` saying why.
    panels: dict[str, list[dict]] = field(default_factory=dict)
    no_prometheus: str = ""
    session_dir: Path | None = None  # the cluster's head node's Ray session directory


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
    Prometheus endpoint is scraped while the job runs, and a real Prometheus (where installed)
    scrapes the cluster through Ray's service discovery file for the dashboard's queries."""
    from ray.cluster_utils import Cluster
    from ray.job_submission import JobSubmissionClient

    from actors.cluster.join import loopback_only
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
    session_dir = Path(cluster.head_node.get_session_dir_path())
    prometheus, no_prometheus = None, ""
    started = time.time()
    try:
        if binary := shutil.which("prometheus"):
            sd_file = session_dir / "prom_metrics_service_discovery.json"
            prometheus = Prometheus(binary, sd_file, tmp_path_factory.mktemp("prometheus"))
        else:
            no_prometheus = "no prometheus binary on PATH (scripts/setup.sh installs Debian's package `prometheus`)"
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
        panels = _dashboard_queries(prometheus, run_dir, started) if prometheus else {}
    finally:
        if prometheus:
            prometheus.stop()
        cluster.shutdown()
    return JobRun(
        run_dir,
        logs,
        status=status,
        logs=logs,
        scrapes=scrapes,
        panels=panels,
        no_prometheus=no_prometheus,
        session_dir=session_dir,
    )


def _dashboard_queries(prometheus: Prometheus, run_dir: Path, started: float) -> dict[str, list[dict]]:
    """Every query of the Grafana dashboard over the run, once Prometheus has scraped the
    last step (waited for here, while the cluster is still up)."""
    from actors.observe.dashboard import build

    prometheus.ready()
    run = run_dir.name
    path = run_dir / "metrics.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    if lines:
        step = f'ray_swe_rl_step{{run="{run}"}}'
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seen = prometheus.query_range(step, started, time.time())
            if seen and float(seen[0]["values"][-1][1]) == lines[-1]["step"]:
                break
            time.sleep(prometheus.scrape_s)
        # Ray reports a step's gauges within its report interval (0.5 s here): one more scrape
        # after the step appeared has them all.
        time.sleep(2 * prometheus.scrape_s)
    exprs = [t["expr"].replace("$run", run) for p in build()["panels"] for t in p["targets"]]
    return {e: prometheus.query_range(e, started, time.time()) for e in exprs}
