"""A local Ray cluster that stays out of a CPU engine's way (`ray.quiet`, on by default).

On a few CPU cores the vLLM engine's OpenMP threads take every core, and Ray's control plane
(GCS, dashboard and its head modules, log monitor, autoscaler monitor, the raylet's agents,
idle prestarted workers) wakes up dozens of times a second. Each wake-up preempts one engine
thread while the others wait for it at the next barrier, so the engine loses more than the
daemons' own CPU time (bench/ray_idle.py measures that time per process; bench/rollout.py the
engine's speed with and without Ray; docs/benchmarks.md has both). Two measures, both only for
a cluster this driver starts, never for one it joins:

- `QUIET_ENV`: slower polling of work that is not on the training path, set in the
  environment Ray's processes inherit (Ray reads `RAY_<config>` and these constants at start):
  no idle workers started ahead of demand (actors get their own worker anyway), the log
  monitor's search for new files every 2 s instead of 0.5 s, the dashboard agent's node and
  process statistics every 10 s instead of 5 s, and the raylet's memory monitor every 1 s
  instead of 0.25 s. Metrics, health checks and scheduling keep Ray's own periods.
- `deprioritize`: the control-plane processes run under SCHED_IDLE, so a waking daemon never
  preempts a running thread of normal priority; it runs when a core has nothing else to do
  (the engine leaves one idle between steps, while its scheduler runs in Python) and, under
  full load, still gets a small share (CFS weight 3 against 36 for a Ray worker's nice 15), so
  health checks answer. Lowering one's own processes' priority needs no privilege. The raylet
  is left alone: the workers it starts (the engines, the learners) would inherit the policy.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from actors.cluster.reaper import descendants

QUIET_ENV: dict[str, str] = {
    "RAY_prestart_worker_first_driver": "0",
    "RAY_enable_worker_prestart": "0",
    "LOG_NAME_UPDATE_INTERVAL_S": "2",
    "REPORTER_UPDATE_INTERVAL_MS": "10000",
    "RAY_memory_monitor_refresh_ms": "1000",
}

# How a control-plane process shows in its command line (ray::<name> for the agents, a script
# or binary name for the rest). Workers (ray::IDLE, ray::RolloutWorker, ...) and the raylet are
# not in it.
CONTROL_PLANE = (
    "gcs_server",
    "dashboard.py",
    "ray-dashboard-",
    "log_monitor.py",
    "monitor.py",
    "ray::DashboardAgent",
    "ray::RuntimeEnvAgent",
    "actors.cluster.reaper",
    "multiprocessing.forkserver",
    "multiprocessing.resource_tracker",
)


@contextlib.contextmanager
def environment(quiet: bool) -> Iterator[None]:
    """QUIET_ENV set while Ray's processes start (they keep it), then this process's own back."""
    saved = {k: os.environ.get(k) for k in QUIET_ENV}
    if quiet:
        os.environ.update(QUIET_ENV)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def is_control_plane(cmdline: str) -> bool:
    """Whether a process with this command line is one of Ray's daemons (or the reaper), not a worker."""
    if cmdline.startswith("ray::"):
        return cmdline.split()[0] in ("ray::DashboardAgent", "ray::RuntimeEnvAgent")
    head = cmdline[:160]  # the interpreter, its flags and the script or module
    return any(name in head for name in CONTROL_PLANE)


def control_plane_pids(driver: int) -> list[int]:
    """The processes under `driver` that are Ray's daemons (and the reaper)."""
    return [pid for pid in descendants([driver]) if pid != driver and is_control_plane(command_line(pid))]


def deprioritize(pids: list[int]) -> int:
    """Put every thread of `pids` under SCHED_IDLE (threads started later inherit it); returns
    how many threads changed. A process gone meanwhile is skipped."""
    changed = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError):
                    os.sched_setscheduler(int(task.name), os.SCHED_IDLE, os.sched_param(0))
                    changed += 1
    return changed
