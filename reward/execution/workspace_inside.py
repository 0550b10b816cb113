"""PID 1's half of a sandbox session (workspace.py is the host's): requests in, answers out.

Loaded by inside.py by its path once the root is built and chrooted into (standard library
only; nothing here runs code of the repository as root). The host sends one JSON request per
line on the request pipe and reads one answer per request from the answer pipe, each an 8-byte
big-endian length and then JSON; both pipes are held by PID 1 alone (the commands it starts
never inherit them), so a command can neither send a request nor forge an answer.

    run      `bash -c COMMAND` (sh where there is no bash) in the work folder as nobody, with
             the rlimits, stdin /dev/null, stdout and stderr into one pipe of which at most
             `output_bytes` are kept (the rest drained, `truncated`), ended at `timeout_s`;
             every child that exits meanwhile is reaped as it exits (an orphan is PID 1's: left
             a zombie, it would hold a place under the pids cap); then every other process of
             the namespace is killed (a background or daemonised child too: no state but the
             files outlives a command) and reaped
    read     the merged tree's file `path` (no link followed), base64, at most `max_bytes`;
             null when absent
    write    files written or deleted as nobody's, each path checked (inside.py's changes)
    changes  what differs from the lower layers, read from the overlay's upper folder through a
             descriptor opened before the chroot (the commands cannot name it): regular files
             (base64, at most `file_bytes` each and `total_bytes` in all, the rest listed as
             over), deletions (whiteouts), links and other kinds listed apart, and opaque
             folders (a folder deleted and made again: the host reads the snapshot's files
             under it as deleted unless upper has them). The walk is a loop, not a recursion,
             and budgeted: `max_entries` entries, `max_name_bytes` of their paths together,
             `max_depth` folders deep, `deadline_s` seconds; the byproducts the host ignores
             (`skip_dirs`, `skip_suffixes`) are counted but neither entered nor read
    close    or EOF: PID 1 exits, and the kernel ends whatever is left with the namespace

Every request gets an answer, whatever it holds: PID 1 never dies of one. A budget that the
tree's own content passed (the policy's doing: a file too big to read, too many files, names
too long, folders too deep, a disk full) is answered `{"error": why, "limit": name}`; a path
refused on the way (a link of the tree) `{"error": why, "refused": true}`; anything else
`{"error": why}`, which the host counts as the session's failure.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import select
import signal
import stat
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

_SHELLS = ("/bin/bash", "/usr/bin/bash", "/bin/sh")
# An overlay mounted by root marks a folder made again with a trusted.* xattr; one mounted in a
# user namespace (rootless, identity.py) uses the user.* namespace instead (overlayfs's userxattr).
_OPAQUE = ("trusted.overlay.opaque", "user.overlay.opaque")
# inside.as_nobody: starts a process as the sandbox's user with the run's rlimits.
Spawn = Callable[..., subprocess.Popen]
_SWEEP_ROUNDS = 200  # kill-and-reap rounds after a command (a forking loop is capped by the pids cgroup)
# A write refused for room (the overlay's tmpfs full, a file over the size limit): the policy filled it.
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class Limit(Exception):
    """A budget of the session that the tree's content passed: `name` is the host's
    (workspace.LIMITS), the message says which and by how much."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(why)
        self.name = name


class _Output(threading.Thread):
    """Reads a command's output pipe to EOF, keeping at most `cap` bytes."""

    def __init__(self, fd: int, cap: int) -> None:
        super().__init__(daemon=True)
        self.fd, self.cap, self.data, self.total = fd, cap, bytearray(), 0

    def run(self) -> None:
        while chunk := os.read(self.fd, 1 << 16):
            self.total += len(chunk)
            if len(self.data) < self.cap:
                self.data += chunk[: self.cap - len(self.data)]
        os.close(self.fd)


def _sweep(keep: set[int]) -> None:
    """Kill every process of this PID namespace but PID 1 and `keep` (the servers), and reap
    them: PID 1 is the namespace's init, every orphan becomes its child."""
    for _ in range(_SWEEP_ROUNDS):
        others = [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != 1]
        others = [pid for pid in others if pid not in keep]
        for pid in others:
            with contextlib.suppress(ProcessLookupError):  # gone meanwhile
                os.kill(pid, signal.SIGKILL)
        while True:  # reap what died (never a server: those stay alive)
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not others:
            return
        time.sleep(0.001)


def _wait(child: subprocess.Popen, timeout_s: float, wake: int) -> int | None:
    """Reap every child of PID 1 as it exits (the command, and the orphans the kernel hands to
    a namespace's init) until the command has; its status, or None at `timeout_s`. SIGCHLD
    writes to `wake` (serve's wakeup descriptor), so the wait sleeps until something exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if pid == child.pid:
                child.returncode = os.waitstatus_to_exitcode(status)
                return child.returncode
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        select.select([wake], [], [], remaining)
        with contextlib.suppress(BlockingIOError):
            while os.read(wake, 4096):
                pass


def _run(request: dict, spec: dict, spawn: Spawn, keep: set[int], wake: int) -> dict:
    shell = next((s for s in _SHELLS if os.path.exists(s)), "/bin/sh")
    read_fd, write_fd = os.pipe()
    start = time.monotonic()
    try:
        child = spawn(
            [shell, "-c", request["command"]],
            spec,
            env=spec["env"],
            cwd=spec["workdir"],
            stdin=subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
        )
    except OSError as exc:
        os.close(read_fd)
        return {"exit_code": 127, "output": f"cannot run {shell}: {exc}", "timed_out": False, "truncated": False}
    finally:
        os.close(write_fd)
    reader = _Output(read_fd, int(request["output_bytes"]))
    reader.start()
    status = _wait(child, float(request["timeout_s"]), wake)
    timed_out, code = status is None, -signal.SIGKILL if status is None else status
    _sweep(keep)  # the command, its background children, anything daemonised (it reaps them)
    child.returncode = code  # reaped here, not by Popen
    reader.join(timeout=5.0)
    return {
        "exit_code": code,
        "output": bytes(reader.data).decode("utf-8", "replace"),
        "timed_out": timed_out,
        "truncated": reader.total > len(reader.data),
        "seconds": round(time.monotonic() - start, 4),
    }


def _xattr(fd: int, name: str) -> bytes | None:
    try:
        return os.getxattr(fd, name)
    except OSError:
        return None


def _read_upper(upper: int, request: dict) -> dict:
    """The overlay's upper folder, walked through its descriptor without following links: a
    loop over a stack of open folders (one descriptor per level, so at most `max_depth`),
    every entry counted against the request's budgets before it is looked at."""
    out: dict[str, Any] = {"files": {}, "deleted": [], "opaque": [], "other": {}}
    walk = _Walk(request)
    root = os.dup(upper)
    stack: list[tuple[int, str, Iterator[str]]] = [(root, "", iter(()))]
    try:
        stack[0] = (root, "", iter(walk.folder(root, "", out)))
        while stack:
            fd, prefix, pending = stack[-1]
            name = next(pending, None)
            if name is None:
                os.close(fd)
                stack.pop()
                continue
            if len(stack) > walk.max_depth:
                raise Limit("limit_depth", f"folders nested over {walk.max_depth} deep in the tree")
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                folders = walk.folder(child, prefix + name + "/", out)
            except BaseException:
                os.close(child)
                raise
            stack.append((child, prefix + name + "/", iter(folders)))
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return out


class _Walk:
    """The budgets of one walk of the upper folder (module docstring) and what it spent."""

    def __init__(self, request: dict) -> None:
        self.file_bytes, self.bytes_left = int(request["file_bytes"]), int(request["total_bytes"])
        self.max_entries, self.max_name_bytes = int(request["max_entries"]), int(request["max_name_bytes"])
        self.max_depth = int(request["max_depth"])
        self.deadline = time.monotonic() + float(request["deadline_s"])
        self.skip_dirs, self.skip_suffixes = frozenset(request["skip_dirs"]), tuple(request["skip_suffixes"])
        self.entries = self.name_bytes = 0

    def _count(self, rel: str) -> None:
        self.entries += 1
        self.name_bytes += len(os.fsencode(rel))
        if self.entries > self.max_entries:
            raise Limit("limit_files", f"over {self.max_entries} files and folders changed in the tree")
        if self.name_bytes > self.max_name_bytes:
            raise Limit("limit_names", f"the changed files' paths pass {self.max_name_bytes} bytes together")
        if time.monotonic() > self.deadline:
            raise Limit("limit_time", "reading the tree's changes took too long")

    def folder(self, fd: int, prefix: str, out: dict[str, Any]) -> list[str]:
        """Record the folder `fd`'s entries (opaque mark, files, whiteouts, links) in `out`;
        the names of its subfolders to walk, sorted."""
        if prefix and any(_xattr(fd, name) == b"y" for name in _OPAQUE):
            out["opaque"].append(prefix[:-1])
        names = []
        with os.scandir(fd) as entries:
            for entry in entries:  # counted as listed: a folder of a million entries stops early
                self._count(prefix + entry.name)
                names.append(entry.name)
        folders = []
        for name in sorted(names):
            rel = prefix + name
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if name not in self.skip_dirs and not name.endswith(self.skip_suffixes):
                    folders.append(name)
            elif name.endswith(self.skip_suffixes):
                continue
            elif stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout: deleted
                out["deleted"].append(rel)
            elif stat.S_ISLNK(st.st_mode):
                out["other"][rel] = "a symbolic link"
            elif not stat.S_ISREG(st.st_mode):
                out["other"][rel] = "not a regular file"
            elif st.st_size > self.file_bytes or st.st_size > self.bytes_left:
                out["other"][rel] = f"{st.st_size} bytes: over the size kept"
            else:
                file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                with os.fdopen(file, "rb") as handle:
                    data = handle.read(st.st_size + 1)
                self.bytes_left -= len(data)
                out["files"][rel] = base64.b64encode(data).decode()
        return folders


def _answer(fd: int, answer: dict) -> None:
    data = json.dumps(answer).encode()
    view = memoryview(struct.pack(">Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _handle(request: dict, spec: dict, paths: ModuleType, spawn: Spawn, keep: set[int], upper: int, wake: int) -> dict:
    """One request's answer (a Limit, UnsafePath or OSError raised here: serve answers it)."""
    work = Path(spec["workdir"])
    op = request["op"]
    if op == "run":
        return _run(request, spec, spawn, keep, wake)
    if op == "read":
        try:
            data = paths.read_beneath(work, paths.repo_path(request["path"]), max_bytes=int(request["max_bytes"]))
        except OSError as exc:
            if exc.errno == errno.EFBIG:  # its answer would pass the host's cap
                raise Limit("limit_answer", f"a file too big to read: {exc.strerror}") from None
            raise
        return {"data": None if data is None else base64.b64encode(data).decode()}
    if op == "write":
        try:
            for rel, content in sorted(request["changes"].items()):
                rel = paths.repo_path(rel)
                if content is None:
                    paths.delete_beneath(work, rel)
                else:
                    paths.write_beneath(work, rel, base64.b64decode(content), spec["uid"])
        except OSError as exc:
            if exc.errno in _NO_ROOM:
                raise Limit("limit_disk", f"the tree has no room for the write: {exc}") from None
            raise
        return {"written": len(request["changes"])}
    if op == "changes":
        return _read_upper(upper, request)
    return {"error": f"unknown request {op!r}"}


def serve(spec: dict, paths: ModuleType, spawn: Spawn, keep: set[int], upper: int) -> int:
    """Answer the host's requests until it says close or its pipe ends; the exit status."""
    session = spec["session"]
    requests = os.fdopen(session["request_fd"], "rb")
    answers = session["answer_fd"]
    # SIGCHLD wakes _wait: the handler does nothing, the wakeup descriptor gets a byte.
    wake, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    _answer(answers, {"ready": True})
    for line in requests:
        try:
            request: dict[str, Any] = json.loads(line)
            if request.get("op") == "close":
                _answer(answers, {"closed": True})
                return 0
            answer = _handle(request, spec, paths, spawn, keep, upper, wake)
        except Limit as exc:
            answer = {"error": str(exc), "limit": exc.name}
        except ValueError as exc:  # UnsafePath: a link of the tree on the way (a bad request too)
            answer = {"error": f"{type(exc).__name__}: {exc}", "refused": isinstance(exc, paths.UnsafePath)}
        except Exception as exc:  # PID 1 outlives every request (a RecursionError, a MemoryError)
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        _answer(answers, answer)
    return 0
