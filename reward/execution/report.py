"""Test outcomes from the harness's report stream, and the canaries that tell a forged one.

The stream is what bootstrap.py's recorder wrote, one JSON object a line, as pytest reported
each phase of each test: `{"id": node id, "when": "setup"|"call"|"teardown"|"collect",
"outcome": "passed"|"failed"|"skipped", "xfail"?: true, "message"?: str}`, then `{"exit": N}`
once the session ended by itself. Node ids are pytest's own, relative to its rootdir, exactly
as SWE-bench writes FAIL_TO_PASS/PASS_TO_PASS (`tests/test_a.py::TestX::test_y[1]`).

Outcome of a test: "failed" if its call failed; else "error" if its setup, teardown or
collection failed; else "skipped" if a phase was skipped (an expected failure counts as
skipped); else "passed" if its call passed. Only "passed" counts as passing.

Canaries: the runner adds a test file of its own after every patch (random names, in the
folder of the last test file), with tests that must pass and tests that must fail, in two
styles (plain `assert`, unittest's `assertEqual`), all through a helper module at the top of
the repository's import path (so a canary fails from a repository frame, as a real test
does). Code that forges outcomes wholesale (every test passed, failures stripped, failures
from the repository's code passed, unittest's assertions disabled, the session cut short, a
report written by someone else) cannot show them all right without knowing which is which; a
report in which they do not show exactly their outcomes is `Tampered`, and so is one in which
the recorder saw pytest's machinery replaced (bootstrap.py's integrity check). Under a
unittest-based runner that takes dotted labels (django's runtests.py: `unittest_beside`) the
canaries are pairs of classes of each test base class the suite uses (unittest's and django's
SimpleTestCase and TestCase) in a module of the last test module's package, and a test's
id is its runner's name for it (`test_x (pkg.mod.Case)`, or its docstring's first line). A report in
which no test ran at all (a collection error interrupts pytest before the first) is not
checked: with no test passed, it cannot resolve anything.

The probe (bootstrap.EqualityProbe): a recorder told which tests to watch writes `{"probing": n}` before
any repository code runs, then `{"probe": id, "found": why}` at the end of each watched test's
call ("" when it found nothing). `probed` turns that into a verdict: a watched test that passed
with a finding, or with no probe line at all while the recorder said it was probing (the line
can be kept from being written, never unwritten), is `Tampered`.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from reward.execution.coverage import read_covered

_PHASES = ("setup", "call", "teardown", "collect")
_OUTCOMES = ("passed", "failed", "skipped")


class BadReport(ValueError):
    """The stream is not a report the recorder writes (not JSON, wrong fields, a phase twice)."""


class Tampered(ValueError):
    """The canaries do not show the outcomes the harness wrote them to have."""


@dataclass(frozen=True)
class Report:
    outcomes: dict[str, str]  # node id -> passed/failed/error/skipped
    failures: dict[str, str] = field(default_factory=dict)  # node id -> first line of why (some)
    exit_code: int | None = None  # pytest's; None when the session did not end by itself
    ran: bool = False  # whether any test reached its setup (a collection error interrupts first)
    tampered: str | None = None  # what the recorder found changed in pytest (bootstrap.py)
    probing: bool = False  # whether the recorder watched tests with its probe (bootstrap.EqualityProbe)
    probes: dict[str, str] = field(default_factory=dict)  # watched test id -> finding ("" none)
    # snapshot path -> lines executed, when the run measured them (coverage.py: hostile, bounded)
    covered: dict[str, frozenset[int]] | None = None


def parse(stream: bytes, failure_limit: int = 200) -> Report:
    """The report in `stream`; BadReport when a line is not one the recorder writes."""
    phases: dict[str, dict[str, str]] = {}
    failures: dict[str, str] = {}
    exit_code, tampered, probing = None, None, False
    probes: dict[str, str] = {}
    covered: dict[str, frozenset[int]] | None = None
    for number, line in enumerate(stream.splitlines(), start=1):
        if exit_code is not None:
            raise BadReport(f"line {number}: a record after the session's end")
        try:
            record = json.loads(line)
        except ValueError:
            raise BadReport(f"line {number}: not JSON") from None
        if isinstance(record, dict) and set(record) == {"exit"} and type(record["exit"]) is int:
            exit_code = record["exit"]
            continue
        if isinstance(record, dict) and set(record) == {"covered"}:
            if covered is not None:
                raise BadReport(f"line {number}: a second coverage record")
            try:
                covered = read_covered(record["covered"])
            except ValueError as exc:
                raise BadReport(f"line {number}: {exc}") from None
            continue
        if isinstance(record, dict) and set(record) == {"tampered"}:
            tampered = tampered or str(record["tampered"])[:300]
            continue
        if isinstance(record, dict) and set(record) == {"probing"}:
            if probing:
                raise BadReport(f"line {number}: a second probing line")
            probing = True
            continue
        if isinstance(record, dict) and set(record) == {"probe", "found"}:
            test_id = str(record["probe"])
            if test_id in probes:
                raise BadReport(f"line {number}: {test_id} probed twice")
            probes[test_id] = str(record["found"])[:300]
            continue
        test_id, when, outcome = _fields(record, number)
        if when in phases.setdefault(test_id, {}):
            raise BadReport(f"line {number}: {test_id} reported its {when} twice")
        phases[test_id][when] = outcome  # an expected failure's call reports "skipped"
        if outcome == "failed" and len(failures) < failure_limit:
            failures.setdefault(test_id, str(record.get("message", ""))[:240] or when)
    outcomes = {test_id: result for test_id, seen in phases.items() if (result := _outcome(seen)) is not None}
    ran = any(when != "collect" for seen in phases.values() for when in seen)
    return Report(outcomes, failures, exit_code, ran, tampered, probing, probes, covered)


def probed(report: Report, watched: tuple[str, ...]) -> None:
    """Tampered when a watched test (a FAIL_TO_PASS test, its id as the recorder writes it)
    passed with a probe finding, or without its probe line from a probing recorder."""
    for test_id in watched:
        if report.outcomes.get(test_id) != "passed":
            continue
        if report.probes.get(test_id):
            raise Tampered(f"{test_id} passed by comparing a value of the candidate's: {report.probes[test_id]}")
        if report.probing and test_id not in report.probes:
            raise Tampered(f"{test_id} passed and its probe wrote nothing")


def _fields(record: object, number: int) -> tuple[str, str, str]:
    if not isinstance(record, dict):
        raise BadReport(f"line {number}: not an object")
    test_id, when, outcome = record.get("id"), record.get("when"), record.get("outcome")
    if not isinstance(test_id, str) or when not in _PHASES or outcome not in _OUTCOMES:
        raise BadReport(f"line {number}: not a test report")
    return test_id, str(when), str(outcome)


def _outcome(seen: dict[str, str]) -> str | None:
    if seen.get("call") == "failed":
        return "failed"
    if "failed" in seen.values():
        return "error"
    if "skipped" in seen.values():
        return "skipped"
    return "passed" if seen.get("call") == "passed" else None


def _token(n: int = 6) -> str:
    return secrets.token_hex(n)


def _helper(import_root: str) -> tuple[str, str, str, str, str, tuple[int, int]]:
    """The canaries' helper module, at the top of the import path: (module, its path, the name
    of its `assert` check, of its `assertEqual` check, its source, two distinct numbers)."""
    module = f"_{_token()}"
    path = f"{module}.py" if import_root in ("", ".") else f"{import_root.rstrip('/')}/{module}.py"
    check, same = f"check_{_token(4)}", f"same_{_token(4)}"
    source = (
        f"def {check}(left, right):\n    assert left == right\n\n\n"
        f"def {same}(case, left, right):\n    case.assertEqual(left, right)\n"
    )
    return module, path, check, same, source, (secrets.randbelow(1 << 30), secrets.randbelow(1 << 30) + (1 << 30))


@dataclass(frozen=True)
class Canaries:
    path: str  # repository-relative path of the canary test file
    expected: dict[str, str]  # node id suffix ("::test_x", "::Case::test_y") -> "passed" | "failed"
    helper: str  # repository-relative path of the module their checks go through
    source: str  # the test file
    helper_source: str
    label: str = ""  # the module's dotted label for a unittest runner ("" : pytest's node ids)

    @classmethod
    def beside(cls, tests: list[str], import_root: str = ".") -> Canaries:
        """Fresh random names: the test file in the folder of the last test file (the same
        conftest and package as the tests, and collected last), its helper at the top of the
        repository's import path, outside the test folders, so that a canary's failure is
        raised from a repository module as a real test's failure is (code that passes only
        failures raised outside the tests folder would pass the canary too). Two styles, each
        a pair: plain functions with `assert`, and a unittest.TestCase with `assertEqual` (code
        that disables unittest's assertions would pass only the second pair's failure)."""
        folder = PurePosixPath(tests[-1]).parent if tests else PurePosixPath(".")
        path = str(folder / f"test_{_token()}.py") if str(folder) != "." else f"test_{_token()}.py"
        module, helper, check, same, helper_source, (a, b) = _helper(import_root)
        plain_ok, plain_bad, unit_ok, unit_bad = (f"test_{_token()}" for _ in range(4))
        case = f"Test{_token(4).upper()}"
        source = (
            f"import unittest\n\nfrom {module} import {check}, {same}\n\n\n"
            f"def {plain_ok}():\n    {check}({a}, {a})\n\n\n"
            f"def {plain_bad}():\n    {check}({a}, {b})\n\n\n"
            f"class {case}(unittest.TestCase):\n"
            f"    def {unit_ok}(self):\n        {same}(self, {b}, {b})\n\n"
            f"    def {unit_bad}(self):\n        {same}(self, {b}, {a})\n"
        )
        expected = {
            f"::{plain_ok}": "passed",
            f"::{plain_bad}": "failed",
            f"::{case}::{unit_ok}": "passed",
            f"::{case}::{unit_bad}": "failed",
        }
        return cls(path, expected, helper, source, helper_source)

    @classmethod
    def unittest_beside(
        cls,
        tests: list[str],
        import_root: str = ".",
        start: str = "tests",
        bases: tuple[tuple[str, str], ...] = (("unittest", "TestCase"),),
    ) -> Canaries:
        """The canaries of a unittest-based runner that takes dotted labels (django's
        runtests.py, its test modules under `start`): a module in the package of the last test
        module (so its label is as deep as the tests' own), with, for each of `bases` (module,
        class: the test classes the suite's tests derive from, django's SimpleTestCase and
        TestCase beside unittest's, whose code a candidate may change), two classes of two
        tests, one pair checking with `assertEqual`, one with `assert`, through a helper at the
        top of the import path. `expected` is keyed by "method (module.Class" (`ids` reads both
        of unittest's forms)."""
        folder = PurePosixPath(tests[-1]).parent if tests else PurePosixPath(start)
        path = str(folder / f"test_{_token()}.py")
        module, helper, check, same, helper_source, (a, b) = _helper(import_root)
        dotted = ".".join(PurePosixPath(path).relative_to(start).with_suffix("").parts)  # never an __init__
        imports = "".join(f"import {m}\n" for m in dict.fromkeys(m for m, _ in bases))
        source, expected = f"{imports}\nfrom {module} import {check}, {same}\n", {}
        for base_module, base in bases:
            for call in (f"{same}(self, ", f"{check}("):
                case, ok, bad = f"Test{_token(4).upper()}", f"test_{_token()}", f"test_{_token()}"
                source += (
                    f"\n\nclass {case}({base_module}.{base}):\n"
                    f"    def {ok}(self):\n        {call}{b}, {b})\n\n"
                    f"    def {bad}(self):\n        {call}{b}, {a})\n"
                )
                expected[f"{ok} ({dotted}.{case}"] = "passed"
                expected[f"{bad} ({dotted}.{case}"] = "failed"
        return cls(path, expected, helper, source, helper_source, dotted)

    @classmethod
    def javascript(cls, tests: list[str], style: str, suffix: str, runner_args: tuple[str, ...] = ()) -> Canaries:
        """The canaries of a JavaScript runner (runners.JavaScriptRunner): a test file named
        `c<token><suffix>` (the last test file's suffix, so the runner's own patterns take
        it) in the folder of the last test file, with four top-level tests through a CommonJS
        helper at the repository's root: a pair checking with node's `assert.strictEqual`,
        and a pair checking with the runner's own expectation (jest's and vitest's `expect`;
        a thrown Error under mocha and node's runner: code that disables `assert` passes only
        the first pair's failure). ES module syntax for TypeScript, `.mjs` and vitest (which
        compiles every test file), CommonJS otherwise; `// @ts-nocheck`: a TypeScript
        compiler that type-checks (ts-jest) takes the file as it is."""
        folder = PurePosixPath(tests[-1]).parent if tests else PurePosixPath("test")
        if suffix.startswith("/"):  # a bare name (`/test.ts`): the canary is that file in a folder of its own
            folder = folder / f"c{_token()}"
            path = str(folder / suffix[1:])
        else:
            path = str(folder / f"c{_token()}{suffix}")
        helper = f"_{_token()}.cjs"
        check, same = f"check_{_token(4)}", f"same_{_token(4)}"
        a, b = secrets.randbelow(1 << 30), secrets.randbelow(1 << 30) + (1 << 30)
        if style in ("jest", "vitest"):
            second = f"exports.{same} = function (expect, left, right) {{ expect(left).toBe(right); }};\n"
        else:
            second = (
                f"exports.{same} = function (expect, left, right) {{\n"
                f"  if (left !== right) throw new Error('expected ' + right + ', got ' + left);\n}};\n"
            )
        helper_source = (
            "'use strict';\nconst assert = require('assert');\n\n"
            f"exports.{check} = function (left, right) {{ assert.strictEqual(left, right); }};\n{second}"
        )
        relative = "/".join([".."] * len(folder.parts)) if folder.parts else "."
        target = f"{relative}/{helper}"
        esm = style == "vitest" or suffix.endswith((".ts", ".tsx", ".mts", ".cts", ".mjs"))
        lines = ["// @ts-nocheck"]
        if esm:
            lines.append(f"import * as h from '{target}';")
        else:
            lines.append(f"const h = require('{target}');")
        test = "test"
        if style == "vitest":
            lines.append("import { test, expect } from 'vitest';")
        elif style == "node-test":
            lines.append("import { test } from 'node:test';" if esm else "const { test } = require('node:test');")
        elif style == "mocha":
            test = "test" if "tdd" in runner_args else "it"
        expect = "expect" if style in ("jest", "vitest") else "undefined"
        names = [f"c_{_token()}" for _ in range(4)]
        calls = [f"h.{check}({a}, {a})", f"h.{check}({a}, {b})"]
        calls += [f"h.{same}({expect}, {b}, {b})", f"h.{same}({expect}, {b}, {a})"]
        lines += [f"{test}('{name}', () => {{ {call}; }});" for name, call in zip(names, calls, strict=True)]
        wants = ("passed", "failed", "passed", "failed")
        expected = {f"::{name}": want for name, want in zip(names, wants, strict=True)}
        return cls(path, expected, helper, "\n".join(lines) + "\n", helper_source)

    @property
    def unittest_style(self) -> bool:
        return bool(self.label)

    def files(self) -> dict[str, str]:
        """The canary test file and its helper module, by path."""
        return {self.path: self.source, self.helper: self.helper_source}

    def ids(self, outcomes: dict[str, str]) -> dict[str, str]:
        """The canaries' node ids in a report -> their suffixes (found by file name and
        function: pytest's rootdir decides the prefix)."""
        if self.unittest_style:  # "test_x (mod.Case)", Python 3.11 on "test_x (mod.Case.test_x)"
            forms = {key: (key + ")", key + "." + key.split(" ", 1)[0] + ")") for key in self.expected}
            return {t: key for t in outcomes for key, ids in forms.items() if t in ids}
        name = PurePosixPath(self.path).name
        return {t: suffix for t in outcomes for suffix in self.expected if t.endswith(name + suffix)}

    def check(self, report: Report) -> dict[str, str]:
        """The report's outcomes without the canaries; Tampered unless each shows exactly
        its expected outcome. A session that ran no test (pytest stops at a collection error
        before running any) has nothing to check: none of its tests passed."""
        if report.tampered:
            raise Tampered(f"the recorder found the test machinery changed: {report.tampered}")
        if not report.ran:
            return dict(report.outcomes)
        found = self.ids(report.outcomes)
        seen = {suffix: report.outcomes[t] for t, suffix in found.items()}
        if seen != self.expected:
            shown = {f"{suffix} must {want[:-2]}": seen.get(suffix, "absent") for suffix, want in self.expected.items()}
            raise Tampered(f"the harness's canary tests did not show their outcomes: {shown}")
        return {t: v for t, v in report.outcomes.items() if t not in found}
