"""Repository paths from untrusted text: the one rule, and file access that never leaves a root.

A path in a patch (`+++ b/...`, `rename from ...`, `copy from ...`) or in an answer
(`### path`) was written by a model, or mined from the internet: it is hostile. `repo_path`
decides whether it names a file of the repository: relative, with no empty, `.` or `..`
component, no backslash and no NUL. Anything else is malformed (reward -1 for an answer,
`patch_failed` for a prediction) and never reaches the file system.

A syntactically clean path can still leave the tree through a symbolic link the repository
itself contains (`docs -> /etc`). `read_beneath`, `write_beneath` and `delete_beneath` walk
the path one component at a time from a directory descriptor with `O_NOFOLLOW`, so no link on
the way is followed (as `git apply` refuses to patch "beyond a symbolic link"); a link met on
the way raises UnsafePath. Every read, write, rename, copy and delete of a patch goes through
them: on the host (reward/execution/runner.py, snapshots.py) and again as root inside the
sandbox before its code runs (reward/execution/inside.py loads this file by path: standard
library only).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(ValueError):
    """A path that is not a plain file path inside the repository; the message says why."""


def path_problem(path: str) -> str | None:
    """Why `path` is not a repository-relative file path, or None when it is one."""
    if not path:
        return "empty path"
    if "\0" in path:
        return "NUL in path"
    if "\\" in path:
        return "backslash in path"
    if path.startswith("/"):
        return "absolute path"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return f"path component {part!r}"
    return None


def repo_path(path: str) -> str:
    """`path` itself when it is a repository-relative file path, else UnsafePath."""
    problem = path_problem(path)
    if problem is not None:
        shown = path if len(path) <= 120 else path[:120] + "..."
        raise UnsafePath(f"unsafe path {shown!r}: {problem}")
    return path


def _parent_fd(root: str | Path, rel: str, create: bool, uid: int | None) -> tuple[int, str]:
    """A descriptor of the directory holding `rel` (below `root`, no link followed) and the
    last component. With `create`, missing directories are made (owned by `uid` when given)."""
    parts = repo_path(rel).split("/")
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                if uid is not None:
                    os.chown(part, uid, uid, dir_fd=fd, follow_symlinks=False)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePath(f"unsafe path {rel!r}: {part!r} is not a directory of the tree") from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def read_beneath(root: str | Path, rel: str, max_bytes: int | None = None) -> bytes | None:
    """The content of the regular file `rel` below `root`; None when there is none (absent, or
    a directory). A symbolic link anywhere on the way raises UnsafePath; a file over `max_bytes`
    raises OSError(EFBIG) before a byte of it is read (a sparse file's size costs no disk)."""
    try:
        fd, name = _parent_fd(root, rel, create=False, uid=None)
    except FileNotFoundError:
        return None
    try:
        try:
            file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePath(f"unsafe path {rel!r}: a symbolic link") from None
            raise
        st = os.fstat(file)
        if not stat.S_ISREG(st.st_mode):  # a directory, a fifo, a device
            os.close(file)
            return None
        with os.fdopen(file, "rb") as handle:
            if max_bytes is not None and st.st_size > max_bytes:
                raise OSError(errno.EFBIG, f"{rel!r}: {st.st_size} bytes, over the {max_bytes} read")
            return handle.read()
    finally:
        os.close(fd)


def write_beneath(root: str | Path, rel: str, data: bytes, uid: int | None = None) -> None:
    """Write `data` as the regular file `rel` below `root`, replacing what was there (a link
    is replaced, never followed); missing directories are made, owned by `uid` when given."""
    fd, name = _parent_fd(root, rel, create=True, uid=uid)
    try:
        _unlink_at(fd, name)
        file = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
        with os.fdopen(file, "wb") as handle:
            handle.write(data)
            if uid is not None:
                os.fchown(handle.fileno(), uid, uid)
    finally:
        os.close(fd)


def delete_beneath(root: str | Path, rel: str) -> None:
    """Remove the file (or link) `rel` below `root` if it is there; a directory stays."""
    try:
        fd, name = _parent_fd(root, rel, create=False, uid=None)
    except FileNotFoundError:
        return
    try:
        _unlink_at(fd, name)
    finally:
        os.close(fd)


def _unlink_at(fd: int, name: str) -> None:
    """Unlink `name` in the directory `fd` when it is a file or a link (not a directory)."""
    try:
        mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        os.unlink(name, dir_fd=fd)
