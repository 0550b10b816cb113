"""A sandbox session: one sandbox that lives for an agent's episode and runs many commands.

`sandbox.run` starts a sandbox per command (~110 ms: namespaces, a root of ~25 mounts, PID 1's
interpreter). An agent runs tens of commands per episode on one tree, so a Session starts the
sandbox once, with the same containment (sandbox.py's table holds for every command: nobody, no
network but its own loopback where asked, cgroup memory and pids caps, rlimits per command, the
snapshot under an overlay whose writes land in a tmpfs) and keeps it: the files persist across
the episode's commands; each command is a fresh `bash -c` with its own time limit and output
cap, and every process it left is killed when it ends (no shell state, no background job
outlives a command: mini-swe-agent's design). Closing the session (or losing its host process)
ends PID 1 and, with it, everything in the namespace.

Most of a cold start is not the sandbox's work but unshare's and PID 1's interpreter starting
(its imports alone ~40 ms here). So a process keeps two spare PID 1s (`SPARES`): started ahead,
in namespaces of their own, their modules loaded, each waiting on a pipe for a spec's path. A
session takes one, writes its spec and sends the path; PID 1 then joins the session's cgroups,
builds its root and answers, as a cold one does. Nothing of a session reaches a spare before
it is taken (no cgroup, mount, file or command), and one spare serves one session.

Protocol (PID 1's side: workspace_inside.py): one JSON request per line on a pipe only PID 1
reads; one length-prefixed JSON answer per request on a pipe only PID 1 writes. The commands
never hold either. What comes back is hostile text: bounded (`answer_bytes`), decoded here.

The episode's patch is `patch()`: the diff of the session's tree against the snapshot, built on
the host from the overlay's upper folder (files written, deleted, or in a folder made again;
every file of the lower layers under a folder deleted whole, `rm -rf DIR`, is deleted).
Left out, and listed in `Changes.left_out` with why: links, binary files (not UTF-8 or with a
NUL byte), files over `file_bytes`, paths a unified diff cannot name (a newline, a carriage
return, a byte that is not UTF-8: data.patching.name_problem), and the byproducts of running
code (IGNORED: bytecode, caches) that no `git diff` would show. A file written back with the
snapshot's content is no change. The harness's own files of the run (the environment's version
modules) are not the agent's: they are left out when unchanged.

Whose failure: everything in the session's tree is the policy's, so every budget its content
can pass (`SessionLimits`: a file too big to read, too many files changed, their paths too long
together, folders too deep, no room left for a write, a walk of the changes too slow) raises
SessionLimit, named by one of LIMITS: the episode ends as the policy's (actors/agent/episode.py),
scored, never as an infrastructure failure. SessionFailed is left for what the policy cannot
cause: a sandbox that does not start, a PID 1 that dies or stops answering, the host.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any, Literal, get_args

from data import paths
from data.patching import name_problem, unified_diff
from data.paths import UnsafePath, read_beneath, repo_path
from reward.execution import sandbox
from reward.execution.environments import Environment

# Byproducts of running the code, never part of a patch (what a repository's .gitignore lists).
IGNORED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".hypothesis", ".tox", ".eggs", ".ruff_cache"})
IGNORED_SUFFIXES = (".pyc", ".pyo", ".egg-info")


class SessionFailed(RuntimeError):
    """The session's sandbox did not start or stopped answering: an infrastructure failure,
    never the policy's."""


# The budgets of a session its tree's content can pass, as the episode's `ended_by` names them.
Limit = Literal["limit_answer", "limit_disk", "limit_files", "limit_names", "limit_depth", "limit_time"]
LIMITS: tuple[Limit, ...] = get_args(Limit)


class SessionLimit(Exception):
    """What the policy put in the session's tree passed one of its budgets (module docstring):
    the policy's failure, not the infrastructure's. `limit` is one of LIMITS."""

    def __init__(self, limit: Limit, why: str) -> None:
        super().__init__(why)
        self.limit: Limit = limit


@dataclass(frozen=True)
class CommandResult:
    exit_code: int  # the command's status; negative: killed by that signal (a timeout: -9)
    output: str  # stdout and stderr together, as they came, at most output_bytes of them
    timed_out: bool
    truncated: bool  # more output came than was kept
    seconds: float


@dataclass(frozen=True)
class Changes:
    files: dict[str, str | None]  # path -> new content (None: deleted), the agent's changes only
    left_out: dict[str, str] = field(default_factory=dict)  # path -> why it is not in the patch


@dataclass(frozen=True)
class SessionLimits:
    # Per command (cpu_s, file_mb, open_files) and for the whole session (memory_mb, pids);
    # wall_s is unused: each command has its own timeout_s.
    sandbox: sandbox.Limits = field(default_factory=sandbox.Limits)
    answer_bytes: int = 64 << 20  # largest answer read from PID 1
    read_bytes: int = 32 << 20  # largest file `read` returns (base64 in the answer: 4/3 of it)
    file_bytes: int = 1 << 20  # largest file a patch may hold
    total_bytes: int = 16 << 20  # all of a patch's files together
    # The walk of the changes: entries (files, folders, whiteouts), their paths' bytes together,
    # folder depth, seconds. With total_bytes, its answer stays under answer_bytes (a name's
    # JSON costs at most 6 bytes a byte: 6 x 4 MiB + 16 MiB x 4/3 + 100,000 entries' framing).
    tree_entries: int = 100_000
    tree_name_bytes: int = 4 << 20
    tree_depth: int = 128
    changes_s: float = 60.0
    start_s: float = 30.0  # PID 1 must be ready within this
    margin_s: float = 10.0  # past a command's own limit, PID 1 must have answered


def ignored(rel: str) -> bool:
    parts = PurePosixPath(rel).parts
    return any(p in IGNORED_DIRS or p.endswith(IGNORED_SUFFIXES) for p in parts)


class _Spare:
    """A session's PID 1 started ahead of it (inside.py `spare`): unshare has made its
    namespaces and the interpreter has loaded what a session runs, which is most of a cold
    start; it waits for its spec's path on `go`. It holds the session's two pipes already."""

    def __init__(self) -> None:
        request_read, self.requests = os.pipe()
        self.answers, answer_write = os.pipe()
        go_read, self.go = os.pipe()
        # The fds' numbers as PID 1 has them (pass_fds keeps them): the spec names them.
        self.fds = {"request_fd": request_read, "answer_fd": answer_write}
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - the session keeps it open
        try:
            self.proc = subprocess.Popen(
                sandbox.pid1_command("--spare", str(go_read), str(Path(paths.__file__).resolve())),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.stderr,
                start_new_session=True,
                env={},
                pass_fds=(request_read, answer_write, go_read),
            )
        except OSError:
            self.stderr.close()
            for fd in (self.requests, self.answers, self.go):
                os.close(fd)
            raise
        finally:
            for fd in (request_read, answer_write, go_read):
                os.close(fd)

    def discard(self) -> None:
        """Close its pipes (it exits on the closed `go`) and reap it."""
        for fd in (self.requests, self.answers, self.go):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2.0)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.stderr.close()


class _Spares:
    """Up to `keep` spare PID 1s of this process, refilled in the background as sessions take
    them: a session that finds one waits only for its root's mounts and PID 1's first answer
    (~22 ms against ~102 ms cold here: bench/workspace.py). The first session of a process starts
    cold and the pool fills after it; episodes started together beyond `keep` start cold too."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._ready: list[_Spare] = []
        self._filling = 0
        self._closed = False

    def take(self) -> _Spare | None:
        with self._lock:
            spare = None
            while self._ready and spare is None:
                candidate = self._ready.pop(0)
                if candidate.proc.poll() is None:
                    spare = candidate
                else:  # ended meanwhile (killed from outside): of no use
                    threading.Thread(target=candidate.discard, daemon=True).start()
            more = 0 if self._closed else self.keep - len(self._ready) - self._filling
            self._filling += max(more, 0)
        for _ in range(more):
            threading.Thread(target=self._fill, daemon=True).start()
        return spare

    def _fill(self) -> None:
        try:
            spare: _Spare | None = _Spare()
        except OSError:  # the next session starts cold, and says why if that fails too
            spare = None
        with self._lock:
            self._filling -= 1
            if spare is not None and self._closed:
                threading.Thread(target=spare.discard, daemon=True).start()
            elif spare is not None:
                self._ready.append(spare)

    def resize(self, keep: int) -> None:
        """Keep `keep` from now on (0: every session starts cold, as bench/workspace.py measures)."""
        with self._lock:
            self.keep, extra, self._ready = keep, self._ready[keep:], self._ready[:keep]
        for spare in extra:
            spare.discard()

    def close(self) -> None:
        with self._lock:
            self._closed, ready, self._ready = True, self._ready, []
        for spare in ready:
            spare.discard()


# Two spares: a step's episodes start their sessions together and the first two start warm; an
# idle spare is one waiting interpreter (a few MB) and its namespaces.
SPARES = _Spares(keep=2)
atexit.register(SPARES.close)


class Session:
    """A live sandbox over `snapshot` with `env` (Environments.ensure); a context manager."""

    def __init__(
        self,
        snapshot: Path,
        env: Environment,
        *,
        limits: SessionLimits = SessionLimits(),
        loopback: bool = False,
        servers: Sequence[sandbox.Server] = (),
    ) -> None:
        self.snapshot, self.env, self.limits = snapshot, env, limits
        start = time.monotonic()
        # The environment's interpreter and its scripts (python, pytest) first on the PATH.
        variables = {**env.variables, "PATH": f"{Path(env.python).parent}:{env.variables.get('PATH', '/usr/bin:/bin')}"}
        self._scratch, self._cgroups, spec, cmd = sandbox.prepare(
            ["session"],
            snapshot,
            env.generated,
            env.ro_paths,
            variables,
            limits.sandbox,
            "/testbed",
            loopback,
            (),
            servers,
            env.layers,
        )
        spec["report_fd"] = -1
        self.uncapped = self._cgroups.uncapped is not None  # the best_effort policy ran it without caps
        self._stopped = False
        spare = SPARES.take()
        if spare is not None:
            self._adopt(spare, spec)
        else:
            self._start_cold(cmd, spec)
        self._read_answer(limits.start_s, "start")
        self.start_s = time.monotonic() - start

    def _adopt(self, spare: _Spare, spec: dict[str, Any]) -> None:
        """Hand a spare PID 1 this session's spec (it goes on as a cold one would)."""
        spec["session"] = spare.fds
        (self._scratch / "spec.json").write_text(json.dumps(spec))
        self._proc, self._requests, self._answers, self._stderr = (
            spare.proc,
            spare.requests,
            spare.answers,
            spare.stderr,
        )
        try:
            os.write(spare.go, f"{self._scratch / 'spec.json'}\n".encode())
        except OSError as exc:  # it ended since it was taken: the start fails as a cold one would
            self._fail(f"the session's sandbox did not start: {exc}")
        finally:
            os.close(spare.go)

    def _start_cold(self, cmd: list[str], spec: dict[str, Any]) -> None:
        request_read, self._requests = os.pipe()
        self._answers, answer_write = os.pipe()
        spec["session"] = {"request_fd": request_read, "answer_fd": answer_write}
        (self._scratch / "spec.json").write_text(json.dumps(spec))
        # PID 1's own messages (why it could not build the root), read when it fails.
        self._stderr = (self._scratch / "stderr").open("w+b")
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                start_new_session=True,
                cwd=self._scratch,
                env={},
                pass_fds=(request_read, answer_write),
            )
        except OSError as exc:
            self._stderr.close()
            for fd in (self._requests, self._answers):
                os.close(fd)
            self._stopped = True
            self._cleanup()
            raise SessionFailed(f"the session's sandbox did not start: {exc}") from None
        finally:
            os.close(request_read)
            os.close(answer_write)

    # -- requests -----------------------------------------------------------------------------
    def run(self, command: str, timeout_s: float, output_bytes: int) -> CommandResult:
        """Run `command` with bash in the tree's root; it and all it started end within timeout_s."""
        answer = self._ask({"op": "run", "command": command, "timeout_s": timeout_s, "output_bytes": output_bytes})
        return CommandResult(
            int(answer["exit_code"]),
            str(answer["output"]),
            bool(answer["timed_out"]),
            bool(answer["truncated"]),
            float(answer.get("seconds", 0.0)),
        )

    def read(self, path: str) -> str | None:
        """The file at `path` in the session's tree now (None: absent or not a file; UnsafePath:
        a link of the tree on the way; SessionLimit: over read_bytes)."""
        data = self._ask({"op": "read", "path": repo_path(path), "max_bytes": self.limits.read_bytes})["data"]
        return None if data is None else base64.b64decode(data).decode("utf-8", "surrogateescape")

    def write(self, changes: Mapping[str, str | None]) -> None:
        """Write (None: delete) files of the session's tree, as the sandbox's user (UnsafePath:
        a link of the tree on the way; SessionLimit: no room left in the tree)."""
        encoded = {
            repo_path(rel): None if text is None else base64.b64encode(text.encode("utf-8", "surrogateescape")).decode()
            for rel, text in changes.items()
        }
        self._ask({"op": "write", "changes": encoded})

    def changes(self) -> Changes:
        """The agent's changes to the snapshot's files (module docstring: what is left out)."""
        limits = self.limits
        raw = self._ask(
            {
                "op": "changes",
                "file_bytes": limits.file_bytes,
                "total_bytes": limits.total_bytes,
                "max_entries": limits.tree_entries,
                "max_name_bytes": limits.tree_name_bytes,
                "max_depth": limits.tree_depth,
                "deadline_s": limits.changes_s,
                "skip_dirs": sorted(IGNORED_DIRS),
                "skip_suffixes": list(IGNORED_SUFFIXES),
            }
        )
        files: dict[str, str | None] = {}
        left_out = {rel: str(why) for rel, why in raw["other"].items() if not ignored(rel)}
        for rel, encoded in raw["files"].items():
            if ignored(rel):
                continue
            if (problem := name_problem(rel)) is not None:
                left_out[rel] = problem
                continue
            data = base64.b64decode(encoded)
            if data == self._original(rel):
                continue  # written back as it was, or only copied up (a mode change)
            if b"\0" in data:
                left_out[rel] = "a binary file"
                continue
            try:
                files[rel] = data.decode("utf-8")
            except UnicodeDecodeError:
                left_out[rel] = "not UTF-8 text"
        # A whiteout over a folder (rm -rf DIR) or an opaque folder (deleted and made again)
        # hides every file of the lower layers under it that upper does not hold itself.
        present = set(raw["files"]) | set(raw["other"])
        gone = list(raw["deleted"])
        for folder in (*raw["deleted"], *raw["opaque"]):
            gone += [rel for rel in self._lower_files(folder) if rel not in present]
        for rel in gone:
            if ignored(rel) or self._original(rel) is None:  # a file made and removed, a folder
                continue
            if (problem := name_problem(rel)) is not None:
                left_out[rel] = problem
            else:
                files[rel] = None
        for rel, text in self.env.generated.items():  # the harness's own files of the run
            if files.get(rel) == text:
                del files[rel]
        return Changes(files, left_out)

    def patch(self) -> tuple[str, Changes]:
        """The episode's patch: a git-style diff of the tree against the snapshot."""
        changes = self.changes()
        parts = []
        for rel, new in sorted(changes.files.items()):
            old = self._original(rel)
            parts.append(unified_diff(rel, None if old is None else old.decode("utf-8", "replace"), new))
        return "".join(parts), changes

    def close(self) -> None:
        """End the session: PID 1 exits, the kernel ends everything else in the namespace."""
        if not self._stopped and self._proc.poll() is None:
            with contextlib.suppress(OSError, SessionFailed, subprocess.TimeoutExpired):
                self._send({"op": "close"})
                self._read_answer(5.0, "close")
                # PID 1 exits right after answering, and the kernel ends the namespace with it:
                # waiting for that leaves the cgroups empty (their removal then never waits).
                self._proc.wait(timeout=5.0)
        self._stop()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # -- plumbing -----------------------------------------------------------------------------
    def _lower_files(self, folder: str) -> list[str]:
        """Every path under `folder` in the lower layers (the build's products, the snapshot),
        none through a link: the files a whiteout or an opaque folder there hides. These trees
        are the harness's (the commit's and its build's), not the agent's."""
        found: set[str] = set()
        for layer in (*self.env.layers, str(self.snapshot)):
            real = os.path.realpath(layer)
            base = os.path.join(real, folder)
            if os.path.realpath(base) != base or not os.path.isdir(base):  # a link on the way, or no folder
                continue
            for top, _, names in os.walk(base):  # never into a link to a folder
                found.update(os.path.relpath(os.path.join(top, name), real) for name in names)
        return sorted(found)

    def _original(self, rel: str) -> bytes | None:
        """The file as the run started: the products layer over the snapshot."""
        for layer in (*self.env.layers, str(self.snapshot)):
            with contextlib.suppress(ValueError):  # a link in the snapshot: not a file of it
                data = read_beneath(layer, rel)
                if data is not None:
                    return data
        return None

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._stopped:
            raise SessionFailed(f"session {request['op']}: the session is closed")
        self._send(request)
        wait = float(request.get("timeout_s", request.get("deadline_s", 0.0))) + self.limits.margin_s
        answer = self._read_answer(wait, request["op"])
        if "error" in answer:
            why = f"session {request['op']}: {answer['error']}"
            if answer.get("limit") in LIMITS:
                raise SessionLimit(answer["limit"], why)
            if answer.get("refused"):
                raise UnsafePath(why)
            raise SessionFailed(why)
        return answer

    def _send(self, request: dict[str, Any]) -> None:
        data = (json.dumps(request) + "\n").encode()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._requests, view) :]
        except BrokenPipeError:
            self._fail("the session's sandbox is gone")

    def _read_answer(self, wait_s: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + wait_s
        header = self._read_exactly(8, deadline, what)
        (size,) = struct.unpack(">Q", header)
        if size > self.limits.answer_bytes:  # what the tree held, which PID 1 bounds: a limit missed
            self._stop()
            raise SessionLimit("limit_answer", f"{what}: an answer of {size} bytes, over {self.limits.answer_bytes}")
        answer: dict[str, Any] = json.loads(self._read_exactly(size, deadline, what))
        return answer

    def _read_exactly(self, size: int, deadline: float, what: str) -> bytes:
        data = bytearray()
        while len(data) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._answers], [], [], remaining)[0]:
                self._fail(f"{what}: no answer from the session's sandbox in time")
            chunk = os.read(self._answers, min(1 << 20, size - len(data)))
            if not chunk:
                self._fail(f"{what}: the session's sandbox ended")
            data += chunk
        return bytes(data)

    def _fail(self, why: str) -> None:
        err = b""
        if not self._stopped:
            self._stderr.seek(0)
            err = self._stderr.read(4000)
        self._stop()
        raise SessionFailed(why + (f": {err.decode('utf-8', 'replace').strip()}" if err else ""))

    def _stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        self._stderr.close()
        for fd in (self._requests, self._answers):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._cleanup()

    def _cleanup(self) -> None:
        self._cgroups.end()
        shutil.rmtree(self._scratch, ignore_errors=True)
