"""The node check: can this node run the sandbox, and which caps will it enforce.

`python -m reward.execution.check [--cache-dir DIR]` prints one line per fact and a verdict, and
exits 0 for `ready` and `ready (best effort)`, 1 otherwise. Every test runner (runner.py) runs
the same check once, at `ready()`, before its first job: a node that is not ready stops the job
at start-up with `NodeNotReady` naming the node and the reason, rather than after a step of
test runs that all fail alike.

    user          who the sandbox runs as: root, or rootless in a user namespace (identity.py)
    namespaces    a live probe, not a reading of sysctls: sandbox.run removes a folder of a
                  one-folder snapshot and makes it again (PROBE). Exit 0 proves what every test
                  run needs: the namespaces (user ones too when rootless), the overlay over the
                  snapshot with its whiteouts and opaque folders (in a user namespace they are
                  user.* xattrs on the upper tmpfs, which Linux keeps from 6.6 on: an older
                  kernel fails here, with EIO, rather than in a test run), the new root, PID 1
                  and the caps' cgroups
    cgroups       the hierarchy (cgroups.py) and whether both caps can be set: one cgroup made
                  under `enforce` whatever the policy, then removed
    interpreters  the Python versions found (pythons.py) and uv (`python -m uv`, as
                  environments.py runs it): reported, not judged (a missing one fails only the
                  instances that need it, each with its status)
    disk          free space under the execution cache (ExecutionConfig.cache_dir), which must
                  be writable

Verdicts: `ready`; `ready (best effort)`: the caps cannot be set but SWE_RL_LIMITS=best_effort
(runs go uncapped, counted as test_uncapped); `not ready: <reason>`. `gather()` probes the node,
`verdict()` is pure: it reads only the `Facts` record, so tests build every verdict from fakes.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conf.config import ExecutionConfig
from conf.errors import UserError
from reward.execution import cgroups, identity, pythons, sandbox

READY, BEST_EFFORT = "ready", "ready (best effort)"
PROBE = ["/bin/sh", "-c", "rm -r /testbed/d && mkdir /testbed/d && echo x > /testbed/d/g"]
PROBE_SAYS = "a folder of the snapshot removed and made again in the sandbox"
NOT_READY = "not ready"


class NodeNotReady(UserError, RuntimeError):
    """This node cannot run the sandbox as configured; the message names the node and why."""


@dataclass(frozen=True)
class Facts:
    """What gather() found on this node; verdict() reads nothing else."""

    user: str  # the user's name
    uid: int
    rootless: bool  # not root: the sandbox runs in a user namespace
    unavailable: str | None  # sandbox.available(): why the sandbox cannot start at all
    policy: cgroups.CapPolicy | None  # None: SWE_RL_LIMITS / SWE_RL_CGROUP_ROOT hold a bad value
    policy_error: str | None
    layout: str  # cgroups.hierarchy().describe()
    caps: str | None  # where each cap is set ("memory v1, pids v1"); None: refused or not tried
    caps_refused: str | None  # CapsUnavailable's message under `enforce`
    probed: bool  # whether the probe ran (not when something above already refuses every run)
    probe_error: str | None  # why PROBE did not exit 0 in the sandbox
    probe_s: float
    pythons: tuple[str, ...]  # pythons.installed()
    uv: str | None  # uv's binary, or None
    cache_dir: str  # resolved
    free_gib: float | None  # free under the cache dir (its nearest existing folder)
    cache_problem: str | None  # why the cache dir cannot be written


@dataclass(frozen=True)
class NodeReport:
    verdict: str  # READY, BEST_EFFORT or NOT_READY
    reason: str | None  # why not ready, or why best effort
    lines: tuple[str, ...]  # what `python -m reward.execution.check` prints, the verdict last


def verdict(facts: Facts) -> NodeReport:
    """The node's verdict and its report lines, from `facts` alone."""
    refusals = [
        facts.unavailable,
        facts.policy_error,
        facts.caps_refused if facts.policy is not None and facts.policy.limits == cgroups.ENFORCE else None,
        f"the sandbox did not run its probe ({PROBE_SAYS}): {facts.probe_error}" if facts.probe_error else None,
        facts.cache_problem,
    ]
    reason = next((r for r in refusals if r), None)
    if reason is not None:
        outcome = NOT_READY
    elif facts.caps_refused:
        outcome, reason = BEST_EFFORT, facts.caps_refused
    else:
        outcome = READY
    said = {
        READY: "",
        BEST_EFFORT: ": the caps cannot be set (above), so runs go uncapped, each counted as test_uncapped",
        NOT_READY: f": {reason}",
    }[outcome]
    return NodeReport(outcome, reason, (*_lines(facts), f"verdict: {outcome}{said}"))


def _lines(facts: Facts) -> list[str]:
    mode = "rootless, in a user namespace mapping it to 65534" if facts.rootless else "root"
    spaces = "user, mount, PID, network, IPC, UTS" if facts.rootless else "mount, PID, network, IPC, UTS"
    if not facts.probed:
        probe = "not probed (every run is refused: see the verdict)"
    elif facts.probe_error:
        probe = f"failed: {facts.probe_error}"
    else:
        probe = f"ok ({PROBE_SAYS}: exit 0 in {facts.probe_s:.2f} s)"
    lines = [f"user: {facts.user} (uid {facts.uid}): {mode}", f"namespaces ({spaces}): {probe}"]
    if facts.rootless:
        lines.append(f"overlay in a user namespace: {probe}")
    lines.append(f"cgroups: {facts.layout}")
    policy = facts.policy
    where = f"{cgroups.LIMITS_ENV}={policy.limits}, {cgroups.ROOT_ENV}={policy.root}" if policy else facts.policy_error
    if facts.caps:
        lines.append(f"caps: memory and pids enforced ({facts.caps}; {where})")
    else:
        lines.append(f"caps: not enforced: {facts.caps_refused or 'not tried'} ({where})")
    found = ", ".join(facts.pythons) or "none"
    supported = f"{pythons.SUPPORTED[0]}-{pythons.SUPPORTED[-1]}"
    lines.append(f"interpreters: Python {found} found (of {supported}); this one {sys.version.split()[0]}")
    lines.append(f"uv: {facts.uv or 'missing: environments that install packages cannot be built'}")
    free = f"{facts.free_gib:.1f} GiB free" if facts.free_gib is not None else "free space unknown"
    lines.append(f"disk: {free} under {facts.cache_dir}" + (f" ({facts.cache_problem})" if facts.cache_problem else ""))
    return lines


def gather(cache_dir: str | Path = ExecutionConfig.cache_dir) -> Facts:
    """Probe this node: the sandbox is started once (~0.1-0.2 s), one cgroup made and removed."""
    uid = os.geteuid()
    unavailable = sandbox.available()
    layout = cgroups.hierarchy()
    policy, policy_error = None, None
    try:
        policy = cgroups.CapPolicy.from_env()
    except cgroups.PolicyError as exc:
        policy_error = str(exc)
    caps, refused = _caps(layout, policy) if policy is not None else (None, None)
    runs = unavailable is None and policy is not None and not (refused and policy.limits == cgroups.ENFORCE)
    start = time.monotonic()
    probe_error = _probe() if runs else None
    probe_s = time.monotonic() - start
    cache = Path(cache_dir).expanduser().resolve()
    free, problem = _disk(cache)
    return Facts(
        user=_user_name(uid),
        uid=uid,
        rootless=identity.rootless(),
        unavailable=unavailable,
        policy=policy,
        policy_error=policy_error,
        layout=layout.describe(),
        caps=caps,
        caps_refused=refused,
        probed=runs,
        probe_error=probe_error,
        probe_s=probe_s,
        pythons=pythons.installed(),
        uv=_uv(),
        cache_dir=str(cache),
        free_gib=free,
        cache_problem=problem,
    )


def _caps(layout: cgroups.Hierarchy, policy: cgroups.CapPolicy) -> tuple[str | None, str | None]:
    """(where each cap is set, None) if a run's cgroup can be made with both caps under
    `enforce` (whatever the policy says), else (None, why not)."""
    try:
        run = cgroups.make(64, 16, policy=cgroups.CapPolicy(cgroups.ENFORCE, policy.root), layout=layout)
    except cgroups.CapsUnavailable as exc:
        return None, str(exc)
    run.end()
    return ", ".join(f"{c} {layout.where(c)}" for c in cgroups.CONTROLLERS), None


def _probe() -> str | None:
    """None if PROBE exits 0 in the sandbox over a one-folder snapshot, else what went wrong."""
    with tempfile.TemporaryDirectory(prefix="node-check-") as tmp:
        snapshot = Path(tmp)
        (snapshot / "d").mkdir()
        (snapshot / "d" / "f").write_text("")
        for path in (snapshot, snapshot / "d", snapshot / "d" / "f"):
            identity.give(path)  # as root the snapshot is nobody's, as for every test run
        try:
            result = sandbox.run(PROBE, snapshot=snapshot, limits=sandbox.Limits(wall_s=30.0))
        except sandbox.SandboxUnavailable as exc:
            return str(exc)
    if result.returncode == 0:
        return None
    said = (result.stderr or result.stdout).strip().splitlines()[-3:]
    return f"exit {result.returncode}, killed {result.killed}: {' | '.join(said) or 'no output'}"


def _disk(cache: Path) -> tuple[float | None, str | None]:
    """Free GiB under the cache dir (it may not exist yet: its nearest existing folder), and why
    it cannot be written (None when it can)."""
    existing = next(p for p in (cache, *cache.parents) if p.exists())
    try:
        free = shutil.disk_usage(existing).free / (1 << 30)
    except OSError:
        free = None
    if not existing.is_dir():
        return free, f"{existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return free, f"the cache dir {cache} cannot be written by uid {os.geteuid()} ({existing})"
    return free, None


def _uv() -> str | None:
    try:
        from uv import find_uv_bin  # the binary `python -m uv` runs (environments.py's _UV)
    except ImportError:
        return None
    try:
        return f"{find_uv_bin()} (python -m uv)"
    except FileNotFoundError:
        return None


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid with no passwd entry (a container's arbitrary uid)
        return f"uid-{uid}"


def node_name() -> str:
    """This node as Ray names it (its IP) inside a Ray worker, else the host's name."""
    if "ray" in sys.modules:
        # Here, not at the top: imported only where Ray already is, so the command does not pay ~0.5 s for it.
        import ray

        if ray.is_initialized():
            return str(ray.util.get_node_ip_address())
    return socket.gethostname()


def require(cache_dir: str | Path) -> NodeReport:
    """The node's report; NodeNotReady naming the node and the reason when it is not ready."""
    report = verdict(gather(cache_dir))
    if report.verdict == NOT_READY:
        raise NodeNotReady(
            f"node {node_name()} is not ready to run tests: {report.reason} "
            f"(`python -m reward.execution.check` on it shows the node's state; docs/cluster.md)"
        )
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reward.execution.check", description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", default=ExecutionConfig.cache_dir, help="the execution cache (relative: to cwd)")
    args = parser.parse_args(argv)
    report = verdict(gather(args.cache_dir))
    print(f"node: {node_name()}")
    print("\n".join(report.lines), flush=True)
    return 0 if report.verdict in (READY, BEST_EFFORT) else 1


if __name__ == "__main__":
    raise SystemExit(main())
