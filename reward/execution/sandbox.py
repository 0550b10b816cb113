"""The sandbox: the one place where code a model wrote runs. Linux namespaces, no Docker.

`run(argv, snapshot=..., changes=..., ...)` runs `argv` on a private copy of `snapshot` with
`changes` applied (the candidate patch and the test patch, as new file contents), and returns
its exit status, its output (truncated) and its report: what the command wrote to the pipe
named by $SWE_RL_REPORT_FD, relayed by the sandbox's PID 1 (root) after the command ended.
Everything else in the project treats a candidate patch as text.

What the code inside sees, and cannot do (each has a test in tests/reward/test_containment.py):

    filesystem  a new root of its own: the snapshot at /testbed (an overlay: writes land in a
                size-limited tmpfs, the snapshot on disk is never modified, and a fresh copy
                costs one mount, not a copy of the repository), the caller's `rw_paths`
                (an environment build's output folder: the only writes that outlive it), a
                private /tmp and /dev/shm (tmpfs), /dev with null, zero, random and urandom, a
                /proc of its own PID namespace; read-only: /usr, /lib*, /bin, /sbin, /etc, the
                interpreter's prefix and environment (`ro_paths`), and the harness's own files
                copied into /swe-rl (`harness_files`).
                The host's other files (home directories, the project, other runs) do not exist
                there. Nothing else it writes outlives it: no directory is shared with the host.
    /proc       names no host path that the sandbox can hide: PID 1's command line reads
                "swe-rl-sandbox-init", the overlay's options name its layers relative to the
                scratch folder (lower/0, upper/data), the hosts file and the servers' output
                live in PID 1's own tmpfs and in memory. What the command must find at its host
                path, the `ro_paths`, shows there (their mount lines, the interpreter's path).
    changes     written by PID 1 as root before the command starts, each path checked by
                data/paths.py on the host and again inside, every component opened without
                following links (a link in the repository cannot send a write outside it).
    report      a pipe to PID 1, which holds the only way out (a pipe to the host, which the
                command's processes do not inherit); PID 1 reads at most `report_bytes` and
                sends them after the command ended: the host reads bytes from a pipe, never a
                file or a link the sandbox made.
    identity    uid and gid 65534 (nobody), no capabilities, `no_new_privs`: as root, nobody
                with no supplementary groups; as any other user, the same id in a user
                namespace of the sandbox's own (identity.py): file modes hold and the process
                limit below applies.
    network     a network namespace with only a loopback interface that is down: no socket
                reaches the host's services, its 127.0.0.1 included, or anything else. With
                `loopback=True` (an environment's `network: "loopback"`) that interface is up:
                the code may serve and connect on its own 127.0.0.1 (tests with a local
                server), still a namespace of its own with no route out.
    servers     with `servers` (an environment's stand-ins for public services: services.py)
                the loopback is up too; PID 1 lets this namespace's unprivileged processes bind
                ports from the lowest server port (the sysctl ip_unprivileged_port_start is
                per network namespace: the host's stays as it is), binds a hosts file of its
                own over the root's /etc/hosts naming 127.0.0.1 for the servers' host names,
                starts each server as nobody with the command's rlimits and its output kept
                apart, and runs the command only once each accepts connections; one that does
                not within its `start_s` ends the run with `failed_server` saying why.
    processes   its own PID namespace: when the command exits, every process it started
                (a daemonised child too) is killed with the namespace; meanwhile PID 1 reaps
                each child as it exits, the orphans it is handed included. A cgroup caps the number
                of processes (`pids`) and the memory (`memory_mb`; the kernel's OOM killer ends
                the cgroup's largest process) on cgroup v1, v2 or hybrid hosts (cgroups.py): a
                cap that cannot be set refuses the run, or with the `best_effort` policy runs
                it uncapped and says so (`uncapped`); rlimits cap CPU seconds, file size and
                open files.
    time        a wall-clock limit: past it the namespace is killed (from the host side, which
                the code inside cannot reach) and the result says "timeout".
    output      stdout and stderr are read by the host and kept up to `output_bytes` each; a
                command that prints more is killed ("output").

How: `unshare` (util-linux) creates mount, PID, network, IPC and UTS namespaces and forks
`python -I -S -B reward/execution/inside.py` as PID 1 of the new PID namespace, which hides its
command line, joins the cgroups,
builds the new root with mounts (private propagation: nothing leaks to the host's mount table),
chroots into it and runs `argv` as nobody with the rlimits (PID 1 itself keeps its privileges).
As root that is all; as any other user the namespaces are made inside a user namespace first
(identity.py), where the host allows one: `available()` says why not where it does not.
"""

from __future__ import annotations

import io
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from data import paths
from data.paths import repo_path
from reward.execution import cgroups, identity
from reward.execution.identity import NOBODY

HARNESS_DIR = "/swe-rl"  # the harness's own files inside (run's `harness_files`; inside.HARNESS_DIR)


@dataclass(frozen=True)
class Limits:
    wall_s: float = 300.0  # wall clock for the whole command
    cpu_s: int = 600  # CPU seconds per process (RLIMIT_CPU)
    memory_mb: int = 4096  # memory of all its processes together (cgroup)
    pids: int = 512  # processes and threads together (cgroup)
    output_bytes: int = 1 << 20  # stdout and stderr kept, each; more is killed
    report_bytes: int = 8 << 20  # the report kept; a larger one comes back as None
    file_mb: int = 256  # largest file it may write (RLIMIT_FSIZE) and size of each tmpfs
    open_files: int = 1024  # RLIMIT_NOFILE


@dataclass(frozen=True)
class Server:
    """A process the sandbox's PID 1 starts before the command and that dies with it: an
    environment's stand-in for a public service (services.py makes them). It runs as nobody,
    in `/`, with `env` as its whole environment; `ro_paths` are mounted read-only as for the
    command."""

    name: str
    argv: tuple[str, ...]
    port: int  # on 127.0.0.1; the command starts once it accepts a connection there
    hosts: tuple[str, ...] = ()  # names the sandbox's /etc/hosts maps to 127.0.0.1
    env: tuple[tuple[str, str], ...] = ()
    ro_paths: tuple[str, ...] = ()
    start_s: float = 10.0  # how long it may take to accept


# The most PID 1 says of the guard's socket, before the report (inside.GuardReader).
GUARD_LINE = 512


@dataclass(frozen=True)
class SandboxResult:
    returncode: int | None  # None when it was killed by the host
    killed: str | None  # None, "timeout", "output", "memory" (the OOM killer ran in its cgroup)
    seconds: float
    stdout: str
    stderr: str
    report: bytes | None = b""  # what it wrote to $SWE_RL_REPORT_FD; None: over report_bytes
    failed_server: str | None = None  # why a Server did not come up (the command never ran)
    uncapped: bool = False  # ran without its memory and pids caps (the best_effort policy)
    # With `guard`: what the command said on the guard's socket (inside.GuardReader): "ended",
    # "tampered: why", or "silent" (no end said: the descriptor closed, the listener removed)
    guard: str | None = None


class SandboxUnavailable(RuntimeError):
    """This machine cannot run the sandbox; the message says what is missing."""


def available() -> str | None:
    """None when the sandbox can run here, else why not."""
    if sys.platform != "linux":
        return "the sandbox needs Linux namespaces"
    if shutil.which("unshare") is None:
        return "util-linux's `unshare` is not installed"
    if identity.rootless() and (why := identity.forbidden()) is not None:
        return f"the sandbox runs rootless as uid {os.geteuid()}, but {why}"
    return None


def prepare(
    argv: Sequence[str],
    snapshot: Path,
    changes: Mapping[str, str | None] | None,
    ro_paths: Sequence[str | Path],
    env: Mapping[str, str] | None,
    limits: Limits,
    workdir: str,
    loopback: bool,
    rw_paths: Sequence[str | Path],
    servers: Sequence[Server],
    layers: Sequence[str | Path],
    harness_files: Mapping[str, str] | None = None,
) -> tuple[Path, cgroups.RunCgroup, dict[str, Any], list[str]]:
    """What run() and a Session (workspace.py) share: the scratch folder (mode 0700), the run's
    cgroups, PID 1's spec (written by the caller once it adds its descriptors) and the command
    that starts PID 1 in its namespaces. The caller ends the cgroups and removes the scratch
    folder. Raises SandboxUnavailable, also where a cap cannot be set (cgroups.py)."""
    why = available()
    if why is not None:
        raise SandboxUnavailable(why)
    for rel in changes or {}:
        repo_path(rel)  # UnsafePath: the caller let a path through that names no repository file
    _check_harness(harness_files or {}, [*ro_paths, *rw_paths, *(p for s in servers for p in s.ro_paths)])
    try:  # before any file: a refusal leaves nothing behind
        run_cgroup = cgroups.make(limits.memory_mb, limits.pids)
    except (cgroups.CapsUnavailable, cgroups.PolicyError) as exc:
        raise SandboxUnavailable(str(exc)) from None
    scratch = Path(tempfile.mkdtemp(prefix="sandbox-"))
    (scratch / "root").mkdir()
    spec = {
        "argv": list(argv),
        "env": dict(env or {}),
        "snapshot": str(snapshot),
        "layers": [str(p) for p in layers],
        # Contents as JSON strings (lone surrogates escaped): written by PID 1 with surrogateescape.
        "changes": dict(changes or {}),
        "harness_files": dict(harness_files or {}),
        "paths_module": str(Path(paths.__file__).resolve()),
        "ro_paths": [str(p) for p in (*ro_paths, *(p for server in servers for p in server.ro_paths))],
        "rw_paths": [str(p) for p in rw_paths],
        "scratch": str(scratch),
        "workdir": workdir,
        "limits": asdict(limits),
        "cgroups": run_cgroup.procs(),
        "uid": NOBODY,
        "rootless": identity.rootless(),
        "loopback": loopback or bool(servers),
        "servers": [{**asdict(server), "env": dict(server.env)} for server in servers],
    }
    os.chmod(scratch, 0o700)
    return scratch, run_cgroup, spec, pid1_command(str(scratch / "spec.json"))


def _check_harness(files: Mapping[str, str], mounted: Sequence[str | Path]) -> None:
    """A harness file is one name in HARNESS_DIR, and no mount lies there (it would hide them)."""
    for name in files:
        if not name or "/" in name or name in (".", "..") or "\0" in name:
            raise ValueError(f"harness file {name!r}: a harness file is one file name (it goes in {HARNESS_DIR})")
    for path in mounted:
        if Path(path) == Path(HARNESS_DIR) or Path(HARNESS_DIR) in Path(path).parents:
            raise ValueError(f"mount {path}: {HARNESS_DIR} holds the harness's own files, nothing is mounted there")


def pid1_command(*args: str) -> list[str]:
    """The command that starts PID 1 (inside.py, given `args`) in fresh namespaces."""
    return [
        "unshare",
        *identity.unshare_flags(),  # rootless: the user namespace first, the others inside it
        "--mount",
        "--pid",
        "--net",
        "--ipc",
        "--uts",
        "--kill-child=SIGKILL",
        "--propagation",
        "private",
        # The script by path, isolated (-I) and without site (-S): it needs the standard library
        # only, and skipping the project's packages and site-packages saves ~60 ms per run. No
        # bytecode (-B): it loads data/paths.py and workspace_inside.py by path, as root, and
        # would write their caches into the project's checkout (-I ignores PYTHONDONTWRITEBYTECODE).
        sys.executable,
        "-I",
        "-S",
        "-B",
        str(Path(__file__).with_name("inside.py")),
        *args,
    ]


def run(
    argv: Sequence[str],
    *,
    snapshot: Path,
    changes: Mapping[str, str | None] | None = None,
    ro_paths: Sequence[str | Path] = (),
    env: Mapping[str, str] | None = None,
    limits: Limits = Limits(),
    workdir: str = "/testbed",
    loopback: bool = False,
    rw_paths: Sequence[str | Path] = (),
    servers: Sequence[Server] = (),
    layers: Sequence[str | Path] = (),
    harness_files: Mapping[str, str] | None = None,
    secret: str = "",
    guard: str | None = None,
) -> SandboxResult:
    """Run argv in a sandbox over `snapshot` with `changes` (path -> new content, None =
    delete) applied. `ro_paths` are extra host paths visible read-only at the same place (the
    interpreter's prefix, the environment); `rw_paths` the same, writable (what the code writes
    there outlives it: only a directory the caller owns and reads back as hostile, e.g. an
    environment build's output). `env` is the whole environment of the command; `servers`
    run beside it on the sandbox's own loopback (Server). `layers` are folders laid read-only
    over the snapshot, the first topmost (an environment's build products: compiled modules).
    `harness_files` (name -> text) are the harness's own files, copied read-only into
    HARNESS_DIR (/swe-rl) of the new root: bootstrap.py is run as /swe-rl/bootstrap.py, so no
    path of the project's checkout is mounted or named in the sandbox. `secret` is text for the
    command's eyes only (the probe's spec: the labelled tests): PID 1 hands it over in a memory
    file whose descriptor is named by $SWE_RL_SECRET_FD, never in a path of the new root; the
    command reads and closes it before it runs anything else (bootstrap.py).
    `guard` (a secret, hex): PID 1 hands the command a socket at a descriptor number it draws
    for the run (named nowhere in the environment) with the secret waiting on it; a line that
    starts with the secret says the harness's guard's word (JavaScript's swe_rl_guard.cjs reads
    the secret before any code under test runs), and the result's `guard` says what came."""
    scratch, run_cgroup, spec, cmd = prepare(
        argv, snapshot, changes, ro_paths, env, limits, workdir, loopback, rw_paths, servers, layers, harness_files
    )
    report_read, report_write = os.pipe()
    spec["report_fd"] = report_write
    spec["secret"] = secret
    spec["guard"] = guard
    (scratch / "spec.json").write_text(json.dumps(spec))
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            cwd=scratch,
            env={},
            pass_fds=(report_write,),
        )
    finally:
        os.close(report_write)  # PID 1 holds the only copy now: EOF when it is gone
    with open(report_read, "rb", buffering=0) as report_pipe:
        out, err, relayed, killed = _collect(proc, report_pipe, limits, start)
    oom = run_cgroup.end()
    shutil.rmtree(scratch, ignore_errors=True)
    if killed is None and oom:
        killed = "memory"
    code = None if killed in ("timeout", "output") else proc.returncode
    seconds = round(time.monotonic() - start, 3)
    uncapped = run_cgroup.uncapped is not None
    said = None
    if relayed[:1] == b"G":  # PID 1's reading of the guard's socket, one line, before the report
        line, _, relayed = relayed[1:].partition(b"\n")
        said = line.decode("utf-8", "replace")
    if relayed[:1] == b"S":
        failed = relayed[1:].decode("utf-8", "replace")
        return SandboxResult(code, killed, seconds, out, err, b"", failed, uncapped, said)
    return SandboxResult(code, killed, seconds, out, err, _report(relayed, limits), uncapped=uncapped, guard=said)


def _report(relayed: bytes, limits: Limits) -> bytes | None:
    """What PID 1 relayed (inside.py): "R" then the report, or "O" when the report passed
    `report_bytes` ("S" then why: a server did not come up, run() reads that); nothing at all
    when PID 1 never got that far (b"": no report)."""
    if not relayed:
        return b""
    return relayed[1:] if relayed[:1] == b"R" and len(relayed) <= limits.report_bytes + 1 else None


def _collect(
    proc: subprocess.Popen[bytes], report: io.RawIOBase, limits: Limits, start: float
) -> tuple[str, str, bytes, str | None]:
    """Read the output pipes up to the output limit and the report pipe up to its own, within
    the wall clock; kill on the wall clock or on too much output."""
    assert proc.stdout is not None and proc.stderr is not None
    buffers: dict[Any, bytearray] = {proc.stdout: bytearray(), proc.stderr: bytearray(), report: bytearray()}
    report_cap = limits.report_bytes + 1 + GUARD_LINE  # the report, PID 1's "R"/"O" and its guard line
    caps = {proc.stdout: limits.output_bytes, proc.stderr: limits.output_bytes, report: report_cap}
    sel = selectors.DefaultSelector()
    for pipe in buffers:
        os.set_blocking(pipe.fileno(), False)
        sel.register(pipe, selectors.EVENT_READ)
    killed = None
    while sel.get_map():
        remaining = limits.wall_s - (time.monotonic() - start)
        if remaining <= 0:
            killed = "timeout"
            break
        for key, _ in sel.select(timeout=min(remaining, 1.0)):
            chunk = key.fileobj.read(65536)  # type: ignore[union-attr]
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            buf = buffers[key.fileobj]
            buf += chunk
            if len(buf) > caps[key.fileobj]:
                if key.fileobj is report:  # PID 1 sends at most the cap: more is not its doing
                    del buf[caps[report] :]
                    continue
                killed = "output"
        if killed:
            break
    if killed:
        # The whole session: unshare, and (--kill-child) the namespace's PID 1 with everything in it.
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    out, err = (bytes(buffers[p][: limits.output_bytes]).decode("utf-8", "replace") for p in (proc.stdout, proc.stderr))
    return out, err, bytes(buffers[report]), killed
