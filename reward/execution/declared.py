"""What a repository snapshot declares about its own environment, read from its files (never run).

derive_candidates (environments.py, in the order candidates.py decides) turns these into EnvSpecs:

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
    project_names(dir)        the name(s) it gives its own distribution (owncode.py removes a
                              release of it from the environment)
    build_requires(dir)       pyproject.toml's `[build-system].requires`, as written ([] when
                              it has none: PEP 518's default, setuptools and wheel, is in
                              every environment's SEED)
    requirement_files(dir)    every requirements file it has (the common names, requirements*.txt
                              at the root, requirements/*.txt), with `file_kind` telling test,
                              dev, variant (tests-min) and other (docs, typing, lint, build) apart
    compiled_with(text)       the Python a pip-compile (or `uv pip compile --python-version`)
                              header says the file was resolved with ("3.13")
    dependency_groups(dir)    PEP 735 `[dependency-groups]`, `{include-group = ...}` followed
    poetry_groups(dir)        Poetry's dev-dependencies and groups, as PEP 508 requirements
    hatch_envs(dir)           Hatch's environments' dependencies and features
    pipfile_dev(dir)          a Pipfile's dev-packages, and the extras it installs the project with
    install_lines(dir)        what its noxfile's `session.install` and CI's `pip install` lines
                              install, each as a requirements file's text
    tox_envs(dir)             tox's environments (tox.ini, setup.cfg [tox:tox], pyproject's
                              [tool.tox] native or legacy_tox_ini): unconditional deps, dependency
                              groups and commands of each, and its extras (a factor's line only
                              when the factor names the tests: `tests: tests`)
    tested_pythons(dir)       the Python versions its CI workflows, tox envlist, noxfile and
                              classifiers name (what its maintainers test on)

setup.py is read with regular expressions, not executed: the snapshot is code under test, and
running it on the host (outside the sandbox) is what the project never does. What only running
it can tell (a setup.py's install_requires, a build backend's dynamic dependencies) comes from
building the snapshot inside the sandbox (environments.py's `_build`); the host reads that
build's metadata as hostile text.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import posixpath
import re
import shlex
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
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
    """A file of the snapshot's, "" when absent or a link (which could name any host file)."""
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() and not path.is_symlink() else ""


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
            if not included.startswith(("..", "/")):
                more, more_extras = requirement_lines(read, included, seen)
                reqs += more
                extras += more_extras
            continue
        if m := _OWN.match(line):
            extras += [e.strip() for e in (m.group(1) or "").split(",") if e.strip()]
            continue
        if line.startswith(("-", ".", "/", "git+", "http:", "https:", "file:")) or "://" in line:
            continue  # options, constraints, paths and URLs (`name @ https://...`): not of the index
        reqs.append(line.split(" --hash", 1)[0].strip())
    return reqs, extras


def reader(snapshot: Path) -> Reader:
    """A Reader of a snapshot on disk: files inside it only (a link, or a folder linked, to a
    path outside reads as absent: these files are read as root on the host)."""
    root = os.path.realpath(snapshot)

    def read(rel: str) -> str | None:
        path = snapshot / rel
        inside = os.path.realpath(path).startswith(os.path.join(root, ""))
        return _read(path) if inside and path.is_file() else None

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


def project_names(snapshot: Path) -> list[str]:
    """The names the snapshot gives its own distribution, as written: pyproject.toml's
    `[project].name` (or Poetry's, or flit's `dist-name`/`module`), setup.cfg's `[metadata]
    name`, the first literal `name="..."` of setup.py. Several when they disagree."""
    toml = _toml(snapshot)
    tool = toml.get("tool", {}) if isinstance(toml.get("tool"), dict) else {}
    flit = tool.get("flit", {}).get("metadata", {}) if isinstance(tool.get("flit"), dict) else {}
    found = [
        toml.get("project", {}).get("name") if isinstance(toml.get("project"), dict) else None,
        tool.get("poetry", {}).get("name") if isinstance(tool.get("poetry"), dict) else None,
        *((flit.get("dist-name"), flit.get("module")) if isinstance(flit, dict) else ()),
    ]
    cfg = _cfg(snapshot)
    if cfg.has_option("metadata", "name"):
        found.append(cfg.get("metadata", "name").strip())
    if m := re.search(r"""\bname\s*=\s*["']([A-Za-z0-9][A-Za-z0-9._-]*)["']""", _read(snapshot / "setup.py")):
        found.append(m.group(1))
    return list(dict.fromkeys(n for n in found if isinstance(n, str) and re.fullmatch(r"[A-Za-z0-9][\w.-]*", n)))


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


# Requirement files named after what is not the test suite: never a requirement set alone.
_OTHER = re.compile(r"doc|sphinx|typing|mypy|lint|style|build|release|publish|pre-commit|bench|flake|format|gha")
# A test file for other versions than the usual ones (flask's tests-min.txt, tests-dev.txt).
_VARIANT = re.compile(r"min|dev|upstream|nightly|latest|oldest|pinned|py2")
_COMPILED = re.compile(r"^#.*(?:pip-compile with Python|--python-version[= ])\s*(3\.\d{1,2})", re.M)
_VERSION = re.compile(r"(?<![\d.])(3\.(?:[6-9]|1[0-9]))(?![\d])")
_TOX_PY = re.compile(r"\bpy(?:thon)?3\.?(\d{1,2})\b")


def requirement_files(snapshot: Path, own: tuple[str, ...] = ()) -> list[str]:
    """Every requirements file of the snapshot: `own` (its row's), the common names, then
    requirements*.txt / *-requirements.txt at the root and requirements/*.txt, sorted."""
    found = [f for f in (*own, *TEST_REQUIREMENT_FILES) if (snapshot / f).is_file()]
    for pattern in ("requirements*.txt", "*requirements.txt", "requirements/*.txt", "requirements/*/*.txt"):
        found += sorted(str(p.relative_to(snapshot)) for p in snapshot.glob(pattern) if p.is_file())
    return list(dict.fromkeys(found))


def file_kind(rel: str) -> str:
    """ "test", "variant" (a test file for minimum or development versions), "dev", "base"
    (requirements.txt: the runtime's) or "other" (docs, typing, lint, build: never the tests')."""
    name = rel.lower().removesuffix(".txt")
    stem = name.rsplit("/", 1)[-1]
    if _OTHER.search(stem):
        return "other"
    if "test" in name:
        return "variant" if _VARIANT.search(stem.replace("test", "")) else "test"
    if re.search(r"dev|develop", stem):
        return "dev"
    return "base" if stem in ("requirements", "base", "install", "runtime", "main", "prod") else "other"


def compiled_with(text: str) -> str | None:
    """The Python a pip-compile / uv header says resolved this file ("3.13"), or None."""
    m = _COMPILED.search(text[:2000])
    return m.group(1) if m else None


def dependency_groups(snapshot: Path) -> dict[str, list[str]]:
    """PEP 735 groups: name -> requirement strings, `{include-group = "x"}` expanded."""
    raw = _toml(snapshot).get("dependency-groups", {})
    groups = raw if isinstance(raw, dict) else {}

    def expand(name: str, seen: tuple[str, ...]) -> list[str]:
        out: list[str] = []
        entries = groups.get(name, [])
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, str):
                out.append(entry)
            elif isinstance(entry, dict) and isinstance(entry.get("include-group"), str):
                included = entry["include-group"]
                out += [] if included in seen else expand(included, (*seen, included))
        return out

    return {name: expand(name, (name,)) for name in groups if isinstance(name, str)}


def poetry_groups(snapshot: Path) -> dict[str, list[str]]:
    """Poetry's development dependencies as PEP 508 requirements: `[tool.poetry.dev-dependencies]`
    as group "dev", `[tool.poetry.group.NAME.dependencies]` as NAME (`^`, `~` and `*`
    translated; a git, path or url dependency left out)."""
    poetry = _toml(snapshot).get("tool", {}).get("poetry", {})
    if not isinstance(poetry, dict):
        return {}
    tables: dict[str, object] = {"dev": poetry.get("dev-dependencies", {})}
    groups = poetry.get("group", {})
    for name, table in groups.items() if isinstance(groups, dict) else []:
        tables[name] = table.get("dependencies", {}) if isinstance(table, dict) else {}
    out: dict[str, list[str]] = {}
    for name, deps in tables.items():
        reqs = [poetry_requirement(n, c) for n, c in (deps.items() if isinstance(deps, dict) else [])]
        if reqs:
            out[name] = [r for r in reqs if r]
    return out


def poetry_requirement(name: str, constraint: object) -> str | None:
    """`pytest = "^7.0.0"` as `pytest>=7.0.0,<8.0.0`; a table's `version` and `extras` read;
    None for python itself and for a git / path / url dependency."""
    extras: list[str] = []
    if isinstance(constraint, dict):
        if not isinstance(constraint.get("version", "*"), str):
            return None
        extras = [e for e in constraint.get("extras", []) if isinstance(e, str)]
        constraint = constraint.get("version", "*" if not set(constraint) & {"git", "path", "url"} else None)
    if name == "python" or not isinstance(constraint, str):
        return None
    parts = []
    for piece in (p.strip() for p in constraint.split(",")):
        m = re.fullmatch(r"([\^~])\s*(\d+(?:\.\d+)*)", piece)
        if m:
            nums = [int(x) for x in m.group(2).split(".")]
            if m.group(1) == "^":  # the leftmost non-zero part may not change
                first = next((i for i, x in enumerate(nums) if x), len(nums) - 1)
                upper = [*nums[:first], nums[first] + 1]
            else:  # ~1.2.3: the minor may not change (~1: the major)
                upper = [nums[0] + 1] if len(nums) == 1 else [nums[0], nums[1] + 1]
            parts.append(f">={m.group(2)},<{'.'.join(map(str, upper))}")
        elif re.fullmatch(r"\d+(?:\.\d+)*", piece):
            parts.append(f"=={piece}")
        elif piece not in ("*", ""):
            parts.append(piece.replace(" ", ""))
    return name + (f"[{','.join(extras)}]" if extras else "") + ",".join(parts)


def pipfile_dev(snapshot: Path) -> tuple[list[str], list[str]]:
    """A Pipfile's `[dev-packages]` as requirements, and the extras its `[packages]` install of
    the project itself (`{path = ".", extras = ["socks"]}`)."""
    try:
        pipfile = tomllib.loads(_read(snapshot / "Pipfile"))
    except tomllib.TOMLDecodeError:
        return [], []
    dev = pipfile.get("dev-packages", {})
    reqs = []
    for name, spec in dev.items() if isinstance(dev, dict) else []:
        version = spec if isinstance(spec, str) else spec.get("version", "*") if isinstance(spec, dict) else None
        extras = spec.get("extras", []) if isinstance(spec, dict) else []
        if not isinstance(version, str) or (isinstance(spec, dict) and set(spec) & {"path", "git", "file"}):
            continue
        extra = f"[{','.join(e for e in extras if isinstance(e, str))}]" if extras else ""
        reqs.append(name + extra + ("" if version.strip() == "*" else version.replace(" ", "")))
    packages = pipfile.get("packages", {})
    own = [
        e
        for spec in (packages.values() if isinstance(packages, dict) else [])
        if isinstance(spec, dict) and spec.get("path") == "."
        for e in spec.get("extras", [])
        if isinstance(e, str)
    ]
    return reqs, own


def hatch_envs(snapshot: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Hatch's environments: name -> (dependencies with extra-dependencies, features: extras)."""
    envs = _toml(snapshot).get("tool", {}).get("hatch", {}).get("envs", {})
    out: dict[str, tuple[list[str], list[str]]] = {}
    for name, table in envs.items() if isinstance(envs, dict) else []:
        if isinstance(table, dict):
            deps = [*table.get("dependencies", []), *table.get("extra-dependencies", [])]
            out[name] = (
                [d for d in deps if isinstance(d, str)],
                [f for f in table.get("features", []) if isinstance(f, str)],
            )
    return out


def install_lines(snapshot: Path) -> list[tuple[str, str]]:
    """(where, a requirements file's text) of each install its noxfile's test sessions
    (`session.install(...)`) and CI workflows (`pip install ...`, `uv pip install ...`) run,
    as requirement lines: `-r FILE` kept, `-e .[test]` as the project's extras."""
    out: list[tuple[str, str]] = []
    for m in re.finditer(r"session\.install\(([^)]*)\)", _read(snapshot / "noxfile.py")):
        out.append(("noxfile.py", _as_lines(re.findall(r"[\"']([^\"']+)[\"']", m.group(1)))))
    workflows = snapshot / ".github" / "workflows"
    for path in sorted(workflows.glob("*.y*ml")) if workflows.is_dir() else []:
        for line in _read(path).splitlines():
            found = re.search(r"\bpip3? install\s+(.*)$", line)
            if found and "${{" not in found.group(1):
                try:
                    args = shlex.split(found.group(1).split("&&")[0].split("#")[0])
                except ValueError:
                    continue
                out.append((f".github/workflows/{path.name}", _as_lines(args)))
    return [(where, text) for where, text in out if text.strip()]


_TOOLS = frozenset({"pip", "setuptools", "wheel", "tox", "nox", "build", "twine", "uv", "virtualenv"})


def _as_lines(args: list[str]) -> str:
    """pip's install arguments as a requirements file: `-r FILE` and `-e .[x]` kept, other options dropped."""
    lines, skip = [], False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("-r", "--requirement", "-e", "--editable") and i + 1 < len(args):
            lines.append(f"{arg} {args[i + 1]}")
            skip = True
        elif arg.startswith("-"):
            skip = arg in ("-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f", "--find-links")
        elif re.split(r"[<>=!~\[;]", arg)[0].lower() in _TOOLS:
            continue  # the installer and the runners of the environments, not the tests' packages
        elif arg.startswith(".") or re.match(r"^[A-Za-z0-9][\w.\-]*(\[[\w,.\-]+\])?([<>=!~;].*)?$", arg):
            lines.append(arg)
    return "\n".join(lines)


@dataclass(frozen=True)
class ToxEnv:
    """One tox environment as declared ("testenv": the base every environment extends)."""

    name: str
    deps: tuple[str, ...] = ()  # requirement lines, `-r file` ones too; factor-conditional ones left out
    groups: tuple[str, ...] = ()  # dependency_groups it installs
    extras: tuple[str, ...] = ()
    commands: tuple[tuple[str, ...], ...] = ()  # each command's argv, as written ({posargs} and all)


def tox_envs(snapshot: Path) -> list[ToxEnv]:
    """tox.ini's, setup.cfg's [tox:tox] or pyproject's [tool.tox] environments, base first."""
    tool = _toml(snapshot).get("tool", {}).get("tox", {})
    if isinstance(tool, dict) and isinstance(tool.get("legacy_tox_ini"), str):
        return _ini_envs(tool["legacy_tox_ini"], "testenv")
    if isinstance(tool, dict) and tool:
        return _native_envs(tool)
    if (snapshot / "tox.ini").is_file():
        return _ini_envs(_read(snapshot / "tox.ini"), "testenv")
    setup_cfg = _read(snapshot / "setup.cfg")
    return _ini_envs(setup_cfg, "testenv") if "[tox:tox]" in setup_cfg else []


_TOX_DEPTH = 5  # `{[section]key}` references followed, at most this deep


def _ini_envs(text: str, base: str) -> list[ToxEnv]:
    cfg = configparser.RawConfigParser(strict=False)
    with contextlib.suppress(configparser.Error):
        cfg.read_string(text)
    out = []
    for section in cfg.sections():
        if section != base and not section.startswith(base + ":"):
            continue

        def lines(key: str, section: str = section, depth: int = 0) -> list[str]:
            value = cfg.get(section, key) if cfg.has_option(section, key) else ""
            joined = re.sub(r"\\\n", " ", value)
            out: list[str] = []
            for ln in (ln.strip() for ln in joined.splitlines()):
                ref = re.fullmatch(r"\{\[([^\]]+)\]([\w-]+)\}", ln)
                if ref and depth < _TOX_DEPTH:  # tox's `{[extra]deps}`: that section's lines
                    out += lines(ref.group(2), ref.group(1), depth + 1)
                elif ln and not ln.startswith("#"):
                    out.append(ln)
            return out

        deps = tuple(d for d in lines("deps") if not re.match(r"^[\w{},.-]+:\s", d))  # `min: -r ...`: a factor's
        extras = tuple(e.strip() for ln in lines("extras") for e in (_test_factor(ln) or "").split(",") if e.strip())
        groups = tuple(g.strip() for ln in lines("dependency_groups") for g in ln.split(",") if g.strip())
        commands = tuple(_split(c) for c in lines("commands") if not re.match(r"^[\w{},.-]+:\s", c))
        name = "testenv" if section == base else section.split(":", 1)[1]
        out.append(ToxEnv(name, deps, groups, extras, tuple(c for c in commands if c)))
    return out


_FACTOR = re.compile(r"^([\w{},.-]+):\s*(.*)$")  # tox's `factor: value` line


def _test_factor(line: str) -> str | None:
    """A tox line for the test environments: as is; `tests: tests` (a factor naming the tests)
    as its value; another factor's line (`mypy: tests-mypy`) None. pip refuses the line itself as
    an extra (`/testbed[tests: tests]`: attrs 23.2.0's tox.ini), on every interpreter."""
    m = _FACTOR.match(line)
    if m is None:
        return line
    return m.group(2) if set(re.split(r"[-,{}]", m.group(1))) & {"test", "tests", "testing"} else None


def _native_envs(tool: dict[str, Any]) -> list[ToxEnv]:
    def env(name: str, table: object) -> ToxEnv:
        t = table if isinstance(table, dict) else {}
        strings = lambda key: tuple(x for x in t.get(key, []) or [] if isinstance(x, str))  # noqa: E731
        commands = tuple(
            tuple(a for a in cmd if isinstance(a, str)) for cmd in t.get("commands", []) or [] if isinstance(cmd, list)
        )
        return ToxEnv(name, strings("deps"), strings("dependency_groups"), strings("extras"), commands)

    envs = [env("testenv", tool.get("env_run_base", {}))]
    named = tool.get("env", {})
    return envs + [env(n, t) for n, t in (named.items() if isinstance(named, dict) else [])]


def _split(command: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(command))
    except ValueError:
        return ()


def tested_pythons(snapshot: Path) -> list[str]:
    """Python versions ("3.11") its CI workflows, tox envlist, noxfile and classifiers name,
    newest first: those its maintainers run its tests on."""
    found: set[str] = set()
    workflows = snapshot / ".github" / "workflows"
    texts = [_read(p) for p in sorted(workflows.glob("*.y*ml"))] if workflows.is_dir() else []
    texts += [_read(snapshot / ".travis.yml"), _read(snapshot / "noxfile.py")]
    for text in texts:
        for line in text.splitlines():
            if re.search(r"python", line, re.I) and not re.search(r"pypy", line, re.I):
                found |= set(_VERSION.findall(line))
    tox_texts = [_read(snapshot / "tox.ini"), _read(snapshot / "pyproject.toml")]
    for text in tox_texts:
        for m in re.finditer(r"py3\{([\d,\s]+)\}", text):  # tox's py3{13,12,11}
            found |= {f"3.{v.strip()}" for v in m.group(1).split(",") if v.strip()}
        found |= {f"3.{v}" for v in _TOX_PY.findall(text)}
    for text in (_read(snapshot / "setup.py"), _read(snapshot / "setup.cfg"), _read(snapshot / "pyproject.toml")):
        found |= set(re.findall(r"Programming Language :: Python :: (3\.\d{1,2})\b", text))
    return sorted(found, key=lambda v: -int(v.split(".")[1]))


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
