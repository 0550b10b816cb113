"""PID 1 of a sandbox's namespaces: build its root, drop to nobody, run the command, end it all.

Started by reward/execution/sandbox.py as `unshare ... python -I -S -B path/to/inside.py SPEC`
(or, for a sandbox session, ahead of time as `... inside.py --spare FD PATHS`, reading SPEC's
path from that descriptor once it has its session: `spare` below), as root, in fresh mount,
PID, network, IPC and UTS namespaces (the mount namespace's propagation is private: none of
these mounts reaches the host). Standard library only (and
data/paths.py, loaded by its path), and nothing here runs code from the sandboxed repository:
this process keeps its privileges, only the command it starts is nobody. Its command line,
which every process of the namespace may read in /proc/1/cmdline, is overwritten at start
(hide_command_line): it named the interpreter, this file's path and the scratch folder. Run rootless
(identity.py), it is nobody too, holding the user namespace's capabilities; it then makes
itself non-dumpable, and the command drops every capability and sets no_new_privs.

    1. join the run's cgroups (memory, pids), so that every process started later counts;
       with `loopback` (or `servers`), bring the network namespace's own loopback up; with
       `servers`, let unprivileged processes of this network namespace bind ports from the
       lowest server port up (ip_unprivileged_port_start is per network namespace);
    2. build the new root in a tmpfs: the harness's own files (`harness_files`: bootstrap.py)
       copied into /swe-rl, read-only bind mounts of the system and of `ro_paths`,
       writable ones of `rw_paths`, the snapshot at `workdir` as an overlay whose writes land
       in a size-limited tmpfs (lower layers: `layers`, e.g. compiled modules, over the
       snapshot, named by links relative to the scratch folder, so the mount table shows no
       host path), the run's `changes` written into it (as root, before anything of the
       repository runs; each path through data/paths.py, no link followed), tmpfs /tmp
       and /dev/shm, a minimal /dev, a /proc of this PID namespace; with `servers`, a hosts
       file of its own bound over the root's /etc/hosts (the servers' names first, then the
       host's lines);
    3. chroot; start each server as uid/gid 65534 with the rlimits, its output into an
       unlinked file of the scratch folder (not the command's output), and wait until it
       accepts on 127.0.0.1:port: one that exits or does not within `start_s` ends the run
       (an "S" and why go to the host instead of a report, and the command never runs);
       start the command in `workdir` as uid/gid 65534 with no groups and the rlimits, with
       a pipe for its report (SWE_RL_REPORT_FD) whose other end only this process holds,
       and, when the run has one, its secret (the probe's labels) in a memory file
       (SWE_RL_SECRET_FD) that only the command holds once it started (_secret_file), and,
       when the host gave a guard secret, the guard's socket (GuardReader);
    4. reap every child as it exits while the command runs (the orphans the kernel hands to
       the namespace's init included: left zombies, they would fill the pids cap), and read
       the report (at most `report_bytes`) and the guard's socket meanwhile; then send them
       (the guard's verdict as a "G" line first) to the
       host through the one descriptor the host gave this process (the command's processes
       never inherit it), and exit with the command's status: as PID 1 exiting, the kernel
       kills every other process of the namespace (a daemonised child included).
"""

from __future__ import annotations

import ctypes
import fcntl
import importlib.util
import json
import os
import resource
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_DEVICES = ("null", "zero", "random", "urandom")
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1  # linux/sockios.h, linux/if.h
# Per network namespace (since Linux 4.11): read and written here in the sandbox's own.
_PORT_START = "/proc/sys/net/ipv4/ip_unprivileged_port_start"
_SERVER_LOG_TAIL = 2000  # bytes of a failed server's output in the reason
HARNESS_DIR = "/swe-rl"  # the harness's own files in the new root (harness_files; sandbox.py)
# What /proc/1/cmdline and /proc/1/comm show inside (hide_command_line): no host path.
TITLE, NAME = b"swe-rl-sandbox-init", b"swe-rl-init"
PR_SET_NAME = 15


# prctl(2) options (linux/prctl.h) and capset(2)'s header version (linux/capability.h).
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 4, 24, 38, 47, 4
_CAP_VERSION_3 = 0x20080522
try:  # read while the host's /proc is still in view
    _LAST_CAP = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
except (OSError, ValueError):
    _LAST_CAP = 63  # dropping a capability the kernel does not know fails: stop there (below)

# mount(2) flags (linux/mount.h).
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
# statvfs(3)'s f_flag bit -> the mount(2) flag of the same meaning.
_STATVFS_KEPT = (
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME),
    (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)
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
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | _kept(target))


def _kept(target: Path) -> int:
    """The flags a remount must keep: in a user namespace the kernel locks a host mount's
    noexec and atime flags (a remount that would change them fails with EPERM)."""
    have = os.statvfs(target).f_flag
    return sum(flag for st, flag in _STATVFS_KEPT if have & st)


def _tmpfs(target: Path, size_mb: int, mode: str = "1777") -> None:
    target.mkdir(parents=True, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_mb}m,mode={mode}")


def build_root(spec: dict, paths: ModuleType) -> Path:
    scratch, limits = Path(spec["scratch"]), spec["limits"]
    root = scratch / "root"
    _tmpfs(root, 64, mode="0755")
    # /tmp first: an environment or interpreter under the host's /tmp (a test's cache) is then
    # bound inside it, not hidden under it.
    _tmpfs(root / "tmp", limits["file_mb"])
    harness_files(root, spec.get("harness_files", {}))
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
    # The layers by names relative to the scratch folder (PID 1's working folder here), each a
    # link to its layer: the overlay's options, which the sandbox's /proc/self/mountinfo shows,
    # name no host path (nor the scratch folder). The build's products over the commit's files.
    os.chdir(scratch)
    (scratch / "lower").mkdir()
    lower = []
    for index, layer in enumerate([*spec.get("layers", ()), spec["snapshot"]]):
        (scratch / "lower" / str(index)).symlink_to(layer)
        lower.append(f"lower/{index}")
    options = f"lowerdir={':'.join(lower)},upperdir=upper/data,workdir=upper/work"
    # In a user namespace the overlay cannot write trusted.* xattrs (its whiteouts of folders and
    # its opaque folders): userxattr keeps them as user.* ones, which tmpfs holds from Linux 6.6.
    _mount("overlay", work, "overlay", 0, options + (",userxattr" if spec["rootless"] else ""))
    os.chdir("/")
    _apply_changes(paths, spec["changes"], work, spec["uid"])  # before any repo code
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


def allow_ports_from(port: int) -> None:
    """Let this network namespace's unprivileged processes bind ports from `port` up (a stand-in
    for httpbin.org serves on 80 as nobody). The sysctl is the namespace's own: the host's
    value, and every other namespace's, stay as they are (tests/reward/test_services.py)."""
    Path(_PORT_START).write_text(str(port))


def harness_files(root: Path, files: dict[str, str]) -> None:
    """The harness's own files (the test runner's bootstrap.py) written into the new root's
    folder HARNESS_DIR, before any mount and read-only with the root (main): a copy rather
    than a bind of the checkout's file, so no path of the checkout shows in the sandbox's
    /proc/self/mountinfo or in the command line that runs it. sandbox.prepare checks the
    names (one component each) and keeps every mount out of HARNESS_DIR."""
    if not files:
        return
    folder = root / HARNESS_DIR.lstrip("/")
    folder.mkdir()
    folder.chmod(0o755)
    for name, text in files.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o644)


def hosts_file(root: Path, scratch: Path, servers: list[dict]) -> None:
    """Bind a hosts file over the new root's /etc/hosts (itself the host's, read-only): the
    servers' names as 127.0.0.1 first (glibc takes the first match), then the host's lines.
    The bind is in this mount namespace only; the host's file is never written. The file lies
    in the overlay's upper tmpfs (outside its data folder): the bind's source in the sandbox's
    /proc/self/mountinfo is then `/hosts` of that tmpfs, not a path of the host."""
    target = root / "etc" / "hosts"
    if target.is_symlink() or not target.is_file():  # a mount would follow a link out of the root
        raise OSError("the host's /etc/hosts is not a regular file: no hosts file of the sandbox's own bound over it")
    names = " ".join(dict.fromkeys(name for server in servers for name in server["hosts"]))
    made = scratch / "upper" / "hosts"
    made.write_text(f"127.0.0.1\t{names}\n{target.read_text(errors='replace')}")
    made.chmod(0o644)
    _mount(str(made), target, None, MS_BIND)  # the mount point exists: /etc is read-only
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | _kept(target))


def start_servers(servers: list[dict], logs: list, spec: dict) -> str | None:
    """Start every server as nobody and wait for each to accept on 127.0.0.1:port; None, or
    why one did not come up (with the end of its output)."""
    for server, log in zip(servers, logs, strict=True):
        try:
            proc = as_nobody(
                server["argv"], spec, env=server["env"], cwd="/", stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        except OSError as exc:
            return f"server {server['name']}: cannot start {server['argv'][0]}: {exc}"
        why = _accepting(proc, server["port"], server["start_s"])
        if why is not None:
            proc.kill()
            log.seek(max(0, log.seek(0, os.SEEK_END) - _SERVER_LOG_TAIL))
            tail = log.read().decode("utf-8", "replace").strip()
            return f"server {server['name']} {why}; its output ends: {tail or '(nothing)'}"
    return None


def _accepting(proc: subprocess.Popen, port: int, start_s: float) -> str | None:
    deadline = time.monotonic() + start_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"exited with status {proc.returncode} before accepting on 127.0.0.1:{port}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return None
        except OSError:
            time.sleep(0.05)
    return f"did not accept on 127.0.0.1:{port} within {start_s:g} s"


_LOADED: dict[str, ModuleType] = {}  # by path: a spare loads its modules before its spec comes


def _load_paths(path: str) -> ModuleType:
    """data/paths.py, the project's one rule for a patch's paths, or workspace_inside.py, by path
    (this script runs without the project on sys.path), before the chroot hides them."""
    if path in _LOADED:
        return _LOADED[path]
    spec = importlib.util.spec_from_file_location(f"swe_rl_{Path(path).stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _LOADED[path] = module
    return module


def _apply_changes(paths: ModuleType, changes: dict[str, str | None], work: Path, uid: int) -> None:
    """Write the candidate and test patches' files (None: delete), every path checked and
    walked without following a link. The snapshot's own files already belong to the sandbox's
    user (snapshots.py), so the new ones are given to it too; chowning the rest here would copy
    every file up into the overlay's tmpfs."""
    for rel, content in sorted(changes.items()):
        if content is None:
            paths.delete_beneath(work, rel)
        else:
            paths.write_beneath(work, rel, content.encode("utf-8", "surrogateescape"), uid)


def _limit(limits: dict) -> None:
    """The command's rlimits (run in the child, before it executes the command)."""
    fsize = limits["file_mb"] << 20
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _prctl(option: int, arg: int = 0) -> int:
    return int(_libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)))


def drop_privileges(rootless: bool) -> None:
    """In the command's child, after its uid is set and before it executes: no capability left
    and none to gain. As root, the change of uid to nobody already cleared every capability;
    rootless, the uid does not change (PID 1 is nobody too, with the namespace's capabilities
    as ambient ones), so the ambient, bounding and inheritable sets are emptied here: a
    failure raises, and the command does not start."""
    if _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL) != 0:
        raise OSError(ctypes.get_errno(), "cannot clear the ambient capabilities")
    if rootless:
        for cap in range(_LAST_CAP + 1):
            if _prctl(PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() != 22:  # EINVAL: past the last
                raise OSError(ctypes.get_errno(), f"cannot drop capability {cap} from the bounding set")
        header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
        data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: twice 32 bits, all 0
        if _libc.capset(header, data) != 0:
            raise OSError(ctypes.get_errno(), "cannot clear the capability sets")
    if _prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        raise OSError(ctypes.get_errno(), "cannot set no_new_privs")


def as_nobody(argv: list[str], spec: dict, *, env: dict, cwd: str, **popen: Any) -> subprocess.Popen:
    """Start `argv` as the sandbox's user: uid/gid 65534, no capabilities, no_new_privs, the
    run's rlimits (the command, the servers, and a session's commands: workspace_inside.py).
    As root it has no groups either; rootless, the user namespace denies setgroups(2), and the
    host user's groups stay (they open only what the new root shows: read-only system files)."""

    def child() -> None:
        _limit(spec["limits"])
        drop_privileges(spec["rootless"])

    groups: dict[str, Any] = {} if spec["rootless"] else {"extra_groups": []}
    return subprocess.Popen(
        argv, env=env, cwd=cwd, user=spec["uid"], group=spec["uid"], preexec_fn=child, **groups, **popen
    )


class _ReportReader(threading.Thread):
    """Reads the command's report pipe until EOF, keeping at most `cap` bytes (the rest is
    drained, so a writer never blocks, and marks the report as over the limit)."""

    def __init__(self, fd: int, cap: int) -> None:
        super().__init__(daemon=True)
        self.fd, self.cap, self.data, self.over = fd, cap, bytearray(), False
        self.lock = threading.Lock()

    def run(self) -> None:
        while chunk := os.read(self.fd, 1 << 16):
            with self.lock:
                if len(self.data) + len(chunk) > self.cap:
                    self.over = True
                else:
                    self.data += chunk

    def result(self) -> bytes:
        """ "R" + the report, or "O" when it passed the cap (sandbox.py reads this)."""
        with self.lock:
            return b"O" if self.over else b"R" + bytes(self.data)


# The most of the guard's verdict sent to the host (sandbox.GUARD_LINE, which this file cannot import).
GUARD_LINE = 512


class GuardReader(threading.Thread):
    """The guard's socket (sandbox.run's `guard`): a socketpair whose other end the command
    inherits at a descriptor number drawn here for the run (64-1023: above what a runner opens
    at start, named in no variable), with the secret already waiting on it. The guard reads the
    secret before any code under test runs (nothing is left to read after it, and a socket,
    unlike a pipe, cannot be opened again through /proc/self/fd); each line it writes starts
    with the secret. result(): "ended" (an end line and no finding), "tampered: why" (a finding,
    or a line without the secret: something else wrote there), "silent" (no end: the
    descriptor closed, the guard's exit listener removed, the process ended by a signal)."""

    def __init__(self, secret: str) -> None:
        super().__init__(daemon=True)
        ours, theirs = socket.socketpair()
        number = secrets.choice([n for n in range(64, 1024) if not _open(n)])
        os.dup2(theirs.fileno(), number, inheritable=True)
        theirs.close()
        ours.sendall(secret.encode())  # waits in the socket's buffer for the guard
        self.ours, self.theirs, self.secret = ours, number, secret.encode()
        self.data = bytearray()

    def run(self) -> None:
        while chunk := self.ours.recv(1 << 16):
            if len(self.data) < (1 << 20):  # the rest is drained: a writer never blocks
                self.data += chunk

    def result(self) -> str:
        ended, found = False, ""
        for line in bytes(self.data).splitlines():
            said, _, rest = line.partition(b" ")
            if not secrets.compare_digest(said, self.secret):
                found = found or "a line without the guard's secret was written on its descriptor"
            elif rest.startswith(b"tampered "):
                found = found or rest[len(b"tampered ") :].decode("utf-8", "replace")
            elif rest == b"end":
                ended = True
        return f"tampered: {found}" if found else "ended" if ended else "silent"


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def reap_until(pid: int) -> int:
    """Reap every child of PID 1 as it exits until `pid` has, and return `pid`'s exit code
    (as subprocess's returncode: -N for signal N). As the namespace's init, PID 1 is handed
    every orphan (a `(cmd &)` of a shell, a daemon's first fork): left a zombie, each would hold
    a place under the pids cap until the command ended, and a workload that starts short-lived
    orphans one after another would reach the cap. Nothing else here waits for a child (the
    command's Popen is never waited on), so the status by pid is the command's own."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:  # no child left: its status was lost, so it counts as killed
            return -signal.SIGKILL
        if done == pid:
            return os.waitstatus_to_exitcode(status)


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    # PID 1 of a PID namespace gets from inside it only the signals it handles: with Python's
    # SIGINT handler gone, nothing the command sends ends it early.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if spec["rootless"]:  # the command is the same user: /proc/1's files and ptrace become root's only
        _prctl(PR_SET_DUMPABLE, 0)
    for procs in spec["cgroups"]:  # "0": this process; every child inherits the cgroups
        Path(procs).write_text("0")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    servers, failed = spec["servers"], None
    if spec["loopback"]:
        loopback_up()
    paths = _load_paths(spec["paths_module"])  # before the chroot hides it
    root = build_root(spec, paths)
    try:  # a host without the per-namespace sysctl or a regular /etc/hosts: the servers' failure
        if servers:
            allow_ports_from(min(server["port"] for server in servers))
            hosts_file(root, Path(spec["scratch"]), servers)
    except OSError as exc:
        failed = f"server {servers[0]['name']}: {exc}"
    # Files in memory (memfd), opened before the chroot: the command cannot name them, and the
    # servers' /proc/PID/fd (the command's user's) shows "/memfd:..." rather than a host path.
    # Open until PID 1 exits, as the servers are (no context manager).
    logs = [os.fdopen(os.memfd_create(f"server-{i}"), "w+b") for i in range(len(servers))]
    # A session reads the overlay's upper folder (its changes) through this descriptor: after
    # the chroot no path names it.
    upper = os.open(Path(spec["scratch"]) / "upper" / "data", os.O_RDONLY | os.O_DIRECTORY) if "session" in spec else -1
    serving = _load_paths(str(Path(__file__).with_name("workspace_inside.py"))) if "session" in spec else None
    # The root's own folder read-only (its mounts keep theirs): nothing can be made beside them.
    # As root nobody could not write it anyway; rootless its tmpfs belongs to the command's user.
    _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chroot(root)
    os.chdir("/")
    if failed is None:
        failed = start_servers(servers, logs, spec)
    if failed is not None:
        print(f"sandbox: {failed}", file=sys.stderr)
        _send(spec["report_fd"], b"S" + failed.encode("utf-8", "replace"))
        return 125
    if serving is not None:  # many commands, one at a time, on the host's requests (workspace_inside.py)
        keep = {int(name) for name in os.listdir("/proc") if name.isdigit() and name != "1"}  # the servers
        return int(serving.serve(spec, paths, as_nobody, keep, upper))
    read_fd, write_fd = os.pipe()
    env = {**spec["env"], "SWE_RL_REPORT_FD": str(write_fd)}
    secret = _secret_file(spec.get("secret", ""))
    if secret is not None:
        env["SWE_RL_SECRET_FD"] = str(secret)
    guard = GuardReader(spec["guard"]) if spec.get("guard") else None
    passed = (write_fd,) + ((secret,) if secret is not None else ()) + ((guard.theirs,) if guard is not None else ())
    try:
        child = as_nobody(
            spec["argv"],
            spec,
            env=env,
            cwd=spec["workdir"],
            # and nothing else: the host's report descriptor stays here
            pass_fds=passed,
        )
    except OSError as exc:
        print(f"sandbox: cannot run {spec['argv'][0]}: {exc}", file=sys.stderr)
        return 127
    finally:
        os.close(write_fd)
        if secret is not None:
            os.close(secret)  # the command holds the only copy: it reads it and closes it first
        if guard is not None:
            os.close(guard.theirs)
    reader = _ReportReader(read_fd, spec["limits"]["report_bytes"])  # after the fork: no thread in it
    reader.start()
    if guard is not None:
        guard.start()
    code = child.returncode = reap_until(child.pid)  # reaped here, not by Popen
    reader.join(timeout=1.0)  # a daemonised grandchild may hold the pipe open: take what came
    said = b""
    if guard is not None:
        guard.join(timeout=1.0)
        said = b"G" + guard.result().encode()[: GUARD_LINE - 2] + b"\n"
    _send(spec["report_fd"], said + reader.result())
    return code


def _secret_file(text: str) -> int | None:
    """The command's secret (sandbox.run's `secret`) in a memory file, read from its start: no
    path of the new root holds it, and once the command has closed its copy (bootstrap.py does
    so before any repository code runs) nothing of the sandbox can open it again (PID 1's
    /proc/1/fd is root's, or non-dumpable rootless). None when there is none."""
    if not text:
        return None
    fd = os.memfd_create("swe-rl-secret", 0)  # not MFD_CLOEXEC: pass_fds hands it to the command
    data = text.encode("utf-8")
    while data:
        data = data[os.write(fd, data) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def hide_command_line() -> None:
    """Overwrite this process's command line in its memory (the kernel's argv area, which
    Python has copied from at start) with TITLE, and its name with NAME: /proc/1/cmdline, which
    every process of the namespace may read, named the interpreter, this script's path in the
    project's checkout and the run's scratch folder. As setproctitle(3) does: the area's last
    byte left non-NUL makes the kernel show it up to the first NUL, TITLE alone. Where the
    area cannot be found (arg_start shows 0) the command line stays as it was."""
    name = ctypes.create_string_buffer(NAME)
    _prctl(PR_SET_NAME, ctypes.addressof(name))
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end: fields 48 and 49 of proc(5)
    except (OSError, IndexError, ValueError):
        return
    size = end - start
    if start == 0 or size < len(TITLE) + 2:
        return
    ctypes.memmove(start, TITLE + b"\0" * (size - len(TITLE) - 1) + b" ", size)


def spare(go_fd: int, paths_module: str) -> int:
    """A PID 1 started ahead of its session (workspace.py's spares): its namespaces made, this
    interpreter and the modules a session loads loaded; it then waits for its spec's path on
    `go_fd` and goes on as any PID 1. The pipe closing first (the host needs no more spares,
    or is gone) ends it: nothing was mounted, joined or run yet."""
    _load_paths(paths_module)
    _load_paths(str(Path(__file__).with_name("workspace_inside.py")))
    with os.fdopen(go_fd, "rb") as go:
        spec_path = go.readline().decode().strip()
    return main(spec_path) if spec_path else 0


if __name__ == "__main__":
    hide_command_line()  # before anything of the sandbox runs
    if sys.argv[1] == "--spare":  # --spare GO_FD PATHS_MODULE
        sys.exit(spare(int(sys.argv[2]), sys.argv[3]))
    sys.exit(main(sys.argv[1]))
