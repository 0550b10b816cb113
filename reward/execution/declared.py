"""What a repository snapshot declares about its own environment, read from its files (never run).

derive_spec (environments.py) turns these into an EnvSpec for a mined pull request:

    python_requires(dir)      `python_requires` (setup.py, setup.cfg) or `requires-python`
                              (pyproject.toml), as written
    test_requirements(dir, own)
                              the requirement lines of its test / development requirement
                              files (requirements-dev.txt and the like, then `own`: those its
                              repository's row in repos.py names; `-r` includes followed inside
                              the snapshot), and the extras of its own project those files
                              install (`-e .[socks]`)
    test_extras(dir)          its extras named test / tests / testing
    src_layout(dir)           whether its packages live under src/
    build_requires(dir)       pyproject.toml's `[build-system].requires`, as written ([] when
                              it has none: PEP 518's default, setuptools and wheel, is in
                              every environment's SEED)

setup.py is read with regular expressions, not executed: the snapshot is code under test, and
running it on the host (outside the sandbox) is what the project never does. What only running
it can tell (a setup.py's install_requires, a build backend's dynamic dependencies) comes from
building the snapshot inside the sandbox (environments.py's `_build`); the host reads that
build's metadata as hostile text.
"""

from __future__ import annotations

import configparser
import contextlib
import posixpath
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Where repositories declare what their tests need, in the order they are read.
TEST_REQUIREMENT_FILES = (
    "requirements-dev.txt",
    "requirements_dev.txt",
    "dev-requirements.txt",
    "requirements-test.txt",
    "requirements_test.txt",
    "requirements-tests.txt",
    "test-requirements.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "requirements/dev.txt",
    "tests/requirements.txt",
)
TEST_EXTRAS = ("test", "tests", "testing")
_OWN = re.compile(r"^(?:-e\s+|--editable\s+)?\.(?:\[([^\]]*)\])?\s*$")  # ".", "-e .[socks]"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


def python_requires(snapshot: Path) -> str | None:
    toml = _toml(snapshot)
    declared = toml.get("project", {}).get("requires-python")
    if isinstance(declared, str):
        return declared
    cfg = _cfg(snapshot)
    if cfg.has_option("options", "python_requires"):
        return cfg.get("options", "python_requires").strip()
    m = re.search(r"""python_requires\s*=\s*["']([^"']+)["']""", _read(snapshot / "setup.py"))
    return m.group(1) if m else None


Reader = Callable[[str], "str | None"]  # repository-relative posix path -> text, None when absent


def requirement_lines(read: Reader, rel: str, seen: set[str] | None = None) -> tuple[list[str], list[str]]:
    """(requirements, extras of the project itself) of the requirements file `rel`, with its
    `-r` includes followed (paths relative to the including file, never above the root)."""
    seen = set() if seen is None else seen
    text = None if rel in seen else read(rel)
    if text is None:
        return [], []
    seen.add(rel)
    reqs: list[str] = []
    extras: list[str] = []
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*", "", raw).strip()
        if not line:
            continue
        if m := re.match(r"^(?:-r|--requirement)\s*(\S+)", line):
            included = posixpath.normpath(posixpath.join(posixpath.dirname(rel), m.group(1)))
            if not included.startswith(".."):
                more, more_extras = requirement_lines(read, included, seen)
                reqs += more
                extras += more_extras
            continue
        if m := _OWN.match(line):
            extras += [e.strip() for e in (m.group(1) or "").split(",") if e.strip()]
            continue
        if line.startswith(("-", ".", "/", "git+", "http:", "https:", "file:")):
            continue  # options, constraints, paths and URLs: not a requirement of the index
        reqs.append(line.split(" --hash", 1)[0].strip())
    return reqs, extras


def reader(snapshot: Path) -> Reader:
    """A Reader of a snapshot on disk."""

    def read(rel: str) -> str | None:
        path = snapshot / rel
        return _read(path) if path.is_file() else None

    return read


def test_requirements(snapshot: Path, own_files: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Of TEST_REQUIREMENT_FILES, then of the repository's own (repos.py: django's
    tests/requirements/py3.txt)."""
    reqs: list[str] = []
    extras: list[str] = []
    seen: set[str] = set()
    for name in (*TEST_REQUIREMENT_FILES, *own_files):
        more, more_extras = requirement_lines(reader(snapshot), name, seen)
        reqs += [r for r in more if r not in reqs]
        extras += [e for e in more_extras if e not in extras]
    return reqs, extras


def test_extras(snapshot: Path) -> list[str]:
    declared: set[str] = set()
    toml = _toml(snapshot)
    declared |= set(toml.get("project", {}).get("optional-dependencies", {}) or {})
    cfg = _cfg(snapshot)
    if cfg.has_section("options.extras_require"):
        declared |= set(cfg.options("options.extras_require"))
    setup_py = _read(snapshot / "setup.py")
    if "extras_require" in setup_py:
        declared |= set(re.findall(r"""["']([\w.-]+)["']\s*:""", setup_py.split("extras_require", 1)[1][:2000]))
    return [e for e in TEST_EXTRAS if e in declared]


def src_layout(snapshot: Path) -> bool:
    src = snapshot / "src"
    if not src.is_dir():
        return False
    return any((p / "__init__.py").is_file() for p in src.iterdir() if p.is_dir()) or any(src.glob("*.py"))


def build_requires(snapshot: Path) -> list[str]:
    build_system = _toml(snapshot).get("build-system", {})
    requires = build_system.get("requires", []) if isinstance(build_system, dict) else []
    return [r for r in requires if isinstance(r, str)] if isinstance(requires, list) else []


def _toml(snapshot: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(_read(snapshot / "pyproject.toml"))
    except tomllib.TOMLDecodeError:
        return {}


def _cfg(snapshot: Path) -> configparser.RawConfigParser:
    cfg = configparser.RawConfigParser()
    with contextlib.suppress(configparser.Error):  # a malformed setup.cfg declares nothing
        cfg.read_string(_read(snapshot / "setup.cfg"))
    return cfg
