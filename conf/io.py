"""The one way the project writes an output file: completely, or not at all.

`atomic_write(path)` yields a file object on a temporary file in the same directory and, when
the block ends without an error, flushes it, fsyncs it and renames it over `path` (atomic on
POSIX file systems), then fsyncs the directory so that the rename itself survives a crash. A
run killed at any moment leaves the previous file or the new one, never a partial file that
looks whole; on an error the temporary file is removed. Every command's outputs (scores,
manifests, reports, summaries, checkpoint metadata) go through it; append-only logs
(metrics.jsonl) are appended line by line instead.

`check_output(path, inputs)` refuses, before anything is opened, an output that is one of the
inputs (the same file, also through links or another spelling) or that cannot be written
(a directory, a missing parent): `reward.score --input F --output F` used to empty F.

`locked(path)` holds an exclusive lock on `path.lock` for the block: the way concurrent
processes (runners, learner ranks, several starts) build one cached artefact once (a model, a
test environment, a snapshot) without each building it; the caller checks again inside.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from conf.errors import UserError


class OutputError(UserError):
    """An output path that must not or cannot be written; the message names it."""


def fsync_dir(path: str | Path) -> None:
    """Make a rename or a new entry in `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """Write `path` through a temporary sibling renamed into place on success (see the module)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


def write_text(path: str | Path, text: str) -> None:
    with atomic_write(path, encoding="utf-8") as f:
        f.write(text)


def check_output(path: str | Path, inputs: Iterable[str | Path] = (), what: str = "output") -> Path:
    """The output path, resolved; OutputError when it is an input or cannot be written."""
    out = Path(path)
    for given in inputs:
        src = Path(given)
        if src.exists() and out.exists() and os.path.samefile(src, out):
            raise OutputError(f"{what} {path}: is the input {given}; writing it would destroy the input")
    if out.is_dir():
        raise OutputError(f"{what} {path}: is a directory")
    parent = out.resolve().parent
    if not parent.is_dir():
        raise OutputError(f"{what} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise OutputError(f"{what} {path}: directory {parent} is not writable")
    return out


@contextmanager
def locked(path: str | Path) -> Iterator[None]:
    """Hold an exclusive flock on `<path>.lock` (its directory made first) for the block."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A sibling lock file, not `path` itself: the path is what the holder builds and renames
    # into place, and a lock on a file that gets replaced locks nothing.
    with open(f"{target}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
