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
    exclude_newer   resolve every package as of this date (uv's --exclude-newer), the runner too:
                    a current pytest breaks old suites
    pythonpath      directories of the snapshot put on PYTHONPATH ("." or "src")

Build: `uv venv` with the interpreter, then `uv pip install --exclude-newer DATE` (uv resolves a
repository's dependencies in seconds). The cache key is a hash of the spec and, for "snapshot"
installs, of the dependency files at the commit; a build runs under a file lock (concurrent
runners on a node build once) into a temporary directory renamed into place, so a half-built
environment is never used. A failed build raises EnvironmentFailed with the tool's last lines;
an interpreter that is not on this machine raises InterpreterUnavailable: both are counted by
the callers, never fatal to a run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_DEPENDENCY_FILES = ("setup.py", "setup.cfg", "pyproject.toml")


class EnvironmentFailed(RuntimeError):
    """An environment could not be built; the message has the reason and the tool's last lines."""


class InterpreterUnavailable(RuntimeError):
    """No interpreter of the spec's Python version on this machine."""


@dataclass(frozen=True)
class EnvSpec:
    snapshot: str = "files"  # "files" | "git"
    python: str = "host"  # "host" | "3.9", "3.11", ...
    requirements: tuple[str, ...] = ()
    install: str = "none"  # "none" | "snapshot"
    exclude_newer: str | None = None  # ISO date
    pythonpath: tuple[str, ...] = (".",)

    @classmethod
    def from_json(cls, text: str | None) -> EnvSpec | None:
        if text is None:
            return None
        raw: dict[str, Any] = json.loads(text)
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"environment: unknown keys {sorted(unknown)}")
        for key in ("requirements", "pythonpath"):
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


def find_python(version: str) -> str:
    """An interpreter of `version` ("3.9") on this machine: PATH, pyenv's versions, /usr/bin."""
    candidates = [shutil.which(f"python{version}")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():
        candidates += [str(p / "bin" / "python3") for p in sorted(pyenv.iterdir()) if p.name.startswith(f"{version}.")]
    candidates.append(f"/usr/bin/python{version}")
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise InterpreterUnavailable(f"Python {version} is not installed on this machine")


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
        h = hashlib.sha256(spec.to_json().encode())
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
        pip = [*uv, "pip", "install", "--quiet", "--python", str(tmp / "bin" / "python")]
        if spec.exclude_newer:
            pip += ["--exclude-newer", spec.exclude_newer]
        if spec.install == "snapshot":
            if snapshot is None:
                raise EnvironmentFailed("install=snapshot needs the snapshot")
            before = self._dists(tmp)
            self._tool([*pip, str(snapshot)], "install the snapshot's dependencies")
            own = sorted(self._dists(tmp) - before - {_canonical(r) for r in spec.requirements})
            mine = [d for d in own if d == _project_name(snapshot)] or own[:0]
            if mine:  # the code under test comes from the snapshot on PYTHONPATH, not site-packages
                self._tool(
                    [*uv, "pip", "uninstall", "--quiet", "--python", str(tmp / "bin" / "python"), *mine],
                    "remove the snapshot's own distribution",
                )
        if spec.requirements:
            self._tool([*pip, *spec.requirements], "install the requirements")
        for path in [tmp, *tmp.rglob("*")]:  # readable by the sandbox's user
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))
        os.replace(tmp, target)

    def _tool(self, cmd: list[str], what: str) -> None:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.build_timeout_s)
        except subprocess.TimeoutExpired:
            raise EnvironmentFailed(f"{what}: no result within {self.build_timeout_s:.0f} s") from None
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
            raise EnvironmentFailed(f"{what} failed: {tail}")

    @staticmethod
    def _dists(venv: Path) -> set[str]:
        site = list(venv.glob("lib/python*/site-packages"))
        return {_canonical(p.name.split("-")[0]) for s in site for p in s.glob("*.dist-info")}


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
