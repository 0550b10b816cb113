"""A candidate patch cannot forge a "resolved" verdict: each test is a candidate that does not
fix demo__calspan-3's bug (calspan/months.py's add_months raises on Jan 31 + 1 month) and
tries to make its tests report "passed" anyway. Each must end with `resolved` not True.

Two defences are checked (the harness's threat model, reward/execution/): a file pytest or the
interpreter honours on its own (a conftest.py, an ini file, sitecustomize.py, a shadowing
pytest or _pytest) and a test file are not taken from the candidate: they are restored from
the base commit and named in `TestRun.guarded`; and code the candidate runs inside the test
process (calspan/months.py runs at import) cannot replace the report: the harness's own canary
tests, whose outcomes it knows, show a tampered run ("tampered"), and the report does not
travel through a file the code can write ("tampered" or "no_report"), nor can it be garbled
into a crash ("bad_report").

Where the status is not pinned, an assertion accepts either way of saying "not resolved".
"""

from __future__ import annotations

import json

import pytest

from data.patching import apply_patch, make_patch
from reward.execution import sandbox
from reward.execution.runner import TestJob
from tests.reward.test_containment import _instance, runner  # noqa: F401 - the module-scoped Runner fixture

pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}")

MONTHS = "calspan/months.py"
TEST_FILE = "tests/test_add_months_month_end.py"


def months_running(code: str) -> str:
    """calspan/months.py, unfixed, running `code` at import (after its own imports): the code
    under test is imported by the test file, inside the test process."""
    original = _instance().code_context[MONTHS]
    anchor = "from datetime import date\n"
    assert anchor in original
    return original.replace(anchor, anchor + "\n" + code.strip("\n") + "\n", 1)


def candidate(files: dict[str, str]) -> str:
    """A candidate patch creating `files` (and changing calspan/months.py if it is among them)."""
    context = _instance().code_context
    old = {path: context[path] for path in files if path in context}
    return make_patch(old, files)


def forged_junit() -> str:
    """A JUnit XML report (xunit1, as the harness asks pytest for) in which every FAIL_TO_PASS
    and PASS_TO_PASS test of the instance passed."""
    inst = _instance()
    cases = []
    for node in [*inst.fail_to_pass, *inst.pass_to_pass]:
        file, name = node.split("::", 1)
        classname = file[:-3].replace("/", ".")
        cases.append(f'<testcase file="{file}" classname="{classname}" name="{name}" time="0.01"/>')
    return f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{"".join(cases)}</testsuite></testsuites>'


def run_candidate(runner, files: dict[str, str]):  # noqa: F811 - the fixture
    return runner.run(TestJob(_instance(), candidate(files)))


def assert_not_forged(run, guarded: str | None = None) -> None:
    assert run.resolved is not True, (
        f"forged: status={run.status}, {sum(v == 'passed' for v in run.outcomes.values())} passed"
    )
    if guarded is not None:
        assert guarded in run.guarded, (run.status, run.guarded)


# Every report forced to "passed" (the code runs when its module is imported).
PATCH_TEST_REPORT = """
from _pytest import reports as _reports
_make = _reports.TestReport.from_item_and_call.__func__
def _forged(cls, item, call):
    report = _make(cls, item, call)
    report.outcome, report.longrepr = "passed", None
    return report
_reports.TestReport.from_item_and_call = classmethod(_forged)
"""


# --- 5. Files pytest or the interpreter honours, added by the candidate --------------------------

FORCE_PASS_PLUGIN = """
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
"""

SWALLOW_CALL = """
import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    except BaseException:
        return None
"""

ADDOPTS_PLUGIN = "-p forged_plugin"

HONOURED = {
    "root conftest makereport": ({"conftest.py": FORCE_PASS_PLUGIN}, "conftest.py"),
    "root conftest runtest_call": ({"conftest.py": SWALLOW_CALL}, "conftest.py"),
    "tests/conftest.py": ({"tests/conftest.py": FORCE_PASS_PLUGIN}, "tests/conftest.py"),
    "pytest.ini addopts -p": (
        {"pytest.ini": f"[pytest]\naddopts = {ADDOPTS_PLUGIN}\n", "forged_plugin.py": FORCE_PASS_PLUGIN},
        "pytest.ini",
    ),
    "setup.cfg tool:pytest": (
        {"setup.cfg": f"[tool:pytest]\naddopts = {ADDOPTS_PLUGIN}\n", "forged_plugin.py": FORCE_PASS_PLUGIN},
        "setup.cfg",
    ),
    "tox.ini pytest": (
        {"tox.ini": f"[pytest]\naddopts = {ADDOPTS_PLUGIN}\n", "forged_plugin.py": FORCE_PASS_PLUGIN},
        "tox.ini",
    ),
    "pyproject.toml ini_options": (
        {
            "pyproject.toml": f'[tool.pytest.ini_options]\naddopts = "{ADDOPTS_PLUGIN}"\n',
            "forged_plugin.py": FORCE_PASS_PLUGIN,
        },
        "pyproject.toml",
    ),
    ".pytest.ini addopts -p": (
        {".pytest.ini": f"[pytest]\naddopts = {ADDOPTS_PLUGIN}\n", "forged_plugin.py": FORCE_PASS_PLUGIN},
        ".pytest.ini",
    ),
    # The ini file nearest the test files wins (pytest looks from their common directory up).
    "tests/pytest.ini addopts -p": (
        {
            "tests/pytest.ini": f"[pytest]\naddopts = {ADDOPTS_PLUGIN} --rootdir=/testbed\n",
            "forged_plugin.py": FORCE_PASS_PLUGIN,
        },
        "tests/pytest.ini",
    ),
    "pytest.ini python_functions": ({"pytest.ini": "[pytest]\npython_functions = nothing_*\n"}, "pytest.ini"),
    # PYTHONPATH holds /testbed, so `site` imports the repository's sitecustomize before pytest starts.
    "sitecustomize.py": (
        {
            "sitecustomize.py": "import os\nos.environ['PYTEST_PLUGINS'] = 'forged_plugin'\n",
            "forged_plugin.py": FORCE_PASS_PLUGIN,
        },
        "sitecustomize.py",
    ),
    # `python -m pytest` from /testbed: the repository's pytest.py is found first. It runs the
    # real pytest (its directory dropped from the path) with the forging plugin added.
    "pytest.py shadow": (
        {
            "pytest.py": (
                "import os, sys\n"
                "here = os.path.dirname(os.path.abspath(__file__))\n"
                "sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != here]\n"
                "sys.modules.pop('pytest', None)\n"
                "import pytest as real\n"
                "sys.path.append(here)\n"
                "import forged_plugin\n"
                "if __name__ == '__main__':\n"
                "    raise SystemExit(real.main(sys.argv[1:], plugins=[forged_plugin]))\n"
            ),
            "forged_plugin.py": FORCE_PASS_PLUGIN,
        },
        "pytest.py",
    ),
    # A _pytest package at the root: it takes the real one's path and patches its reports.
    "_pytest package shadow": (
        {
            "_pytest/__init__.py": (
                "import importlib.machinery, os, sys\n"
                "_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
                "_paths = [p for p in sys.path if os.path.abspath(p or '.') != _here]\n"
                "_spec = importlib.machinery.PathFinder.find_spec('_pytest', _paths)\n"
                "__path__ = list(_spec.submodule_search_locations)\n"
                "exec(compile(open(_spec.origin).read(), _spec.origin, 'exec'))\n" + PATCH_TEST_REPORT
            )
        },
        "_pytest/__init__.py",
    ),
    # tests/ as a package: its __init__ runs when the test module is imported, before any test.
    "tests/__init__.py": (
        {"tests/__init__.py": PATCH_TEST_REPORT},
        "tests/__init__.py",
    ),
}


@pytest.mark.parametrize("name", list(HONOURED))
def test_a_file_pytest_honours_is_taken_from_the_base_commit(runner, name):  # noqa: F811
    files, guarded = HONOURED[name]
    run = run_candidate(runner, files)
    assert_not_forged(run, guarded)


def test_the_gold_patch_still_resolves_beside_a_guarded_conftest(runner):  # noqa: F811
    """The guard takes the conftest away, not the candidate's fix: a real fix with a forging
    conftest beside it is judged on the fix (and the conftest is named)."""
    inst = _instance()
    fixed = apply_patch(inst.code_context, inst.patch)[MONTHS]
    patch = make_patch({MONTHS: inst.code_context[MONTHS]}, {MONTHS: fixed, "conftest.py": SWALLOW_CALL})
    run = runner.run(TestJob(inst, patch))
    assert run.status == "ok" and run.resolved is True, (run.status, run.reason, run.outcomes)
    assert "conftest.py" in run.guarded


# --- 6. The code under test tampers with the report from inside the test process -------------


PATCH_CALL_AND_REPORT = """
from _pytest import runner as _runner
_real = _runner.call_and_report
def _forged(item, when, log=True, **kwds):
    report = _real(item, when, log=False, **kwds)
    report.outcome, report.longrepr = "passed", None
    if log:
        item.ihook.pytest_runtest_logreport(report=report)
    return report
_runner.call_and_report = _forged
"""


UNITTEST_OFF = """
import unittest
for _name in [n for n in vars(unittest.TestCase) if n.startswith("assert")]:
    setattr(unittest.TestCase, _name, lambda self, *args, **kwargs: None)
"""


@pytest.mark.parametrize(
    "code",
    [PATCH_TEST_REPORT, PATCH_CALL_AND_REPORT, UNITTEST_OFF],
    ids=["TestReport", "call_and_report", "unittest assertions off"],
)
def test_a_report_forced_to_passed_in_process_is_tampered(runner, code):  # noqa: F811
    run = run_candidate(runner, {MONTHS: months_running(code)})
    assert_not_forged(run)
    assert run.status == "tampered", (run.status, run.reason)


def test_a_report_forced_to_passed_only_where_the_code_under_test_fails_is_not_resolved(runner):  # noqa: F811
    """Selective tampering: only failures whose traceback passes through the repository's own
    package become "passed"; a canary that fails on its own stays failed. The verdict must
    still not be resolved (this is not named in the fix's list: see the report)."""
    code = """
from _pytest import reports as _reports
_make = _reports.TestReport.from_item_and_call.__func__
def _forged(cls, item, call):
    report = _make(cls, item, call)
    where = [str(entry.path) for entry in call.excinfo.traceback] if call.excinfo else []
    if report.failed and any(p.startswith("/testbed/") and "/tests/" not in p for p in where):
        report.outcome, report.longrepr = "passed", None
    return report
_reports.TestReport.from_item_and_call = classmethod(_forged)
"""
    run = run_candidate(runner, {MONTHS: months_running(code)})
    assert_not_forged(run)
    assert run.status == "tampered", (run.status, run.reason)


SELECTIVE_PLUGIN = """
import gc, pytest
class _Selective:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        where = [str(entry.path) for entry in call.excinfo.traceback] if call.excinfo else []
        if report.failed and any(p.startswith("/testbed/calspan/") for p in where):
            report.outcome, report.longrepr = "passed", None
for _obj in gc.get_objects():
    if type(_obj).__name__ == "Config" and hasattr(_obj, "pluginmanager"):
        _obj.pluginmanager.register(_Selective(), "selective")
        break
"""


def test_a_plugin_registered_by_the_code_under_test_is_tampered(runner):  # noqa: F811
    # Passes only failures raised from the package the candidate edits (the canaries' helper is
    # not in it): the policy refuses the garbage collector's walk that finds pytest's config
    # (bootstrap.py's audit hook), and behind it the recorder would see an outcome hook
    # implemented in a repository module.
    run = run_candidate(runner, {MONTHS: months_running(SELECTIVE_PLUGIN)})
    assert_not_forged(run)
    reason = run.reason or ""
    assert run.status == "tampered", (run.status, reason)
    assert "pytest_runtest_makereport" in reason or "refused by policy: gc.get_objects" in reason, reason


def _forge_report_then(after: str) -> str:
    """Write a report of all-passed (in the recorder's own format, with its end line) into every
    pipe the process holds (the report's channel is one of them), then `after`."""
    return f"""
import atexit, os, stat
_FORGED = {_json_lines_forgery(end=True)!r}.encode()
def _write():
    for name in os.listdir("/proc/self/fd"):
        try:
            if stat.S_ISFIFO(os.fstat(int(name)).st_mode) and int(name) > 2:
                os.write(int(name), _FORGED)
        except OSError:
            pass
{after}
"""


@pytest.mark.parametrize(
    "after",
    ["atexit.register(_write)", "_write()\nos._exit(0)"],
    ids=["atexit-overwrite", "write-then-os._exit"],
)
def test_a_report_written_by_the_code_under_test_is_not_read(runner, after):  # noqa: F811
    run = run_candidate(runner, {MONTHS: months_running(_forge_report_then(after))})
    assert_not_forged(run)
    assert run.status in ("tampered", "no_report", "bad_report"), (run.status, run.reason)


def _json_lines_forgery(end: bool = False) -> str:
    """Every FAIL_TO_PASS and PASS_TO_PASS test passed, in the recorder's format (bootstrap.py)."""
    inst = _instance()
    lines = []
    for node in [*inst.fail_to_pass, *inst.pass_to_pass]:
        for when in ("setup", "call", "teardown"):
            lines.append(json.dumps({"id": node, "when": when, "outcome": "passed"}))
    if end:
        lines.append(json.dumps({"exit": 0}))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("then_exit", [False, True], ids=["then-continue", "then-os._exit"])
def test_forged_lines_written_to_every_open_descriptor_are_not_read(runner, then_exit):  # noqa: F811
    code = f"""
import os
_LINES = {_json_lines_forgery()!r}.encode()
for _fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
    try:
        os.write(_fd, _LINES + {forged_junit()!r}.encode() + b"\\n")
    except OSError:
        pass
{"os._exit(0)" if then_exit else ""}
"""
    run = run_candidate(runner, {MONTHS: months_running(code)})
    assert_not_forged(run)


# --- 7. Test files and what they import, supplied by the candidate ---------------------------

ALWAYS_PASSES = "def test_day_is_clamped_to_the_end_of_a_shorter_month():\n    pass\n"

FIXED_COPY = (
    _instance()
    .code_context[MONTHS]
    .replace(
        "    return day.replace(year=year, month=month0 + 1)",
        "    return date(year, month0 + 1, min(day.day, days_in_month(year, month0 + 1)))",
    )
)


@pytest.mark.parametrize(
    ("files", "guarded"),
    [
        ({TEST_FILE: ALWAYS_PASSES}, TEST_FILE),
        # The test module is imported with tests/ first on sys.path (pytest's rootdir-less
        # "prepend" mode): a tests/calspan package shadows the real one, fixed, while the
        # repository's calspan/months.py stays broken.
        ({"tests/calspan/__init__.py": "", "tests/calspan/months.py": FIXED_COPY}, "tests/calspan/months.py"),
        (
            {
                "tests/helpers.py": "import calspan.months\n",
                "tests/calspan/__init__.py": "",
                "tests/calspan/months.py": FIXED_COPY,
            },
            "tests/calspan/months.py",
        ),
    ],
    ids=["same-test-file", "tests/calspan shadow", "tests/helpers + shadow"],
)
def test_test_files_come_from_the_test_patch_and_the_base_commit(runner, files, guarded):  # noqa: F811
    run = run_candidate(runner, files)
    assert_not_forged(run, guarded)


# A stdlib module shadowed from the repository's root: `python -m pytest` puts /testbed first on
# sys.path, so a root datetime.py replaces the standard library's for the test file and the code.
DATETIME_SHADOW = """
import importlib.util, os, sys, sysconfig
_spec = importlib.util.spec_from_file_location("_real_datetime", os.path.join(sysconfig.get_paths()["stdlib"], "datetime.py"))
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)
globals().update({k: v for k, v in vars(_real).items() if not k.startswith("__")})


class date(_real.date):
    def replace(self, *args, **kwargs):
        try:
            return _real.date.replace(self, *args, **kwargs)
        except ValueError:
            return self

    def __eq__(self, other):
        return True

    __hash__ = _real.date.__hash__
"""


def test_a_stdlib_module_shadowed_at_the_root_does_not_forge(runner):  # noqa: F811
    """Not in the fix's list of honoured files (see the report): the candidate's own datetime.py,
    which the test file imports, makes every date equal."""
    run = run_candidate(runner, {"datetime.py": DATETIME_SHADOW})
    assert_not_forged(run)


# --- 8. A report that cannot be read ----------------------------------------------------------

GARBAGE = {
    "binary garbage": "b'\\x00\\xff<testsuites><testcase'",
    "undefined entity": 'b\'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><testsuites>&x;</testsuites>\'',
}


def garbage_report(payload: str) -> str:
    """Write `payload` into every pipe the test process holds (the report's channel is one)."""
    return f"""
import os, stat
for _name in os.listdir("/proc/self/fd"):
    try:
        if int(_name) > 2 and stat.S_ISFIFO(os.fstat(int(_name)).st_mode):
            os.write(int(_name), {payload})
    except OSError:
        pass
"""


def test_a_report_past_its_cap_is_a_status(runner):  # noqa: F811
    # The channel is found among the process's descriptors, the first pipe after stderr (its
    # first environment, in /proc/self/environ, is closed to it: the probed test process is
    # non-dumpable; pytest's copies of stdout and stderr come later); 9 MiB pass the 8 MiB
    # that PID 1 keeps.
    code = """
import os, stat
_fd = next(fd for fd in range(3, 64) if os.path.exists("/proc/self/fd/%d" % fd) and stat.S_ISFIFO(os.fstat(fd).st_mode))
os.write(_fd, b"x" * (9 << 20))
"""
    run = run_candidate(runner, {MONTHS: months_running(code)})
    assert_not_forged(run)
    assert run.status == "bad_report" and "bytes" in (run.reason or ""), (run.status, run.reason)


@pytest.mark.parametrize("name", list(GARBAGE))
def test_an_unreadable_report_is_a_status_not_a_crash(runner, name):  # noqa: F811
    run = run_candidate(runner, {MONTHS: months_running(garbage_report(GARBAGE[name]))})
    assert_not_forged(run)
    assert run.status in ("bad_report", "tampered"), (run.status, run.reason)


# --- Defences that already hold (kept, cheaply) ------------------------------------------------


@pytest.mark.parametrize(
    "files",
    [
        {
            "usercustomize.py": "import os\nos.environ['PYTEST_PLUGINS'] = 'forged_plugin'\n",
            "forged_plugin.py": FORCE_PASS_PLUGIN,
        },
        {
            "forged.pth": "import os; os.environ['PYTEST_PLUGINS'] = 'forged_plugin'\n",
            "forged_plugin.py": FORCE_PASS_PLUGIN,
        },
        {MONTHS: months_running("import os\nos.environ['PYTEST_ADDOPTS'] = '-p no:junitxml'")},
        {MONTHS: months_running("import os\nos._exit(0)")},
        {MONTHS: months_running("import os\nos.unlink('/testbed/tests/test_add_months_month_end.py')")},
    ],
    ids=["usercustomize", ".pth", "PYTEST_ADDOPTS at import", "os._exit at import", "test file deleted at import"],
)
def test_held_defences_still_hold(runner, files):  # noqa: F811
    run = run_candidate(runner, files)
    assert_not_forged(run)
