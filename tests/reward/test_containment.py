"""The sandbox contains what a candidate patch can do: each attack runs as a test inside it,
is stopped or finds nothing, scores unresolved with the reason recorded, and leaves the host
as it was: no file changed or created, no process left, and the runner takes the next job.

The attacks are candidate patches to a demo instance (the code a model would write): each puts
its code at the top of the module under test, which the tests import, run through the same
Runner the trainer, the harness and validation use.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conf.config import ExecutionConfig
from data.demo import load_demo_rows
from data.patching import make_patch
from data.schema import Instance
from reward.execution import sandbox
from reward.execution.environments import EnvSpec
from reward.execution.runner import Runner, TestJob

pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}")

MARK = "swe_rl_attack"  # in the attack's source: how its processes are recognised


def _instance() -> Instance:
    return Instance.from_row(next(r for r in load_demo_rows() if r["instance_id"] == "demo__calspan-3"))


def _attack(body: str) -> str:
    """A candidate patch to the module under test that runs `body` when the tests import it
    (at its end: the module starts with a `from __future__` import)
    (a conftest.py, the old vector, is no longer applied: reward/execution/guard.py). What `body`
    prints comes back in the run's log: pytest shows the error the import ends with."""
    indented = "\n".join("    " + line for line in body.strip("\n").splitlines())
    source = (
        f"# {MARK}\nimport contextlib, io, os, socket, subprocess, sys, time\n\n_out = io.StringIO()\n"
        f"with contextlib.redirect_stdout(_out):\n{indented}\n"
        "raise RuntimeError('ATTACK OUTPUT: ' + _out.getvalue().replace(chr(10), ' | '))\n"
    )
    original = _instance().code_context[TARGET]
    return make_patch({TARGET: original}, {TARGET: original + "\n" + source})


TARGET = "calspan/months.py"  # the module the instance's tests import


@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Runner:
    cache = tmp_path_factory.mktemp("exec")
    return Runner(
        ExecutionConfig(cache_dir=str(cache), wall_s=20.0, memory_mb=256, pids=64, file_mb=16, output_kb=64, cpu_s=30)
    )


@pytest.fixture(scope="module")
def host_listener():
    """A socket on the host's 127.0.0.1 that records any connection (the sandbox must reach none)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    hits: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            hits.append("connected")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], hits
    stop.set()
    thread.join()
    server.close()


@pytest.fixture(scope="module", autouse=True)
def _subreaper():
    """Make this process the subreaper of everything it starts: a process that escaped its
    sandbox is re-parented here, not to init, so "left behind" is exactly the set of this
    process's live descendants that a run added, whatever else runs on the machine."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())
    yield
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


_PR_SET_CHILD_SUBREAPER = 36


def _descendants() -> set[int]:
    """Live (not zombie) descendants of this process."""
    parent = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            parent[int(entry)] = int(ppid)
    me, found = os.getpid(), set()
    for pid in parent:
        p = pid
        while p in parent and p not in (0, 1):
            p = parent[p]
            if p == me:
                found.add(pid)
                break
    return found


def _run_attack(runner: Runner, body: str) -> tuple[object, set[int]]:
    """The run, and the processes it left: descendants of this process that were not there
    before it (earlier tests of the session keep children of their own, a Ray cluster or a
    watcher, that are not the attack's)."""
    before = _descendants()
    run = runner.run(TestJob(_instance(), _attack(body)))
    time.sleep(0.5)
    return run, _descendants() - before


def _assert_contained(run, left: set[int]) -> None:
    assert run.resolved is not True
    assert not left, f"processes left behind: {left}"


def test_a_socket_opened_by_the_host_on_loopback_is_unreachable(runner, host_listener):
    port, hits = host_listener
    run, left = _run_attack(runner, f"socket.create_connection(('127.0.0.1', {port}), timeout=2)")
    _assert_contained(run, left)
    assert hits == []
    assert "Network is unreachable" in run.log or "Connection refused" in run.log, run.log[-1500:]


def test_writing_outside_the_work_dir_changes_nothing_on_the_host(runner, tmp_path):
    target = tmp_path / "planted.txt"
    body = f"""
for path in [{str(target)!r}, '/etc/planted', '/usr/planted', '/root/planted', '/planted']:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, 'w').write('x')
        print('WROTE', path)
    except OSError as e:
        print('REFUSED', path, e)
"""
    run, left = _run_attack(runner, body)
    _assert_contained(run, left)
    assert "REFUSED /etc/planted" in run.log, run.log[-1500:]
    assert not target.exists() and not Path("/etc/planted").exists() and not Path("/planted").exists()


def test_files_outside_the_snapshot_cannot_be_read(runner, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    body = f"""
for path in [{str(secret)!r}, '/etc/shadow', {str(Path(__file__))!r}]:
    try:
        print('READ', path, open(path).read()[:40])
    except OSError as e:
        print('CANNOT', path, type(e).__name__)
print('SECRET VISIBLE' if os.path.exists({str(secret)!r}) else 'SECRET ABSENT')
"""
    run, left = _run_attack(runner, body)
    _assert_contained(run, left)
    assert "the host's secret" not in run.log and "SECRET ABSENT" in run.log, run.log[-1500:]


def test_a_fork_bomb_is_capped(runner):
    body = """
children = []
try:
    for _ in range(10_000):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
except OSError as e:
    print('FORK REFUSED after', len(children), e)
"""
    run, left = _run_attack(runner, body)
    _assert_contained(run, left)
    assert "FORK REFUSED after" in run.log or run.status in ("timeout", "killed")


def test_orphans_exiting_one_after_another_never_reach_the_pids_cap(runner):
    # 300 orphans over the run's life under a cap of 64 processes, never more than two at
    # once: PID 1 (the namespace's init, which each is handed) reaps each as it exits.
    body = """
made = 0
try:
    for _ in range(300):
        pid = os.fork()
        if pid == 0:
            if os.fork() == 0:
                os._exit(0)
            os._exit(0)
        os.waitpid(pid, 0)
        made += 1
except OSError as e:
    print('FORK REFUSED after', made, e)
print('ORPHANS', made)
"""
    run, left = _run_attack(runner, body)
    _assert_contained(run, left)
    assert "ORPHANS 300" in run.log and "FORK REFUSED" not in run.log, run.log[-1500:]


def test_the_sandboxs_proc_names_no_host_path_it_can_hide(runner):
    # What every process inside may read of /proc: each process's command line (PID 1's named
    # the project's interpreter, inside.py in the checkout and the run's scratch folder), the
    # mount table (the overlay's options named the snapshot and the scratch folder, a bind
    # named the checkout's bootstrap.py) and the targets of the descriptors it may read.
    # The environment's interpreter and prefixes are mounted where they are on the host (a
    # venv names its own paths; this runner's is the project's venv, python=host): their mount
    # lines and the interpreter's path in a command line are what is left, and set aside here.
    checkout = Path(__file__).resolve().parents[2]
    hidden = {
        "checkout": {str(checkout), os.path.realpath(checkout)},
        "project venv": {sys.prefix, os.path.realpath(sys.prefix)},
        "snapshot": {str(runner.snapshots.path(_instance(), EnvSpec()))},
        "scratch": {
            os.path.join(d, "sandbox-") for d in (tempfile.gettempdir(), os.path.realpath(tempfile.gettempdir()))
        },
    }
    body = f"""
hidden = {hidden!r}
env = (sys.prefix, sys.base_prefix)
def table(path, field):
    lines = open(path).read().splitlines()
    return chr(10).join(line for line in lines if line.split(' - ')[0].split()[field] not in env)
views = {{'/proc/self/mountinfo': table('/proc/self/mountinfo', 4), '/proc/mounts': table('/proc/mounts', 1)}}
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    try:
        line = open('/proc/%s/cmdline' % pid, 'rb').read().decode(errors='replace')
        views['/proc/%s/cmdline' % pid] = line.replace(sys.executable + chr(0), '')
        for fd in os.listdir('/proc/%s/fd' % pid):
            views['/proc/%s/fd/%s' % (pid, fd)] = os.readlink('/proc/%s/fd/%s' % (pid, fd))
    except OSError:
        pass
for view, text in views.items():
    for what, needles in hidden.items():
        for needle in needles:
            if needle in text:
                print('LEAK', what, 'in', view, repr(text[max(0, text.index(needle) - 80):][:240]))
print('INIT', views['/proc/1/cmdline'].replace(chr(0), '|'), 'VIEWS', len(views))
print('OVERLAY', [line.split(' - ')[1].split()[2] for line in views['/proc/self/mountinfo'].splitlines() if ' - overlay ' in line])
"""
    run, left = _run_attack(runner, body)
    _assert_contained(run, left)
    assert "INIT swe-rl-sandbox-init|" in run.log and "LEAK" not in run.log, run.log[-2500:]
    views = int(re.search(r"VIEWS (\d+)", run.log).group(1))  # type: ignore[union-attr]
    assert views >= 8  # mountinfo, mounts, two command lines, the test process's descriptors
    assert "lowerdir=lower/0,upperdir=upper/data,workdir=upper/work" in run.log, run.log[-2500:]


def test_memory_past_the_limit_is_stopped(runner):
    run, left = _run_attack(runner, "blocks = [bytearray(16 << 20) for _ in range(64)]\nprint('ALLOCATED 1 GiB')")
    _assert_contained(run, left)  # 1 GiB against a 256 MiB limit
    assert "ALLOCATED 1 GiB" not in run.log and run.status in ("killed", "no_report"), (run.status, run.log[-800:])


def test_an_endless_loop_is_stopped_at_the_wall_clock(runner):
    # A runner of its own with a short wall clock (on the same built environment): the module's
    # 20 s would make this test wait 20 s for nothing.
    quick = Runner(dataclasses.replace(runner.cfg, wall_s=4.0))
    started = time.monotonic()
    run, left = _run_attack(quick, "while True:\n    pass")
    _assert_contained(run, left)
    assert run.status == "timeout" and "timeout" in (run.reason or "")
    assert time.monotonic() - started < 60


def test_a_gigabyte_of_output_is_cut(runner):
    run, left = _run_attack(runner, "sys.stdout.write('x' * (1 << 30))")
    _assert_contained(run, left)
    assert run.status in ("killed", "ok") and len(run.log) <= 4000


def test_a_daemonised_child_dies_with_the_run(runner, tmp_path):
    body = """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
    os._exit(0)
"""
    run, left = _run_attack(runner, body)
    _assert_contained(run, left)
    sleeping = subprocess.run(["pgrep", "-f", MARK], capture_output=True, text=True).stdout.split()
    assert sleeping == []


def test_the_runner_takes_the_next_job_and_the_snapshot_is_untouched(runner):
    inst = _instance()
    run = runner.run(TestJob(inst, inst.patch))
    assert run.status == "ok" and run.outcomes and all(v == "passed" for v in run.outcomes.values())
    snapshot = runner.snapshots.path(inst, EnvSpec())
    assert not (snapshot / "tests").exists() and TARGET in inst.code_context
    assert (snapshot / TARGET).read_text() == inst.code_context[TARGET]


# --- What held before the containment work (the red team's "held" list): kept held ---------------


def test_root_only_and_other_runs_files_stay_unreadable(runner):
    body = f"""
for path in ['/proc/1/environ', '/root/.bashrc', '/root/.ray/auth_token', {str(Path(__file__).parents[2] / "README.md")!r},
             '/tmp/ray/session_latest/logs/raylet.out', {str(runner.snapshots.root)!r}]:
    try:
        data = open(path, 'rb').read(64) if not os.path.isdir(path) else os.listdir(path)
        print('READ', path, len(data))
    except OSError as e:
        print('CANNOT', path, type(e).__name__)
"""
    run, left = _run_attack(runner, body)
    _assert_contained(run, left)
    assert "CANNOT /proc/1/environ" in run.log and " READ " not in f" {run.log} ", run.log[-1500:]


def test_the_interpreter_the_environment_and_the_system_stay_unwritable(runner):
    body = """
for path in [sys.prefix + '/planted.py', os.path.dirname(os.__file__) + '/planted.py', '/usr/lib/planted',
             '/etc/planted', sys.executable]:
    try:
        open(path, 'ab').close()
        print('WROTE', path)
    except OSError as e:
        print('REFUSED', path, type(e).__name__)
"""
    run, left = _run_attack(runner, body)
    _assert_contained(run, left)
    assert "WROTE" not in run.log and run.log.count("REFUSED") == 5, run.log[-1500:]
    assert not Path(sys.prefix, "planted.py").exists()


def test_filling_tmp_shm_and_the_tree_stops_at_the_file_limit(runner):
    # The runner's file_mb is 16: each tmpfs holds 16 MiB, then ENOSPC (or the file-size rlimit).
    body = """
for folder in ['/tmp', '/dev/shm', '/testbed']:
    written = 0
    try:
        with open(folder + '/fill.bin', 'wb') as f:
            while written < (64 << 20):
                f.write(b'x' * (1 << 20))
                written += 1 << 20
    except OSError as e:
        pass
    print('FILLED', folder, written >> 20)
"""
    free_before = shutil.disk_usage(tempfile.gettempdir()).free
    run, left = _run_attack(runner, body)
    _assert_contained(run, left)
    filled = dict(re.findall(r"FILLED (\S+) (\d+)", run.log))
    assert sorted(filled) == ["/dev/shm", "/testbed", "/tmp"], run.log[-1500:]
    assert all(int(mb) <= 16 for mb in filled.values()), filled
    assert free_before - shutil.disk_usage(tempfile.gettempdir()).free < (32 << 20)


def test_results_printed_on_stdout_and_a_module_level_skip_resolve_nothing(runner):
    inst = _instance()
    fake = "\n".join(f"print('PASSED {t}')" for t in [*inst.fail_to_pass, *inst.pass_to_pass])
    run, left = _run_attack(runner, f"{fake}\nimport pytest\npytest.skip('skipped at import', allow_module_level=True)")
    _assert_contained(run, left)
    assert run.status == "ok" and not any(v == "passed" for k, v in run.outcomes.items() if k in inst.fail_to_pass)
