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

    network      a failing test that tried to reach a host beyond the sandbox's loopback says
                 so in its message (NetworkWatch: an audit hook, Python 3.8 on), for
                 data.validate's needs_network; the verdict does not read it

    the secret   the probe's spec (the instance's FAIL_TO_PASS ids, the candidate's files and
                 the lines it changed in them, the test files run) comes through a memory
                 file PID 1 hands over (SWE_RL_SECRET_FD, inside.py), read and closed first
                 thing: no path inside holds the labels. A probed process then makes itself
                 non-dumpable, so a process the tested code starts cannot read its memory.

    the policy   an audit hook (policy.py, copied beside this file as swe_rl_policy.py; Python
                 3.8 on) installed before pytest and anything of the repository is imported:
                 a capability no fix needs (frames, tracing, ctypes, gc, code objects, the test
                 files' text, others' classes) reached for by code the candidate added or
                 changed is refused and written as {"tampered": why} at once. On 3.5-3.7
                 there is no hook: the probe and the integrity checks below still run.

    the probe    for the watched tests and the candidate's files, a `{"probing": n}` line first;
                 then, while each such test's call runs, a profile function (EqualityProbe)
                 questions every non-builtin value a function of the candidate's files returns
                 (whatever its class: mock.ANY, a standard-library subclass), and the `self` of
                 the comparison methods of the candidate's classes: equal to a fresh
                 `object()`, to an instance of a class made for the question, to a random
                 string or number, or not unequal to them, is an answer no honest value gives.
                 At every call a test file makes it also runs the integrity check (a
                 replacement restoring itself on its first call is seen before it runs). One
                 `{"probe": id, "found": why}` line per such test at the end of its call (""
                 found nothing; the profile function gone, or a trace function or thread hook
                 that appeared, read through the interpreter's own functions, is a finding)

    integrity    the functions through which pytest turns a test into its report, and the
                 helpers tests call by name (pytest's, math's, some builtins: WATCHED)
                 are noted before any repository code is imported; when one has been replaced
                 (or its code swapped) by the time a test is reported, or a hook that decides
                 outcomes comes from a repository module that is not a conftest.py, a
                 {"tampered": why} line says so and the run is "tampered".

The tested code shares this process, so it can still write into the pipe or patch pytest in
ways these checks do not see; the runner's canary tests (runner.py, report.py) catch what
forges wholesale: see docs/security.md for what is left.
"""

import importlib
import ipaddress
import itertools
import json
import linecache
import operator
import os
import runpy
import sys
import threading
import unittest
import warnings

try:  # the harness's copy beside this file in the sandbox (runners.harness_files)
    import swe_rl_policy as policy
except ImportError:  # this file run or imported from the checkout: policy.py beside it
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "swe_rl_policy", os.path.join(os.path.dirname(os.path.abspath(__file__)), "policy.py")
    )
    policy = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
    _spec.loader.exec_module(policy)  # type: ignore[union-attr]

# The interpreter's own profile and trace functions, kept before any repository code runs: the
# probe asks these, not sys's attributes, which the code under test can replace.
_GETPROFILE, _SETPROFILE, _GETTRACE = sys.getprofile, sys.setprofile, sys.gettrace

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
    # the helpers tests call through the pytest namespace (watched once pytest is imported)
    "pytest:raises",
    "pytest:approx",
    "pytest:fail",
    "pytest:skip",
    "pytest:xfail",
    "pytest:warns",
    "pytest:deprecated_call",
    "pytest:importorskip",
    "unittest:TestCase",
    "unittest.case:TestCase",
    # comparisons a test's assertion calls by name; monkeypatched by no honest test (open,
    # input, print and __import__ are, so they are not here)
    "builtins:all",
    "builtins:any",
    "builtins:isinstance",
    "builtins:issubclass",
    "builtins:len",
    "builtins:sorted",
    "builtins:repr",
    "builtins:abs",
    "builtins:round",
    "builtins:min",
    "builtins:max",
    "builtins:sum",
    "operator:eq",
    "operator:ne",
    "operator:contains",
    # the policy's note of who starts a thread (policy.AuditPolicy.install), when it is on
    "threading:Thread.start",
)
# And every function of math (isclose, isnan, ...): its names are checked as WATCHED's are.
MATH = "math"
# Modules whose names are watched only when something imported them already.
_IMPORTED_ONLY = ("pytest",)
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
    math = importlib.import_module(MATH)
    functions = [MATH + ":" + n for n in sorted(vars(math)) if not n.startswith("_") and callable(vars(math)[n])]
    found = {}
    for name in (*WATCHED, *("unittest.case:TestCase." + n for n in methods), *functions):
        module_name, _, attrs = name.partition(":")
        if module_name in _IMPORTED_ONLY and module_name not in sys.modules:
            continue
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


def _loopback_names(path="/etc/hosts"):
    """The names the sandbox's hosts file maps to a loopback address: its own and its stand-in
    services' (httpbin.org), which a test reaches without the internet."""
    names = {"localhost"}
    try:
        with open(path) as hosts:
            for line in hosts:
                parts = line.split("#", 1)[0].split()
                if len(parts) > 1 and (parts[0].startswith("127.") or parts[0] == "::1"):
                    names.update(p.lower() for p in parts[1:])
    except OSError:
        pass
    return names


def _outside(host, local):
    """Whether `host` (a name or an address, as a socket call gives it) is beyond the loopback."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str) or not host:
        return False  # None (a wildcard), a unix socket's path given as bytes, ...
    try:
        return not ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return host.lower().rstrip(".") not in local


class NetworkWatch:
    """The first host beyond the sandbox's loopback that the current test tried to reach: a
    name looked up that the hosts file does not map to the loopback, or a connection to an
    address outside it, seen by an audit hook (Python 3.8 on; none before). The sandbox has
    no internet, so such a test's failure is the network's: its message says so
    (" [tried the network: HOST]"), which data.validate reads to name it in needs_network.
    Informational only: the verdict never reads it."""

    EVENTS = ("socket.getaddrinfo", "socket.gethostbyname", "socket.connect")

    def __init__(self):
        self.local = _loopback_names()
        self.host = None
        if hasattr(sys, "addaudithook"):
            sys.addaudithook(self.hook)

    def hook(self, event, args):
        if self.host is not None or event not in self.EVENTS:
            return
        try:  # an audit hook's exception would be the audited call's: none escapes
            target = args[1] if event == "socket.connect" else args[0]
            if event == "socket.connect":
                target = target[0] if isinstance(target, tuple) and target else None
            if _outside(target, self.local):
                self.host = str(target)[:80]
        except Exception:
            pass

    def note(self):
        return " [tried the network: " + self.host + "]" if self.host else ""


# How many values of one class the probe questions per test: a class of the candidate's (sympy's
# Add, when add.py is patched) may hand out thousands, and each question is a few comparisons.
PROBES_PER_CLASS = 20
# Exact builtin types: their comparisons are the interpreter's, never the candidate's.
# Compared by identity: a metaclass of the candidate's can make `kind in (...)` true.
PLAIN = frozenset(id(t) for t in (type(None), bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset))
CONTAINERS = frozenset(id(t) for t in (list, tuple, set, frozenset, dict))
_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement or type()


class EqualityProbe:
    """Questions the values a passing FAIL_TO_PASS test can have compared: every value the
    candidate's code returns during the test's call (whatever its class: a mock sentinel or a
    standard-library subclass is questioned as a class of its own is), and the `self` of a
    comparison method of a class that is the candidate's (profile "return" and "call" events).
    Such a value is asked whether it equals fresh values no honest value equals; the first
    that does is the finding. The questions run inside the profile function, where Python
    does not profile, with warnings silenced (a question must not add one a test counts).

    Trusting nothing the tested code can replace: the profile function is set and read with
    the interpreter's own functions kept at start (_SETPROFILE, _GETPROFILE), a trace function
    or a thread's trace or profile hook that appeared during the test is a finding, and at
    every call the test file makes (`watched`: a function returning the first replaced name
    of the harness's WATCHED list, or None) the integrity check runs, so a replacement that
    restores the original on its first call is seen before it runs."""

    def __init__(self, files, tests=(), watched=None):
        self.cwd = os.getcwd()
        self.files = frozenset(os.path.normpath(os.path.join(self.cwd, f)) for f in files)
        self.tests = frozenset(os.path.normpath(os.path.join(self.cwd, t)) for t in tests)
        self.watched = watched
        self.code = {}  # a code object's file name -> whether it is one of the candidate's files
        self.test_code = {}  # a code object's file name -> whether it is a test file run
        self.left = {}  # id(class) -> [class, how many more of its values may be questioned, the candidate's]
        self.found = ""
        self.state = None  # the trace state when the test's call began
        self.setprofile = _SETPROFILE
        self.hook = self.event  # the one bound method handed to sys.setprofile (checked by identity)
        # Fresh per run: a value cannot have been written to equal these.
        self.sentinels = (
            object(),
            type("Q" + os.urandom(4).hex(), (object,), {})(),
            os.urandom(16).hex(),
            int.from_bytes(os.urandom(8), "big") + (1 << 70),
        )

    def start(self):
        self.left, self.found = {}, ""
        for path in self.tests:  # read again through open(), which the policy watches
            linecache.cache.pop(path, None)
        self.state = _trace_state()
        self.setprofile = sys.setprofile
        _SETPROFILE(self.hook)
        sys.setprofile = self.guard  # switching the probe off and on again around a forgery: seen

    def guard(self, function):
        """sys.setprofile while a watched test runs: done, and a finding."""
        self.found = self.found or "the code under test called sys.setprofile during the test"
        _SETPROFILE(function)

    def stop(self):
        """The finding of this test ("" none); a profile function other than ours at the end
        (the code under test replaced or removed it) is a finding too, as is a trace function
        or a thread hook that was not there at the start."""
        current = _GETPROFILE()
        _SETPROFILE(None)
        sys.setprofile = self.setprofile
        self.left = {}
        if current is not self.hook:
            return "the probe was switched off during the test (sys.setprofile)"
        if _trace_state() != self.state:
            return "a trace or profile function was set during the test (sys.settrace, threading)"
        return self.found

    def ours(self, filename):
        known = self.code.get(filename)
        if known is None:
            known = self.code[filename] = os.path.normpath(os.path.join(self.cwd, filename)) in self.files
        return known

    def from_test(self, filename):
        known = self.test_code.get(filename)
        if known is None:
            known = self.test_code[filename] = os.path.normpath(os.path.join(self.cwd, filename)) in self.tests
        return known

    def event(self, frame, event, arg):
        if self.found:
            return
        try:
            if event == "call" or event == "c_call":
                caller = frame.f_back if event == "call" else frame
                if caller is not None and self.watched is not None and self.from_test(caller.f_code.co_filename):
                    replaced = self.watched()
                    if replaced is not None:
                        self.found = replaced + " was replaced when the test called it"
                        return
            if event != "return" and event != "call":
                return
            code = frame.f_code
            if not self.ours(code.co_filename):
                return
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if event == "return":
                    self.question(arg, True)
                    if id(type(arg)) in CONTAINERS:  # a few of what it holds
                        items = arg.values() if type(arg) is dict else arg
                        for item in itertools.islice(items, 8):
                            self.question(item, True)
                elif code.co_argcount and code.co_name in ("__eq__", "__ne__", "<lambda>"):
                    self.question(frame.f_locals.get(code.co_varnames[0]), False)
        except Exception:  # the probe never changes what the test sees
            pass

    def question(self, value, returned):
        """Ask `value` the questions: when the candidate's code returned it, whatever its class;
        as the `self` of a comparison method, when its class is the candidate's."""
        kind = type(value)
        if id(kind) in PLAIN or self.found:
            return
        entry = self.left.get(id(kind))
        if entry is None:
            entry = self.left[id(kind)] = [kind, PROBES_PER_CLASS, self.candidates(kind)]
        if entry[1] <= 0 or not (returned or entry[2]):
            return
        entry[1] -= 1
        for other in self.sentinels:
            shown = type(other).__name__ if type(other) is not object else "object()"
            if _answers(operator.eq, value, other, True):
                self.found = _name(kind) + " == a fresh " + shown + " is true"
            elif not _declines(kind, value, other) and _answers(operator.ne, value, other, False):
                self.found = _name(kind) + " != a fresh " + shown + " is false"
            if self.found:
                return

    def candidates(self, kind):
        """Whether `kind` is the candidate's: a class of its MRO made in the candidate's files,
        or whose `__eq__`/`__ne__` is a function of those files, of no file ("<string>"), a
        callable that is not a function (a builtin such as operator.is_not set as `__eq__`), or
        a function borrowed from another class (its qualified name is not under the class's)."""
        for cls in kind.__mro__:
            if not cls.__flags__ & _HEAP_TYPE:
                continue
            module = sys.modules.get(vars(cls).get("__module__") or "")
            if self.ours(getattr(module, "__file__", None) or "<none>"):
                return True
            for name in ("__eq__", "__ne__"):
                method = vars(cls).get(name)
                if method is None:
                    continue
                code = getattr(method, "__code__", None)
                if code is None or self.ours(code.co_filename) or code.co_filename.startswith("<"):
                    return True
                owner = str(getattr(method, "__qualname__", "")).rpartition(".")[0]
                if owner != str(getattr(cls, "__qualname__", "")):
                    return True
        return False


def _trace_state():
    """The trace function and the threading module's trace and profile hooks, as the
    interpreter has them (not through sys's attributes)."""
    return (_GETTRACE(), getattr(threading, "_trace_hook", None), getattr(threading, "_profile_hook", None))


def _answers(compare, value, other, claim):
    """Whether `compare(value, other)` is as true as `claim`; an exception (a comparison that
    refuses, or an answer with no truth value) is no."""
    try:
        return bool(compare(value, other)) is claim
    except Exception:
        return False


def _declines(kind, value, other):
    """Whether the class's own `__eq__` answers NotImplemented to `other`: then an old-style
    `__ne__` written as `not self.__eq__(other)` says "not unequal" by mistake, not by design."""
    try:
        return kind.__eq__ is not object.__eq__ and kind.__eq__(value, other) is NotImplemented
    except Exception:
        return False


def _name(kind):
    return str(getattr(kind, "__module__", "?")) + "." + str(getattr(kind, "__qualname__", kind.__name__))


def _probe(fd, spec):
    """The EqualityProbe of the candidate's files and the test ids it watches, from the
    harness's secret (policy.read_secret), with the `{"probing": n}` line written; (None,
    empty) when the run has none (nothing to probe)."""
    tests, files = frozenset(spec.get("tests", ())), spec.get("files", ())
    if not tests or not files:
        return None, frozenset()
    _emit(fd, {"probing": len(tests)})
    return EqualityProbe(files, spec.get("test_files", ())), tests


def _undumpable():
    """Make this process non-dumpable (prctl PR_SET_DUMPABLE 0): a process the tested code
    starts, of the same user, can then neither read its memory (/proc/PID/mem, where the
    probe's spec lives) nor trace it. Interpreters whose tests start a child inherit nothing
    of it (exec makes the child dumpable again). Without ctypes (an interpreter built without
    it) the process stays as it was."""
    try:
        import ctypes  # here: only a probed run needs it, and it must not come before the policy is read

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:
        pass


def _install_policy(fd, spec):
    """The audit hook of the candidate's capabilities (policy.AuditPolicy), when the run has a spec;
    before any repository code is imported. None on an interpreter without audit hooks."""
    if not spec.get("tests") or not spec.get("files"):
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    refusals = policy.AuditPolicy(fd, _emit, spec["files"], spec.get("lines", {}), spec.get("test_files", ()), here)
    return refusals if refusals.install() else None


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

    def __init__(self, fd, roots, probe=None, probed=frozenset()):
        self.fd, self.roots = fd, tuple(os.path.join(r, "") for r in roots)
        self.watched = _watched()
        self.config = None
        if probe is not None:
            probe.watched = self.replaced
        self.tampered = False
        self.network = NetworkWatch()
        self.probe, self.probed = probe, probed

    def pytest_runtest_call(self, item):
        """A hook wrapper (main marks it): the probe around a watched test's call."""
        watched = self.probe is not None and item.nodeid in self.probed
        if watched:
            self.probe.start()
        try:
            yield
        finally:
            if watched:
                _emit(self.fd, {"probe": item.nodeid, "found": self.probe.stop()})

    def pytest_configure(self, config):
        self.config = config

    def replaced(self):
        """ "pytest's NAME" for the first WATCHED name replaced, else None (the probe asks at
        every call a test file makes)."""
        why = _changed(self.watched)
        return None if why is None else "pytest's " + why

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

    def pytest_runtest_logstart(self, nodeid, location):
        self.network.host = None  # what the previous test tried is not this one's

    def pytest_runtest_logreport(self, report):
        self.check()
        record = {"id": report.nodeid, "when": report.when, "outcome": report.outcome}
        if hasattr(report, "wasxfail"):
            record["xfail"] = True
        if report.failed:
            record["message"] = _message(report) + self.network.note()
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

    def __init__(self, fd, probe=None, probed=frozenset()):
        self.fd = fd
        self.probe, self.probed = probe, probed
        self.probing = None  # the label of the watched test now running
        self.state = {}  # id(test) -> [label, outcome, message]
        self.written = set()
        self.tampered = False
        base = unittest.TestResult
        for name in RESULT_METHODS:
            setattr(base, name, self._wrap(name, getattr(base, name)))
        self.watched = _watched()  # after wrapping: the wrappers are what must stay
        if probe is not None:
            probe.watched = lambda: None if _changed(self.watched) is None else "unittest's " + _changed(self.watched)

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
            if self.probe is not None and self.probing is None and _label(test) in self.probed:
                self.probing = _label(test)
                self.probe.start()
            return
        entry = self.state.get(id(test))
        if name == "stopTest":
            if self.probing is not None and entry is not None and entry[0] == self.probing:
                _emit(self.fd, {"probe": self.probing, "found": self.probe.stop()})
                self.probing = None
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


def run_unittest_script(fd, argv, spec):
    """Run a unittest-based runner script (django's tests/runtests.py) as `python SCRIPT ARGS`
    would, with the recorder in unittest.TestResult; the script's exit status ends the report."""
    script = os.path.abspath(argv[0])
    recorder = UnittestRecorder(fd, *_probe(fd, spec))
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
        import coverage  # from the tool folder alone, and only in a measured run

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
    spec = policy.read_secret()  # first: its descriptor is closed before anything else runs
    fd = int(os.environ.pop("SWE_RL_REPORT_FD"))
    tool = os.environ.pop("SWE_RL_COVERAGE", "")
    paths = [p for p in os.environ.pop("SWE_RL_PATH", "").split(os.pathsep) if p]
    if sys.path and os.path.dirname(os.path.abspath(__file__)) == os.path.abspath(sys.path[0] or "."):
        del sys.path[0]  # the harness's own directory
    sys.path.extend(paths)
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    if spec:
        _undumpable()
    _install_policy(fd, spec)  # before the runner and anything of the repository is imported
    if sys.argv[1:2] == ["--unittest"]:
        return run_unittest_script(fd, sys.argv[2:], spec)
    # the environment's pytest, once sys.path is the harness's
    import pytest

    own = os.path.abspath(pytest.__file__)
    # Where the repository is the runner (pytest's own repository), its code is pytest's:
    # nothing of it can be held to the versions noted here.
    probe, probed = _probe(fd, spec)
    mine = [] if any(own.startswith(os.path.join(p, "")) for p in paths) else paths
    recorder = Recorder(fd, mine, probe, probed)
    pytest.hookimpl(hookwrapper=True)(Recorder.pytest_runtest_call)  # marks the function in place
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
