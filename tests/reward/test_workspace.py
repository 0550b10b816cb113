"""A sandbox session (reward/execution/workspace.py): many commands on one tree, each a fresh
process with its own limits; the tree's changes become the episode's patch; what a hostile
command does is contained and the next command of the same session still works."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from data.patching import apply_patch
from reward.execution import identity, sandbox
from reward.execution.environments import Environments, EnvSpec
from reward.execution.sandbox import NOBODY
from reward.execution.workspace import Session, SessionFailed, SessionLimits

pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}")

FILES = {"pkg/__init__.py": "", "pkg/mod.py": "def f():\n    return 1\n", "docs/old.txt": "old\n"}


@pytest.fixture
def session(tmp_path):
    snapshot = tmp_path / "snapshot"
    for rel, text in FILES.items():
        (snapshot / rel).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / rel).write_text(text)
    for path in [snapshot, *snapshot.rglob("*")]:  # as snapshots.py leaves one
        identity.give(path)
    env = Environments(tmp_path / "envs").ensure(EnvSpec())
    limits = SessionLimits(sandbox.Limits(pids=64, file_mb=8, memory_mb=512))
    with Session(snapshot, env, limits=limits) as live:
        yield live


def test_files_persist_and_each_command_is_a_fresh_process(session):
    assert session.run("echo 2 > n; cd pkg; export X=1", 10, 1000).exit_code == 0
    again = session.run("cat n; pwd; echo X=$X; id -u", 10, 1000)  # files stay; cwd, variables do not
    assert again.output.split() == ["2", "/testbed", "X=", str(NOBODY)]
    assert session.run("sleep 300 & echo started", 10, 1000).output == "started\n"
    # The background job died with its command: only PID 1, this bash and ls are left.
    assert len(session.run("ls /proc | grep -c '^[0-9]'; true", 10, 1000).output.split()) == 1
    assert int(session.run("ls -d /proc/[0-9]* | wc -l", 10, 1000).output) <= 4


def test_a_command_past_its_limit_is_killed_and_its_output_cut(session):
    slow = session.run("echo before; sleep 30", 0.5, 1000)
    assert (slow.timed_out, slow.exit_code, slow.output) == (True, -9, "before\n") and slow.seconds < 5
    loud = session.run("yes abc | head -c 100000", 10, 64)
    assert loud.truncated and loud.output == ("abc\n" * 16) and not loud.timed_out
    assert session.run("exit 3", 10, 10).exit_code == 3


def test_the_patch_is_the_trees_change_and_applies_to_the_snapshot(session):
    session.run(
        "sed -i 's/return 1/return 2/' pkg/mod.py && rm docs/old.txt && printf 'new\\n' > pkg/new.py"
        " && mkdir -p pkg/__pycache__ && echo x > pkg/__pycache__/mod.cpython-311.pyc"
        " && ln -s /etc/passwd pkg/link && printf 'a\\0b' > blob.bin && cp docs/../pkg/__init__.py pkg/__init__.py",
        10,
        1000,
    )
    session.write({"pkg/written.py": "w = 1\n"})
    assert session.read("pkg/written.py") == "w = 1\n" and session.read("docs/old.txt") is None
    patch, changes = session.patch()
    assert sorted(changes.files) == ["docs/old.txt", "pkg/mod.py", "pkg/new.py", "pkg/written.py"]
    assert changes.left_out == {"blob.bin": "a binary file", "pkg/link": "a symbolic link"}
    rebuilt = apply_patch(dict(FILES), patch)  # the changed files; a deleted one as "" (the schema's way)
    assert rebuilt == {
        "pkg/mod.py": "def f():\n    return 2\n",
        "docs/old.txt": "",
        "pkg/new.py": "new\n",
        "pkg/written.py": "w = 1\n",
    }


def test_a_folder_removed_and_made_again_counts_its_old_files_deleted(session):
    session.run("rm -r docs && mkdir docs && echo fresh > docs/new.txt", 10, 1000)
    assert session.changes().files == {"docs/new.txt": "fresh\n", "docs/old.txt": None}


def test_a_path_outside_the_tree_is_refused_before_anything_is_touched(session):
    for bad in ("../escape.py", "/etc/passwd", "pkg/../../x"):
        with pytest.raises(ValueError):
            session.write({bad: "x"})
        with pytest.raises(ValueError):
            session.read(bad)


@pytest.mark.parametrize(
    ("attack", "contained"),
    [
        (":(){ :|:& };:", lambda r: r.seconds < 15),  # a fork bomb: the pids cap, then the sweep
        ("head -c 64M /dev/zero > big; echo status=$?", lambda r: "status=0" not in r.output),  # over file_mb
        ("python3 -c 'x = bytearray(2 << 30)'", lambda r: r.exit_code != 0),  # over the memory cap
    ],
)
def test_a_hostile_command_is_contained_and_the_next_one_works(session, attack, contained):
    result = session.run(attack, 5, 4000)
    assert contained(result), result
    after = session.run("echo alive; ls /proc | grep -c '^[0-9]'", 10, 1000)
    assert after.output.split()[0] == "alive" and int(after.output.split()[1]) <= 4


def test_the_hosts_files_and_ports_are_out_of_reach(session, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("host only")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    probe = session.run(
        f"cat {secret}; echo > {tmp_path}/planted; echo hi > /dev/tcp/127.0.0.1/{port} && echo connected", 5, 4000
    )
    # A connection that reached the host would wait in the listen backlog: none does. (Checked
    # without an accepting thread, which a close under it left raising on a reused descriptor.)
    server.setblocking(False)
    with pytest.raises(BlockingIOError):
        server.accept()
    server.close()
    assert "host only" not in probe.output and "connected" not in probe.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret", "snapshot"]  # nothing planted


def test_a_closed_session_leaves_no_process_and_answers_nothing(tmp_path, session):
    session.run("sleep 300 &", 5, 100)
    pid = session._proc.pid
    session.close()
    assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
    with pytest.raises(SessionFailed):
        session.run("true", 5, 100)
    assert not list(Path(session._scratch).parent.glob(session._scratch.name))


def _wait_for_a_spare(spares, timeout: float = 10.0):
    import time

    deadline = time.monotonic() + timeout
    while not spares._ready and time.monotonic() < deadline:
        time.sleep(0.01)
    assert spares._ready, "no spare PID 1 was started after a session took one"
    return spares._ready[0]


def test_a_session_starts_on_a_spare_pid_1_and_is_the_same_sandbox(tmp_path, session):
    """A session takes a PID 1 started ahead of it (workspace.py _Spares); what it runs is
    contained as in a cold start: nobody, its own tree, no host files, its own processes."""
    from reward.execution import workspace

    (tmp_path / "secret").write_text("host only")
    spare = _wait_for_a_spare(workspace.SPARES)  # the fixture's session took or left one
    with Session(session.snapshot, session.env, limits=session.limits) as warm:
        assert warm._proc is spare.proc and spare not in workspace.SPARES._ready
        out = warm.run(f"id -u; head -1 pkg/mod.py; cat {tmp_path}/secret; ls -d /proc/[0-9]* | wc -l", 10, 4000)
        lines = out.output.splitlines()
        assert lines[:2] == [str(NOBODY), "def f():"] and "host only" not in out.output
        assert int(lines[-1]) <= 4  # PID 1, bash, ls, wc: a PID namespace of its own
        assert warm.run("echo x > new.txt", 10, 100).exit_code == 0 and warm.read("new.txt") == "x\n"
        assert session.read("new.txt") is None  # another session's tree
        pid = warm._proc.pid
    assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0


def test_spares_end_when_closed_and_a_dead_one_is_passed_over(tmp_path):
    from reward.execution.workspace import _Spares

    spares = _Spares(keep=1)
    assert spares.take() is None  # none yet: the caller starts cold, and one is started
    first = _wait_for_a_spare(spares)
    first.proc.kill()
    first.proc.wait()
    assert spares.take() is None  # the dead one is passed over, another started
    second = _wait_for_a_spare(spares)
    assert second is not first and second.proc.poll() is None
    spares.close()
    assert second.proc.poll() is not None  # its pipe closed, it exited without a spec
    assert spares.take() is None and spares._ready == []  # closed: none started again
