"""What environment a JavaScript/TypeScript repository at a commit needs, read from its own files
(never run): the Node versions to try, its lock file, its test runner, and which files of a test
patch are tests. The Python analogue is candidates.py with declared.py; the runner and its
options are jscommand.py's (testcommand.py's analogue).

    is_javascript(dir)      a package.json at the root (a JSON object) and none of Python's project
                            files (setup.py, pyproject.toml, setup.cfg): a Python project with a
                            package.json (a docs site, a frontend's tooling) has its tests in
                            Python, and a JavaScript library rarely carries a Python build
    node_versions(dir, date)
                            Node majors, best first:
                              pinned   .nvmrc, .node-version, asdf's .tool-versions, package.json's
                                       volta.node (`lts/*` and codenames read as of the date), as
                                       the repository says
                              admitted the majors package.json's engines.node admits (RANGE:
                                       >=, ^, ~, x, hyphen ranges and `||`, read per major),
                                       released by the date: those its CI tests first (GitHub
                                       workflows' node-version / node lists, .travis.yml's
                                       node_js, appveyor's nodejs_version), then those out for
                                       MATURE_DAYS, then even (LTS) majors before odd ones (never
                                       LTS: short-lived, and packages rarely publish binaries for
                                       them), newest first. A major released after the date is
                                       not a candidate: no commit was tested on it.
                              fallback nothing admitted: the newest even major out at the date;
                                       no date and nothing declared: DEFAULT_NODE
                            Only majors >= 10 (MAJORS): older ones cannot be had here.
    lock_kind(dir)          "npm" (npm-shrinkwrap.json, package-lock.json), "yarn" (yarn.lock v1),
                            "yarn-berry" (a yarn.lock with `__metadata:`), "pnpm", "bun", None;
                            package.json's packageManager decides between several
    js_candidates(dir, date, repo)
                            the EnvSpec fields of each Node version with the detected runner,
                            best first; [] when nothing runs the tests
    js_test_files(paths)    the JS/TS test files of a test patch (TEST_FILE_RULES)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from datetime import date as Date
from pathlib import Path, PurePosixPath
from typing import Any

from data.git.diffs import is_test_path
from reward.execution.jscommand import detect_runner, js_command, package_json

# First release of each Node major (nodejs.org's release schedule): a commit predating one was
# never tested on it; the table orders majors by age.
MAJORS = {
    10: "2018-04-24",
    11: "2018-10-23",
    12: "2019-04-23",
    13: "2019-10-22",
    14: "2020-04-21",
    15: "2020-10-20",
    16: "2021-04-20",
    17: "2021-10-19",
    18: "2022-04-19",
    19: "2022-10-18",
    20: "2023-04-18",
    21: "2023-10-17",
    22: "2024-04-24",
    23: "2024-10-16",
    24: "2025-05-06",
}
# When each even major entered long-term support, and its codename (`lts/hydrogen`): `lts/*` at a
# date is the newest major in LTS by then.
LTS = {10: "2018-10-30", 12: "2019-10-21", 14: "2020-10-27", 16: "2021-10-26", 18: "2022-10-25"} | {
    20: "2023-10-24",
    22: "2024-10-29",
    24: "2025-10-28",
}
CODENAMES = {"argon": 4, "boron": 6, "carbon": 8, "dubnium": 10, "erbium": 12, "fermium": 14, "gallium": 16}
CODENAMES |= {"hydrogen": 18, "iron": 20, "jod": 22, "krypton": 24}
OLDEST = 10  # older majors cannot be had here
MATURE_DAYS = 90  # a major out this long had its packages' native binaries by then (candidates.py's rule)
DEFAULT_NODE = "20"  # no date and nothing declared
PYTHON_PROJECT = ("setup.py", "pyproject.toml", "setup.cfg")
JS_EXTENSIONS = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")


def is_javascript(snapshot: Path) -> bool:
    """A JavaScript/TypeScript repository (module docstring)."""
    if any((snapshot / f).is_file() for f in PYTHON_PROJECT):
        return False
    return (snapshot / "package.json").is_file() and bool(package_json(snapshot))


# ---------------------------------------------------------------------------- Node versions


def node_versions(snapshot: Path, created_at: str | None) -> list[str]:
    """Candidate Node majors, best first (module docstring); at least one."""
    return [major for major, _ in _nodes(snapshot, created_at)]


def _nodes(snapshot: Path, created_at: str | None) -> list[tuple[str, str]]:
    """(major, why) of each candidate, best first."""
    when = utc(created_at)
    day = when[:10] if when else None
    package = package_json(snapshot)
    out: dict[int, str] = {}
    for source, text in _pins(snapshot, package):
        major = node_major(text, day)
        if major is not None and major >= OLDEST and major not in out:
            out[major] = f"{source} {text.strip()}"
    engines = package.get("engines")
    declared = engines.get("node") if isinstance(engines, dict) else None
    admits = major_range(declared) if isinstance(declared, str) else None
    tested = tested_nodes(snapshot, day)
    known = [m for m in MAJORS if day is None or MAJORS[m] <= day]
    admitted = [m for m in known if admits is None or admits(m)]
    mature = (Date.fromisoformat(day) - timedelta(days=MATURE_DAYS)).isoformat() if day else None

    def key(m: int) -> tuple[bool, bool, bool, int]:
        return (m not in tested, mature is not None and MAJORS[m] > mature, m % 2 == 1, -m)

    ordered = sorted(admitted, key=key)
    if day is None and not tested and admits is None and int(DEFAULT_NODE) in ordered:  # nothing decides
        ordered.remove(int(DEFAULT_NODE))
        ordered.insert(0, int(DEFAULT_NODE))
    for m in ordered:
        why = "tested by its CI" if m in tested else "out by the commit"
        out.setdefault(m, f"engines {declared!r} admits it, {why}" if declared else why)
    if not out:
        even = [m for m in known if m % 2 == 0]
        out[even[-1] if even else int(DEFAULT_NODE)] = "the newest even major out by the commit (nothing admitted)"
    return [(str(m), why) for m, why in out.items()]


def _pins(snapshot: Path, package: dict[str, Any]) -> list[tuple[str, str]]:
    """(file, version as written) of the files that pin a Node version."""
    pins = []
    for name in (".nvmrc", ".node-version"):
        path = snapshot / name
        if path.is_file() and not path.is_symlink():  # a link could name any host file, read as root
            lines = [ln.split("#")[0].strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()]
            first = next((ln for ln in lines if ln), "")
            if first:
                pins.append((name, first))
    for line in _text(snapshot / ".tool-versions").splitlines():  # asdf's: `nodejs 14.16.0`
        words = line.split("#")[0].split()
        if len(words) > 1 and words[0] in ("nodejs", "node"):
            pins.append((".tool-versions", words[1]))
    volta = package.get("volta")
    if isinstance(volta, dict) and isinstance(volta.get("node"), str):
        pins.append(("volta", volta["node"]))
    return pins


def node_major(text: str, day: str | None) -> int | None:
    """The major a version as written names: "18", "v18.17.0", "18.x", "lts/hydrogen", "lts/*"
    and "node" / "latest" / "current" (the newest out at `day`, or in the table); None when it
    names none ("iojs", "${{ matrix.node }}")."""
    value = text.strip().strip("'\"").lower()
    if m := re.fullmatch(r"v?(\d+)(?:\.[\dx*]+)*(?:\.x)?", value):
        return int(m.group(1))
    if value.startswith("lts/"):
        name = value[4:]
        if name in CODENAMES:
            return CODENAMES[name]
        lts = [m for m, d in LTS.items() if day is None or d <= day]
        if name in ("*", "latest"):
            return lts[-1] if lts else None
        if name == "-1":  # the LTS before the newest
            return lts[-2] if len(lts) > 1 else None
        return None
    if value in ("node", "latest", "current", "stable", "*"):
        out = [m for m, d in MAJORS.items() if day is None or d <= day]
        return out[-1] if out else None
    return None


def tested_nodes(snapshot: Path, day: str | None) -> list[int]:
    """The majors its CI runs (module docstring), newest first, each once."""
    values: list[str] = []
    workflows = snapshot / ".github" / "workflows"
    files = sorted(workflows.glob("*.y*ml")) if workflows.is_dir() else []
    for path in files:
        values += _yaml_values(_text(path), ("node-version", "node", "node_version", "nodejs"))
    values += _yaml_values(_text(snapshot / ".travis.yml"), ("node_js",))
    for name in ("appveyor.yml", ".appveyor.yml"):
        values += _yaml_values(_text(snapshot / name), ("nodejs_version",))
    majors = {m for v in values if (m := node_major(v, day)) is not None and m >= OLDEST}
    return sorted(majors, reverse=True)


def _yaml_values(text: str, keys: tuple[str, ...]) -> list[str]:
    """The scalar values of `key:` lines (inline `[a, b]` lists, a scalar, or the `- a` items
    indented below an empty one): the CI files' node lists without a YAML parser."""
    out: list[str] = []
    lines = text.splitlines()
    names = "|".join(re.escape(k) for k in keys)
    for i, line in enumerate(lines):
        m = re.match(rf"^(\s*)(?:-\s*)?(?:{names})\s*:\s*(.*?)\s*(?:#.*)?$", line)
        if not m:
            continue
        value = m.group(2)
        if value.startswith("["):
            out += [v.strip().strip("'\"") for v in value.strip("[]").split(",") if v.strip()]
        elif value:
            out.append(value.strip("'\""))
        else:
            indent = len(m.group(1))
            for below in lines[i + 1 :]:
                item = re.match(r"^(\s*)-\s*(.*?)\s*(?:#.*)?$", below)
                if not item or len(item.group(1)) < indent:
                    break
                out.append(item.group(2).strip("'\""))
    return out


# A version as a range comparator writes it: "14", "14.x", "16.0.0", "v18.2", "*".
_VERSION = r"v?(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:[-+][\w.+-]*)?"
_INF = (10**9, 0, 0)


def major_range(text: str) -> Callable[[int], bool] | None:
    """A predicate on majors: whether some version of the major satisfies the semver range
    `text` (npm's forms: `>=14`, `>= 16.0.0`, `^18 || ^20`, `14.x`, `~16.13`, `16 - 20`, `*`, a
    space-separated intersection); None when it cannot be read (then it does not constrain)."""
    alternatives = []
    for part in text.split("||"):
        interval = _interval(part.strip())
        if interval is None:
            return None
        alternatives.append(interval)

    def admits(major: int) -> bool:
        low, high = (major, 0, 0), (major + 1, 0, 0)
        return any(lo < high and hi > low and lo < hi for lo, hi in alternatives)

    return admits


def _interval(text: str) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """[low, high) of one intersection of comparators; None when unreadable."""
    if text in ("", "*", "x", "X", "latest"):
        return (0, 0, 0), _INF
    if m := re.fullmatch(rf"({_VERSION})\s+-\s+({_VERSION})", text):
        a, b = _parse(m.group(1)), _parse(m.group(5))
        if a is None or b is None:
            return None
        return _floor(a), _ceiling(b)
    low, high = (0, 0, 0), _INF
    for m in re.finditer(rf"(?:[<>]=?|=|\^|~>?)?\s*{_VERSION}", text):
        got = _comparator(m.group(0).replace(" ", ""))
        if got is None:
            return None
        low, high = max(low, got[0]), min(high, got[1])
    rest = re.sub(rf"(?:[<>]=?|=|\^|~>?)?\s*{_VERSION}", "", text).strip()
    return None if rest else (low, high)


Partial = tuple[int | None, int | None, int | None]  # None: a wildcard or an absent part


def _parse(text: str) -> Partial | None:
    m = re.fullmatch(_VERSION, text)
    if not m:
        return None
    parts = [int(g) if g is not None and g.isdigit() else None for g in m.groups()]
    for i in range(1, 3):  # "14.x.3": after a wildcard everything is one
        if parts[i - 1] is None:
            parts[i] = None
    return parts[0], parts[1], parts[2]


def _floor(v: Partial) -> tuple[int, int, int]:
    return (v[0] or 0, v[1] or 0, v[2] or 0)


def _ceiling(v: Partial) -> tuple[int, int, int]:
    """The first version above every version `v` (partial: any of its wildcards) stands for."""
    if v[0] is None:
        return _INF
    if v[1] is None:
        return (v[0] + 1, 0, 0)
    if v[2] is None:
        return (v[0], v[1] + 1, 0)
    return (v[0], v[1], v[2] + 1)


def _comparator(text: str) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    m = re.fullmatch(r"([<>]=?|=|\^|~>?)?(.*)", text)
    if not m:
        return None
    op, v = m.group(1) or "=", _parse(m.group(2))
    if v is None:
        return None
    if v[0] is None:
        return ((0, 0, 0), _INF) if op in ("=", ">=", "<=", "^", "~", "~>") else ((0, 0, 0), (0, 0, 0))
    floor, ceiling = _floor(v), _ceiling(v)
    if op == "=":
        return floor, ceiling
    if op == ">=":
        return floor, _INF
    if op == ">":
        return ceiling, _INF
    if op == "<":
        return (0, 0, 0), floor
    if op == "<=":
        return (0, 0, 0), ceiling
    if op == "^":  # the leftmost non-zero part stays (majors here are >= 10: the major)
        if v[0] > 0 or v[1] is None:
            return floor, (v[0] + 1, 0, 0)
        return floor, (0, v[1] + 1, 0) if v[1] > 0 or v[2] is None else (0, 0, (v[2] or 0) + 1)
    # ~ and ~>: the minor stays when given, else the major
    return floor, (v[0], v[1] + 1, 0) if v[1] is not None else (v[0] + 1, 0, 0)


# ---------------------------------------------------------------------------- lock files

LOCKS = (
    ("npm-shrinkwrap.json", "npm"),  # npm reads it before package-lock.json
    ("package-lock.json", "npm"),
    ("yarn.lock", "yarn"),
    ("pnpm-lock.yaml", "pnpm"),
    ("bun.lock", "bun"),
    ("bun.lockb", "bun"),
)


def lock_kind(snapshot: Path) -> str | None:
    """The lock file the repository installs from (module docstring)."""
    present = {kind: name for name, kind in reversed(LOCKS) if (snapshot / name).is_file()}
    manager = package_json(snapshot).get("packageManager")
    chosen = None
    if isinstance(manager, str):
        name = manager.split("@", 1)[0]
        chosen = name if name in present else None
    chosen = chosen or next((kind for _, kind in LOCKS if kind in present), None)
    if chosen == "yarn" and re.search(r"^__metadata:", _text(snapshot / "yarn.lock"), re.M):
        return "yarn-berry"
    return chosen


def lockfile_version(snapshot: Path) -> int | None:
    """An npm lock's lockfileVersion (1: npm 5-6; 2: npm 7+, readable by 6; 3: npm 7+ only)."""
    for name in ("npm-shrinkwrap.json", "package-lock.json"):
        path = snapshot / name
        if path.is_file() and not path.is_symlink():
            try:
                data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
            except json.JSONDecodeError:
                return None
            version = data.get("lockfileVersion") if isinstance(data, dict) else None
            return version if isinstance(version, int) else None
    return None


# ---------------------------------------------------------------------------- candidates


def js_candidates(
    snapshot: Path, created_at: str | None, repo: str, limit: int = 4
) -> list[tuple[str, dict[str, Any]]]:
    """(why, EnvSpec fields) of each Node version with the repository's runner, best first, at
    most `limit`; [] when nothing runs its tests (jscommand.js_command says why). `repo`
    ("owner/name") names it in each why."""
    found = detect_runner(snapshot)
    if found is None:
        return []
    runner, args = found
    command = js_command(snapshot)
    lock = lock_kind(snapshot)
    if lock == "npm" and (version := lockfile_version(snapshot)) is not None:
        lock = f"npm lockfileVersion {version}"
    installs = f"lock {lock}" if lock else "no lock: package.json resolved as of the commit"
    out = []
    for node, why in _nodes(snapshot, created_at)[:limit]:
        fields: dict[str, Any] = {
            "snapshot": "git",
            "node": node,
            "install": "lock",
            "runner": runner,
            "runner_args": list(args),
            "exclude_newer": utc(created_at),
        }
        out.append((f"{repo}: node {node} ({why}); {runner} from {command.source}; {installs}", fields))
    return out


# ---------------------------------------------------------------------------- test files

# Folders whose files a runner never runs as tests (data and stand-ins a test loads).
NOT_TESTS = frozenset({"fixtures", "fixture", "__fixtures__", "__mocks__", "__snapshots__", "node_modules"})
# Folders that hold only a suite's helpers (express's test/support/env.js): their files are not
# tests unless named as one. helpers/ and utils/ are not among them: they often mirror the
# source's (axios's test/unit/helpers/parseProtocol.js tests lib/helpers/parseProtocol.js).
HELPER_DIRS = frozenset({"support", "__helpers__", "test-utils", "testutils", "test-helpers"})
# File stems of a suite's set-up modules, likewise; a stem starting with "_" is a helper by
# convention (axios's test/specs/__helpers.js). utils.js and helpers.js are not among them:
# express's test/utils.js tests lib/utils.js.
HELPER_STEMS = frozenset(
    {"setup", "setuptests", "setup-tests", "globalsetup", "global-setup", "globalteardown", "global-teardown"}
    | {"test-utils", "testutils", "test-helpers", "test-setup"}
)
_CONFIG_NAME = re.compile(r"^(jest|vitest|vite|karma|webpack|babel|rollup|mocha)\.conf(ig)?\b|^\.(eslintrc|mocharc)")
_NAMED_TEST = re.compile(r"^(test_.*|.*_tests?\.[^.]+|.*[.-](test|spec)\.[^.]+)$")


def js_test_files(paths: list[str]) -> list[str]:
    """The JS/TS test files among a test patch's paths (TEST_FILE_RULES), in order."""
    return [p for p in paths if is_js_test_file(p)]


TEST_FILE_RULES = """A JS/TS test file: an extension of JS_EXTENSIONS, not a declaration file
(.d.ts), a test path by diffs.is_test_path (a test/, tests/, __tests__/, spec/ folder on it, or a
test name: x.test.js, x.spec.ts, test_x.js), and none of NOT_TESTS's folders on it; in one of
HELPER_DIRS, or with a stem of HELPER_STEMS, a stem starting with "_", or a tool's configuration
name, only when its own name says test (x.test.js). Anything else under a test folder is kept
(conservative): mocha's test/app.router.js is a test file by its folder alone, so a helper with an
ordinary name (axios's test/helpers/server.js) is kept too; it registers no test, so it adds no
label, but a runner given it alone may report an empty file."""


def is_js_test_file(path: str) -> bool:
    p = PurePosixPath(path)
    name = p.name.lower()
    if not name.endswith(JS_EXTENSIONS) or re.search(r"\.d\.[mc]?ts$", name) or not is_test_path(path):
        return False
    folders = [part.lower() for part in p.parts[:-1]]
    if any(f in NOT_TESTS for f in folders):
        return False
    if _NAMED_TEST.match(name):
        return True
    stem = name.split(".", 1)[0]
    helper = any(f in HELPER_DIRS for f in folders) or stem in HELPER_STEMS or stem.startswith("_")
    return not (helper or _CONFIG_NAME.match(name))


def utc(created_at: str | None) -> str | None:
    """An ISO 8601 time as UTC "YYYY-MM-DDTHH:MM:SSZ" (npm's --before takes it; a commit's
    local offset would move its day)."""
    if not created_at:
        return None
    when = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(path: Path) -> str:
    """A file of the snapshot's, "" when absent or a link (which could name any host file)."""
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() and not path.is_symlink() else ""
