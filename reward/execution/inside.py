"""PID 1 of a sandbox's namespaces: build its root, drop to nobody, run the command, end it all.

Started by reward/execution/sandbox.py as `unshare ... python -I -S path/to/inside.py SPEC`,
as root, in fresh mount, PID, network, IPC and UTS namespaces (the mount namespace's
propagation is private: none of these mounts reaches the host). Standard library only, and
nothing here runs code from the sandboxed repository before privileges are dropped.

    1. join the run's cgroups (memory, pids), so that every process started later counts;
       with `loopback`, bring the network namespace's own loopback up;
    2. build the new root in a tmpfs: read-only bind mounts of the system and of `ro_paths`,
       writable ones of `rw_paths`,
       the snapshot at `workdir` as an overlay whose writes land in a size-limited tmpfs, the
       run's `changes` written into it (as root, before anything of the repository runs),
       `/results` (the one directory shared with the host), tmpfs /tmp and /dev/shm, a minimal
       /dev, a /proc of this PID namespace;
    3. chroot, chdir to `workdir`, drop to uid/gid 65534 with no groups, set the rlimits;
    4. run the command as a child, wait for it, and exit with its status: as PID 1 exiting,
       the kernel kills every other process of the namespace (a daemonised child included).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path

_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_DEVICES = ("null", "zero", "random", "urandom")
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1  # linux/sockios.h, linux/if.h


# mount(2) flags (linux/mount.h).
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str | Path, fstype: str | None, flags: int, data: str | None = None) -> None:
    """mount(2) itself: a root of ~25 mounts built by the `mount` command cost ~80 ms of
    process starts per sandbox, this costs well under 1 ms."""
    args = [None if a is None else str(a).encode() for a in (source, target, fstype, data)]
    if _libc.mount(args[0], args[1], args[2], ctypes.c_ulong(flags), args[3]) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target} ({fstype}): {os.strerror(errno)}")


def _bind(source: str, target: Path, writable: bool = False) -> None:
    if Path(source).is_dir():
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    _mount(source, target, None, MS_BIND)
    if not writable:  # a bind mount takes its own flags only when remounted
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _tmpfs(target: Path, size_mb: int, mode: str = "1777") -> None:
    target.mkdir(parents=True, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_mb}m,mode={mode}")


def build_root(spec: dict) -> Path:
    scratch, limits = Path(spec["scratch"]), spec["limits"]
    root = scratch / "root"
    _tmpfs(root, 64, mode="0755")
    # /tmp first: an environment or interpreter under the host's /tmp (a test's cache) is then
    # bound inside it, not hidden under it.
    _tmpfs(root / "tmp", limits["file_mb"])
    for path in (*_SYSTEM, *spec["ro_paths"]):
        if os.path.lexists(path):
            real = os.path.realpath(path)
            if real != path and real.startswith("/usr"):  # /bin -> usr/bin on merged-/usr systems
                (root / path.lstrip("/")).symlink_to(os.path.relpath(real, os.path.dirname(path)))
                continue
            _bind(path, root / path.lstrip("/"))
    for path in spec["rw_paths"]:  # after the read-only ones: a writable directory may lie inside one
        _bind(path, root / path.lstrip("/"), writable=True)
    # The snapshot as an overlay: reads from disk, writes to a tmpfs the size of the file limit.
    upper = scratch / "upper"
    _tmpfs(upper, limits["file_mb"], mode="0755")
    (upper / "data").mkdir()
    (upper / "work").mkdir()
    os.chown(upper / "data", spec["uid"], spec["uid"])
    work = root / spec["workdir"].lstrip("/")
    work.mkdir(parents=True, exist_ok=True)
    lower = spec["snapshot"]
    _mount("overlay", work, "overlay", 0, f"lowerdir={lower},upperdir={upper / 'data'},workdir={upper / 'work'}")
    _apply_changes(Path(spec["changes"]), spec["deleted"], work, spec["uid"])  # as root, before any repo code
    _bind(str(scratch / "results"), root / "results", writable=True)
    (root / "dev").mkdir()
    _mount("tmpfs", root / "dev", "tmpfs", MS_NOSUID, "size=1m,mode=0755")
    for device in _DEVICES:
        _bind(f"/dev/{device}", root / "dev" / device, writable=True)
    _tmpfs(root / "dev" / "shm", limits["file_mb"])
    (root / "proc").mkdir(exist_ok=True)
    _mount("proc", root / "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    return root


def loopback_up() -> None:
    """Bring this network namespace's own loopback up (127.0.0.1, ::1): a test may serve and
    connect on it (pytest-httpbin, a local test server). It is not the host's loopback: the
    namespace has no other interface and no route out, so the host's services stay unreachable."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)  # struct ifreq: name, flags
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def _apply_changes(changes: Path, deleted: list[str], work: Path, uid: int) -> None:
    """Write the candidate and test patches' files. The snapshot's own files already belong to
    the sandbox's user (snapshots.py), so the new ones are given to it too; chowning the rest
    here would copy every file up into the overlay's tmpfs."""
    for source in sorted(p for p in changes.rglob("*") if p.is_file()):
        target = work / source.relative_to(changes)
        for parent in reversed(target.relative_to(work).parents[:-1]):
            if not (work / parent).exists():
                (work / parent).mkdir()
                os.chown(work / parent, uid, uid)
        if target.is_symlink() or target.exists():
            target.unlink()
        shutil.copyfile(source, target)
        os.chown(target, uid, uid)
    for rel in deleted:
        target = work / rel
        if target.is_symlink() or target.is_file():
            target.unlink()


def _limit(limits: dict) -> None:
    fsize = limits["file_mb"] << 20
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    for procs in spec["cgroups"]:  # "0": this process; every child inherits the cgroups
        Path(procs).write_text("0")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    if spec.get("loopback"):
        loopback_up()
    root = build_root(spec)
    os.chroot(root)
    os.chdir(spec["workdir"])
    os.setgroups([])
    os.setgid(spec["uid"])
    os.setuid(spec["uid"])
    _limit(spec["limits"])
    try:
        child = subprocess.Popen(spec["argv"], env=spec["env"])
    except OSError as exc:
        print(f"sandbox: cannot run {spec['argv'][0]}: {exc}", file=sys.stderr)
        return 127
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
