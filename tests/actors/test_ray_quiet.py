"""The quiet local cluster: which processes count as Ray's control plane, and SCHED_IDLE on
every thread of them (actors/cluster/quiet.py). That the trainer applies it to a real cluster is
asserted where one runs in-process (tests/test_learning.py)."""

import os
import subprocess
import sys
import time

import pytest

from actors.cluster.quiet import control_plane_pids, deprioritize, is_control_plane

PY = "/venv/bin/python"


@pytest.mark.parametrize(
    ("cmdline", "expected"),
    [
        ("/x/site-packages/ray/core/src/ray/gcs/gcs_server --log_dir=/tmp/ray/s --config_list=eyJ", True),
        (f"{PY} /x/site-packages/ray/dashboard/dashboard.py --host=127.0.0.1 --port=8265", True),
        ('ray-dashboard-NodeHead-0 (/venv/bin/python -B -c "from multiprocessing.forkserver import main")', True),
        (f"{PY} -u /x/site-packages/ray/_private/log_monitor.py --session-dir=/tmp/ray/s", True),
        (f"{PY} -u /x/site-packages/ray/autoscaler/_private/monitor.py --logs-dir=/tmp/ray/s/logs", True),
        ("ray::DashboardAgent", True),
        ("ray::RuntimeEnvAgent", True),
        (f"{PY} -m actors.cluster.reaper 4242 /tmp/swe_rl-4242", True),
        # The engines, learners and idle workers, and the raylet that starts them, keep their priority.
        ("ray::RolloutWorker.generate", False),
        ("ray::LearnerWorker", False),
        ("ray::IDLE", False),
        ("/x/site-packages/ray/core/src/ray/raylet/raylet --raylet_socket_name=/tmp/ray/s/sockets/raylet", False),
        (f"{PY} -m vllm.entrypoints.openai.api_server --model m", False),
        ("", False),
    ],
)
def test_control_plane_by_command_line(cmdline, expected):
    assert is_control_plane(cmdline) is expected


def test_every_thread_of_a_control_plane_process_goes_idle():
    # A stand-in daemon that is a child of this process and has a second thread, named like the reaper.
    code = "import threading, time; threading.Thread(target=time.sleep, args=(30,)).start(); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", code, "-m", "actors.cluster.reaper"])
    try:
        deadline = time.monotonic() + 120  # a loaded machine may take long to start the thread
        while len(os.listdir(f"/proc/{proc.pid}/task")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.pid in control_plane_pids(os.getpid())
        assert deprioritize([proc.pid]) == 2
        for tid in os.listdir(f"/proc/{proc.pid}/task"):
            assert os.sched_getscheduler(int(tid)) == os.SCHED_IDLE
        assert os.sched_getscheduler(0) != os.SCHED_IDLE  # this process is left alone
        assert deprioritize([proc.pid + 10_000_000]) == 0  # a process gone meanwhile is skipped
    finally:
        proc.kill()
        proc.wait()


def test_the_quiet_environment_is_set_only_while_ray_starts(monkeypatch):
    from actors.cluster.quiet import QUIET_ENV, environment

    monitor, prestart = "RAY_memory_monitor_refresh_ms", "RAY_enable_worker_prestart"  # Ray's own spelling
    monkeypatch.setenv(monitor, "500")  # a user's own setting comes back
    monkeypatch.delenv(prestart, raising=False)
    with environment(True):
        assert {k: os.environ[k] for k in QUIET_ENV} == QUIET_ENV
    assert os.environ[monitor] == "500"
    assert prestart not in os.environ
    with environment(False):
        assert os.environ[monitor] == "500"
