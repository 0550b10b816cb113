"""Which of a candidate's files the test run never sees: those that could decide its verdict.

A candidate patch is code a policy wrote to be rewarded, so any file it can write that pytest
or Python honours before or around the tests is a way to forge the verdict instead of fixing
the bug (docs/security.md). Such files are not applied: the run sees the base commit's version
(and the test patch's), and `TestRun.guarded` names them. Restored rather than rejected: a
real fix may also touch setup.cfg or pyproject.toml, and dropping that change costs at most a
test the fix needed and the base configuration did not give, while the forgery it closes is
certain. SWE-bench's harness honours all of them.

    always      pytest's configuration and plugins wherever they are (conftest.py, pytest.ini,
                .pytest.ini, tox.ini, setup.cfg, pyproject.toml: pytest looks for them upwards
                from the test files); start-up hooks (sitecustomize.py, usercustomize.py);
                pytest's default test files (test_*.py, *_test.py: the tests are the test
                patch's and the base commit's, never the candidate's); compiled files
                (__pycache__/, .pyc, .pyo, .so, .pyd: Python loads an unchecked-hash .pyc or an
                extension module before the source beside it); a top-level pytest.py or
                _pytest/ (a runner of the candidate's own)
    owned       anything in a folder the runner owns whole (django: tests/, where runtests.py,
                its settings and every test module live)
    if created  a new file in a test folder (data/diffs.is_test_path: tests/helpers.py, or
                tests/pkg/mod.py that shadows the package through pytest's rootdir insertion);
                a new module named after a standard-library module (datetime.py, json/) at a
                folder the test process imports from (the root, the environment's
                `pythonpath`, the test files' folders): the tests' own imports would get it

A JavaScript/TypeScript repository's runner (Jest, Mocha, Vitest, node --test) and compiler
(TypeScript, Babel, SWC) are configured by files, its dependencies by its manifest and lock
files, and its tests are files too, so these are guarded as well, in every repository:

    always      the runners' and compilers' configuration wherever it is (jest.config.*,
                vitest.config.*, vitest.workspace.*, vite.config.*, .mocharc*, babel.config.*,
                .babelrc*, tsconfig*.json, jsconfig*.json, .swcrc, karma.conf.*, ava.config.*);
                package.json at any depth (its scripts, `jest` / `mocha` fields, `type`,
                `exports` and dependencies decide what runs and what an import resolves to);
                the lock and package-manager files (package-lock.json, npm-shrinkwrap.json,
                yarn.lock, pnpm-lock.yaml, pnpm-workspace.yaml, .npmrc: its node-options
                reach every node process, .yarnrc*, .pnpmfile.cjs, .pnp.cjs, .pnp.loader.mjs,
                a top-level .yarn/); node_modules/ anywhere (an import resolves into the
                nearest one); the test files (*.test.* and *.spec.* with a JavaScript or
                TypeScript extension; such a file in a test/, tests/, spec/ or __tests__/
                folder: Mocha's default specs are test/*.js, and the helpers and set-up files
                there are loaded by the tests), Jest's folders (__tests__/, __mocks__/:
                its module mocks, __snapshots__/ and *.snap: the expected values of snapshot
                tests); set-up files wherever they are (jest.setup.*, jest.teardown.*,
                vitest.setup.*, setupTests.*, setup-tests.*)
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Iterable
from pathlib import PurePosixPath

from data.git.diffs import JS_EXTENSIONS, JS_TEST_DIRS, is_test_path

NAMES = frozenset(
    {"conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"}
    | {"sitecustomize.py", "usercustomize.py"}
)
PATTERNS = ("test_*.py", "*_test.py", "*.pyc", "*.pyo", "*.so", "*.pyd")
TOP = ("pytest.py", "_pytest")
STDLIB = frozenset(sys.stdlib_module_names)

JS_NAMES = frozenset(
    {"package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "pnpm-workspace.yaml"}
    | {".npmrc", ".pnpmfile.cjs", ".pnp.cjs", ".pnp.loader.mjs", ".swcrc"}
)
JS_PATTERNS = (
    *("jest.config.*", "vitest.config.*", "vitest.workspace.*", "vite.config.*", ".mocharc*", "karma.conf.*"),
    *("ava.config.*", "babel.config.*", ".babelrc*", "tsconfig*.json", "jsconfig*.json", ".yarnrc*", "*.snap"),
    *("jest.setup.*", "jest.teardown.*", "vitest.setup.*", "setupTests.*", "setup-tests.*"),
)
JS_DIRS = frozenset({"node_modules", "__tests__", "__mocks__", "__snapshots__"})
JS_TOP = (".yarn",)


def is_guarded(path: str, created: bool, roots: Iterable[str] = (".",), owned: Iterable[str] = ()) -> bool:
    """Whether a candidate's change to `path` is not applied (the module docstring). `created`:
    the base commit has no such file; `roots`: repository folders on the tests' import path;
    `owned`: folders the test runner owns whole (django's tests/: its runner script, settings
    and test modules)."""
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if name in NAMES or "__pycache__" in parts or parts[0] in TOP:
        return True
    if any(path.startswith(folder.rstrip("/") + "/") for folder in owned):
        return True
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in PATTERNS):
        return True
    if _is_js_guarded(parts):
        return True
    if not created:
        return False
    return is_test_path(path) or any(_module_at(path, root) in STDLIB for root in roots)


def _is_js_guarded(parts: tuple[str, ...]) -> bool:
    """The JavaScript/TypeScript rules (the module docstring's second table)."""
    name, folders = parts[-1], parts[:-1]
    if name in JS_NAMES or parts[0] in JS_TOP or any(part in JS_DIRS for part in folders):
        return True
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in JS_PATTERNS):
        return True
    if PurePosixPath(name).suffix not in JS_EXTENSIONS:
        return False
    stem = name.rsplit(".", 1)[0]
    return stem.endswith((".test", ".spec")) or any(part in JS_TEST_DIRS for part in folders)


def _module_at(path: str, root: str) -> str | None:
    """The top-level module `path` defines when `root` is on sys.path (x.py -> x, x/y.py -> x)."""
    prefix = "" if root in ("", ".") else root.rstrip("/") + "/"
    if not path.startswith(prefix):
        return None
    first, _, rest = path[len(prefix) :].partition("/")
    if rest:
        return first
    return first[:-3] if first.endswith(".py") else None
