"""A sandbox session (reward/execution/workspace.py): many commands on one tree, each a fresh
process with its own limits; the tree's changes become the episode's patch; what a hostile
command does is contained and the next command of the same session still works."""

from __future__ import annotations

import contextlib
import socket
import subprocess
from pathlib import Path

import pytest

from data.patching import apply_patch
from data.paths import UnsafePath
from reward.execution import identity, sandbox
from reward.execution.environments import Environments, EnvSpec
from reward.execution.sandbox import NOBODY
from reward.execution.workspace import Session, SessionFailed, SessionLimit, SessionLimits

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


# -- what the policy puts in its own tree is the policy's: a session limit, never an infra failure
DEEP = "python3 -c \"import os\nfor _ in range(3000): os.mkdir('d'); os.chdir('d')\""
MANY = "python3 -c \"import os\nfor i in range(25000): open('f%05d' % i + 'x' * 200, 'w').close()\""
SUBMIT = "```submit\n```"


def _bash(command: str) -> str:
    return f"```bash\n{command}\n```"


def _edit(path: str) -> str:
    return f"```python\n### {path}\n<<<<<<< SEARCH\nx = 0\n=======\nx = 1\n>>>>>>> REPLACE\n```"


@pytest.fixture
def roomy(session):
    """A session whose file limit lets a command make a sparse file of 300 MB (no disk used)."""
    limits = SessionLimits(sandbox.Limits(pids=64, file_mb=512, memory_mb=512))
    with Session(session.snapshot, session.env, limits=limits) as live:
        yield live


@pytest.mark.parametrize(
    ("turns", "limit"),
    [
        ([_bash("truncate -s 300M big.py"), _edit("big.py"), SUBMIT], "limit_answer"),  # its read: over the cap
        ([_bash(DEEP), SUBMIT], "limit_depth"),  # 3000 nested folders: the walk of the changes
        ([_bash(MANY), SUBMIT], "limit_names"),  # 25,000 files of 206-byte names: 5 MB of names
    ],
)
def test_a_tree_past_a_session_limit_ends_the_episode_as_the_policys(roomy, turns, limit):
    from actors.agent.episode import ScriptedPolicy, final_patch, run_episode
    from conf.config import AgentConfig

    episode = run_episode(ScriptedPolicy(turns), roomy, "task", AgentConfig())
    episode, patch, left_out = final_patch(episode, roomy)
    assert (episode.ended_by, patch, left_out) == (limit, "", {}) and episode.limit
    # PID 1 answered with the limit and lives on: the session still works.
    assert roomy.run("echo alive", 10, 100).output == "alive\n"


def test_pid_1_answers_every_request_and_outlives_it(session):
    with pytest.raises(SessionLimit) as hit:  # the walk is a loop: no RecursionError at any depth
        session.run(DEEP, 30, 100)
        session.changes()
    assert hit.value.limit == "limit_depth"
    session._send({"op": "read"})  # a request without its fields: an error as the answer
    assert "error" in session._read_answer(5, "read")
    session.run("ln -s /etc docs/etc", 10, 100)
    with pytest.raises(UnsafePath):  # a link of the tree on the way: refused, not a failure
        session.read("docs/etc/passwd")
    assert session.run("echo alive", 10, 100).output == "alive\n"


def test_a_killed_session_is_still_an_infrastructure_failure(session):
    session._proc.kill()
    with pytest.raises(SessionFailed) as failed:
        session.run("true", 5, 100)
    assert not isinstance(failed.value, SessionLimit)


def test_a_folder_removed_whole_has_every_file_under_it_deleted(session):
    session.run("mkdir -p docs/sub && echo b > docs/sub/b.txt", 10, 100)  # made in the session...
    (session.snapshot / "docs" / "sub").mkdir()  # ...and one in the snapshot's lower layer too
    (session.snapshot / "docs" / "sub" / "c.txt").write_text("c\n")
    session.run("rm -rf docs pkg/__init__.py", 10, 100)
    assert session.changes().files == {"docs/old.txt": None, "docs/sub/c.txt": None, "pkg/__init__.py": None}


def test_a_name_a_diff_cannot_carry_is_left_out_and_named(session):
    made = "touch \"$(printf 'a\\nb.py')\" \"$(printf 'c\\rd.py')\" \"$(printf 'e\\tf.py')\" \"$(printf 'g\\x80.py')\""
    nested = "\"$(printf 'n\\npkg')/pkg\""  # a folder "n<newline>pkg": never the path pkg/mod.py
    session.run(f"{made}; mkdir -p {nested} && echo x > {nested}/mod.py; echo y > ok.py", 10, 400)
    patch, changes = session.patch()
    assert changes.files == {"ok.py": "y\n"} and patch.count("diff --git") == 1
    assert set(changes.left_out) == {"a\nb.py", "c\rd.py", "e\tf.py", "g\udc80.py", "n\npkg/pkg/mod.py"}
    assert all("name" in why for why in changes.left_out.values())


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_replayed_session_and_its_patch_make_the_same_tree(session, tmp_path):
    """Every kind of change a session can make, then the snapshot with the patch applied is the
    session's tree, file by file."""
    session.run(
        "rm -rf docs && mkdir -p docs/new lib/a/b && echo n > docs/new/n.txt && echo deep > lib/a/b/c.py"
        " && sed -i 's/1/3/' pkg/mod.py && rm pkg/__init__.py && mkdir pkg/__init__.py 2>/dev/null;"
        " rmdir pkg/__init__.py; printf 'no newline' > tail.txt && mv lib/a/b/c.py lib/a/moved.py",
        10,
        1000,
    )
    # The session's tree as its commands see it: each file's name and content, NUL-separated.
    dump = 'find . -type f -print0 | xargs -0 -n1 sh -c \'printf "%s\\0" "$0"; cat "$0"; printf "\\0"\''
    parts = session.run(dump, 10, 100000).output.split("\0")[:-1]
    final = {name.removeprefix("./"): text for name, text in zip(parts[::2], parts[1::2], strict=True)}
    patch, changes = session.patch()
    assert changes.left_out == {}
    before = _tree(session.snapshot)
    produced = {**before, **apply_patch(before, patch)}  # a deleted file comes back as ""
    for rel in [rel for rel, text in changes.files.items() if text is None]:
        del produced[rel]
    assert produced == final and "docs/old.txt" not in produced


def test_pid_1_reaps_orphans_as_they_exit(session):
    # 300 orphans one after another under a cap of 64 processes: each is reaped as it exits.
    result = session.run("for i in $(seq 300); do (true &); done; echo done", 30, 4000)
    assert (result.exit_code, result.output) == (0, "done\n")


def test_nothing_pid_1_loads_writes_bytecode_into_the_checkout(tmp_path, session):
    from data import paths
    from reward.execution import workspace

    caches = [Path(paths.__file__).parent / "__pycache__", Path(workspace.__file__).parent / "__pycache__"]
    loaded = ("paths.", "workspace_inside.", "inside.")

    def written() -> dict[Path, int]:
        return {p: p.stat().st_mtime_ns for c in caches if c.is_dir() for p in c.iterdir() if p.name.startswith(loaded)}

    for path in written():  # what the host's own imports left (rootless: not ours to remove, then unchanged)
        with contextlib.suppress(OSError):
            path.unlink()
    before = written()
    with Session(session.snapshot, session.env, limits=session.limits) as other:  # a spare's PID 1, or a cold one
        other.run("true", 10, 100)
    workspace.SPARES.resize(0)
    try:
        with Session(session.snapshot, session.env, limits=session.limits) as cold:
            cold.run("true", 10, 100)
    finally:
        workspace.SPARES.resize(2)
    sandbox.run(["true"], snapshot=session.snapshot)  # a test run's PID 1, which the spares never are
    assert written() == before
