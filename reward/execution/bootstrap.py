"""The harness's test process: starts pytest inside the sandbox and streams each outcome out.

Run by the runner as `<env python> -s -B /swe-rl/bootstrap.py <pytest args>`, or, for a
repository whose suite has its own unittest-based runner (django's `tests/runtests.py`), as
`... bootstrap.py --unittest SCRIPT <its args>`, as the sandbox's unprivileged user, with the
interpreter of the environment under test (any Python from 3.5 on: standard library only, and
no syntax newer than that). It is the harness's own file, copied read-only into the sandbox's
root (sandbox.run's `harness_files`: no path of the checkout is mounted); nothing of the
repository runs before it has set up:

    sys.path     the standard library and the environment's site-packages first, then the
                 repository's directories (SWE_RL_PATH): a `pytest.py`, `_pytest/` or
                 `sitecustomize.py` in the repository cannot shadow the runner. `-s` leaves the
                 user site out and PYTHONPATH is unset for this process (the runner does not
                 use `-I`, which would also drop PYTHONHASHSEED); tests that start Python
                 themselves get PYTHONPATH as before.
    the report   one JSON line per test report (nodeid, phase, outcome, first line of the
                 failure), written as it happens to a pipe that the sandbox's PID 1 holds
                 (SWE_RL_REPORT_FD): nothing is left in a file for the tested code to rewrite at
                 exit, and a final {"exit": code} line says the session ended by itself.
    coverage     when the runner asks (SWE_RL_COVERAGE: the harness's read-only folder holding
                 coverage.py, reward/execution/coverage.py), the files under the snapshot are
                 measured while pytest runs and one {"covered": {path: [line, ...]}} line comes
                 before the end: which lines the tests executed (the injector draws its bugs
                 there). The host reads it as it reads every line here: as the tested code's.

    unittest     with --unittest, unittest's TestResult itself is the recorder (UnittestRecorder:
                 every result class of every runner built on unittest calls up into it), the
                 script runs as `python SCRIPT` would run it (its folder first on sys.path,
                 as `__main__`), and a test's id is the name its runner prints at verbosity 2,
                 the name SWE-bench's log parser reads: the first line of its docstring, else
                 `test_x (module.Class)` (Python 3.11 on: `test_x (module.Class.test_x)`)

    integrity    the functions through which pytest turns a test into its report (WATCHED)
                 are noted before any repository code is imported; when one has been replaced
                 (or its code swapped) by the time a test is reported, or a hook that decides
                 outcomes comes from a repository module that is not a conftest.py, a
                 {"tampered": why} line says so and the run is "tampered".

The tested code shares this process, so it can still write into the pipe or patch pytest in
ways these checks do not see; the runner's canary tests (runner.py, report.py) catch what
forges wholesale: see docs/security.md for what is left.
"""

import importlib
import json
import os
import runpy
import sys
import unittest

# pytest's path from a test to its report, across pytest 4-8 (a name a version lacks is skipped).
WATCHED = (
    "_pytest.runner:runtestprotocol",
    "_pytest.runner:call_and_report",
    "_pytest.runner:call_runtest_hook",
    "_pytest.runner:check_interactive_exception",
    "_pytest.runner:pytest_runtest_call",
    "_pytest.runner:pytest_runtest_makereport",
    "_pytest.runner:CallInfo.from_call",
    "_pytest.runner:CallInfo.__init__",
    "_pytest.reports:TestReport.from_item_and_call",
    "_pytest.reports:TestReport.__init__",
    "_pytest.reports:BaseReport.passed",
    "_pytest.reports:BaseReport.failed",
    "_pytest.python:pytest_pyfunc_call",
    "_pytest.python:Function.runtest",
    "_pytest.main:pytest_runtestloop",
    "_pytest.skipping:pytest_runtest_makereport",
    "pluggy._callers:_multicall",
    "pluggy.callers:_multicall",
    "pluggy._hooks:_HookCaller.__call__",
    "pluggy._hooks:HookCaller.__call__",
    "pluggy.hooks:_HookCaller.__call__",
    "pluggy._manager:PluginManager._hookexec",
    "pluggy.manager:PluginManager._hookexec",
    # unittest-style tests: their failures reach pytest through these.
    "_pytest.unittest:TestCaseFunction.runtest",
    "_pytest.unittest:TestCaseFunction.addError",
    "_pytest.unittest:TestCaseFunction.addFailure",
    "_pytest.unittest:TestCaseFunction.addSuccess",
    "_pytest.unittest:TestCaseFunction.addSkip",
    "_pytest.unittest:TestCaseFunction.addExpectedFailure",
    "_pytest.unittest:TestCaseFunction.addUnexpectedSuccess",
    "_pytest.unittest:TestCaseFunction._addexcinfo",
    "unittest.case:TestCase.run",
    "unittest.result:TestResult.startTest",
    "unittest.result:TestResult.stopTest",
    "unittest.result:TestResult.addSuccess",
    "unittest.result:TestResult.addFailure",
    "unittest.result:TestResult.addError",
    "unittest.result:TestResult.addSkip",
    "unittest.result:TestResult.addExpectedFailure",
    "unittest.result:TestResult.addUnexpectedSuccess",
    "unittest.result:TestResult.addSubTest",
    "unittest.case:TestCase.__call__",
    "unittest.case:TestCase._callTestMethod",
    "unittest.case:_Outcome.testPartExecutor",
    "_pytest.python_api:raises",
    "_pytest.python_api:approx",
    "_pytest.raises:raises",
    "_pytest.outcomes:fail",
)
# And every assertion method of unittest.TestCase (assertEqual, assertTrue, fail, ...).
ASSERTION_PREFIXES = ("assert", "fail", "_baseAssertEqual", "_getAssertEqualityFunc", "_formatMessage")
# Hooks whose implementations decide a test's outcome or its report.
OUTCOME_HOOKS = (
    "pytest_runtest_protocol",
    "pytest_runtest_call",
    "pytest_pyfunc_call",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_report_teststatus",
)


def _emit(fd, record):
    data = (json.dumps(record) + "\n").encode("utf-8", "replace")
    while data:
        data = data[os.write(fd, data) :]


def _message(report):
    """The first line of why a report failed (pytest's crash message, else its text)."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    text = getattr(crash, "message", None) or str(getattr(report, "longrepr", "") or "")
    lines = text.strip().splitlines()
    return lines[0][:240] if lines else ""


def _watched():
    """{name: (the object, its code)} for every WATCHED name this pytest has."""
    methods = [n for n in vars(unittest.TestCase) if n.startswith(ASSERTION_PREFIXES)]
    found = {}
    for name in (*WATCHED, *("unittest.case:TestCase." + n for n in methods)):
        module_name, _, attrs = name.partition(":")
        try:
            owner = importlib.import_module(module_name)
            *path, attr = attrs.split(".")
            for part in path:
                owner = vars(owner)[part]
            value = vars(owner)[attr]
        except (ImportError, KeyError):
            continue
        func = getattr(value, "__func__", None) or getattr(value, "fget", None) or value
        found[name] = (value, owner, attr, getattr(func, "__code__", None))
    return found


def _changed(watched):
    """The first WATCHED name whose object or code is no longer what it was."""
    for name, (value, owner, attr, code) in watched.items():
        now = vars(owner).get(attr)
        func = getattr(now, "__func__", None) or getattr(now, "fget", None) or now
        if now is not value or getattr(func, "__code__", None) is not code:
            return name
    return None


def _hookimpls(caller):
    """A hook's implementations: `get_hookimpls()` from pluggy 0.10 on; before it (pytest 4.x
    of 2019 with pluggy 0.8-0.9) the caller's own lists of them."""
    if caller is None:
        return []
    if hasattr(caller, "get_hookimpls"):
        return caller.get_hookimpls()
    return list(getattr(caller, "_nonwrappers", [])) + list(getattr(caller, "_wrappers", []))


class Recorder:
    """A pytest plugin registered by the harness: every setup/call/teardown and collection
    report, as it happens, and whether pytest's machinery was tampered with."""

    def __init__(self, fd, roots):
        self.fd, self.roots = fd, tuple(os.path.join(r, "") for r in roots)
        self.watched = _watched()
        self.config = None
        self.tampered = False

    def pytest_configure(self, config):
        self.config = config

    def check(self):
        """Emit one {"tampered": why} line the first time something is found."""
        if self.tampered:
            return
        why = _changed(self.watched)
        if why is not None:
            why = "pytest's " + why + " was replaced"
        elif self.config is not None:
            why = self._repository_hook()
        if why is not None:
            self.tampered = True
            _emit(self.fd, {"tampered": why})

    def _repository_hook(self):
        """A hook deciding outcomes that a repository module (not a conftest.py) implements."""
        hooks = self.config.pluginmanager.hook if self.config is not None else None
        for hook in OUTCOME_HOOKS:
            caller = getattr(hooks, hook, None)
            for impl in _hookimpls(caller):
                code = getattr(impl.function, "__code__", None)
                where = getattr(code, "co_filename", "")
                if where.startswith(self.roots) and os.path.basename(where) != "conftest.py":
                    return hook + " is implemented in " + where
        return None

    def pytest_runtest_logreport(self, report):
        self.check()
        record = {"id": report.nodeid, "when": report.when, "outcome": report.outcome}
        if hasattr(report, "wasxfail"):
            record["xfail"] = True
        if report.failed:
            record["message"] = _message(report)
        _emit(self.fd, record)

    def pytest_collectreport(self, report):
        if report.failed:
            _emit(self.fd, {"id": report.nodeid, "when": "collect", "outcome": "failed", "message": _message(report)})


# unittest.TestResult's methods through which every runner built on unittest reports a test.
RESULT_METHODS = (
    "startTest",
    "stopTest",
    "addSuccess",
    "addFailure",
    "addError",
    "addSkip",
    "addExpectedFailure",
    "addUnexpectedSuccess",
    "addSubTest",
)


def _label(test):
    """The name a unittest runner prints for `test` at verbosity 2 (TextTestResult's
    getDescription, then " ... "): its docstring's first line, else str(test)."""
    try:
        doc = test.shortDescription()
    except Exception:  # a broken docstring property: the plain name
        doc = None
    return doc or str(test)


def _exc_line(err):
    """The first line of an exc_info triple's exception, as `Type: message`."""
    if not err or err[0] is None:
        return ""
    text = (err[0].__name__ + ": " + str(err[1])).strip()
    return text.splitlines()[0][:240] if text else ""


class UnittestRecorder:
    """unittest's TestResult as the recorder: each method in RESULT_METHODS is wrapped (the
    result classes of django's runner, TextTestResult and the rest call up into these), a
    test's outcome is gathered from startTest to stopTest (a failing subtest fails it, an error
    in its tearDown after a pass is an error) and one record is written at stopTest (none for
    a test no add* call reported: it did not pass). A class or
    module fixture that fails (setUpClass: an _ErrorHolder, never started) is written as an
    error of its own id. Ids are _label's; a label met a second time (two tests with one
    docstring) is written as str(test) for the later test, so no id is reported twice."""

    def __init__(self, fd):
        self.fd = fd
        self.state = {}  # id(test) -> [label, outcome, message]
        self.written = set()
        self.tampered = False
        base = unittest.TestResult
        for name in RESULT_METHODS:
            setattr(base, name, self._wrap(name, getattr(base, name)))
        self.watched = _watched()  # after wrapping: the wrappers are what must stay

    def _wrap(self, name, original):
        recorder = self

        def method(result, test, *args):
            value = original(result, test, *args)
            recorder.seen(name, test, args)
            return value

        method.__name__ = method.__qualname__ = name
        return method

    def seen(self, name, test, args):
        if name == "startTest":
            self.state[id(test)] = [_label(test), None, ""]  # an outcome only from an add* call
            return
        entry = self.state.get(id(test))
        if name == "stopTest":
            if entry is not None:
                del self.state[id(test)]
                if entry[1] is not None:  # a test that reported nothing did not pass
                    self.write(test, entry)
            return
        if name == "addSubTest":
            err = args[1] if len(args) > 1 else None  # (subtest, err): `test` is the parent
            if entry is None or err is None:
                return
            failed = issubclass(err[0], getattr(test, "failureException", AssertionError))
            self.mark(entry, "failed" if failed else "error", _exc_line(err))
            return
        if entry is None:  # not started: a class or module fixture's error (_ErrorHolder)
            if name == "addError":
                self.write(test, [str(test), "error", _exc_line(args[0] if args else None)])
            return
        outcome = {
            "addSuccess": "passed",
            "addFailure": "failed",
            "addError": "error",
            "addSkip": "skipped",
            "addExpectedFailure": "xfail",
            "addUnexpectedSuccess": "failed",
        }[name]
        why = _exc_line(args[0]) if name in ("addFailure", "addError") and args else ""
        if name == "addUnexpectedSuccess":
            why = "unexpected success"
        self.mark(entry, outcome, why)

    @staticmethod
    def mark(entry, outcome, why):
        """Keep the worst outcome seen: failed > error > xfail/skipped > passed."""
        rank = {None: -1, "passed": 0, "skipped": 1, "xfail": 1, "error": 2, "failed": 3}
        if rank[outcome] >= rank[entry[1]]:
            entry[1] = outcome
            entry[2] = why or entry[2]

    def write(self, test, entry):
        self.check()
        label, outcome, why = entry
        if label in self.written:
            label = str(test)
        if label in self.written:
            return
        self.written.add(label)
        record = {"id": label, "when": "setup" if outcome == "error" else "call"}
        record["outcome"] = {"error": "failed", "xfail": "skipped"}.get(outcome, outcome)
        if outcome == "xfail":
            record["xfail"] = True
        if why and record["outcome"] == "failed":
            record["message"] = why
        _emit(self.fd, record)

    def check(self):
        if not self.tampered:
            why = _changed(self.watched)
            if why is not None:
                self.tampered = True
                _emit(self.fd, {"tampered": "unittest's " + why + " was replaced"})


def run_unittest_script(fd, argv):
    """Run a unittest-based runner script (django's tests/runtests.py) as `python SCRIPT ARGS`
    would, with the recorder in unittest.TestResult; the script's exit status ends the report."""
    script = os.path.abspath(argv[0])
    recorder = UnittestRecorder(fd)
    sys.argv = [script, *argv[1:]]
    sys.path.insert(0, os.path.dirname(script))  # as the interpreter does for a script
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    recorder.check()
    _emit(fd, {"exit": int(code)})
    return int(code)


def start_coverage(tool):
    """coverage.py from the harness's read-only tool folder (reward/execution/coverage.py),
    measuring the files under the working directory (the snapshot), started before any
    repository code is imported; None when the run is not measured or coverage cannot start
    (the run goes on without it)."""
    if not tool:
        return None
    sys.path.insert(0, tool)  # first: nothing of the repository's can stand in for it
    try:
        import coverage

        cov = coverage.Coverage(data_file="/tmp/.swe-rl-coverage", config_file=False, source=[os.getcwd()])
        cov.start()
    except Exception as exc:  # an interpreter this coverage does not support: no lines
        sys.stderr.write("swe-rl: coverage did not start: " + repr(exc) + "\n")
        return None
    finally:
        sys.path.remove(tool)
    return cov


def emit_coverage(fd, cov):
    """One {"covered": {path: [line, ...]}} record: the lines run, by path under the snapshot."""
    cov.stop()
    data = cov.get_data()
    root = os.path.join(os.getcwd(), "")
    covered = {}
    for name in data.measured_files():
        if name.startswith(root):
            covered[name[len(root) :].replace(os.sep, "/")] = sorted(data.lines(name) or [])
    _emit(fd, {"covered": covered})


def main():
    fd = int(os.environ.pop("SWE_RL_REPORT_FD"))
    tool = os.environ.pop("SWE_RL_COVERAGE", "")
    paths = [p for p in os.environ.pop("SWE_RL_PATH", "").split(os.pathsep) if p]
    if sys.path and os.path.dirname(os.path.abspath(__file__)) == os.path.abspath(sys.path[0] or "."):
        del sys.path[0]  # the harness's own directory
    sys.path.extend(paths)
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    if sys.argv[1:2] == ["--unittest"]:
        return run_unittest_script(fd, sys.argv[2:])
    # the environment's pytest, once sys.path is the harness's
    import pytest

    own = os.path.abspath(pytest.__file__)
    # Where the repository is the runner (pytest's own repository), its code is pytest's:
    # nothing of it can be held to the versions noted here.
    recorder = Recorder(fd, [] if any(own.startswith(os.path.join(p, "")) for p in paths) else paths)
    if not recorder.roots:
        recorder.watched = {}
    cov = start_coverage(tool)
    code = pytest.main(sys.argv[1:], plugins=[recorder])
    recorder.check()
    if cov is not None:
        emit_coverage(fd, cov)
    _emit(fd, {"exit": int(code)})
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
