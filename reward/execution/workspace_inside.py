"""PID 1's half of a sandbox session (workspace.py is the host's): requests in, answers out.

Loaded by inside.py by its path once the root is built and chrooted into (standard library
only; nothing here runs code of the repository as root). The host sends one JSON request per
line on the request pipe and reads one answer per request from the answer pipe, each an 8-byte
big-endian length and then JSON; both pipes are held by PID 1 alone (the commands it starts
never inherit them), so a command can neither send a request nor forge an answer.

    run      `bash -c COMMAND` (sh where there is no bash) in the work folder as nobody, with
             the rlimits, stdin /dev/null, stdout and stderr into one pipe of which at most
             `output_bytes` are kept (the rest drained, `truncated`), ended at `timeout_s`;
             then every other process of the namespace is killed (a background or daemonised
             child too: no state but the files outlives a command) and reaped
    read     the merged tree's file `path` (no link followed), base64; null when absent
    write    files written or deleted as nobody's, each path checked (inside.py's changes)
    changes  what differs from the lower layers, read from the overlay's upper folder through a
             descriptor opened before the chroot (the commands cannot name it): regular files
             (base64, at most `file_bytes` each and `total_bytes` in all, the rest listed as
             over), deletions (whiteouts), links and other kinds listed apart, and opaque
             folders (a folder deleted and made again: the host reads the snapshot's files
             under it as deleted unless upper has them)
    close    or EOF: PID 1 exits, and the kernel ends whatever is left with the namespace
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import stat
import struct
import subprocess
import threading
import time
from collections.abc import Callable
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


def _run(request: dict, spec: dict, spawn: Spawn, keep: set[int]) -> dict:
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
    timed_out = False
    try:
        code = child.wait(timeout=float(request["timeout_s"]))
    except subprocess.TimeoutExpired:
        timed_out, code = True, -signal.SIGKILL
    _sweep(keep)  # the command, its background children, anything daemonised
    child.wait()
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
    """The overlay's upper folder, walked through its descriptor without following links."""
    files: dict[str, str] = {}
    deleted: list[str] = []
    opaque: list[str] = []
    other: dict[str, str] = {}
    budget = int(request["total_bytes"])
    for top, dirs, names, fd in os.fwalk(".", dir_fd=upper):
        rel_top = os.path.normpath(top)
        prefix = "" if rel_top == "." else rel_top + "/"
        dirs.sort()
        if prefix and any(_xattr(fd, name) == b"y" for name in _OPAQUE):
            opaque.append(rel_top)
        for name in sorted(names):
            rel = prefix + name
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout: deleted
                deleted.append(rel)
            elif stat.S_ISLNK(st.st_mode):
                other[rel] = "a symbolic link"
            elif not stat.S_ISREG(st.st_mode):
                other[rel] = "not a regular file"
            elif st.st_size > int(request["file_bytes"]) or st.st_size > budget:
                other[rel] = f"{st.st_size} bytes: over the size kept"
            else:
                file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
                with os.fdopen(file, "rb") as handle:
                    data = handle.read(st.st_size + 1)
                budget -= len(data)
                files[rel] = base64.b64encode(data).decode()
        for name in list(dirs):  # fwalk lists a link to a folder among the folders, never enters it
            if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                dirs.remove(name)
                other[prefix + name] = "a symbolic link"
    return {"files": files, "deleted": deleted, "opaque": opaque, "other": other}


def _answer(fd: int, answer: dict) -> None:
    data = json.dumps(answer).encode()
    view = memoryview(struct.pack(">Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def serve(spec: dict, paths: ModuleType, spawn: Spawn, keep: set[int], upper: int) -> int:
    """Answer the host's requests until it says close or its pipe ends; the exit status."""
    session = spec["session"]
    work = Path(spec["workdir"])
    requests = os.fdopen(session["request_fd"], "rb")
    answers = session["answer_fd"]
    _answer(answers, {"ready": True})
    for line in requests:
        request: dict[str, Any] = json.loads(line)
        op = request["op"]
        try:
            if op == "run":
                answer = _run(request, spec, spawn, keep)
            elif op == "read":
                data = paths.read_beneath(work, paths.repo_path(request["path"]))
                answer = {"data": None if data is None else base64.b64encode(data).decode()}
            elif op == "write":
                for rel, content in sorted(request["changes"].items()):
                    rel = paths.repo_path(rel)
                    if content is None:
                        paths.delete_beneath(work, rel)
                    else:
                        paths.write_beneath(work, rel, base64.b64decode(content), spec["uid"])
                answer = {"written": len(request["changes"])}
            elif op == "changes":
                answer = _read_upper(upper, request)
            elif op == "close":
                _answer(answers, {"closed": True})
                return 0
            else:
                answer = {"error": f"unknown request {op!r}"}
        except (OSError, ValueError) as exc:  # UnsafePath is a ValueError
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        _answer(answers, answer)
    return 0
