"""The node check (reward/execution/check.py): verdicts from fake facts, one real run of the
command on this machine, and the test runner's gate on it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conf.config import ExecutionConfig
from conf.errors import UserError
from reward.execution import check, identity, sandbox
from reward.execution.cgroups import BEST_EFFORT, ENFORCE, CapPolicy
from reward.execution.check import Facts, NodeNotReady, verdict
from reward.execution.runner import Runner

REPO = Path(__file__).resolve().parents[2]
# What cgroups.make says on a v2 node whose root cgroup was not delegated (its _explain, shortened).
REFUSED = (
    "sandbox: cannot cap memory: cannot enable +memory +pids in /sys/fs/cgroup/cgroup.subtree_control: "
    "Permission denied; host: cgroup v2; unified at /sys/fs/cgroup (cpu io memory pids), running as uid 1000"
)
# A rootless Ray node (cluster.yaml's ubuntu) on cgroup v2 with /ray delegated to it: ready.
READY_NODE = Facts(
    user="ubuntu",
    uid=1000,
    rootless=True,
    unavailable=None,
    policy=CapPolicy(ENFORCE, "/ray"),
    policy_error=None,
    layout="cgroup v2; unified at /sys/fs/cgroup (cpu io memory pids)",
    caps="memory v2, pids v2",
    caps_refused=None,
    probed=True,
    probe_error=None,
    probe_s=0.12,
    pythons=("3.9", "3.11"),
    uv="/home/ubuntu/venv/bin/uv (python -m uv)",
    cache_dir="/home/ubuntu/.cache/execution",
    free_gib=812.34,
    cache_problem=None,
)


def test_a_rootless_node_with_its_caps_delegated_is_ready():
    report = verdict(READY_NODE)
    assert (report.verdict, report.reason) == ("ready", None)
    assert report.lines == (
        "user: ubuntu (uid 1000): rootless, in a user namespace mapping it to 65534",
        "namespaces (user, mount, PID, network, IPC, UTS): ok (a folder of the snapshot removed and made again in the sandbox: exit 0 in 0.12 s)",
        "overlay in a user namespace: ok (a folder of the snapshot removed and made again in the sandbox: exit 0 in 0.12 s)",
        "cgroups: cgroup v2; unified at /sys/fs/cgroup (cpu io memory pids)",
        "caps: memory and pids enforced (memory v2, pids v2; SWE_RL_LIMITS=enforce, SWE_RL_CGROUP_ROOT=/ray)",
        f"interpreters: Python 3.9, 3.11 found (of 3.8-3.13); this one {sys.version.split()[0]}",
        "uv: /home/ubuntu/venv/bin/uv (python -m uv)",
        "disk: 812.3 GiB free under /home/ubuntu/.cache/execution",
        "verdict: ready",
    )


def test_as_root_there_is_no_user_namespace_to_report():
    report = verdict(replace(READY_NODE, user="root", uid=0, rootless=False))
    assert report.verdict == "ready"
    assert report.lines[:2] == (
        "user: root (uid 0): root",
        "namespaces (mount, PID, network, IPC, UTS): ok (a folder of the snapshot removed and made again in the sandbox: exit 0 in 0.12 s)",
    )
    assert not any(line.startswith("overlay") for line in report.lines)


def test_caps_that_cannot_be_set_under_best_effort_leave_the_node_ready_best_effort():
    facts = replace(READY_NODE, policy=CapPolicy(BEST_EFFORT, "/"), caps=None, caps_refused=REFUSED)
    report = verdict(facts)
    assert (report.verdict, report.reason) == ("ready (best effort)", REFUSED)
    assert f"caps: not enforced: {REFUSED} (SWE_RL_LIMITS=best_effort, SWE_RL_CGROUP_ROOT=/)" in report.lines
    assert report.lines[-1] == (
        "verdict: ready (best effort): the caps cannot be set (above), so runs go uncapped, each counted as test_uncapped"
    )


def test_a_cap_that_cannot_be_set_under_enforce_makes_the_node_not_ready():
    facts = replace(READY_NODE, policy=CapPolicy(ENFORCE, "/"), caps=None, caps_refused=REFUSED, probed=False)
    report = verdict(facts)
    assert (report.verdict, report.reason) == ("not ready", REFUSED)
    assert (
        report.lines[1]
        == "namespaces (user, mount, PID, network, IPC, UTS): not probed (every run is refused: see the verdict)"
    )
    assert report.lines[-1] == f"verdict: not ready: {REFUSED}"


def test_forbidden_user_namespaces_make_the_node_not_ready_with_the_setting_to_change(tmp_path, monkeypatch):
    monkeypatch.setattr(identity, "_userns_mounts", lambda: False)  # as under Ubuntu's restriction
    (tmp_path / "kernel").mkdir()
    (tmp_path / "kernel" / "apparmor_restrict_unprivileged_userns").write_text("1\n")
    why = identity.forbidden(tmp_path)
    assert why is not None and "kernel.apparmor_restrict_unprivileged_userns=0" in why
    unavailable = f"the sandbox runs rootless as uid 1000, but {why}"  # sandbox.available()'s wording
    report = verdict(replace(READY_NODE, unavailable=unavailable, probed=False))
    assert (report.verdict, report.reason) == ("not ready", unavailable)
    assert report.lines[-1] == f"verdict: not ready: {unavailable}"


def test_a_probe_that_fails_or_a_cache_that_cannot_be_written_makes_the_node_not_ready():
    failed = verdict(replace(READY_NODE, probe_error="exit 1, killed None: mount: permission denied"))
    assert failed.reason == (
        "the sandbox did not run its probe (a folder of the snapshot removed and made again in the sandbox): "
        "exit 1, killed None: mount: permission denied"
    )
    assert failed.lines[2] == "overlay in a user namespace: failed: exit 1, killed None: mount: permission denied"
    blocked = verdict(replace(READY_NODE, cache_problem="/data is not a folder"))
    assert (blocked.verdict, blocked.reason) == ("not ready", "/data is not a folder")


def test_the_check_refuses_a_cache_dir_under_a_file(tmp_path):
    (tmp_path / "file").write_text("")
    facts = check.gather(tmp_path / "file" / "cache")
    assert facts.cache_problem == f"{tmp_path / 'file'} is not a folder"
    assert facts.cache_dir == str(tmp_path / "file" / "cache")


@pytest.mark.skipif(os.geteuid() != 0 or sandbox.available() is not None, reason="needs root and the sandbox")
def test_the_command_says_ready_on_this_machine(tmp_path):
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "reward.execution.check", "--cache-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    seconds = time.monotonic() - start
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines[0] == f"node: {socket.gethostname()}"
    assert lines[1] == "user: root (uid 0): root"
    assert lines[2].startswith("namespaces (mount, PID, network, IPC, UTS): ok (")
    assert any(line.startswith("caps: memory and pids enforced (") for line in lines)
    assert lines[-2].startswith("disk: ") and lines[-2].endswith(f" GiB free under {tmp_path}")
    assert lines[-1] == "verdict: ready"
    assert seconds < 5.0  # ~0.35 s on an idle machine: one sandbox start, one cgroup


def test_a_runner_on_a_node_that_is_not_ready_refuses_to_start(monkeypatch, tmp_path):
    unavailable = "util-linux's `unshare` is not installed"
    monkeypatch.setattr(check, "gather", lambda cache_dir: replace(READY_NODE, unavailable=unavailable))
    runner = Runner(ExecutionConfig(cache_dir=str(tmp_path)))
    with pytest.raises(NodeNotReady) as info:
        runner.ready()
    assert isinstance(info.value, UserError)  # the commands print it as one line, no traceback
    assert str(info.value) == (
        f"node {socket.gethostname()} is not ready to run tests: {unavailable} "
        "(`python -m reward.execution.check` on it shows the node's state; docs/cluster.md)"
    )
    monkeypatch.setattr(check, "gather", lambda cache_dir: READY_NODE)
    assert runner.ready() == os.getpid()
