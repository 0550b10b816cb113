"""Test environments: an interpreter plus the packages a repository's tests need at a commit,
built once per spec on each node into a content-addressed cache, shared by every instance.

An instance's `environment` (schema v3, a JSON object; `EnvSpec` here) says:

    snapshot        "files": the instance's own code context is the whole repository (the demo
                    set); "git": the repository at `base_commit`, from a local clone
    python          "host": the project's own interpreter and packages (it has pytest; the demo
                    set needs nothing else); or a version, "3.9", found on this machine
    requirements    pip requirement strings, the test runner pinned among them
    install         "none"; or "snapshot": the snapshot's declared dependencies (setup.py,
                    setup.cfg, pyproject.toml) are installed, and the snapshot's own
                    distribution removed again: the code under test is always the snapshot on
                    the import path (`pythonpath`), never a copy in site-packages. In either
                    mode, a release of the repository a dependency pulled in is removed after
                    the last install (owncode.py), the names it goes by part of the cache key
    extras          with "snapshot": extras of the snapshot's own project to install ("test")
    exclude_newer   resolve every package as of this date (uv's --exclude-newer), the runner too:
                    a current pytest breaks old suites; an exact pin (`name==1.2`) is exempt:
                    it names one release, which SWE-bench installs whenever it was published
    undated         requirements exempt from that date: a suite's test files published as a
                    package after the commit (a repository's `test_data`, repos.py: pydicom's
                    tests download theirs at run time, which SWE-bench's containers can and the
                    sandbox cannot)
    pythonpath      directories of the snapshot put on PYTHONPATH ("." or "src")
    runner          the suite's test command, a name registered in runners.RUNNERS: "pytest"
                    (the default), or "django" (the repository's tests/runtests.py, its test
                    modules given as dotted labels); `runner_args` its options for the version
                    (SWE-bench's: `--settings=test_sqlite --parallel 1`). Not part of the cache
                    key: it does not change the build
    network         "none": no network at all (the loopback too is down); "loopback": the
                    sandbox's own loopback is up, for tests that serve on 127.0.0.1 (pytest-
                    httpbin, a local test server); never the host's network (sandbox.py)
    services        stand-ins for public services the tests call, by name (services.py:
                    "httpbin" serves http://httpbin.org on the sandbox's own loopback, the name
                    mapped in the sandbox's own /etc/hosts); each has its own venv, built and
                    cached here from its own EnvSpec; not part of this environment's cache key

Build, and what runs where (the threat model: the snapshot's code, and everything it writes
or prints, is hostile; setup.py and a PEP 517 build backend are its code):

    host, root      uv only, given packages of the index by name: `uv venv` with the
                    interpreter (pythons.py finds it), then `uv pip install --exclude-newer
                    DATE --compile-bytecode` of SEED (pip, setuptools, wheel: what other
                    environments come with), the snapshot's static build requirements
                    (pyproject.toml's `[build-system].requires`, read with tomllib) and the
                    spec's requirements, where two of which name one package the later wins
                    (SWE-bench installs its sources one after the other: the requirement
                    files, then pip_packages), said in the log; bytecode compiled at install
                    as pip does (an old package's invalid escape is then a warning at install,
                    not an error under a suite's `filterwarnings = error`)
    sandbox, nobody the venv's pip builds and installs the snapshot (`pip install --no-deps
                    --no-build-isolation --no-index /testbed[extras]`) into a scratch folder,
                    the only host directory it may write (`rw_paths`; the venv is mounted
                    read-only: uv runs the venv's python on the host, so nothing the build
                    leaves may be in it; the build's build/ and *.egg-info land in the
                    overlay's tmpfs, the snapshot on disk stays as the commit has it); then a
                    script of this module, run by the venv's python, prints that
                    distribution's Requires-Dist for the spec's extras and this interpreter
                    (markers evaluated) as JSON. A build that fails while the snapshot's own
                    metadata has a requirement that does not parse (`pytest>=7.*`: refused on
                    every interpreter) runs once more over those files read another way, each
                    such requirement repaired or dropped (lenient.py), noted in REPAIRED
    host, root      that JSON is read as hostile text: bounded, each entry a PEP 508
                    requirement of the index by name (one with a URL or a path, or named
                    like an archive, which uv reads as a file, would be built as root:
                    EnvironmentFailed names it); one `uv pip install` of them
                    with the requirements and SEED, as of the date; then the distribution's
                    .dist-info (regular files only) is copied into site-packages, its code
                    never: the version and entry points stay (sqlfluff reads its version with
                    importlib.metadata and finds its rules by entry point, as after
                    SWE-bench's `pip install -e .`), the code is only the snapshot's

The tests' own subprocesses: bootstrap.py puts the snapshot's folders on the test process's
path and its PYTHONPATH; a suite that starts Python with a PYTHONPATH of its own (werkzeug's
development server) would not find the code under test, which is never installed. A .pth file
in the environment (IMPORT_PATH, written on first use) adds those folders to every Python process
of the environment except the test process itself, which keeps bootstrap.py's order (nothing of
the repository on its path before the recorder).

Compiled modules (astropy's C and Cython extensions; SWE-bench's `pip install -e .` builds them
in its testbed): the `*.so` files the sandboxed build left in a package the snapshot has are
copied (regular files, bounded) into `products/<key>-<snapshot>` beside the environments, and
every run mounts that folder read-only over the snapshot (sandbox.run's `layers`). The cache
key reads the dependency files only, so commits that share an environment do not share these:
each further snapshot's modules are built when first asked for, in the sandbox, the same way,
and kept (Environment.built_s counts that build). The modules are the base commit's: a patch
that changes a C source is not rebuilt, as SWE-bench's evaluation does not rebuild either.

The snapshot must be owned by the sandbox's user (snapshots.py makes it so): the build writes
into it through the overlay. What a build needs from the network beyond its static build
requirements (setup_requires fetched at build time) is not there: the sandbox has none. The
cache key is a hash of the spec and, for "snapshot" installs, of the dependency files at the
commit; a build runs under a file lock (concurrent runners on a node build once) into a
temporary directory renamed into place, so a half-built environment is never used. A failed
build raises EnvironmentFailed naming the step with the tool's last lines; an interpreter that
is not on this machine raises InterpreterUnavailable: both are counted by the callers, never
fatal to a run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from conf.io import locked
from reward.execution import (
    candidates,
    declared,
    identity,
    jscommand,
    jsenv,
    node,
    owncode,
    repos,
    sandbox,
    testcommand,
)
from reward.execution.lenient import repaired
from reward.execution.pythons import RELEASES, InterpreterUnavailable, find_python, installed_for
from reward.execution.runners import RUNNERS, runner_for

log = logging.getLogger(__name__)

# find_python and InterpreterUnavailable live in pythons.py; callers import them from here too.
__all__ = [
    "EnvSpec",
    "Environment",
    "EnvironmentFailed",
    "Environments",
    "InterpreterUnavailable",
    "derive_candidates",
    "derive_spec",
    "find_python",
]

# Files whose content decides what a "snapshot" install installs (setup.py often reads the
# requirements files): part of the cache key.
_DEPENDENCY_FILES = (
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "requirements.txt",
    *declared.TEST_REQUIREMENT_FILES,
    *repos.TEST_REQUIREMENT_FILES,
)
# What every environment has besides the spec's requirements: what `python -m venv`, virtualenv
# and conda environments come with (uv's venvs have none of it), resolved as of the spec's date.
# Old test suites import pkg_resources (pydicom's data manager does at import time).
SEED = ("pip", "setuptools", "wheel")
# Test requirements that serve on 127.0.0.1 during the tests: such suites get the loopback
# (ephemeral-port-reserve: werkzeug's tests start its development server on a reserved port;
# uvicorn: httpx's serve its test app).
LOCAL_SERVERS = frozenset(
    {"pytest-httpbin", "httpbin", "pytest-localserver", "pytest-httpserver", "pytest-aiohttp"}
    | {"ephemeral-port-reserve", "uvicorn"}
)
# uv's hint for a package the date cut filtered (_uv_install), and how many it may exempt.
_FILTERED = re.compile(r"`([A-Za-z0-9][A-Za-z0-9._-]*)` was filtered by `exclude-newer`")
_EXEMPT_RETRIES = 5
# uv's error for an exact pin it could only build from source, and failed to: conda (SWE-bench's
# installer) has builds of releases PyPI has no wheel of for that interpreter (numpy 1.19.2 and
# scipy 1.5.2 for Python 3.9, which PyPI first has as wheels in 1.19.3 and 1.5.4).
_NO_WHEEL = re.compile(r"Failed to build `([A-Za-z0-9][A-Za-z0-9._-]*)==(\d+)\.(\d+)(?:\.[\w.]+)?`")
# Part of every cache key: a change to how environments are built invalidates the old ones.
BUILD_VERSION = b"6: bytecode compiled, exact pins undated, the later wins, the repository's own code removed"
_UV = (sys.executable, "-m", "uv")
# The sandboxed build: nothing from the network or a cache, no bytecode (the code is dropped),
# always a wheel (PEP 517, also with an old pip), with the build requirements already installed.
_PIP_BUILD = (
    "--quiet",
    "--no-deps",
    "--no-build-isolation",
    "--no-index",
    "--no-compile",
    "--no-cache-dir",
    "--disable-pip-version-check",
    "--use-pep517",
)
# Bounds on what the host reads back from the sandboxed build.
_LISTED_BYTES, _LISTED_MAX = 1 << 20, 2000  # the requirements' JSON
_METADATA_BYTES, _METADATA_DEPTH = 16 << 20, 4  # the .dist-info folder copied into site-packages
# The build's version modules the runs add to the snapshot (_generated_versions), in the env.
GENERATED, _GENERATED_MAX, _GENERATED_BYTES = "generated.json", 20, 64 << 10
# A build that compiled extension modules (astropy's C and Cython): the marker in the
# environment, what a compiled module's name ends with, and the bounds on what is kept of them.
COMPILED, _EXTENSION_SUFFIXES = "compiled", (".so",)
_PRODUCTS_FILES, _PRODUCTS_BYTES = 5000, 1 << 30
# What a failed build of the snapshot itself says (derivation.py: the interpreter's, not the set's).
SNAPSHOT_BUILD = "build the snapshot (in the sandbox)"
# The notes of a build over repaired metadata (lenient.py), in the environment: what it read instead.
REPAIRED = "repaired.json"
# The .pth file that puts the snapshot's folders on the path of the tests' own subprocesses.
IMPORT_PATH = "_swe_rl_snapshot.pth"
_DIST_INFO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+!-]*\.dist-info")
# What a requirement's name may not end with: a file's name, never a package of the index.
_ARCHIVES = (".whl", ".tar.gz", ".tgz", ".zip", ".tar.bz2", ".tar", ".egg")
# Run in the sandbox by the venv's python (-I: neither the snapshot nor the build's output is on
# its path): the Requires-Dist of the one distribution in argv[1] whose markers hold for this
# interpreter and the extras argv[2:], a self-reference ("widget[socks]") adding its extras.
# pip's vendored packaging: the venv has pip (SEED), any version since 2018 has these.
# The METADATA file is read with the email parser, not importlib.metadata: Python 3.6 and 3.7
# (SWE-bench's django 3.0-3.2 specs) have no importlib.metadata.
_REQUIRES = """
import email.parser, glob, json, os, sys
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name
(info,) = glob.glob(os.path.join(sys.argv[1], "*.dist-info"))
with open(os.path.join(info, "METADATA"), encoding="utf-8") as f:
    meta = email.parser.Parser().parse(f, headersonly=True)
own, extras, done, out = canonicalize_name(meta["Name"]), set(sys.argv[2:]), None, []
while done != extras:
    done, out = set(extras), []
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in [*sorted(done), ""]):
            if canonicalize_name(req.name) == own:
                extras |= set(req.extras)
                continue
            req.marker = None
            out.append(str(req))
print(json.dumps(list(dict.fromkeys(out))))
"""


class EnvironmentFailed(RuntimeError):
    """An environment could not be built; the message has the reason and the tool's last lines."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output  # the tool's whole output (what _uv_install reads)


@dataclass(frozen=True)
class EnvSpec:
    snapshot: str = "files"  # "files" | "git"
    python: str = "host"  # "host" | "3.9", "3.11", ...
    requirements: tuple[str, ...] = ()
    install: str = "none"  # "none" | "snapshot"
    extras: tuple[str, ...] = ()  # with install="snapshot": extras of the project itself
    exclude_newer: str | None = None  # ISO date
    pythonpath: tuple[str, ...] = (".",)
    network: str = "none"  # "none" | "loopback": the sandbox's own loopback is up
    undated: tuple[str, ...] = ()  # requirements not held to exclude_newer (repos.Repository.test_data)
    services: tuple[str, ...] = ()  # stand-ins served in the sandbox (services.REGISTRY)
    version: str | None = None  # the project's version for a setuptools_scm build (None: 0.0.0)
    # Install the snapshot's static [build-system].requires before its build; False: the
    # requirements alone build it, as SWE-bench's `pip install --no-build-isolation` does
    # (scikit-learn: its build-requires' oldest-supported-numpy would fight the spec's numpy pin).
    build_requires: bool = True
    runner: str = "pytest"  # a runners.RUNNERS name: the suite's test command, not part of the build
    runner_args: tuple[str, ...] = ()  # the runner's options for this version (django: --settings=test_sqlite ...)
    # A JavaScript/TypeScript environment's Node version ("20", "18.19.0", "host"; node.py);
    # None: a Python one. With it, `install` is "lock" (the lock file's dependencies) or "none".
    node: str | None = None
    # The runner's own selection of test files as the repository's command writes it (files,
    # folders, globs: axios's `test/unit/**/*.js`; jscommand.py): a test patch's file outside
    # it is another runner's (axios's test/specs/: karma's, in a browser) and is not run. ()
    # = every file of the runner's language. Not part of the build.
    test_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.runner not in RUNNERS:
            raise ValueError(f"environment: runner {self.runner!r} is not one of {sorted(RUNNERS.names())}")
        language = runner_for(self.runner).language
        if (self.node is not None) != (language == "javascript"):
            need = "a node version" if language == "javascript" else "no node version"
            raise ValueError(f"environment: runner {self.runner!r} ({language}) takes {need}, got node={self.node!r}")
        if self.node is not None and (self.install not in ("lock", "none") or self.python != "host"):
            raise ValueError(f"environment: node={self.node!r} takes install 'lock' or 'none' and no python")
        if self.node is None and self.install == "lock":
            raise ValueError("environment: install 'lock' is a JavaScript environment's: it needs `node`")

    @classmethod
    def from_json(cls, text: str | None) -> EnvSpec | None:
        if text is None:
            return None
        raw: dict[str, Any] = json.loads(text)
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"environment: unknown keys {sorted(unknown)}")
        for key in ("requirements", "pythonpath", "extras", "undated", "runner_args", "services", "test_paths"):
            if key in raw:
                raw[key] = tuple(raw[key])
        return cls(**raw)

    def to_json(self) -> str:
        """The spec as instances carry it; the runner's fields and the services only where they
        are not the default (a pytest spec without services reads as before they existed)."""
        return json.dumps(self._fields(), sort_keys=True)

    def build_json(self) -> str:
        """What the environment's build depends on: the spec without its test command and its
        services (one environment serves every runner; services run from venvs of their own),
        so the keys of environments built before those fields existed stay what they were."""
        fields = {
            k: v for k, v in self._fields().items() if k not in ("runner", "runner_args", "services", "test_paths")
        }
        return json.dumps(fields, sort_keys=True)

    def _fields(self) -> dict[str, Any]:
        fields = asdict(self)
        if self.runner == "pytest" and not self.runner_args:
            del fields["runner"], fields["runner_args"]
        for name in ("services", "version", "node", "test_paths"):
            if not fields[name]:
                del fields[name]
        if self.build_requires:  # the default: specs written before the field read and hash as before
            del fields["build_requires"]
        return fields


@dataclass(frozen=True)
class Environment:
    """A built environment, as the sandbox needs it."""

    python: str  # interpreter path (the same inside the sandbox: it is mounted there read-only)
    ro_paths: tuple[str, ...]  # host paths the interpreter needs, mounted read-only
    variables: dict[str, str] = field(default_factory=dict)  # the command's whole environment
    key: str = "host"
    built_s: float = 0.0  # seconds this call spent building (0 when cached)
    generated: dict[str, str] = field(default_factory=dict)  # snapshot path -> a version module the build wrote
    layers: tuple[str, ...] = ()  # read-only folders over the snapshot: its compiled modules (build products)

    @staticmethod
    def read_generated(target: Path) -> dict[str, str]:
        path = target / GENERATED
        found: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}
        return found


def _sandbox_vars(spec: EnvSpec) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": ":".join(os.path.normpath(f"/testbed/{p}") for p in spec.pythonpath),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }


def _import_path(target: Path, spec: EnvSpec) -> None:
    """IMPORT_PATH in the environment's site-packages (written once, environments built before it
    included): the snapshot's folders on sys.path of every Python process the tests start
    themselves (werkzeug's development server: a subprocess whose PYTHONPATH is its own), as
    after SWE-bench's `pip install -e .`. The test process itself is left to bootstrap.py (the
    repository after the standard library and the environment, nothing of it imported before
    the recorder): while SWE_RL_REPORT_FD is set, which bootstrap.py removes before any test
    runs, the line adds nothing. On the host the folders do not exist (nothing is imported)."""
    sites = sorted(target.glob("lib/python*/site-packages"))
    if not sites or (sites[0] / IMPORT_PATH).is_file():
        return
    folders = [os.path.normpath(f"/testbed/{p}") for p in spec.pythonpath]
    line = f"import os, sys; 'SWE_RL_REPORT_FD' in os.environ or sys.path.extend({folders!r})\n"
    tmp = sites[0] / f".{IMPORT_PATH}.{os.getpid()}.tmp"
    tmp.write_text(line)
    tmp.chmod(0o644)
    os.replace(tmp, sites[0] / IMPORT_PATH)  # a runner beside this one writes the same line


def _base_prefix(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout.strip()


class Environments:
    """The node's environment cache under `root` (e.g. .cache/execution/envs)."""

    def __init__(self, root: Path, build_timeout_s: float = 1800.0) -> None:
        self.root, self.build_timeout_s = root, build_timeout_s
        self.builds = 0  # environments this process built (the rest came from the cache)
        self._ready: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {}  # key -> (ro_paths, generated)
        self._moved: dict[str, dict[str, str]] = {}  # python -> {pin without a wheel: its line, wheels only}
        self.toolchains = node.Toolchains(root.parent / "tools" / "node", build_timeout_s)  # JavaScript's (node.py)

    def key(self, spec: EnvSpec, snapshot: Path | None) -> str:
        h = hashlib.sha256(spec.build_json().encode() + BUILD_VERSION)
        if spec.install == "snapshot" and snapshot is not None:
            for name in _DEPENDENCY_FILES:
                if (snapshot / name).is_file():
                    h.update(name.encode() + b"\0" + (snapshot / name).read_bytes())
        if snapshot is not None:  # what the build removes as the repository's own (owncode.py)
            h.update(b"own\0" + json.dumps(_own(snapshot, spec)).encode())
        return h.hexdigest()[:16]

    def ensure(self, spec: EnvSpec, snapshot: Path | None = None) -> Environment:
        if spec.node is not None:
            return self._ensure_node(spec, snapshot)
        variables = _sandbox_vars(spec)
        if spec.python == "host":
            if spec.requirements or spec.install != "none":
                raise EnvironmentFailed("python=host takes no requirements: they would change the project's own venv")
            # The project's venv holds the trainer's pytest plugins (hypothesis, hydra, anyio),
            # which no repository's tests asked for: loading them took 3.5 of a 3.9 s run of one
            # test (`python -X importtime -m pytest`); the recorder is loaded by bootstrap.py itself.
            variables["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
            if snapshot is not None:
                _host_shadows(snapshot, spec)
            return Environment(sys.executable, (sys.prefix, sys.base_prefix), variables)
        key = self.key(spec, snapshot)
        target = self.root / key
        python = target / "bin" / "python"
        built = 0.0
        if not python.exists():
            with locked(target):
                if not python.exists():  # built by another runner meanwhile
                    start = time.monotonic()
                    self._build(spec, snapshot, target)
                    self.builds += 1
                    built = time.monotonic() - start
        if key not in self._ready:  # a built environment never changes: its prefix and files read once
            _import_path(target, spec)
            self._ready[key] = ((str(target), _base_prefix(str(python))), Environment.read_generated(target))
        ro, generated = self._ready[key]
        layers: tuple[str, ...] = ()
        if snapshot is not None and (target / COMPILED).is_file():
            start = time.monotonic()
            layers = (str(self._products(spec, snapshot, key, target)),)
            built += time.monotonic() - start
        return Environment(str(python), ro, variables, key, built, generated, layers)

    def _ensure_node(self, spec: EnvSpec, snapshot: Path | None) -> Environment:
        """A JavaScript environment (node.py): the toolchain, and the lock file's node_modules
        laid over the snapshot, built once per (package.json and lock file, toolchain)."""
        binary, version = self.toolchains.find(spec.node or "host")
        key = node.cache_key(spec.build_json() + version, snapshot if spec.install == "lock" else None)
        target = self.root / key
        built = 0.0
        if not (target / node.RECORD).is_file():
            with locked(target):
                if not (target / node.RECORD).is_file():  # built by another runner meanwhile
                    start = time.monotonic()
                    self._staged(target, lambda tmp: self._build_node(spec, snapshot, binary, version, tmp, target))
                    self.builds += 1
                    built = time.monotonic() - start
        layers = (str(target / node.LAYER),) if spec.install == "lock" else ()
        return Environment(binary, node.ro_paths(binary), node.run_variables(binary), key, built, {}, layers)

    def _build_node(
        self, spec: EnvSpec, snapshot: Path | None, binary: str, version: str, tmp: Path, target: Path
    ) -> None:
        shutil.rmtree(tmp, ignore_errors=True)
        layer = tmp / node.LAYER
        layer.mkdir(parents=True)
        tool = "none"
        if spec.install == "lock":
            if snapshot is None:
                raise EnvironmentFailed("install=lock needs the snapshot")
            tools = self.root.parent / "tools"
            try:
                tool = node.host_install(snapshot, layer, spec.exclude_newer, tools, self.build_timeout_s)
            except RuntimeError as exc:
                raise EnvironmentFailed(f"install the dependencies (on the host, scripts off): {exc}") from None
            try:
                ro = node.ro_paths(binary)
                pnpm = node.pnpm_for(snapshot) if tool == "pnpm install" else ""
                node.sandboxed_rebuild(binary, version, layer, ro, tools, self.build_timeout_s, pnpm)
            except RuntimeError as exc:
                raise EnvironmentFailed(f"{node.REBUILD}: {exc}") from None
            # A release of the repository's own package a dependency pulled in (owncode.py).
            owncode.remove_js(layer, owncode.js_names(snapshot, node.workspace_manifests(snapshot)))
            # The manifests copied for the host step go: the runs read the snapshot's own.
            for path in sorted(layer.rglob("*"), reverse=True):
                if path.is_file() and not path.is_symlink() and "node_modules" not in path.relative_to(layer).parts:
                    path.unlink()
        (tmp / node.RECORD).write_text(json.dumps({"node": binary, "version": version, "tool": tool}))
        _readable(tmp)
        os.replace(tmp, target)

    def products_path(self, key: str, snapshot: Path) -> Path:
        """Where the compiled modules of `snapshot` built in environment `key` live: one folder
        per (environment, snapshot), since the cache key reads the dependency files only and
        two commits that share them differ in their C sources. A snapshot is named by its path:
        snapshots.py's are content-addressed and never change once in place."""
        where = hashlib.sha256(str(snapshot.resolve()).encode()).hexdigest()[:16]
        return self.root / "products" / f"{key}-{where}"

    def _products(self, spec: EnvSpec, snapshot: Path, key: str, target: Path) -> Path:
        """The snapshot's compiled extension modules (build products), built once per
        (environment, snapshot) in the sandbox as the environment's own build was, kept beside
        the environment and mounted read-only over the snapshot in every run: what SWE-bench's
        `pip install -e .` (a build in place) leaves in its testbed."""
        dest = self.products_path(key, snapshot)
        if dest.is_dir():
            return dest
        with locked(dest):
            if not dest.is_dir():  # built by another runner meanwhile
                dest.parent.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryDirectory(prefix=f".{dest.name}.build-", dir=dest.parent) as out:
                    python = str(target / "bin" / "python")
                    self._sandboxed_pip(python, spec, snapshot, target, Path(out))
                    if not _keep_products(Path(out), snapshot, spec.pythonpath, dest):
                        dest.mkdir()  # this commit compiles none: an empty layer, not a rebuild every run
        return dest

    def _build(self, spec: EnvSpec, snapshot: Path | None, target: Path) -> None:
        self._staged(target, lambda tmp: self._build_into(spec, snapshot, target, tmp))

    @staticmethod
    def _staged(target: Path, build: Callable[[Path], None]) -> None:
        """`build(tmp)` into a temporary folder beside `target`, which it renames into place
        when done: a failed build leaves nothing on disk."""
        tmp = target.with_name(f".{target.name}.tmp")
        try:
            build(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _build_into(self, spec: EnvSpec, snapshot: Path | None, target: Path, tmp: Path) -> None:
        interpreter = find_python(spec.python)
        shutil.rmtree(tmp, ignore_errors=True)
        self._tool([*_UV, "venv", "--quiet", "--python", interpreter, str(tmp)], "venv")
        python = str(tmp / "bin" / "python")
        requirements = [*later_wins(spec.requirements), *spec.undated, *SEED]
        if spec.install == "none":
            self._uv_install(python, spec, requirements, "install the requirements")
            if snapshot is not None:
                (site,) = tmp.glob("lib/python*/site-packages")
                owncode.remove_python(site, *_own(snapshot, spec))
        elif snapshot is None:
            raise EnvironmentFailed("install=snapshot needs the snapshot")
        else:
            build = declared.build_requires(snapshot) if spec.build_requires else []  # read, never run
            self._uv_install(python, spec, [*build, *requirements], "install the build requirements")
            with tempfile.TemporaryDirectory(prefix=f".{target.name}.build-", dir=target.parent) as out:
                own = self._sandboxed_build(spec, snapshot, tmp, Path(out))
                self._uv_install(python, spec, [*own, *requirements], "install the snapshot's dependencies")
                (site,) = tmp.glob("lib/python*/site-packages")
                owncode.remove_python(site, *_own(snapshot, spec))  # a release a dependency pulled in
                _install_metadata(Path(out), site)  # the code under test is the snapshot on PYTHONPATH
                generated = _generated_versions(Path(out), snapshot, spec.pythonpath)
                (tmp / GENERATED).write_text(json.dumps(generated, sort_keys=True))
                # A build that compiled modules: this snapshot's are kept now, any other
                # snapshot's are built when first asked for (_products).
                products = self.products_path(target.name, snapshot)
                if _keep_products(Path(out), snapshot, spec.pythonpath, products):
                    (tmp / COMPILED).write_text(products.name)
        if not uv_compiles(spec.python):  # as pip would at install: packages of the index, compiled, never run
            (site,) = tmp.glob("lib/python*/site-packages")
            subprocess.run(
                [python, "-m", "compileall", "-q", str(site)], capture_output=True, timeout=self.build_timeout_s
            )
        _readable(tmp)
        os.replace(tmp, target)

    def _sandboxed_build(self, spec: EnvSpec, snapshot: Path, venv: Path, out: Path) -> list[str]:
        """Build the snapshot with the environment's pip in the sandbox, into `out` (the one
        directory it may write, besides its tmpfs), and return its own distribution's
        requirements for the spec's extras, checked. The venv is mounted read-only: what the
        build leaves can never be run on the host (uv runs the venv's python to query it)."""
        python = str(venv / "bin" / "python")
        ro = self._sandboxed_pip(python, spec, snapshot, venv, out)
        listed = self._sandboxed(
            [python, "-I", "-c", _REQUIRES, str(out), *spec.extras],
            snapshot,
            ro,
            out,
            "read the snapshot's requirements (in the sandbox)",
        )
        return _requirements(listed, "the snapshot's requirements")

    def _sandboxed_pip(self, python: str, spec: EnvSpec, snapshot: Path, venv: Path, out: Path) -> tuple[str, ...]:
        """The venv's pip builds and installs the snapshot into `out`, in the sandbox; returns
        the read-only paths it ran with."""
        identity.give(out)
        own = f"/testbed[{','.join(spec.extras)}]" if spec.extras else "/testbed"
        pip = [python, "-I", "-m", "pip", "install", *_PIP_BUILD, "--target", str(out), own]
        ro = (str(venv), _base_prefix(python))
        try:
            self._sandboxed(pip, snapshot, ro, out, SNAPSHOT_BUILD, spec.version)
        except EnvironmentFailed:
            changes, repairs = repaired(snapshot)
            if not repairs:
                raise
            # Its own metadata has a requirement its build refuses (on every interpreter): built
            # once more over files that read each another way or drop it, noted (lenient.py).
            log.warning("[env] %s: once more with %s", SNAPSHOT_BUILD, "; ".join(r.note() for r in repairs))
            shutil.rmtree(out)
            out.mkdir()
            identity.give(out)
            self._sandboxed(pip, snapshot, ro, out, SNAPSHOT_BUILD, spec.version, changes)
            if not (venv / REPAIRED).exists():
                (venv / REPAIRED).write_text(json.dumps([r.note() for r in repairs]))
        return ro

    def _sandboxed(
        self,
        argv: list[str],
        snapshot: Path,
        ro: tuple[str, ...],
        out: Path,
        what: str,
        version: str | None = None,
        changes: dict[str, str | None] | None = None,
    ) -> str:
        limits = sandbox.Limits(wall_s=self.build_timeout_s, cpu_s=int(self.build_timeout_s), output_bytes=4 << 20)
        # A git archive has no .git: setuptools_scm projects build only with a version given.
        variables = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
        variables["SETUPTOOLS_SCM_PRETEND_VERSION"] = version or "0.0.0"
        try:
            result = sandbox.run(
                argv, snapshot=snapshot, changes=changes, ro_paths=ro, rw_paths=(out,), env=variables, limits=limits
            )
        except sandbox.SandboxUnavailable as exc:
            raise EnvironmentFailed(f"{what}: {exc}") from None
        if result.killed or result.returncode != 0:
            why = f"stopped ({result.killed})" if result.killed else "failed"
            # pip prints the build's own error above a trailer of about ten lines.
            raise EnvironmentFailed(f"{what} {why}: {_tail(result.stderr or result.stdout, 30)}")
        return result.stdout

    def _uv_install(self, python: str, spec: EnvSpec, requirements: list[str], what: str) -> None:
        """One `uv pip install`. Where the date cut leaves a requirement unsatisfiable, uv names
        the package it filtered (an exact pin exempt from the date needs a dependency published
        after it: sphinx's `Jinja2==3.0.3` needs MarkupSafe 2.0, a 2020 cut has 1.1); that
        package is exempted too, logged, and the install retried, at most _EXEMPT_RETRIES times.
        SWE-bench resolves with no date at all.

        Where an exact pin has no wheel for the interpreter and its source does not build, the
        pin becomes its release line from that version on, wheels only (`numpy==1.19.2` ->
        `numpy>=1.19.2,<1.20`, uv's --only-binary), logged, and the install retried."""
        exempt: list[str] = []
        # Pins moved to wheels by an earlier install of this interpreter (the build's next step,
        # another environment): each source build that fails costs minutes.
        moved = self._moved.setdefault(spec.python, {})
        requirements = [moved.get(r, r) for r in requirements]
        wheels = [_canonical(r) for r in moved]  # packages held to wheels after their pin failed to build
        while True:
            try:
                self._tool(_install(python, spec, requirements, tuple(exempt), tuple(wheels)), what)
                return
            except EnvironmentFailed as exc:
                if (m := _NO_WHEEL.search(exc.output)) and _canonical(m.group(1)) not in wheels:
                    name, major, minor = _canonical(m.group(1)), int(m.group(2)), int(m.group(3))
                    pins = [r for r in requirements if exact_pin(r) and _canonical(r) == name]
                    line = f"<{major}.{minor + 1}"
                    moved.update({r: f"{r.replace('==', '>=', 1)},{line}" for r in pins})
                    requirements = [moved.get(r, r) for r in requirements]
                    log.info("%s: %s has no wheel here and its source did not build: %s, wheels only",
                             what, pins, [moved[r] for r in pins])  # fmt: skip
                    wheels.append(name)
                    continue
                more = [
                    n for n in dict.fromkeys(_canonical(n) for n in _FILTERED.findall(exc.output)) if n not in exempt
                ]
                if not more or not spec.exclude_newer or len(exempt) + len(more) > _EXEMPT_RETRIES:
                    raise
                log.info(
                    "%s: %s exempt from the date %s too (uv: filtered by exclude-newer)", what, more, spec.exclude_newer
                )
                exempt += more

    def _tool(self, cmd: list[str], what: str) -> None:
        """Run a trusted tool (uv) on the host: nothing it is given is code of the snapshot."""
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.build_timeout_s)
        except subprocess.TimeoutExpired:
            raise EnvironmentFailed(f"{what}: no result within {self.build_timeout_s:.0f} s") from None
        if proc.returncode != 0:
            raise EnvironmentFailed(f"{what} failed: {_tail(proc.stderr or proc.stdout)}", proc.stderr or proc.stdout)


def _readable(folder: Path) -> None:
    """Every file and folder of a built environment readable by the sandbox's user."""
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _install(
    python: str,
    spec: EnvSpec,
    requirements: list[str],
    exempt_more: tuple[str, ...] = (),
    wheels_only: tuple[str, ...] = (),
) -> list[str]:
    """`uv pip install` of `requirements` into the venv of `python`, as of the spec's date (its
    undated requirements, exact pins and `exempt_more` exempt), each checked to be a requirement
    of the index by name; `wheels_only` packages are never built from source."""
    checked = [_requirement(r, "requirement") for r in dict.fromkeys(requirements)]
    compile_flag = ["--compile-bytecode"] if uv_compiles(spec.python) else []  # else compiled after (_build)
    cmd = [*_UV, "pip", "install", "--quiet", *compile_flag, "--python", python]
    for name in wheels_only:
        cmd += ["--only-binary", name]
    if spec.exclude_newer:
        cmd += ["--exclude-newer", spec.exclude_newer]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        exempt = [*spec.undated, *(r for r in checked if exact_pin(r)), *exempt_more]
        for name in dict.fromkeys(_canonical(r) for r in exempt):
            cmd += ["--exclude-newer-package", f"{name}={now}"]
    return [*cmd, *checked]


def uv_compiles(python: str) -> bool:
    """Whether uv's --compile-bytecode works with this interpreter: its compile script needs
    py_compile's invalidation modes (Python 3.7 on); older ones are compiled by their own
    compileall after the installs."""
    try:
        return tuple(int(part) for part in python.split(".")[:2]) >= (3, 7)
    except ValueError:
        return True  # "host" and the like: the project's own interpreter


def exact_pin(requirement: str) -> bool:
    """`name==1.2` (or `===`): one release, installed whatever the date. `==1.*` is a range."""
    specs = list(Requirement(requirement).specifier)
    return len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version


def later_wins(requirements: tuple[str, ...] | list[str]) -> list[str]:
    """One requirement per package, the last given (at the first one's place): SWE-bench
    installs a spec's sources one after the other, so a later pin replaces an earlier one,
    where one resolution of both would fail (`markupsafe==2.1.2` then `markupsafe==2.1.1`).
    A later bare name (`numpy`) replaces no earlier requirement that has a version: pip leaves
    a package that is already installed as it is (scikit-learn's specs: `numpy==1.19.2` in
    its conda packages, then `numpy` in its pip_packages)."""
    chosen: dict[str, str] = {}
    for req in requirements:
        # One with a marker applies to some interpreters only: it replaces nothing.
        name = req if ";" in req else _canonical(req)
        if name in chosen and not re.search(r"[<>=!~]", req) and re.search(r"[<>=!~]", chosen[name]):
            continue  # already satisfied, as pip would find it
        if name in chosen and chosen[name] != req:
            log.info("[env] %r and then %r: the later wins, as SWE-bench installs them", chosen[name], req)
        chosen[name] = req
    return list(chosen.values())


def _requirements(text: str, source: str) -> list[str]:
    """The JSON list of requirement strings a sandboxed step printed, each checked."""
    try:
        listed = json.loads(text) if len(text) <= _LISTED_BYTES else None
    except ValueError:
        listed = None
    if not isinstance(listed, list) or len(listed) > _LISTED_MAX:
        raise EnvironmentFailed(f"{source}: not a JSON list of at most {_LISTED_MAX} requirements: {text[:200]!r}")
    return [_requirement(entry, source) for entry in listed]


def _requirement(entry: object, source: str) -> str:
    """`entry` as a PEP 508 requirement of the package index, by name. One with a URL or a
    path (`name @ file:///...`, `name @ https://...`) is refused: uv would build it as root."""

    if not isinstance(entry, str) or len(entry) > 1000:
        raise EnvironmentFailed(f"{source}: not a requirement: {entry!r:.200}")
    try:
        req = Requirement(entry)
    except InvalidRequirement as exc:
        raise EnvironmentFailed(f"{source}: {entry!r} is not a requirement: {exc}") from None
    if req.url:
        raise EnvironmentFailed(f"{source}: {entry!r} installs from {req.url}, not from the index: refused")
    if req.name.lower().endswith(_ARCHIVES):  # uv reads `x-1.0-py3-none-any.whl` as a file when there is one
        raise EnvironmentFailed(f"{source}: {entry!r} names a file, not a package of the index: refused")
    return str(req)


def _own(snapshot: Path, spec: EnvSpec) -> tuple[list[str], list[str], list[str]]:
    """(the snapshot's own distribution names, the regular import names it provides, its
    namespace portions): what no environment built for it may hold in site-packages (owncode.py)."""
    return (declared.project_names(snapshot), *owncode.import_names(snapshot, spec.pythonpath))


@functools.cache
def _host_sites() -> tuple[Path, ...]:
    """The project's venv's site-packages folders."""
    return tuple(Path(p) for p in sys.path if p.startswith(sys.prefix) and p.endswith("site-packages"))


@functools.cache
def _host_distributions() -> frozenset[str]:
    """The normalized names of the distributions in the project's venv (by their folder's name)."""
    return frozenset(owncode.canonical(i.name.split("-")[0]) for s in _host_sites() for i in s.glob("*.dist-info"))


def _host_shadows(snapshot: Path, spec: EnvSpec) -> None:
    """python=host is the project's own venv, which is never changed: a snapshot whose own
    code it holds (a distribution of the snapshot's name, a package the snapshot provides)
    would be tested against that copy, so EnvironmentFailed names it."""
    projects, names, portions = _own(snapshot, spec)
    found = sorted({owncode.canonical(p) for p in projects} & _host_distributions())
    found += [str(e) for site in _host_sites() for name in [*names, *portions] for e in owncode.entries(site, name)]
    if found:
        raise EnvironmentFailed(
            f"python=host: the project's environment holds the snapshot's own code ({', '.join(found)}), which would"
            " shadow the code under test: give the instance an environment of its own"
        )


def _generated_versions(out: Path, snapshot: Path, pythonpath: tuple[str, ...]) -> dict[str, str]:
    """The version modules the build wrote that the commit does not have (setuptools_scm's
    `_pytest/_version.py`, which `import _pytest` needs), as snapshot paths -> content: the runs
    add them to the snapshot's files, as the build would have left them in an editable install.
    Only `*version.py` files of a package the snapshot has, read without following a link,
    bounded; the build is the snapshot's own code, so they carry no more than it does."""
    root = pythonpath[0] if pythonpath else "."
    found: dict[str, str] = {}
    # Entries are walked without following a link: a package folder the build made a link
    # (to any host folder) is never entered.
    packages = sorted((e for e in os.scandir(out) if e.is_dir(follow_symlinks=False)), key=lambda e: e.name)
    for package in packages:
        for entry in sorted(os.scandir(package.path), key=lambda e: e.name):
            if len(found) >= _GENERATED_MAX or not entry.name.endswith("version.py"):
                continue
            if not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_size > _GENERATED_BYTES:
                continue
            rel = (
                f"{package.name}/{entry.name}"
                if root in ("", ".")
                else str(PurePosixPath(root) / package.name / entry.name)
            )
            if not (snapshot / rel).parent.is_dir() or (snapshot / rel).exists():
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                found[rel] = f.read(_GENERATED_BYTES).decode("utf-8", "replace")
    return found


def _keep_products(out: Path, snapshot: Path, pythonpath: tuple[str, ...], dest: Path) -> bool:
    """Copy the compiled extension modules the build left in `out` (`*.so`, in a package the
    snapshot has) to `dest` at their snapshot paths, and say whether there were any (none:
    nothing is written). `out` was written by the snapshot's code: regular files only, folders
    walked without following a link, at most _PRODUCTS_FILES files and _PRODUCTS_BYTES in all.
    Written to a temporary folder renamed into place, readable by the sandbox's user."""
    root = pythonpath[0] if pythonpath else "."
    found: list[tuple[str, str]] = []  # (snapshot path, file in out)
    for folder, folders, names in os.walk(out):  # followlinks=False: a linked folder is not entered
        rel_folder = Path(folder).relative_to(out)
        if rel_folder.parts and rel_folder.parts[0].endswith((".dist-info", ".egg-info", ".data")):
            folders.clear()
            continue
        for name in sorted(names):
            source = Path(folder) / name
            if not name.endswith(_EXTENSION_SUFFIXES) or not stat.S_ISREG(source.lstat().st_mode):
                continue
            rel = str(PurePosixPath(root, *rel_folder.parts, name)) if root not in ("", ".") else str(rel_folder / name)
            if rel_folder.parts and (snapshot / root / rel_folder.parts[0]).is_dir():  # the snapshot's own package
                found.append((rel, str(source)))
    if not found:
        return False
    if len(found) > _PRODUCTS_FILES:
        raise EnvironmentFailed(f"the snapshot's build: {len(found)} compiled modules, over {_PRODUCTS_FILES}")
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    total = 0
    try:
        for rel, built in found:
            fd = os.open(built, os.O_RDONLY | os.O_NOFOLLOW)
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with os.fdopen(fd, "rb") as f, target.open("wb") as w:
                while chunk := f.read(1 << 20):
                    total += len(chunk)
                    if total > _PRODUCTS_BYTES:
                        raise EnvironmentFailed(
                            f"the snapshot's build: compiled modules over {_PRODUCTS_BYTES >> 20} MiB"
                        )
                    w.write(chunk)
        for path in [tmp, *tmp.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return True


def _install_metadata(out: Path, site: Path) -> None:
    """Copy the .dist-info directory of the one distribution the sandboxed build left in `out`
    into `site`, and nothing else: the version and entry points stay readable (sqlfluff reads
    its version with importlib.metadata and finds its rules by entry point, as after
    SWE-bench's `pip install -e .`), the code is only the snapshot's. `out` was written by the
    snapshot's code: regular files only (a symlink could name any host file), folders walked
    without following links and at most a few deep, the total bounded."""
    infos = [p for p in out.iterdir() if p.name.endswith(".dist-info")]
    if len(infos) != 1 or infos[0].is_symlink() or not infos[0].is_dir() or not _DIST_INFO.fullmatch(infos[0].name):
        raise EnvironmentFailed(
            f"the snapshot's build: expected one .dist-info folder, found {sorted(p.name for p in infos)}"
        )
    info, total = infos[0], 0
    dest = site / info.name
    shutil.rmtree(dest, ignore_errors=True)  # a package of the index by the same name: the snapshot's wins
    for folder, folders, names in os.walk(info):  # followlinks=False: a linked folder is not entered
        if len(Path(folder).relative_to(info).parts) >= _METADATA_DEPTH:
            folders.clear()  # licenses/ has a few levels; a deeper tree only costs the host
        for name in names:
            source = Path(folder) / name
            if not stat.S_ISREG(source.lstat().st_mode):
                continue
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                data = f.read(max(0, _METADATA_BYTES + 1 - total))
            total += len(data) + 512  # a file costs a block at least: a million empty ones are refused too
            if total > _METADATA_BYTES:
                raise EnvironmentFailed(f"the snapshot's build: its metadata is over {_METADATA_BYTES >> 20} MiB")
            target = dest / source.relative_to(info)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", name, maxsplit=1)[0]).lower()


def derive_spec(snapshot: Path, created_at: str | None, repo: str) -> EnvSpec:
    """The first of derive_candidates: the environment most likely to build and run."""
    return derive_candidates(snapshot, created_at, repo, limit=1)[0][1]


def derive_candidates(snapshot: Path, created_at: str | None, repo: str, limit: int = 4) -> list[tuple[str, EnvSpec]]:
    """The environments a mined commit's tests may run in, best first, each with the name of
    its requirement set (candidates.py decides which and in which order), from what its snapshot
    declares and what the harness knows of its repository ("owner/name": its row in repos.py).

    snapshot "git"; install "snapshot" when it has a setup.py / setup.cfg / pyproject.toml
    (its declared dependencies, with the set's extras and its test extras); requirements: the
    set's, the runner's package added when they do not name it (runners.py: pytest's); runner:
    the row's, with its options and, for pytest, those of the repository's own test command that
    the harness passes on (testcommand.py); python: candidates.interpreters' order;
    exclude_newer: the commit's date, raised to the interpreter's first release (nothing older
    installs on it); pythonpath "src" for a src layout, else the root; network "loopback" when the
    requirements name a local-server plugin (LOCAL_SERVERS), else "none"; undated: the row's
    test_data.

    A JavaScript or TypeScript repository (jsenv.is_javascript: a package.json and no Python
    project) gets jsenv.js_candidates': Node versions best first with its runner and options
    (jscommand.py), its lock file installed ("lock"), the command's own selection of test files
    (test_paths), the sandbox's own loopback up (test suites serve on 127.0.0.1 as a rule:
    supertest, a local http server).
    """
    if jsenv.is_javascript(snapshot):
        paths = jscommand.js_command(snapshot).paths
        found = jsenv.js_candidates(snapshot, created_at, repo, limit)
        return [(why, _js_spec({**fields, "test_paths": list(paths)})) for why, fields in found]
    date = _utc(created_at)
    compiled = [v for f in declared.requirement_files(snapshot) if (v := declared.compiled_with(_text(snapshot, f)))]
    pythons = candidates.interpreters(
        declared.python_requires(snapshot),
        installed_for(date, candidates.MATURE_DAYS),
        compiled,
        declared.tested_pythons(snapshot),
        date,
    )
    has_project = any((snapshot / f).is_file() for f in ("setup.py", "setup.cfg", "pyproject.toml"))
    row = repos.lookup(repo)
    runner, runner_args = row.command_at(None)
    if runner == "pytest":
        runner_args = (*runner_args, *testcommand.own_command(snapshot).args)
    needed = runner_for(runner).requirement
    test_extras = declared.test_extras(snapshot) if has_project else []
    out = []
    for python, chosen in candidates.plan(
        pythons, candidates.requirement_sets(snapshot, row.test_requirement_files), limit
    ):
        reqs = list(chosen.requirements)
        if needed is not None and not any(_canonical(r) == needed for r in reqs):
            reqs.append(needed)
        extras = tuple(dict.fromkeys([*chosen.extras, *test_extras])) if has_project else ()
        when = date
        if when is not None and when < f"{RELEASES[python]}T00:00:00Z":
            when = f"{RELEASES[python]}T00:00:00Z"
        spec = EnvSpec(
            snapshot="git",
            python=python,
            requirements=tuple(reqs),
            install="snapshot" if has_project else "none",
            extras=extras,
            exclude_newer=when,
            pythonpath=("src",) if declared.src_layout(snapshot) else (".",),
            runner=runner,
            runner_args=runner_args,
            network="loopback" if any(_canonical(r) in LOCAL_SERVERS for r in reqs) else "none",
            undated=row.test_data,
        )
        out.append((chosen.name, spec))
    return out


def _js_spec(fields: dict[str, Any]) -> EnvSpec:
    spec = EnvSpec.from_json(json.dumps({**fields, "network": "loopback"}))
    assert spec is not None
    return spec


def _text(snapshot: Path, rel: str) -> str:
    return (snapshot / rel).read_text(encoding="utf-8", errors="replace")


def _utc(created_at: str | None) -> str | None:
    """An ISO 8601 time as UTC "YYYY-MM-DDTHH:MM:SSZ" (what uv's --exclude-newer takes)."""
    if not created_at:
        return None

    when = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
