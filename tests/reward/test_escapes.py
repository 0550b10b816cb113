"""A candidate patch cannot touch the host: not through the paths it names, nor through the
report channel. The harness writes the candidate's files as root before the sandbox starts, so
a path from a patch is checked before any byte is written ("patch_failed", "unsafe path").

Every host file here lives under tmp_path; each test checks it is unchanged (content and
existence) and that nothing was created beside it.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from conf.config import ExecutionConfig, RewardConfig
from data.patching import apply_patch
from reward.core import score_output
from reward.execution import sandbox
from reward.execution.environments import EnvSpec
from reward.execution.runner import Runner, TestJob
from reward.kinds import make_reward
from tests.reward.test_containment import _instance, runner  # noqa: F401 - the module-scoped Runner fixture
from tests.reward.test_forgery import MONTHS, candidate, months_running

needs_sandbox = pytest.mark.skipif(
    sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}"
)

UP = "../" * 40  # more than enough to climb from any scratch or snapshot directory to /


def new_file(path: str, text: str) -> str:
    """A hand-written diff creating `path` (any string, as a hostile patch names it)."""
    lines = text.splitlines(keepends=True)
    return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n" + "".join("+" + ln for ln in lines)


def edit_file(path: str, old: str, new: str) -> str:
    return f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n"


def snapshot_of(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def assert_refused(run) -> None:
    assert run.status == "patch_failed", (run.status, run.reason)
    assert "unsafe path" in (run.reason or ""), run.reason
    assert run.resolved is not True


# --- 1. Paths in a unified diff -------------------------------------------------------------


@needs_sandbox
@pytest.mark.parametrize("how", ["absolute", "traversal"])
@pytest.mark.parametrize("what", ["create", "overwrite"])
def test_a_patch_path_outside_the_repository_is_refused(runner, tmp_path, how, what):  # noqa: F811
    host = tmp_path / "host"
    host.mkdir()
    (host / "kept.txt").write_text("original\n")
    before = snapshot_of(host)
    target = host / ("planted.py" if what == "create" else "kept.txt")
    path = f"/{target}" if how == "absolute" else UP + str(target).lstrip("/")
    patch = new_file(path, "pwned = True\n") if what == "create" else edit_file(path, "original", "pwned")
    run = runner.run(TestJob(_instance(), patch))
    assert_refused(run)
    assert snapshot_of(host) == before


@needs_sandbox
@pytest.mark.parametrize("path", ["./conftest.py", "tests//conftest.py", "calspan/./months.py"])
def test_a_patch_path_that_is_not_plain_is_refused(runner, path):  # noqa: F811
    """`.` and empty components name a repository file by another spelling: a guard that
    compares names ("conftest.py") would not see them."""
    run = runner.run(TestJob(_instance(), new_file(path, "x = 1\n")))
    assert_refused(run)


@needs_sandbox
@pytest.mark.parametrize("direction", ["from-absolute", "from-traversal", "to-absolute", "to-traversal"])
def test_a_rename_outside_the_repository_is_refused(runner, tmp_path, direction):  # noqa: F811
    host = tmp_path / "host"
    host.mkdir()
    (host / "kept.txt").write_text("original\n")
    before = snapshot_of(host)
    outside = host / ("kept.txt" if direction.startswith("from") else "renamed.py")
    spelled = f"/{outside}" if direction.endswith("absolute") else UP + str(outside).lstrip("/")
    old, new = (spelled, "calspan/stolen.txt") if direction.startswith("from") else (MONTHS, spelled)
    patch = f"diff --git a/{old} b/{new}\nsimilarity index 100%\nrename from {old}\nrename to {new}\n"
    run = runner.run(TestJob(_instance(), patch))
    assert_refused(run)
    assert snapshot_of(host) == before  # the renamed host file still exists, nothing was created


@needs_sandbox
@pytest.mark.parametrize("target", ["conftest.py", "calspan/months.py"])
def test_a_copy_from_a_host_file_does_not_read_it(runner, tmp_path, target):  # noqa: F811
    secret = tmp_path / "secret.txt"
    secret.write_text("HOSTSECRET_7f3a91\n")
    secret.chmod(0o600)
    patch = f"diff --git a/{secret} b/{target}\nsimilarity index 100%\ncopy from /{secret}\ncopy to {target}\n"
    run = runner.run(TestJob(_instance(), patch))
    assert_refused(run)
    assert "HOSTSECRET_7f3a91" not in repr(run)
    assert secret.read_text() == "HOSTSECRET_7f3a91\n"


@needs_sandbox
@pytest.mark.parametrize("how", ["absolute", "traversal"])
def test_a_patch_cannot_poison_the_snapshot_cache(tmp_path, how):
    """A path aimed at the runner's snapshot of the instance: were it written, the fix would be
    in the base commit for every later run (an empty patch would resolve)."""
    fresh = Runner(ExecutionConfig(cache_dir=str(tmp_path / "cache"), wall_s=20.0, memory_mb=256, pids=64,
                                    file_mb=16, output_kb=64, cpu_s=30))  # fmt: skip
    inst = _instance()
    snapshot = fresh.snapshots.path(inst, EnvSpec())
    before = snapshot_of(snapshot)
    fixed = apply_patch(inst.code_context, inst.patch)[MONTHS]
    target = snapshot / MONTHS
    path = f"/{target}" if how == "absolute" else UP + str(target).lstrip("/")
    run = fresh.run(TestJob(inst, new_file(path, fixed)))
    assert_refused(run)
    assert snapshot_of(snapshot) == before
    later = fresh.run(TestJob(inst, ""))  # the base commit with the test patch: the bug is there
    assert later.status == "ok" and later.resolved is False, (later.status, later.outcomes)


@needs_sandbox
@pytest.mark.parametrize("how", ["write through", "read through"])
def test_a_link_in_the_repository_carries_no_byte_across(tmp_path, how):
    """A clean path can still leave the tree through a link the repository itself holds (a
    cloned repository may have `docs -> /etc`): no link is followed, on the host or inside."""
    fresh = Runner(ExecutionConfig(cache_dir=str(tmp_path / "cache"), wall_s=20.0, memory_mb=256, pids=64,
                                    file_mb=16, output_kb=64, cpu_s=30))  # fmt: skip
    inst = _instance()
    snapshot = fresh.snapshots.path(inst, EnvSpec())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("HOSTSECRET_41c2 = 1\n")
    os.symlink(outside, snapshot / "calspan" / "vendor")
    if how == "write through":
        patch = new_file("calspan/vendor/planted.py", "x = 1\n")
    else:
        patch = edit_file("calspan/vendor/secret.py", "HOSTSECRET_41c2 = 1", "y = 2")
    run = fresh.run(TestJob(inst, patch))
    assert_refused(run)
    assert (
        sorted(os.listdir(outside)) == ["secret.py"] and (outside / "secret.py").read_text() == "HOSTSECRET_41c2 = 1\n"
    )
    assert "HOSTSECRET_41c2" not in repr(run)


# --- 2. Paths in SEARCH/REPLACE answers (the training reward) -------------------------------


def answer(path: str) -> str:
    return (
        "<think>add a helper</think>\n<solution>\n```python\n"
        f"### {path}\n<<<<<<< SEARCH\n\n=======\nx = 1\n>>>>>>> REPLACE\n```\n</solution>"
    )


def unsafe_answer_paths(tmp_path: Path) -> list[str]:
    return ["../x.py", f"{tmp_path}/abs.py", "./a.py", "a//b.py", "calspan/../calspan/months.py", "a\\b.py"]


@pytest.mark.parametrize("index", range(6))
def test_an_unsafe_answer_path_is_malformed_for_the_similarity_reward(tmp_path, index):
    path = unsafe_answer_paths(tmp_path)[index]
    inst = _instance()
    result = score_output(inst.code_context, inst.oracle_new_content, answer(path))
    assert result.reward == -1.0 and "unsafe path" in (result.error or ""), (path, result)
    kind = make_reward(RewardConfig(kind="similarity"))
    via_kind = kind.score(kind.prepare(inst), answer(path))
    assert via_kind.reward == -1.0 and "unsafe path" in (via_kind.error or ""), (path, via_kind)


def test_a_nul_in_an_answer_path_is_malformed(tmp_path):
    inst = _instance()
    result = score_output(inst.code_context, inst.oracle_new_content, answer("a\0.py"))
    assert result.reward == -1.0 and "unsafe path" in (result.error or ""), result


# The `tests` and `hybrid` kinds' scoring of these answers runs through the test pool: see
# tests/actors/test_test_pool.py (one Ray cluster for the pool's tests).


# --- 3. The report channel -------------------------------------------------------------------


def _sandbox_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("sandbox-*")}


def _symlink_report_to(secret: Path) -> str:
    """Code under test that, at exit, replaces the report with a symlink to a host file: the
    harness, root on the host, would follow it."""
    return f"""
import atexit, os
def _swap():
    for name in ("junit.xml", "report.json", "report"):
        path = "/results/" + name
        try:
            if os.path.lexists(path):
                os.unlink(path)
            os.symlink({str(secret)!r}, path)
        except OSError:
            pass
atexit.register(_swap)
"""


@needs_sandbox
@pytest.mark.parametrize(
    "content",
    [
        '<secrets><testcase classname="" name="HOSTSECRET_b41c"/></secrets>\n',  # XML: today's parser reads it
        "HOSTSECRET_b41c: not xml\n",
    ],
    ids=["xml-secret", "text-secret"],
)
def test_a_report_symlinked_to_a_host_file_does_not_read_it(runner, tmp_path, content):  # noqa: F811
    secret = tmp_path / "secret.xml"
    secret.write_text(content)
    secret.chmod(0o600)
    run = runner.run(TestJob(_instance(), candidate({MONTHS: months_running(_symlink_report_to(secret))})))
    assert "HOSTSECRET_b41c" not in repr(run)
    assert run.resolved is not True
    assert secret.read_text() == content and not secret.is_symlink()


@needs_sandbox
def test_a_flood_into_the_report_directory_lands_nowhere_on_the_host(tmp_path):
    """3 x 120 MB written where the report went: no such directory (or one the code cannot
    write), so the host's disk and the harness's memory see none of it."""
    fresh = Runner(ExecutionConfig(cache_dir=str(tmp_path / "cache"), wall_s=60.0, memory_mb=512, pids=64,
                                    file_mb=128, output_kb=64, cpu_s=60))  # fmt: skip
    flood = """
import os
_chunk = b"x" * (1 << 20)
for _i in range(3):
    try:
        with open("/results/flood%d.bin" % _i, "wb") as _f:
            for _ in range(120):
                _f.write(_chunk)
    except OSError:
        pass
"""
    patch = candidate({MONTHS: months_running(flood)})
    fresh.run(TestJob(_instance(), ""))  # the snapshot, made before the measurement
    free_before = shutil.disk_usage(tempfile.gettempdir()).free
    lowest = [free_before]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            lowest.append(shutil.disk_usage(tempfile.gettempdir()).free)

    watcher = threading.Thread(target=watch, daemon=True)
    dirs_before, peak_before = _sandbox_dirs(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    watcher.start()
    try:
        run = fresh.run(TestJob(_instance(), patch))
    finally:
        done.set()
        watcher.join()
    assert run.resolved is not True
    assert free_before - min(lowest) < 300 << 20, f"{(free_before - min(lowest)) >> 20} MB of the host's disk used"
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert grown_kb < 200 << 10, f"the harness's peak memory grew by {grown_kb >> 10} MB"
    assert _sandbox_dirs() <= dirs_before, "a sandbox's scratch directory was left behind"
    assert all("flood" not in name for name in os.listdir(tmp_path))
