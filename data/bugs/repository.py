"""Working code read from a clone at a commit, and the bug as a commit of that clone.

`python -m data.inject reward.execution.repos=[owner/name=CLONE] --commit REF` needs no pull
request: the source is the repository at REF. Its test files are the suite whose passing tests
are the baseline: a Python repository's (its pytest configuration's `python_files`, else
test_*.py and *_test.py under any folder, else nose's tests_*.py and *_tests.py; less what
pytest's own walk would leave out: its norecursedirs and --ignore options, and folders of
type-checker cases, reward/execution/testcommand.py's `collected`), or a
JavaScript/TypeScript repository's (*.test.* and *.spec.* files, and the scripts in test/, tests/,
spec/ and __tests__/ folders less their fixtures, helpers and set-up: the files Jest, Mocha,
Vitest and node --test find by default); a repository with more JavaScript test files than Python
ones is a JavaScript repository. Its sources of that language outside test folders (`--paths`
narrows them: a src/ layout's package) are the files the rules injector may change. The source is
an `Instance` with those sources as its code context, no oracle and no test patch, so the
injector's draws and trees (injector.py) take it as they take a demo instance.

A kept bug's instance has the repository's snapshot at a commit holding the bug: the bug is
committed into the clone (data/git/commits.py, `refs/swe-rl/inject/<id>`), and the instance's
base commit is that commit, its oracle patch the inverse of the bug, its code context the
changed files as the bug left them plus `relevant_files` unchanged ones chosen as data.build
chooses them (data/context/imports.py). It has no test patch: its tests are the test files its
FAIL_TO_PASS and PASS_TO_PASS name (reward/execution/runner.py runs those when an instance has
no test patch), all already in the snapshot.
"""

from __future__ import annotations

import configparser
import contextlib
import fnmatch
import logging
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from data.bugs.injector import BugCandidate, buggy_tree, issue_text, working_tree
from data.bugs.languages import is_test_file, language_of
from data.context.imports import relevant_candidates
from data.git.commits import commit_files
from data.git.diffs import JS_TEST_DIRS, is_test_path
from data.git.repo import Repo
from data.mining.extract import add_relevant
from data.mining.filters import FilterConfig
from data.patching import files_patch
from data.schema import Instance
from reward.execution.testcommand import collected

REF_PREFIX = "refs/swe-rl/inject/"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GitSource:
    """The repository at a commit: an Instance over its sources, and its test files."""

    instance: Instance
    tests: tuple[str, ...]
    clone: Path
    baseline_s: float | None = None  # what its tests took in its derived environment (None: not measured)


def _is_source(path: str, prefixes: tuple[str, ...], language: str = "python") -> bool:
    if language_of(path) != language or is_test_file(path) or is_test_path(path):
        return False
    if prefixes:
        return any(path.startswith(p.rstrip("/") + "/") or path == p for p in prefixes)
    # Without prefixes: the code, not the project's scaffolding (docs' conf.py, setup.py; a
    # JavaScript project's build output, dependencies and tool configurations).
    if path.startswith(("docs/", "doc/", "examples/", ".")) or path in {"setup.py", "noxfile.py"}:
        return False
    return language == "python" or not _js_scaffolding(path)


# A JavaScript project's files that are no code of its own: generated, vendored, its tooling and
# configuration, and (in a monorepo's packages too) its documentation and examples.
_JS_NOT_CODE = frozenset(
    {"node_modules", "dist", "build", "coverage", "vendor", "scripts", "bench", "benchmark", "benchmarks"}
    | {"docs", "doc", "examples", "example", "fixtures", "__fixtures__", "__mocks__"}
)
_JS_TOOLS = ("*.config.*", "*.conf.*", "*.min.*", ".*", "gulpfile.*", "Gruntfile.*", "Jakefile.*")


def _js_scaffolding(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return any(part in _JS_NOT_CODE for part in parts[:-1]) or any(fnmatch.fnmatchcase(name, p) for p in _JS_TOOLS)


# pytest's default `python_files`; then nose's naming (tqdm's tqdm/tests/tests_*.py until 2020),
# tried only when the first finds no test file and the repository configures none.
PYTEST_FILES, NOSE_FILES = ("test_*.py", "*_test.py"), ("tests_*.py", "*_tests.py")
# Where pytest reads `python_files`, in its order of precedence: (file, section).
_PYTEST_CONFIGS = (
    ("pytest.ini", "pytest"),
    ("pyproject.toml", ""),
    ("tox.ini", "pytest"),
    ("setup.cfg", "tool:pytest"),
)


def _is_test_module(path: str, patterns: tuple[str, ...] = PYTEST_FILES) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.endswith(".py") and any(fnmatch.fnmatchcase(name, p) for p in patterns)


# Folders within a test folder (data.git.diffs.JS_TEST_DIRS) that hold no test
# (data, mocks, helpers: Mocha would run them as specs when given them).
_JS_NOT_TESTS = frozenset(
    {"fixtures", "fixture", "__fixtures__", "helpers", "helper", "support", "utils", "mocks", "__mocks__"}
    | {"__snapshots__", "data", "node_modules"}
)
_JS_TEST_NAMES = ("*.test.*", "*.spec.*")
_JS_NOT_TEST_NAMES = ("setup*", "helper*", "global-setup*", "global-teardown*", "teardown*")


def _is_js_test(path: str) -> bool:
    """A JavaScript/TypeScript test file: *.test.* or *.spec.*, or a script in a test folder
    outside its fixtures and helpers."""
    if language_of(path) != "javascript":
        return False
    parts = path.split("/")
    name, folders = parts[-1], parts[:-1]
    if any(part in _JS_NOT_TESTS for part in folders):
        return False
    if any(fnmatch.fnmatchcase(name, p) for p in _JS_TEST_NAMES):
        return True
    named_otherwise = any(fnmatch.fnmatchcase(name, p) for p in _JS_NOT_TEST_NAMES)
    return not named_otherwise and any(part in JS_TEST_DIRS for part in folders)


def python_files(read: Callable[[str], str | None]) -> tuple[str, ...]:
    """The repository's own `python_files` patterns (its pytest configuration, read by `read`:
    path -> text or None), or () when it sets none."""
    for name, section in _PYTEST_CONFIGS:
        text = read(name)
        if text is None:
            continue
        value: object = None
        if name == "pyproject.toml":
            with contextlib.suppress(tomllib.TOMLDecodeError):
                value = tomllib.loads(text).get("tool", {}).get("pytest", {}).get("ini_options", {}).get("python_files")
        else:
            parser = configparser.ConfigParser(interpolation=None, strict=False)
            with contextlib.suppress(configparser.Error):
                parser.read_string(text)
                value = parser.get(section, "python_files", fallback=None)
        if isinstance(value, str):
            value = value.split()
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return tuple(value)
    return ()


def read_source(name: str, clone: Path, commit: str, prefixes: tuple[str, ...] = ()) -> GitSource:
    """The repository `name` held by `clone` at `commit` (a ref or id), as a source. Raises
    ValueError naming what is missing (no such commit, no source file, no test file)."""
    with Repo(clone) as repo:
        sha = repo.resolve(commit)
        if sha is None:
            raise ValueError(f"{clone}: no commit {commit!r}")
        paths = repo.text("ls-tree", "-r", "--name-only", sha).splitlines()
        date = repo.text("log", "-1", "--format=%cI", sha).strip()

        def read(name: str) -> str | None:
            blob = repo.blob(f"{sha}:{name}") if name in paths else None
            return blob.decode("utf-8", "replace") if blob is not None else None

        own = python_files(read)
        tests: tuple[str, ...] = ()
        for patterns in [own] if own else [PYTEST_FILES, NOSE_FILES]:
            tests = tuple(sorted(p for p in paths if _is_test_module(p, patterns)))
            if tests:
                break
        language = "python"
        js_tests = tuple(sorted(p for p in paths if _is_js_test(p)))
        if not own and len(js_tests) > len(tests):
            language, tests = "javascript", js_tests
        else:  # what pytest's walk of the repository would leave out (testcommand.collected)
            tests, left_out = collected(tests, read)
            if left_out:
                example = next(iter(left_out.items()))
                log.info("[inject] %s: %d test files left out, e.g. %s", name, len(left_out), example)
        sources: dict[str, str] = {}
        for path in paths:
            if _is_source(path, prefixes, language):
                blob = repo.blob(f"{sha}:{path}")
                try:
                    sources[path] = blob.decode("utf-8") if blob is not None else ""
                except UnicodeDecodeError:
                    continue
    if not sources:
        what = "Python" if language == "python" else "JavaScript/TypeScript"
        raise ValueError(
            f"{name} at {sha[:12]}: no {what} source outside test folders" + (f" under {prefixes}" if prefixes else "")
        )
    if not tests:
        raise ValueError(
            f"{name} at {sha[:12]}: no test file ({', '.join(own or PYTEST_FILES + NOSE_FILES)}, "
            "nor JavaScript/TypeScript's *.test.*, *.spec.*, test/, __tests__/)"
        )
    inst = Instance(
        instance_id=f"{name.replace('/', '__')}-{sha[:12]}",
        repo=name,
        base_commit=sha,
        problem_statement="",
        patch="",
        test_patch="",
        code_context=sources,
        oracle_new_content={},
        created_at=date,
    )
    return GitSource(inst, tests, clone)


def bug_instance(
    source: GitSource,
    candidate: BugCandidate,
    k: int,
    fail_to_pass: set[str],
    baseline: set[str],
    runs: list[Any],
    relevant_files: int = 3,
) -> Instance:
    """A proved bug of `source` as an instance whose base commit holds the bug (committed into
    the clone under REF_PREFIX) and whose oracle patch reverts it."""
    src = source.instance
    fixed, buggy = working_tree(src), buggy_tree(src, candidate.bug)
    changed = sorted({m.path for m in candidate.bug})
    instance_id = f"{src.instance_id}.inject{k}"
    bug = {p: buggy[p] for p in changed}
    commit = commit_files(
        source.clone,
        src.base_commit,
        dict(bug),
        f"injected bug {instance_id} ({candidate.operators})",
        REF_PREFIX + instance_id,
    )
    context: dict[str, str] = dict(bug)
    if relevant_files > 0:
        with Repo(source.clone) as repo:
            found = relevant_candidates(repo, commit, changed, set(changed))
            context.update(add_relevant(repo, commit, found, 0, relevant_files, FilterConfig()))
    return replace(
        src,
        instance_id=instance_id,
        base_commit=commit,
        problem_statement=issue_text(fail_to_pass, runs),
        patch=files_patch(bug, {p: fixed[p] for p in changed}, set()),
        code_context=context,
        oracle_new_content={p: fixed[p] for p in changed},
        problem_source=candidate.problem_source,
        fail_to_pass=tuple(sorted(fail_to_pass)),
        pass_to_pass=tuple(sorted(baseline - fail_to_pass)),
    )
