"""Each sandbox run's cgroup: its memory and pids caps, on a cgroup v1, v2 or hybrid host.

A run's processes must not take the node down: a fork bomb stops at `pids.max`, a memory bomb
at the memory cap (the kernel's OOM killer ends the cgroup's largest process, and the result
says "memory"). Where a cap cannot be set, the run does not start (`CapsUnavailable`, one line
naming the cap, the host's cgroup state and the fix), unless the process's policy says
`best_effort`: then it runs uncapped, warned once per process and counted by the caller
(SandboxResult.uncapped, the pool's `test_uncapped`). No path sets no cap silently.

    policy      read from the process environment on every run: SWE_RL_LIMITS ("enforce", the
                default, or "best_effort") and SWE_RL_CGROUP_ROOT (a cgroup path under the
                hierarchy's root, e.g. "/ray"; default the root itself). Commands take them
                from the shell; training's `reward.execution.limits` / `cgroup_root` reach the
                test runners' processes as the same variables (runner.py).
    v1          one cgroup per controller, `<mount of memory>/<root>/swe_rl_sandbox/<id>` with
                `memory.limit_in_bytes` and `<mount of pids>/<root>/swe_rl_sandbox/<id>` with
                `pids.max`; OOM kills read from `memory.oom_control`. A non-root user needs the
                root's folders made and chowned to it (v1 delegation).
    v2          one cgroup in the unified hierarchy, `<root>/swe_rl_sandbox/<id>`, with
                `memory.max`, `memory.swap.max` 0 (the memory cap is not dodged into swap) and
                `pids.max`; the controllers are enabled down the path (`cgroup.subtree_control`
                of the root and of swe_rl_sandbox); OOM kills read from `memory.events`; ended
                with `cgroup.kill`. The root must be a cgroup this process may write and that
                holds no process itself (v2's no-internal-process rule): a delegated one
                (systemd `Delegate=yes`, a pod's cgroup) with the process in a child of it.
    hybrid      v1 controllers beside an empty unified hierarchy (systemd's hybrid mode): each
                cap is set where its controller is bound, v1 here.

PID 1 (inside.py) joins the run's cgroups before it starts anything (it writes "0" to each
`cgroup.procs` that `RunCgroup.procs` names), so every process the command starts counts.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

LIMITS_ENV, ROOT_ENV = "SWE_RL_LIMITS", "SWE_RL_CGROUP_ROOT"
ENFORCE, BEST_EFFORT = "enforce", "best_effort"
POLICIES = (ENFORCE, BEST_EFFORT)
PARENT = "swe_rl_sandbox"  # every run's cgroup lies in this folder under the root
CONTROLLERS = ("memory", "pids")
_MOUNTINFO = Path("/proc/self/mountinfo")
_warned = False


class CapsUnavailable(RuntimeError):
    """A run's memory or pids cap cannot be set on this host (and the policy is `enforce`)."""


class PolicyError(ValueError):
    """SWE_RL_LIMITS or SWE_RL_CGROUP_ROOT holds a value the sandbox does not take."""


@dataclass(frozen=True)
class CapPolicy:
    limits: str = ENFORCE  # "enforce": no cap, no run; "best_effort": uncapped, counted, warned
    root: str = "/"  # the cgroup under which runs' cgroups are made, from the hierarchy's root

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> CapPolicy:
        limits = environ.get(LIMITS_ENV) or ENFORCE
        if limits not in POLICIES:
            raise PolicyError(f"{LIMITS_ENV}={limits!r}: accepted values are {', '.join(POLICIES)}")
        root = environ.get(ROOT_ENV) or "/"
        if not root.startswith("/") or ".." in Path(root).parts:
            raise PolicyError(f"{ROOT_ENV}={root!r}: a cgroup path from the hierarchy's root, e.g. /ray")
        return cls(limits, root)


@dataclass(frozen=True)
class Hierarchy:
    """Where this host binds the memory and pids controllers."""

    kind: str  # "v1", "v2", "hybrid" (v1 controllers beside a unified hierarchy), "none"
    v1: dict[str, Path] = field(default_factory=dict)  # controller -> its v1 mount point
    unified: Path | None = None  # the cgroup2 mount point
    unified_controllers: frozenset[str] = frozenset()  # what the unified root offers

    def where(self, controller: str) -> str | None:
        """ "v1", "v2", or None: the hierarchy that holds `controller`."""
        if controller in self.v1:
            return "v1"
        return "v2" if self.unified is not None and controller in self.unified_controllers else None

    def describe(self) -> str:
        parts = [f"cgroup {self.kind}"]
        if self.v1:
            parts.append("v1 " + ", ".join(f"{c} at {p}" for c, p in sorted(self.v1.items())))
        if self.unified is not None:
            offered = " ".join(sorted(self.unified_controllers)) or "no controllers"
            parts.append(f"unified at {self.unified} ({offered})")
        return "; ".join(parts)


def hierarchy(mountinfo: str | None = None) -> Hierarchy:
    """The host's cgroup layout, from /proc/self/mountinfo (or the text given)."""
    text = _MOUNTINFO.read_text() if mountinfo is None else mountinfo
    v1: dict[str, Path] = {}
    unified: Path | None = None
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        point = Path(fields[4].replace("\\040", " "))
        if tail[0] == "cgroup":
            for option in tail[2].split(","):
                if option in CONTROLLERS:
                    v1.setdefault(option, point)
        elif tail[0] == "cgroup2" and unified is None:
            unified = point
    offered: frozenset[str] = frozenset()
    if unified is not None:
        with contextlib.suppress(OSError):
            offered = frozenset((unified / "cgroup.controllers").read_text().split())
    if v1:
        kind = "hybrid" if unified is not None else "v1"
    else:
        kind = "v2" if unified is not None else "none"
    return Hierarchy(kind, v1, unified, offered)


@dataclass
class RunCgroup:
    """One run's cgroups (none when it runs uncapped: `uncapped` then says why)."""

    dirs: list[Path]
    v2: bool = False
    uncapped: str | None = None

    def procs(self) -> list[str]:
        """The files PID 1 writes "0" to, joining every cgroup of the run."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def end(self) -> bool:
        """Kill whatever is left in the run's cgroups and remove them; True if the OOM killer ran."""
        oom = False
        for path in self.dirs:
            if self.v2:
                with contextlib.suppress(OSError):  # cgroup.kill: Linux 5.14; the loop below otherwise
                    (path / "cgroup.kill").write_text("1")
            for _ in range(50):
                try:
                    procs = (path / "cgroup.procs").read_text().split()
                except OSError:
                    procs = []
                for pid in procs:
                    with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
                if not procs:
                    break
                time.sleep(0.02)
            # "oom_kill N": processes the OOM killer ended in this cgroup (v1 and v2 alike).
            events = path / ("memory.events" if self.v2 else "memory.oom_control")
            with contextlib.suppress(OSError):
                kills = [line.split()[1] for line in events.read_text().splitlines() if line.startswith("oom_kill ")]
                oom = oom or (bool(kills) and kills[0] != "0")
            with contextlib.suppress(OSError):
                path.rmdir()
        return oom


def make(memory_mb: int, pids: int, policy: CapPolicy | None = None, layout: Hierarchy | None = None) -> RunCgroup:
    """The run's cgroups with both caps set. Where a cap cannot be set: CapsUnavailable under
    `enforce`; an uncapped RunCgroup saying why under `best_effort` (warned once per process)."""
    policy = policy or CapPolicy.from_env()
    layout = layout or hierarchy()
    name = uuid.uuid4().hex[:12]
    made: list[Path] = []
    v2 = False
    try:
        wanted = {"memory": memory_mb, "pids": pids}
        where = {c: layout.where(c) for c in CONTROLLERS}
        if missing := [c for c, w in where.items() if w is None]:
            raise _Refused(missing[0], "the host has no such controller mounted")
        for controller in [c for c in CONTROLLERS if where[c] == "v1"]:
            made.append(_v1(layout.v1[controller] / policy.root.lstrip("/"), controller, name, wanted[controller]))
        if any(w == "v2" for w in where.values()):
            assert layout.unified is not None
            v2_caps = {c: wanted[c] for c in CONTROLLERS if where[c] == "v2"}
            made.append(_v2(layout.unified / policy.root.lstrip("/"), name, v2_caps))
            v2 = True
    except _Refused as refused:
        RunCgroup(made, v2).end()
        why = _explain(refused, layout, policy)
        if policy.limits == ENFORCE:
            raise CapsUnavailable(why) from None
        _warn_once(why)
        return RunCgroup([], uncapped=why)
    return RunCgroup(made, v2)


class _Refused(Exception):
    def __init__(self, cap: str, why: str) -> None:
        super().__init__(why)
        self.cap, self.why = cap, why


def _write(path: Path, value: str, cap: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise _Refused(cap, f"cannot write {value!r} to {path}: {exc.strerror or exc}") from None


def _v1(base: Path, controller: str, name: str, value: int) -> Path:
    run = base / PARENT / name
    try:
        run.mkdir(parents=True)
    except OSError as exc:
        raise _Refused(controller, f"cannot make {run}: {exc.strerror or exc}") from None
    key, setting = ("memory.limit_in_bytes", value << 20) if controller == "memory" else ("pids.max", value)
    try:
        _write(run / key, str(setting), controller)
    except _Refused:
        with contextlib.suppress(OSError):
            run.rmdir()
        raise
    return run


_enabled: set[Path] = set()  # v2 parents whose subtree_control this process has already set


def _v2(base: Path, name: str, caps: dict[str, int]) -> Path:
    """A run's cgroup in the unified hierarchy: the controllers enabled from `base` down, the
    caps written. The kernel refuses to enable controllers under a cgroup that holds processes
    (EBUSY) or that the user may not write (EACCES): both become the refusal's reason."""
    first = next(iter(caps))
    try:
        offered = set((base / "cgroup.controllers").read_text().split())
    except OSError as exc:
        raise _Refused(first, f"{base} is not a cgroup this process can read: {exc.strerror or exc}") from None
    if missing := [c for c in caps if c not in offered]:
        why = f"{base} does not offer the {missing[0]} controller (enable it in its parent's cgroup.subtree_control)"
        raise _Refused(missing[0], why)
    enable = " ".join(f"+{c}" for c in caps)
    parent = base / PARENT
    if parent not in _enabled:
        try:
            (base / "cgroup.subtree_control").write_text(enable)
        except OSError as exc:
            busy = " (it holds processes: move them into a child cgroup first)" if exc.errno == errno.EBUSY else ""
            why = f"cannot enable {enable} in {base}/cgroup.subtree_control: {exc.strerror or exc}{busy}"
            raise _Refused(first, why) from None
        try:
            parent.mkdir(exist_ok=True)
        except OSError as exc:
            raise _Refused(first, f"cannot make {parent}: {exc.strerror or exc}") from None
        _write(parent / "cgroup.subtree_control", enable, first)
        _enabled.add(parent)
    run = parent / name
    try:
        run.mkdir()
    except OSError as exc:
        raise _Refused(first, f"cannot make {run}: {exc.strerror or exc}") from None
    try:
        if "memory" in caps:
            _write(run / "memory.max", str(caps["memory"] << 20), "memory")
            if (run / "memory.swap.max").exists():  # only where the kernel accounts swap
                _write(run / "memory.swap.max", "0", "memory")
        if "pids" in caps:
            _write(run / "pids.max", str(caps["pids"]), "pids")
    except _Refused:
        with contextlib.suppress(OSError):
            run.rmdir()
        raise
    return run


def _explain(refused: _Refused, layout: Hierarchy, policy: CapPolicy) -> str:
    who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    fix = (
        f"run as root, or delegate a cgroup to this user (systemd Delegate=yes, or make it and chown it: "
        f"docs/cluster.md) and name it with reward.execution.cgroup_root / {ROOT_ENV} (now {policy.root})"
    )
    return (
        f"sandbox: cannot cap {refused.cap}: {refused.why}; host: {layout.describe()}, running as {who}; "
        f"fix: {fix}, or run uncapped with reward.execution.limits={BEST_EFFORT} / {LIMITS_ENV}={BEST_EFFORT}"
    )


def _warn_once(why: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning("%s (running uncapped: every such run is counted as test_uncapped)", why)
