"""Nothing left behind: a run's temporary root, and a watcher that ends its local Ray cluster.

`scoped_tmp()` gives a local run one temporary root, `<tmp>/swe_rl-<driver pid>`, as TMPDIR for
the driver and every process Ray starts for it (multiprocessing's `pymp-*` directories, vLLM's
`vllm_dist_*` rendezvous files and any library's temporary files land there; Ray keeps its own
session files in `<tmp>/ray`). It is removed when the driver exits, and by the next run if the
driver was killed (a root whose process is gone).

`watch()` starts this module as a separate process (its own session, so it outlives a
SIGKILLed driver): every second it records the processes under the driver (Ray's head
processes, the raylet's dashboard and runtime-env agents, every worker), and once the driver
is gone it ends those still running, by PID, then removes the temporary root. The record must
be taken while the driver lives: when it dies the raylet goes with it and its agents are
re-parented, out of reach of a process-tree walk; they then lingered for about a minute
holding four listening ports. On a normal exit `ray.shutdown()` has already ended them and
the watcher finds nothing to do. Processes are identified by PID and start time, so a PID
reused meanwhile is never touched.

    python -m actors.cluster.reaper DRIVER_PID TMP_ROOT
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

_PREFIX = "swe_rl-"
POLL_S = 1.0
GRACE_S = 5.0


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat); None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(roots: Iterable[int]) -> list[int]:
    """`roots` and every process under them (from /proc; a process gone meanwhile is skipped)."""
    tree, out, stack = _children(), [], list(roots)
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(tree.get(pid, []))
    return out


def _alive(pid: int) -> bool:
    return _start_time(pid) is not None


def scoped_tmp() -> Path:
    """Make this process's temporary root and point TMPDIR at it (see the module docstring).
    Call it before anything caches the temporary directory (loading a tokenizer makes torch
    pin TORCHINDUCTOR_CACHE_DIR under it, for every process started later); idempotent."""
    name = f"{_PREFIX}{os.getpid()}"
    if Path(tempfile.gettempdir()).name == name:
        return Path(tempfile.gettempdir())
    base = Path(tempfile.gettempdir())
    for stale in base.glob(f"{_PREFIX}*"):  # left by a driver that was killed
        pid = stale.name.removeprefix(_PREFIX)
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    root = base / name
    root.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("RAY_TMPDIR", str(base))  # Ray's own session files stay in <tmp>/ray
    os.environ["TMPDIR"] = str(root)
    tempfile.tempdir = None  # re-read TMPDIR on next use
    atexit.register(shutil.rmtree, root, True)
    # A SIGTERM (a job stopped, a `kill`) ends the driver through its finally blocks and atexit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    return root


_WATCHED: set[int] = set()  # driver pids that have a watcher (a process may start Ray twice)


def watch(tmp_root: Path) -> None:
    """Start the watcher of this driver's processes and temporary root (once per process)."""
    if os.getpid() in _WATCHED:
        return
    _WATCHED.add(os.getpid())
    cmd = [sys.executable, "-m", "actors.cluster.reaper", str(os.getpid()), str(tmp_root)]
    quiet = subprocess.DEVNULL
    root = Path(__file__).resolve().parent.parent
    subprocess.Popen(cmd, start_new_session=True, stdin=quiet, stdout=quiet, stderr=quiet, cwd=root)


def reap(victims: Iterable[tuple[int, str]]) -> int:
    """End the (pid, start time) processes still running; returns how many were."""
    victims = [(pid, start) for pid, start in victims if _start_time(pid) == start]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, start in victims:
            if start is not None and _start_time(pid) == start:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and any(_start_time(p) == s for p, s in victims if s):
            time.sleep(0.1)
    return len(victims)


def main(argv: list[str]) -> int:
    driver, tmp_root = int(argv[0]), Path(argv[1])
    driver_start, known = _start_time(driver), set[tuple[int, str]]()
    while driver_start is not None and _start_time(driver) == driver_start:
        known |= {
            (p, s) for p in descendants([driver]) if p not in (driver, os.getpid()) if (s := _start_time(p)) is not None
        }
        time.sleep(POLL_S)
    reap(known)
    shutil.rmtree(tmp_root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
