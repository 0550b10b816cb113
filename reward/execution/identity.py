"""Who the sandbox's processes are: as root, or rootless in a user namespace of their own.

    root        (the process is root) PID 1 is root in fresh mount, PID, network, IPC and UTS
                namespaces; the command runs as uid/gid 65534 (nobody) with no groups. Files
                the command must own on the host (a snapshot, a build's output folder) are
                chowned to 65534 (`give`).
    rootless    (any other user: a Ray node's `ubuntu`, a pod without privileges) the same
                namespaces are made inside a user namespace that maps this one user to 65534
                and nothing else (`--map-user`/`--map-group`; no subordinate range is used).
                PID 1 keeps the namespace's capabilities (`--keep-caps`, ambient) to mount,
                chroot and bring up loopback, then makes itself non-dumpable (its /proc entries
                and descriptors are not the command's to read or trace); the command runs as
                65534, its ambient, bounding and inheritable capabilities dropped and
                `no_new_privs` set (inside.py `drop_privileges`), so nothing it runs can
                mount, unmount, remount, chroot or re-map what PID 1 set up, and no set-uid or
                file-capability binary gains anything. It is the host's user outside: the
                host's files it can reach are only those the new root shows it (sandbox.py's
                table), as in root mode. Host files need no chown: they already belong to it.

Rootless needs unprivileged user namespaces. `forbidden()` names the host setting that refuses
them and how to allow it.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

NOBODY = 65534  # the id sandboxed code runs as, in both modes
_USERNS = ("--user", f"--map-user={NOBODY}", f"--map-group={NOBODY}", "--keep-caps")
_SYSCTL = Path("/proc/sys")


def rootless() -> bool:
    return os.geteuid() != 0


def forbidden(sysctl: Path = _SYSCTL) -> str | None:
    """Why this host refuses an unprivileged user namespace, with the fix; None if it allows one."""

    def read(name: str) -> str | None:
        try:
            return (sysctl / name).read_text().strip()
        except OSError:
            return None

    if read("user/max_user_namespaces") == "0":
        return (
            "user namespaces are off (user.max_user_namespaces=0): "
            "allow them with `sysctl -w user.max_user_namespaces=65536`"
        )
    if read("kernel/unprivileged_userns_clone") == "0":
        return (
            "unprivileged user namespaces are off (kernel.unprivileged_userns_clone=0): "
            "allow them with `sysctl -w kernel.unprivileged_userns_clone=1`"
        )
    # The restriction spares a program an AppArmor profile grants `userns` to: only a namespace
    # that cannot mount tells.
    if read("kernel/apparmor_restrict_unprivileged_userns") == "1" and not _userns_mounts():
        return (
            "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1, "
            "Ubuntu 23.10 and later): allow them with `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` "
            "or an AppArmor profile granting `userns` to /usr/bin/unshare (docs/cluster.md)"
        )
    return None


@functools.cache
def _userns_mounts() -> bool:
    """Whether unshare can make a user namespace whose mount namespace this process may mount in."""
    probe = ["unshare", *_USERNS, "--mount", "mount", "-t", "tmpfs", "none", "/mnt"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def unshare_flags() -> list[str]:
    """unshare(1)'s options for the user namespace (none as root)."""
    if not rootless():
        return []
    return list(_USERNS)


def give(path: Path) -> None:
    """Hand a host file to the sandbox's user (nobody as root; rootless it already is)."""
    if not rootless():
        os.lchown(path, NOBODY, NOBODY)
