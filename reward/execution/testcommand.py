"""The repository's own test command: the pytest selection and options it states, as the harness
may pass them on. Read from its files, never run.

Where a repository says how its tests run (its tox test environment's commands, a noxfile's
`session.run("pytest", ...)`, a Makefile `test` target, a CI workflow's `run:` line; the first
pytest command found in that order), and its pytest configuration's `testpaths`:

    paths     the folders or files it names (`pytest tests/unit`), else pytest's `testpaths`: the
              baseline's test files are those under them (derivation.select_tests); none named:
              every test file, as before
    args      the options passed on (EnvSpec.runner_args, after the harness's own): warnings
              filters (-W), marker and keyword deselections that only take away (`-m "not
              slow"`, `-k "not network"`: the harness's canaries carry neither), --ignore,
              --deselect, --import-mode, --strict-markers / --strict-config
    ignored   every other option, each with why: the harness sets it itself (-v, -q, --tb, -r,
              -p no:cacheprovider), it changes what the harness controls (-p: plugins, the guard
              restores the base commit's configuration anyway; -c, --rootdir, --confcutdir,
              -o: which configuration pytest reads; --basetemp: a path outside the sandbox's),
              it would cut the run short (-x, --maxfail, --lf), or it needs a plugin the
              environment may lack (--cov, -n, --timeout); and the command's shell (tox's
              {posargs}, `cd`, `&&`), which is never run

pytest's `python_files` (python_files: tqdm's `tests_*.py`) says which files are its test modules.
The harness names the test files on pytest's command line, where pytest collects a file whatever
its configuration leaves out of a folder walk, so `collected` leaves out, as that walk would:
files under `norecursedirs` (pytest's own default when unset) and under the `--ignore` /
`--ignore-glob` paths of its `addopts` or its command; and type-checker cases (a `typing/` or
`mypy_test_cases/` folder's test_*.py that calls `reveal_type` or defines no test: mypy's and
pyright's inputs, which may fail at import when pytest collects them). A conftest's `collect_ignore` is code,
never read: the files it names are run.

A positive -m or -k (`-k test_fast`) would deselect the canaries too: ignored. The arguments are
the harness's own reading of the base commit (a candidate's changes to these files are guarded:
guard.py), so no patch decides them.
"""

from __future__ import annotations

import configparser
import contextlib
import fnmatch
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from reward.execution import declared

# Options passed on, and whether each takes a value.
PASSED = {
    "-W": True,
    "--pythonwarnings": True,
    "-m": True,
    "-k": True,
    "--ignore": True,
    "--ignore-glob": True,
    "--deselect": True,
    "--import-mode": True,
    "--strict-markers": False,
    "--strict-config": False,
    "--strict": False,
}
# Options the harness sets itself or that only change the console: left out without a word.
QUIET = re.compile(r"^(-v+|-q+|-s|-l|--tb(=.*)?|-r\w*|--color(=.*)?|--durations(=.*)?|--verbose|--quiet|-ra)$")
# Options that take a value (so the next argument is not a path), of those not passed on.
VALUED = frozenset(
    {"-p", "-c", "-o", "--rootdir", "--confcutdir", "--basetemp", "--maxfail", "-n", "--numprocesses", "--dist"}
    | {"--cov", "--cov-report", "--cov-config", "--timeout", "--junitxml", "--durations", "--tb", "-r"}
)
WHY = {
    "-p": "loads or blocks a plugin (the harness's recorder and guard decide plugins)",
    "-c": "names another configuration file",
    "-o": "overrides the configuration the harness reads from the base commit",
    "--rootdir": "moves pytest's root",
    "--confcutdir": "changes which conftest.py files load",
    "--basetemp": "a temporary folder outside the sandbox's",
    "-x": "stops at the first failure",
    "--exitfirst": "stops at the first failure",
    "--maxfail": "stops after failures",
    "--lf": "runs a previous run's failures",
    "--ff": "reorders by a previous run",
}


@dataclass(frozen=True)
class TestCommand:
    __test__ = False  # not a pytest test class
    source: str = ""  # where it was read ("tox.ini", "Makefile", ".github/workflows/tests.yml"); "" when none
    args: tuple[str, ...] = ()  # options passed on
    paths: tuple[str, ...] = ()  # its selection of tests (folders or files); () = every test file
    ignored: tuple[str, ...] = ()  # "option: why", each left out


def own_command(snapshot: Path) -> TestCommand:
    """The repository's test command as the harness passes it on (module docstring)."""
    source, argv = _first_pytest(snapshot)
    args, paths, ignored = vet(argv)
    paths = [p for p in paths if _inside(snapshot, p)]
    if not paths:
        paths = [p for p in testpaths(snapshot) if _inside(snapshot, p)]
    return TestCommand(source, tuple(args), tuple(paths), tuple(ignored))


def vet(argv: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(options passed on, positional paths, "option: why" left out) of pytest's arguments."""
    args: list[str] = []
    paths: list[str] = []
    ignored: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
        if not arg.startswith("-"):
            if "{" not in arg and "$" not in arg:
                paths.append(arg.split("::", 1)[0].rstrip("/"))
            continue
        if QUIET.match(arg):
            if name in VALUED and not eq and not value:
                i += 1
            continue
        if name in PASSED:
            if PASSED[name] and not eq and not (value and not arg.startswith("--")):
                value, i = (argv[i] if i < len(argv) else ""), i + 1
            if name in ("-m", "-k") and not only_takes_away(value):
                ignored.append(f"{name} {value}: would deselect the harness's canaries too")
                continue
            args.append(f"{name}={value}" if name.startswith("--") and PASSED[name] else name)
            if PASSED[name] and not name.startswith("--"):
                args.append(value)
            continue
        if name in VALUED and not eq and not (value and not arg.startswith("--")):
            arg, i = f"{arg} {argv[i] if i < len(argv) else ''}".strip(), i + 1
        ignored.append(f"{arg}: {WHY.get(name, 'not an option the harness passes on')}")
    return args, paths, ignored


def only_takes_away(expression: str) -> bool:
    """Whether a -m / -k expression keeps a test that has no marker and a harness name: each
    `and` part negated (`not slow and not network`)."""
    parts = [p.strip() for p in re.split(r"\band\b", expression.strip().strip("'\""))]
    return bool(parts) and all(p.startswith("not ") or p.startswith("not(") for p in parts) and " or " not in expression


def testpaths(snapshot: Path) -> list[str]:
    """pytest's `testpaths`, from the file that configures pytest (ini_option)."""
    return ini_option(declared.reader(snapshot), "testpaths")


def python_files(read: declared.Reader) -> tuple[str, ...]:
    """pytest's `python_files` patterns (tqdm's `tests_*.py`), else pytest's default ones.
    `read`: a snapshot's files, or a commit's (a git blob reader)."""
    return tuple(ini_option(read, "python_files")) or ("test_*.py", "*_test.py")


def ini_option(read: declared.Reader, key: str) -> list[str]:
    """A list option of pytest's configuration, from the first file that configures pytest, in
    pytest's order: pytest.ini, .pytest.ini, pyproject.toml's [tool.pytest.ini_options],
    tox.ini's [pytest], setup.cfg's [tool:pytest]."""
    for name, section in (("pytest.ini", "pytest"), (".pytest.ini", "pytest")):
        text = read(name)
        if text is not None:
            return _ini_list(text, section, key)
    with contextlib.suppress(tomllib.TOMLDecodeError):
        options = tomllib.loads(read("pyproject.toml") or "").get("tool", {}).get("pytest", {}).get("ini_options")
        if isinstance(options, dict):
            value = options.get(key, [])
            return value.split() if isinstance(value, str) else [v for v in value if isinstance(v, str)]
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        cfg = _ini(read(name) or "")
        if cfg.has_section(section):
            return _ini_list(read(name) or "", section, key)
    return []


# pytest's default `norecursedirs`, which a repository's own setting replaces.
NORECURSE = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")
# A folder that holds a type checker's test cases (mypy's and pyright's "typing" test data:
# files named test_*.py that only a type checker reads, marshmallow's tests/mypy_test_cases/),
# by a word of its name.
TYPE_CASE_DIRS = re.compile(r"(?:^|_)(?:typing|typecheck|typechecking|typesafety|mypy|pyright|pyre)(?:_|$)|type_check")
_TYPE_CALLS = re.compile(r"\b(?:reveal_type|assert_type)\(")
_A_TEST = re.compile(r"^\s*(?:async\s+)?def\s+test|^\s*class\s+Test", re.M)


def collected(
    tests: tuple[str, ...] | list[str], read: declared.Reader, args: tuple[str, ...] | list[str] = ()
) -> tuple[tuple[str, ...], dict[str, str]]:
    """(the test files pytest would collect walking the repository, each left out -> why): its
    configuration's `norecursedirs` and `addopts` ignores, `args`' ignores (the repository's
    command's, TestCommand.args), and type-checker cases (module docstring). `read`: the
    snapshot's files, or a commit's."""
    patterns = tuple(ini_option(read, "norecursedirs")) or NORECURSE
    paths, globs = ignored((*ini_option(read, "addopts"), *args))
    kept: list[str] = []
    out: dict[str, str] = {}
    for test in tests:
        folders = PurePosixPath(test).parts[:-1]
        for i, folder in enumerate(folders):
            where = "/".join(folders[: i + 1])
            if any(_norecurse(p, folder, where) for p in patterns):
                out[test] = f"under {where}/ (norecursedirs)"
                break
        else:
            if why := ignored_by(test, paths, globs):
                out[test] = why
            elif any(TYPE_CASE_DIRS.search(f) for f in folders) and _type_cases(read(test) or ""):
                out[test] = "type-checker cases"
            else:
                kept.append(test)
    return tuple(kept), out


def ignored(args: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """(paths, globs) that pytest's `--ignore` and `--ignore-glob` options in `args` name,
    relative to the repository's root."""
    paths: list[str] = []
    globs: list[str] = []
    for i, arg in enumerate(args):
        for name, into in (("--ignore", paths), ("--ignore-glob", globs)):
            if arg == name and i + 1 < len(args):
                into.append(args[i + 1])
            elif arg.startswith(name + "="):
                into.append(arg.split("=", 1)[1])
    clean = lambda arg: arg.strip("'\"").removeprefix("./")  # noqa: E731
    return [clean(p).rstrip("/") for p in paths], [clean(g) for g in globs]


def ignored_by(test: str, paths: list[str], globs: list[str]) -> str:
    """Which option leaves `test` out ("--ignore", "--ignore-glob"), or "" (`ignored`'s lists)."""
    if any(test == p or test.startswith(p + "/") for p in paths):
        return "--ignore"
    if any(fnmatch.fnmatchcase(test, g) or fnmatch.fnmatchcase(test, g + "/*") for g in globs):
        return "--ignore-glob"
    return ""


def _norecurse(pattern: str, folder: str, where: str) -> bool:
    """pytest's match of a `norecursedirs` pattern: the folder's name, or with a `/` its path."""
    if "/" in pattern:
        return fnmatch.fnmatchcase(where, pattern) or fnmatch.fnmatchcase(where, "*/" + pattern)
    return fnmatch.fnmatchcase(folder, pattern)


def _type_cases(text: str) -> bool:
    """A module a type checker reads: it calls reveal_type / assert_type, or defines no test."""
    return bool(_TYPE_CALLS.search(text)) or not _A_TEST.search(text)


def _ini(text: str) -> configparser.RawConfigParser:
    cfg = configparser.RawConfigParser(strict=False)
    with contextlib.suppress(configparser.Error):
        cfg.read_string(text)
    return cfg


def _ini_list(text: str, section: str, key: str) -> list[str]:
    cfg = _ini(text)
    return cfg.get(section, key).split() if cfg.has_option(section, key) else []


def _inside(snapshot: Path, rel: str) -> bool:
    """A path of the snapshot, relative, not above its root."""
    if not rel or rel.startswith(("/", "~")) or ".." in Path(rel).parts:
        return False
    return (snapshot / rel).exists()


# pytest, however started: through python -m, coverage, or a tool's environment (`pipenv run`).
_PYTEST = re.compile(
    r"^(?:(?:pipenv|poetry|uv|hatch|pdm) run (?:--\S+ )*)?"
    r"(?:py\.test|pytest|python3?(?:\.\d+)? -m pytest|coverage run (?:-\S+ )*-m pytest)\b"
)


def _first_pytest(snapshot: Path) -> tuple[str, list[str]]:
    """(where, pytest's arguments) of the first pytest command the repository states."""
    for env in declared.tox_envs(snapshot):
        if env.name == "testenv" or env.name.startswith(("py", "test")):
            for command in env.commands:
                found = _pytest_args(" ".join(shlex.quote(a) for a in command))
                if found is not None:
                    return "tox", found
    noxfile = _text(snapshot / "noxfile.py")
    for m in re.finditer(r"session\.run\(\s*((?:[\"'][^\"']*[\"']\s*,?\s*)+)", noxfile):
        literals = re.findall(r"[\"']([^\"']*)[\"']", m.group(1))  # each one argument, as written
        found = _pytest_args(" ".join(shlex.quote(a) for a in literals))
        if found is not None:
            return "noxfile.py", found
    makefile = _text(snapshot / "Makefile")
    if target := re.search(r"^tests?:.*\n((?:\t.*\n?)+)", makefile, re.M):
        for line in target.group(1).splitlines():
            found = _pytest_args(line.strip().lstrip("@-"))
            if found is not None:
                return "Makefile", found
    workflows = snapshot / ".github" / "workflows"
    for path in sorted(workflows.glob("*.y*ml")) if workflows.is_dir() else []:
        for line in _text(path).splitlines():
            line = re.sub(r"^\s*(?:-\s*)?(?:run:\s*)?", "", line)
            found = _pytest_args(line)
            if found is not None:
                return f".github/workflows/{path.name}", found
    return "", []


def _pytest_args(line: str) -> list[str] | None:
    """pytest's arguments in one shell line (its first command that is pytest), or None."""
    for part in re.split(r"&&|\|\||;|\|", line):
        part = part.strip()
        m = _PYTEST.match(part)
        if m:
            try:
                return shlex.split(part[m.end() :])
            except ValueError:
                return []
    return None


def _text(path: Path) -> str:
    """A file of the snapshot's, "" when absent or a link: a linked pytest.ini, tox.ini or
    setup.cfg could name any host file, whose options would reach the runner's arguments."""
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() and not path.is_symlink() else ""
