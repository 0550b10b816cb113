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
                    the import path (`pythonpath`), never a copy in site-packages
    extras          with "snapshot": extras of the snapshot's own project to install ("test")
    exclude_newer   resolve every package as of this date (uv's --exclude-newer), the runner too:
                    a current pytest breaks old suites
    undated         requirements exempt from that date: a suite's test files published as a
                    package after the commit (TEST_DATA: pydicom's tests download theirs at run
                    time, which SWE-bench's containers can and the sandbox cannot)
    pythonpath      directories of the snapshot put on PYTHONPATH ("." or "src")
    network         "none": no network at all (the loopback too is down); "loopback": the
                    sandbox's own loopback is up, for tests that serve on 127.0.0.1 (pytest-
                    httpbin, a local test server); never the host's network (sandbox.py)

Build: `uv venv` with the interpreter (pythons.py finds it), then one `uv pip install
--exclude-newer DATE` of a private copy of the snapshot (building writes build/ and *.egg-info
into the tree it builds, and the shared snapshot must stay as the commit has it) with the
requirements and SEED (pip, setuptools, wheel: what other environments come with), in one
resolution; then the files that the distribution installed from that copy (its direct_url.json
names it) put in site-packages are deleted, its metadata kept: the version and entry points stay
(sqlfluff reads its version with importlib.metadata and finds its rules by entry point, as after
SWE-bench's `pip install -e .`), the code is only the snapshot's. The cache key is a hash of the spec and, for
"snapshot" installs, of the dependency files at the commit; a build runs under a file lock (concurrent
runners on a node build once) into a temporary directory renamed into place, so a half-built
environment is never used. A failed build raises EnvironmentFailed with the tool's last lines;
an interpreter that is not on this machine raises InterpreterUnavailable: both are counted by
the callers, never fatal to a run.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reward.execution import declared
from reward.execution.pythons import RELEASES, InterpreterUnavailable, find_python, installed

# find_python and InterpreterUnavailable live in pythons.py; callers import them from here too.
__all__ = [
    "EnvSpec",
    "Environment",
    "EnvironmentFailed",
    "Environments",
    "InterpreterUnavailable",
    "derive_spec",
    "find_python",
]

# Files whose content decides what a "snapshot" install installs (setup.py often reads the
# requirements files): part of the cache key.
_DEPENDENCY_FILES = ("setup.py", "setup.cfg", "pyproject.toml", "requirements.txt", *declared.TEST_REQUIREMENT_FILES)
DEFAULT_PYTHON = "3.9"  # SWE-bench's for most repositories; used when nothing else decides
# What every environment has besides the spec's requirements: what `python -m venv`, virtualenv
# and conda environments come with (uv's venvs have none of it), resolved as of the spec's date.
# Old test suites import pkg_resources (pydicom's data manager does at import time).
SEED = ("pip", "setuptools", "wheel")
# Test requirements that serve on 127.0.0.1 during the tests: such suites get the loopback.
LOCAL_SERVERS = frozenset({"pytest-httpbin", "httpbin", "pytest-localserver", "pytest-httpserver", "pytest-aiohttp"})
# Projects whose tests fetch data files from the network at run time, and the package that ships
# those files for offline use (installed undated: it was published after most of their commits).
TEST_DATA = {"pydicom": ("pydicom-data",)}
# Part of every cache key: a change to how environments are built invalidates the old ones.
BUILD_VERSION = b"3: seeded with pip, setuptools, wheel; the own dist's metadata kept"


class EnvironmentFailed(RuntimeError):
    """An environment could not be built; the message has the reason and the tool's last lines."""


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
    undated: tuple[str, ...] = ()  # requirements not held to exclude_newer (TEST_DATA)

    @classmethod
    def from_json(cls, text: str | None) -> EnvSpec | None:
        if text is None:
            return None
        raw: dict[str, Any] = json.loads(text)
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"environment: unknown keys {sorted(unknown)}")
        for key in ("requirements", "pythonpath", "extras", "undated"):
            if key in raw:
                raw[key] = tuple(raw[key])
        return cls(**raw)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True)
class Environment:
    """A built environment, as the sandbox needs it."""

    python: str  # interpreter path (the same inside the sandbox: it is mounted there read-only)
    ro_paths: tuple[str, ...]  # host paths the interpreter needs, mounted read-only
    variables: dict[str, str] = field(default_factory=dict)  # the command's whole environment
    key: str = "host"
    built_s: float = 0.0  # seconds this call spent building (0 when cached)


def _sandbox_vars(spec: EnvSpec) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": ":".join(os.path.normpath(f"/testbed/{p}") for p in spec.pythonpath),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }


def _base_prefix(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout.strip()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class Environments:
    """The node's environment cache under `root` (e.g. .cache/execution/envs)."""

    def __init__(self, root: Path, build_timeout_s: float = 1800.0) -> None:
        self.root, self.build_timeout_s = root, build_timeout_s
        self.builds = 0  # environments this process built (the rest came from the cache)

    def key(self, spec: EnvSpec, snapshot: Path | None) -> str:
        h = hashlib.sha256(spec.to_json().encode() + BUILD_VERSION)
        if spec.install == "snapshot" and snapshot is not None:
            for name in _DEPENDENCY_FILES:
                if (snapshot / name).is_file():
                    h.update(name.encode() + b"\0" + (snapshot / name).read_bytes())
        return h.hexdigest()[:16]

    def ensure(self, spec: EnvSpec, snapshot: Path | None = None) -> Environment:
        variables = _sandbox_vars(spec)
        if spec.python == "host":
            if spec.requirements or spec.install != "none":
                raise EnvironmentFailed("python=host takes no requirements: they would change the project's own venv")
            return Environment(sys.executable, (sys.prefix, sys.base_prefix), variables)
        key = self.key(spec, snapshot)
        target = self.root / key
        python = target / "bin" / "python"
        if not python.exists():
            with _locked(target):
                if not python.exists():  # built by another runner meanwhile
                    start = time.monotonic()
                    self._build(spec, snapshot, target)
                    self.builds += 1
                    built = time.monotonic() - start
                    return Environment(str(python), (str(target), _base_prefix(str(python))), variables, key, built)
        return Environment(str(python), (str(target), _base_prefix(str(python))), variables, key)

    def _build(self, spec: EnvSpec, snapshot: Path | None, target: Path) -> None:
        interpreter = find_python(spec.python)
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        uv = [sys.executable, "-m", "uv"]
        self._tool([*uv, "venv", "--quiet", "--python", interpreter, str(tmp)], "venv")
        python = str(tmp / "bin" / "python")
        pip = [*uv, "pip", "install", "--quiet", "--python", python]
        if spec.exclude_newer:
            pip += ["--exclude-newer", spec.exclude_newer]
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            for name in spec.undated:
                pip += ["--exclude-newer-package", f"{_canonical(name)}={now}"]
        requirements = (*spec.requirements, *spec.undated)
        if spec.install == "snapshot":
            if snapshot is None:
                raise EnvironmentFailed("install=snapshot needs the snapshot")
            with tempfile.TemporaryDirectory(prefix="build-", dir=self.root) as scratch:
                copy = Path(scratch) / "src"  # building writes into the tree it builds: not the snapshot
                shutil.copytree(snapshot, copy, symlinks=True)
                own = f"{copy}[{','.join(spec.extras)}]" if spec.extras else str(copy)
                self._tool([*pip, own, *requirements, *SEED], "install the snapshot's dependencies")
                for info in _own_dists(tmp, copy, _project_name(snapshot)):
                    _drop_code(info)  # the code under test is the snapshot on PYTHONPATH, not a copy
        else:
            self._tool([*pip, *requirements, *SEED], "install the requirements")
        for path in [tmp, *tmp.rglob("*")]:  # readable by the sandbox's user
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))
        os.replace(tmp, target)

    def _tool(self, cmd: list[str], what: str) -> None:
        try:
            # A git archive has no .git: setuptools_scm projects build only with a version given.
            env = {**os.environ, "SETUPTOOLS_SCM_PRETEND_VERSION": "0.0.0"}
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.build_timeout_s, env=env)
        except subprocess.TimeoutExpired:
            raise EnvironmentFailed(f"{what}: no result within {self.build_timeout_s:.0f} s") from None
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
            raise EnvironmentFailed(f"{what} failed: {tail}")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", name, maxsplit=1)[0]).lower()


def _project_name(snapshot: Path) -> str | None:
    """The distribution name the snapshot declares (setup.cfg / pyproject.toml / setup.py)."""
    for name, pattern in (
        ("pyproject.toml", r'(?m)^name\s*=\s*["\']([^"\']+)'),
        ("setup.cfg", r"(?m)^name\s*=\s*(\S+)"),
        ("setup.py", r"""name\s*=\s*["']([^"']+)"""),
    ):
        path = snapshot / name
        if path.is_file() and (m := re.search(pattern, path.read_text(errors="replace"))):
            return _canonical(m.group(1))
    return None


def _own_dists(venv: Path, source: Path, name: str | None) -> list[Path]:
    """The .dist-info directories in `venv` of what was installed from the directory `source`
    (PEP 610 direct_url.json), else of the distribution called `name`."""
    infos = list(venv.glob("lib/python*/site-packages/*.dist-info"))
    mine = []
    for info in infos:
        direct = info / "direct_url.json"
        if direct.is_file() and json.loads(direct.read_text()).get("url", "").rstrip("/") == source.as_uri():
            mine.append(info)
    return mine or [i for i in infos if name and _canonical(i.name.split("-")[0]) == name]


def _drop_code(info: Path) -> None:
    """Delete what a distribution installed into site-packages (RECORD), but its own metadata;
    scripts outside site-packages stay (they import the package, found on PYTHONPATH)."""
    site, info = info.parent.resolve(), info.resolve()
    emptied = set()
    with (info / "RECORD").open(newline="") as record:
        for row in csv.reader(record):
            path = (site / row[0]).resolve() if row else site
            if info in path.parents:
                continue
            if site in path.parents and path.is_file():
                path.unlink()
                emptied.add(path.parent)
    for folder in sorted(emptied, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):  # not empty: something else lives there too
            while folder != site and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                folder = folder.parent


def derive_spec(snapshot: Path, created_at: str | None) -> EnvSpec:
    """The environment of a mined pull request's tests, from what its snapshot declares.

    snapshot "git"; install "snapshot" when it has a setup.py / setup.cfg / pyproject.toml
    (its declared dependencies, with its test extras); requirements: its test requirement
    files' lines (declared.py), pytest added when they do not name it; python: the oldest
    installed version its python_requires admits, else (none declared) the newest installed
    one released before the commit, else DEFAULT_PYTHON (or the oldest installed); exclude_newer: the commit's date,
    raised to the interpreter's first release (nothing older installs on it); pythonpath "src"
    for a src layout, else the root; network "loopback" when the test requirements name a
    local-server plugin (LOCAL_SERVERS), else "none"; undated: the project's TEST_DATA.
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    here = installed()
    try:
        admits = SpecifierSet(declared.python_requires(snapshot) or "")
    except InvalidSpecifier:
        admits = SpecifierSet()
    allowed = [v for v in here if Version(f"{v}.0") in admits]
    date = _utc(created_at)
    if not allowed:
        python = next((v for v in RELEASES if Version(f"{v}.0") in admits), DEFAULT_PYTHON)  # run: no_interpreter
    elif str(admits):
        python = allowed[0]
    else:
        released = [v for v in allowed if date is not None and RELEASES[v] <= date[:10]]
        python = released[-1] if released else (DEFAULT_PYTHON if DEFAULT_PYTHON in allowed else allowed[0])
    has_project = any((snapshot / f).is_file() for f in ("setup.py", "setup.cfg", "pyproject.toml"))
    reqs, own_extras = declared.test_requirements(snapshot)
    extras = tuple(dict.fromkeys([*own_extras, *declared.test_extras(snapshot)])) if has_project else ()
    if not any(_canonical(r) == "pytest" for r in reqs):
        reqs.append("pytest")
    if date is not None and date < f"{RELEASES[python]}T00:00:00Z":
        date = f"{RELEASES[python]}T00:00:00Z"
    return EnvSpec(
        snapshot="git",
        python=python,
        requirements=tuple(reqs),
        install="snapshot" if has_project else "none",
        extras=extras,
        exclude_newer=date,
        pythonpath=("src",) if declared.src_layout(snapshot) else (".",),
        network="loopback" if any(_canonical(r) in LOCAL_SERVERS for r in reqs) else "none",
        undated=TEST_DATA.get(_project_name(snapshot) or "", ()),
    )


def _utc(created_at: str | None) -> str | None:
    """An ISO 8601 time as UTC "YYYY-MM-DDTHH:MM:SSZ" (what uv's --exclude-newer takes)."""
    if not created_at:
        return None
    from datetime import UTC, datetime

    when = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
