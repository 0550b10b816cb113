"""Test runners: how a suite's tests are started, recorded and checked, one registered entry each.

An environment names its runner (`EnvSpec.runner`; a repository's is its row in repos.py), and
runner.py asks that entry, through one interface, for everything that depends on it:

    command(python, runner_args, import_root, tests)
                    the test process's argv (always the harness's bootstrap.py first, which
                    starts the entry's recorder before any repository code: pytest's plugin,
                    or unittest's TestResult with `--unittest`) and the canaries it runs with
                    (report.py: a pytest file, or a unittest module labelled like the tests);
                    an empty argv when none of `tests` is a test module the runner takes
    guarded_dirs    folders the runner owns whole: a candidate's change anywhere in them is not
                    applied (guard.py's "owned"), since the runner's script and settings live there
    requirement     the package a derived environment adds when its test requirements do not
                    name it (environments.derive_candidates); None when the repository carries its runner

    pytest      the environment's runner_args (the repository's own options that
                testcommand.py passes on: -W, `-m "not slow"`, ...), then the test files and the
                canary file as pytest's arguments (SWE-bench's test directives are the test
                patch's files)
    django      `tests/runtests.py --verbosity 2 RUNNER_ARGS LABELS`, as SWE-bench runs it:
                each test file under tests/ as its dotted module label
                (tests/admin_views/tests.py -> admin_views.tests), the canary module's label last

A runner for another framework is one subclass here with `@RUNNERS.register("name")`; an
environment can name it at once (EnvSpec checks the name against RUNNERS). The threat model of
everything the command starts is runner.py's and docs/security.md's.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from pathlib import Path, PurePosixPath
from typing import ClassVar

from conf.registry import Registry
from reward.execution.report import Canaries
from reward.execution.sandbox import HARNESS_DIR

# Where the test process finds the harness's bootstrap.py: a read-only copy in the sandbox's
# own root (harness_files), not a bind of the checkout's file, so no checkout path shows inside.
BOOTSTRAP = f"{HARNESS_DIR}/bootstrap.py"
# `-s`: no user site; `-B`: no bytecode written into the overlay (bootstrap.py says why).
_PYTHON_FLAGS = ("-s", "-B")


# The JavaScript runners' reporters (js/): each writes the report stream in the recorder's format.
JS_DIR = Path(__file__).with_name("js")
# A JavaScript or TypeScript source file: what a JavaScript runner may take as a test file.
JS_SUFFIXES = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")
_TS_SUFFIXES = (".ts", ".tsx", ".mts", ".cts")


@functools.cache
def harness_files() -> dict[str, str]:
    """What sandbox.run copies into HARNESS_DIR for a test run: bootstrap.py with its policy
    (policy.py, as swe_rl_policy.py) and the JavaScript reporters, read once."""
    files = {"bootstrap.py": Path(__file__).with_name("bootstrap.py").read_text()}
    files["swe_rl_policy.py"] = Path(__file__).with_name("policy.py").read_text()  # its audit hook
    files.update({p.name: p.read_text() for p in sorted(JS_DIR.iterdir()) if p.suffix in (".cjs", ".mjs")})
    return files


class TestRunner(ABC):
    """One way of running a suite under the harness's recorder; its class is registered, and
    each use builds a fresh (stateless) instance."""

    __test__ = False  # not a pytest test class
    guarded_dirs: ClassVar[tuple[str, ...]] = ()
    requirement: ClassVar[str | None] = None
    language: ClassVar[str] = "python"  # or "javascript": its environment has a node (node.py)
    suffixes: ClassVar[tuple[str, ...]] = (".py",)  # the files it takes as test files

    def takes(self, path: str) -> bool:
        """Whether a test patch's file is one of this runner's test files."""
        return path.endswith(self.suffixes)

    def variables(self, token: str) -> dict[str, str]:
        """What a test run adds to the environment's variables (an agent's session has none of
        it); `token`: the run's own, which the harness's guard says a finding with."""
        return {}

    @abstractmethod
    def command(
        self, python: str, runner_args: tuple[str, ...], import_root: str, tests: list[str]
    ) -> tuple[list[str], Canaries]:
        """The argv of the test process and its canaries (module docstring)."""


RUNNERS: Registry[type[TestRunner]] = Registry("test runner", "environment.runner")


def runner_for(name: str) -> TestRunner:
    """The runner an environment names; an unknown name lists the registered ones."""
    return RUNNERS.get(name)()


# -p no:cacheprovider: no .pytest_cache (and no --lf state) carried between runs;
# --tb=line: one line per failure on the console; a real suite's hundreds of full tracebacks
# (requests' network tests in the sandbox) would pass the output cap.
PYTEST_ARGS = ("-p", "no:cacheprovider", "-q", "-rN", "--tb=line")


@RUNNERS.register("pytest")
class Pytest(TestRunner):
    requirement = "pytest"

    def command(
        self, python: str, runner_args: tuple[str, ...], import_root: str, tests: list[str]
    ) -> tuple[list[str], Canaries]:
        canaries = Canaries.beside(tests, import_root)
        # runner_args: the repository's own options the harness passes on (testcommand.py), after
        # its own, so neither a -q nor a plugin of theirs comes before the recorder's.
        return [python, *_PYTHON_FLAGS, BOOTSTRAP, *PYTEST_ARGS, *runner_args, *tests, canaries.path], canaries


@RUNNERS.register("django")
class Django(TestRunner):
    """django's tests/runtests.py. The script, its settings (tests/test_sqlite.py) and every test
    module live under tests/, which the runner owns whole (the fix is django's code; its tests
    are the test patch's)."""

    script, tests = "tests/runtests.py", "tests"
    guarded_dirs = ("tests",)
    # The test classes django's tests derive from: django's own are code under test (a candidate
    # may change how SimpleTestCase or TestCase run a test), so the canaries include a pair of each.
    bases = (("unittest", "TestCase"), ("django.test", "SimpleTestCase"), ("django.test", "TestCase"))

    def command(
        self, python: str, runner_args: tuple[str, ...], import_root: str, tests: list[str]
    ) -> tuple[list[str], Canaries]:
        modules = [t for t in tests if t.startswith(self.tests + "/")]
        canaries = Canaries.unittest_beside(modules, import_root, self.tests, self.bases)
        labels = [self.label(t) for t in modules]
        if not labels:
            return [], canaries
        args = ["--unittest", self.script, "--verbosity", "2", *runner_args, *labels, canaries.label]
        return [python, *_PYTHON_FLAGS, BOOTSTRAP, *args], canaries

    def label(self, path: str) -> str:
        """A test file under tests/ as runtests.py's dotted label (a package's __init__.py: the package)."""
        parts = PurePosixPath(path).relative_to(self.tests).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


class JavaScriptRunner(TestRunner):
    """A JavaScript test runner from the repository's own node_modules, started by its `bin`
    entry (`node_modules/.bin/NAME`: the link npm and yarn make to a `#!/usr/bin/env node`
    script, the shell script pnpm writes), the environment's node first on PATH; with the
    harness's reporter (js/) and the canaries of report.Canaries.javascript. The argv is
    `node_modules/.bin/NAME [the runner's own options] [the repository's] [the harness's]
    FILES`; node's own runner is `node --test ...`."""

    language = "javascript"
    suffixes = JS_SUFFIXES
    style: ClassVar[str]  # the canaries' style (report.Canaries.javascript)

    def variables(self, token: str) -> dict[str, str]:
        # Every node process of the run loads the harness's guard first (js/swe_rl_guard.cjs);
        # a child without the report's pipe says a finding on its stderr after the token.
        return {"NODE_OPTIONS": f"--require {HARNESS_DIR}/swe_rl_guard.cjs", "SWE_RL_GUARD_TOKEN": token}

    def command(
        self, python: str, runner_args: tuple[str, ...], import_root: str, tests: list[str]
    ) -> tuple[list[str], Canaries]:
        canaries = Canaries.javascript(tests, self.style, self.canary_suffix(tests), runner_args)
        files = [t for t in tests if self.takes(t)]
        if not files:
            return [], canaries
        return [*self.argv(runner_args), *files, canaries.path], canaries

    def canary_suffix(self, tests: list[str]) -> str:
        """The canary file's name after its token: the last test file's from its first dot
        (`.test.ts`, `.spec.js`, `.js`), so the runner's own test-file patterns take it; a test
        file named only `test.ts` (date-fns: `src/<fn>/test.ts`, its vitest `include` that name
        alone) gives `/test.ts`: the canary is a file of that name in a folder of its own."""
        name = PurePosixPath(tests[-1]).name if tests else "x.test.js"
        stem, dot, rest = name.partition(".")
        if dot and stem in ("test", "tests", "spec"):
            return "/" + name
        return "." + rest if dot else ".test.js"

    @abstractmethod
    def argv(self, runner_args: tuple[str, ...]) -> list[str]:
        """Everything before the test files."""


@RUNNERS.register("node-test")
class NodeTest(JavaScriptRunner):
    """node's own test runner (node 18.19 and 20 on: custom reporters). Each file runs in a
    process of its own; the reporter runs in the parent."""

    style = "node-test"

    def argv(self, runner_args: tuple[str, ...]) -> list[str]:
        return ["node", "--test", *runner_args, f"--test-reporter={HARNESS_DIR}/node_test_reporter.mjs",
                "--test-reporter-destination=stdout"]  # fmt: skip

    def canary_suffix(self, tests: list[str]) -> str:
        return _plain_js(super().canary_suffix(tests))


@RUNNERS.register("jest")
class Jest(JavaScriptRunner):
    """jest, in band (its tests in the reporter's process, one at a time: the sandbox's
    process cap and its wall clock hold for the whole run), the files as paths, not patterns."""

    style = "jest"

    def argv(self, runner_args: tuple[str, ...]) -> list[str]:
        own = [f"--reporters={HARNESS_DIR}/jest_reporter.cjs", "--ci", "--runInBand", "--watchman=false"]
        own.append("--colors=false")
        # A boolean last: an array option before the files (--reporters, a repository's
        # --setupFiles) would take them as its values.
        return ["node_modules/.bin/jest", *own, *runner_args, "--runTestsByPath"]


@RUNNERS.register("mocha")
class Mocha(JavaScriptRunner):
    """mocha in its own process (`_mocha`: `mocha` re-spawns node), serially (a parallel run
    reports through its workers, not the reporter)."""

    style = "mocha"

    def argv(self, runner_args: tuple[str, ...]) -> list[str]:
        reporter = ["--reporter", f"{HARNESS_DIR}/mocha_reporter.cjs"]
        return ["node_modules/.bin/_mocha", "--no-parallel", "--no-colors", *runner_args, *reporter]

    def canary_suffix(self, tests: list[str]) -> str:
        return _plain_js(super().canary_suffix(tests))


@RUNNERS.register("vitest")
class Vitest(JavaScriptRunner):
    """vitest run once (no watch); the files as its filters. A file its `typecheck` settings take
    is also checked by tsc, its tests "passing" whatever their bodies assert (zod's config takes
    every test file): the reporter reads only the files vitest ran."""

    style = "vitest"

    def argv(self, runner_args: tuple[str, ...]) -> list[str]:
        reporter = f"--reporter={HARNESS_DIR}/vitest_reporter.mjs"
        return ["node_modules/.bin/vitest", "run", "--watch=false", *runner_args, reporter]


def selected(path: str, patterns: tuple[str, ...]) -> bool:
    """Whether a repository path is in a runner's selection as its command writes it: a file, a
    folder (everything under it), or a glob (`**` any folders, `*` and `?` within one,
    `{a,b}` either). No pattern: every path."""
    if not patterns:
        return True
    for pattern in patterns:
        pattern = pattern.removeprefix("./").rstrip("/")
        if not re.search(r"[*?{\[]", pattern):
            if path == pattern or path.startswith(pattern + "/"):
                return True
        elif _glob(pattern).fullmatch(path):
            return True
    return False


@functools.cache
def _glob(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "{" and "}" in pattern[i:]:
            end = pattern.index("}", i)
            out.append("(?:" + "|".join(re.escape(a) for a in pattern[i + 1 : end].split(",")) + ")")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def _plain_js(suffix: str) -> str:
    """A canary's suffix for a runner that loads files with node itself: `.js` (CommonJS or an
    ES module, as the nearest package.json says) becomes `.cjs`; TypeScript stays (the
    repository's loader takes it)."""
    for plain in (".js", ".jsx"):
        if suffix.endswith(plain):
            return suffix[: -len(plain)] + ".cjs"
    return suffix
