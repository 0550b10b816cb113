"""Which lines of a snapshot a test run executed: coverage.py, from a trusted folder, read back as hostile text.

The rules injector draws its bugs from the lines the baseline's tests execute (data/bugs/), so
that a drawn bug is one a test can notice. A run asked for it (`TestJob.coverage`) measures
them with coverage.py inside the sandbox:

    the tool     installed by uv on the host, as root, from the package index by name (nothing
                 of the snapshot's), into `tools/coverage-<python>` beside the environments,
                 once per interpreter version, under a file lock into a temporary folder
                 renamed into place; the run mounts it read-only (never in the environment:
                 the environment's cache key and its tests' imports stay as they were)
    the run      bootstrap.py imports coverage from that folder (SWE_RL_COVERAGE) before any
                 repository code, measures the files under /testbed while pytest runs, and
                 writes one `{"covered": {path: [line, ...]}}` record to the report stream
                 before its end (report.py reads it)
    the host     the record is the tested code's to forge (it shares the process): it is read
                 as hostile text, bounded (COVERED_FILES files, COVERED_LINES lines in all),
                 each path a relative POSIX path inside the snapshot, each line a line number.
                 It only steers which mutations are drawn, each of which its own runs must
                 still prove, so a forged record costs the draw and decides nothing

A run that could not measure (the tool failed to install, an interpreter coverage.py does not
support) runs without it and reports no lines; the injector then draws from every line.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath

from conf.io import locked

log = logging.getLogger(__name__)

ENV_VAR = "SWE_RL_COVERAGE"  # the tool's folder, for bootstrap.py
COVERED_FILES, COVERED_LINES = 5000, 2_000_000  # bounds on the record the host reads
_UV = (sys.executable, "-m", "uv")


class Tools:
    """coverage.py for each interpreter version, installed once under `root` (a node's cache)."""

    def __init__(self, root: Path, timeout_s: float = 600.0) -> None:
        self.root, self.timeout_s = root, timeout_s

    def coverage(self, python: str, version: str) -> Path:
        """The folder holding coverage.py for the interpreter at `python` (version `version`:
        "3.9", or "host"); RuntimeError naming the failure when uv could not install it."""
        dest = self.root / f"coverage-{version}"
        if dest.is_dir():
            return dest
        with locked(dest):
            if dest.is_dir():  # installed by another runner meanwhile
                return dest
            dest.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=dest.parent) as tmp:
                target = Path(tmp) / "tool"
                cmd = [*_UV, "pip", "install", "--quiet", "--target", str(target), "--python", python, "coverage"]
                try:
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s)
                except subprocess.TimeoutExpired:
                    raise RuntimeError(f"coverage for {python}: no install within {self.timeout_s:.0f} s") from None
                if proc.returncode != 0:
                    tail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
                    raise RuntimeError(f"coverage for {python}: uv failed: {tail[:300]}")
                for path in [target, *target.rglob("*")]:  # the sandbox's user reads it
                    if not path.is_symlink():
                        path.chmod(0o755 if path.is_dir() else 0o644)
                shutil.move(str(target), dest)
        return dest


def read_covered(value: object) -> dict[str, frozenset[int]]:
    """The `covered` record's value (hostile: the tested code can write it) as snapshot path ->
    executed lines; ValueError on anything but a bounded map of safe relative paths to line
    numbers."""
    if not isinstance(value, dict) or len(value) > COVERED_FILES:
        raise ValueError(f"covered: not a map of at most {COVERED_FILES} files")
    out: dict[str, frozenset[int]] = {}
    total = 0
    for path, lines in value.items():
        if not isinstance(path, str) or not _safe(path):
            raise ValueError(f"covered: {str(path)[:100]!r} is not a relative path inside the snapshot")
        if not isinstance(lines, list) or not all(type(n) is int and n >= 0 for n in lines):
            raise ValueError(f"covered: {path[:100]}: not a list of line numbers")
        total += len(lines)
        if total > COVERED_LINES:
            raise ValueError(f"covered: over {COVERED_LINES} lines")
        out[path] = frozenset(n for n in lines if n > 0)  # line 0: coverage.py's mark of an empty module
    return out


def _safe(path: str) -> bool:
    p = PurePosixPath(path)
    return bool(path) and len(path) <= 1000 and not p.is_absolute() and ".." not in p.parts and "\0" not in path
