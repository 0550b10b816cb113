"""The sandbox as an unprivileged user (rootless: identity.py), with the outcomes it has as root.

Users run Ray as a plain user (the cluster preset's `ubuntu`); CI runs as root. So these tests
make a user (`useradd`), delegate it a cgroup of each controller (v1 here: the folder chowned to
it, as docs/cluster.md says for a node), and run, as that user: the containment, escape,
forgery, environment-build and session suites (every attack class of bench/redteam.py that runs
in a sandbox; bench/rootless.py --redteam runs the whole bench so),
expecting every test to pass as it does as root; a run whose caps cannot be set, refused or,
with best effort, run uncapped and flagged; and what only rootless has (the command is PID 1's
user: no capability, no ptrace of PID 1, no signal to it).

CI's interpreter lives in root's home (mode 0700), which the user cannot enter: each command
runs in a private mount namespace with a world-readable tmpfs over every such folder and the
paths the run needs bound back into it. No permission on the host changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from reward.execution import cgroups, identity, sandbox

ROOT = Path(__file__).resolve().parents[2]
USER = "swe-rl-rootless"
SUITES = (
    "tests/reward/test_containment.py",
    "tests/reward/test_escapes.py",
    "tests/reward/test_forgery.py",
    "tests/reward/test_workspace.py",
    "tests/reward/test_env_build.py",
)
_TOOLS = ("useradd", "setpriv", "unshare", "mount")

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="making a user and delegating it a cgroup needs root"),
    pytest.mark.skipif(sandbox.available() is not None, reason=f"no sandbox: {sandbox.available()}"),
    pytest.mark.skipif(
        any(shutil.which(t) is None for t in _TOOLS), reason=f"needs {', '.join(_TOOLS)} (util-linux, passwd)"
    ),
    pytest.mark.skipif(identity.forbidden() is not None, reason=f"{identity.forbidden()}"),
]


def _hidden(paths: list[Path]) -> dict[Path, set[str]]:
    """Folders another user cannot traverse, each with the entries under it the run needs."""
    out: dict[Path, set[str]] = {}
    for path in paths:
        for parent in reversed(path.parents):
            if parent != Path("/") and not parent.stat().st_mode & 0o001:
                out.setdefault(parent, set()).add(path.relative_to(parent).parts[0])
                break
    return out


class Unprivileged:
    """Runs commands as USER, with a view of the paths the interpreter and the project need."""

    def __init__(self, uid: int, gid: int, home: Path, cgroup_root: str) -> None:
        self.uid, self.gid, self.home, self.cgroup_root = uid, gid, home, cgroup_root
        needed = [Path(sys.base_prefix).resolve(), Path(sys.prefix), Path(sys.executable).resolve(), ROOT]
        self.view = _hidden(needed)

    def run(self, argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        lines = ["set -e"]
        for index, (hidden, names) in enumerate(sorted(self.view.items())):
            for name in sorted(names):
                stage = self.home / f".stage-{index}-{name}"
                lines += [f"mkdir -p '{stage}'", f"mount --bind '{hidden / name}' '{stage}'"]
            lines.append(f"mount -t tmpfs -o mode=0755,size=1m tmpfs '{hidden}'")
            for name in sorted(names):
                stage = self.home / f".stage-{index}-{name}"
                lines += [f"mkdir -p '{hidden / name}'", f"mount --move '{stage}' '{hidden / name}'"]
        lines.append(f'exec setpriv --reuid={self.uid} --regid={self.gid} --clear-groups "$@"')
        # The host's environment (its CA bundle and package index settings reach PyPI from here),
        # less what is root's own or this test's, then the run's settings.
        own = {"HOME", "USER", "LOGNAME", "PWD", "OLDPWD", "MAIL", "TMPDIR", "RAY_TMPDIR"}
        own |= {cgroups.LIMITS_ENV, cgroups.ROOT_ENV}
        inherited = {k: v for k, v in os.environ.items() if k not in own and not k.startswith("PYTEST")}
        variables = {**inherited, "HOME": str(self.home), "PATH": "/usr/local/bin:/usr/bin:/bin", **env}
        command = ["env", "-i", *(f"{k}={v}" for k, v in variables.items()), *argv]
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines), "sh", *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )


@contextlib.contextmanager
def unprivileged_user(home: Path) -> Iterator[Unprivileged]:
    """USER (made if missing) with `home` and a delegated cgroup of each v1 controller, removed
    after (bench/rootless.py uses it too). Skips where the controllers are not v1."""
    if subprocess.run(["id", "-u", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True)
    uid, gid = (
        int(subprocess.run(["id", flag, USER], capture_output=True, text=True, check=True).stdout)
        for flag in ("-u", "-g")
    )
    home.chmod(0o755)
    os.chown(home, uid, gid)
    layout = cgroups.hierarchy()
    if any(layout.where(c) != "v1" for c in cgroups.CONTROLLERS):
        pytest.skip(f"delegating a cgroup here is written for v1 controllers; this host: {layout.describe()}")
    name = f"swe_rl_rootless_test_{os.getpid()}"
    delegated = [layout.v1[c] / name for c in cgroups.CONTROLLERS]
    for folder in delegated:  # v1 delegation: the folder and its files belong to the user
        folder.mkdir()
        for path in [folder, *folder.iterdir()]:
            os.chown(path, uid, gid)
    try:
        yield Unprivileged(uid, gid, home, f"/{name}")
    finally:
        for folder in delegated:  # the runs' own cgroups are gone by now: only empty folders remain
            for path in sorted(folder.rglob("*"), reverse=True):
                if path.is_dir():
                    path.rmdir()
            folder.rmdir()


@pytest.fixture(scope="module")
def unprivileged():
    # In /tmp itself: pytest's temporary folder and a run's TMPDIR (actors/cluster/reaper.py)
    # are root's own (mode 0700), and the user's home (uv's cache) must be its to enter.
    home = Path(tempfile.mkdtemp(prefix="swe-rl-rootless-home-", dir="/tmp"))
    try:
        with unprivileged_user(home) as user:
            yield user
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _collected(files: tuple[str, ...]) -> int:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    ).stdout
    return int(re.search(r"(\d+) tests? collected", out).group(1))  # type: ignore[union-attr]


def test_the_containment_and_forgery_suites_hold_rootless(unprivileged):
    run = unprivileged.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITES],
        {cgroups.ROOT_ENV: unprivileged.cgroup_root},
        timeout=900,
    )
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    # Every test passes as it does as root: none skipped (a sandbox that would not start rootless
    # skips them), none failed.
    assert re.fullmatch(rf"{_collected(SUITES)} passed in [\d.]+s( \(\d+:\d+:\d+\))?", summary), summary


PROBE = textwrap.dedent(
    """
    import json, os, sys, tempfile
    from pathlib import Path
    from reward.execution import identity, sandbox
    snapshot = Path(tempfile.mkdtemp())
    (snapshot / "a.py").write_text("x = 1\\n")
    script = (
        "grep -E '^(Uid|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status;"
        "ls /proc/1/fd >/dev/null 2>&1 && echo fd-readable || echo fd-closed;"
        "kill -INT 1 2>/dev/null; kill -TERM 1 2>/dev/null; sleep 0.2; echo still-here;"
        "unshare -U -r true 2>/dev/null && echo userns-made || echo userns-refused;"
        "mount -t tmpfs x /tmp 2>/dev/null && echo mounted || echo mount-refused;"
        "mkdir /planted 2>/dev/null && echo root-writable || echo root-read-only;"
        "echo new > /testbed/b.py && cat /testbed/b.py; ls /root 2>&1 | head -c 0; ls / | tr '\\\\n' ' '"
    )
    try:
        result = sandbox.run(["/bin/sh", "-c", script], snapshot=snapshot, changes={"c.py": "y = 2\\n"})
        print(json.dumps({"code": result.returncode, "out": result.stdout, "uncapped": result.uncapped}))
    except sandbox.SandboxUnavailable as exc:
        print(json.dumps({"refused": str(exc)}))
    """
)


def _probe(unprivileged, env):
    run = unprivileged.run([sys.executable, "-c", PROBE], env, timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1]), run.stderr


def test_the_command_holds_nothing_of_pid_1_rootless(unprivileged):
    got, _ = _probe(unprivileged, {cgroups.ROOT_ENV: unprivileged.cgroup_root})
    assert (got["code"], got["uncapped"]) == (0, False)
    fields = dict(line.split(":\t", 1) for line in got["out"].splitlines() if ":\t" in line)
    assert fields["Uid"].split() == [str(identity.NOBODY)] * 4
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[caps], 16) == 0, (caps, fields[caps])
    assert fields["NoNewPrivs"].strip() == "1"
    words = got["out"].split()
    assert {"fd-closed", "still-here", "userns-refused", "mount-refused", "root-read-only", "new"} <= set(words)
    assert "root" not in words and "home" not in words  # the host's home folders do not exist there


def test_without_a_delegated_cgroup_the_run_is_refused_or_flagged_uncapped(unprivileged):
    refused, _ = _probe(unprivileged, {})
    line = refused["refused"]
    assert line.startswith("sandbox: cannot cap memory") and "Permission denied" in line
    assert f"running as uid {unprivileged.uid}" in line and ("cgroup hybrid" in line or "cgroup v1" in line)
    assert "SWE_RL_LIMITS=best_effort" in line and "SWE_RL_CGROUP_ROOT" in line
    flagged, stderr = _probe(unprivileged, {cgroups.LIMITS_ENV: cgroups.BEST_EFFORT})
    assert (flagged["code"], flagged["uncapped"]) == (0, True)
    assert stderr.count("counted as test_uncapped") == 1
