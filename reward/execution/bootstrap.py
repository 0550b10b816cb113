"""The harness's test process: starts pytest inside the sandbox and streams each outcome out.

Run by the runner as `<env python> -s -B /path/to/bootstrap.py <pytest args>`, as the sandbox's
unprivileged user, with the interpreter of the environment under test (any Python from 3.6 on:
standard library only, and no syntax newer than that). It is the harness's own file, mounted
read-only; nothing of the repository runs before it has set up:

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

The tested code shares this process, so it can still write into the pipe or patch pytest in
memory; the runner's canary tests (runner.py, report.py) detect that: see docs/security.md.
"""

import json
import os
import sys


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


class Recorder:
    """A pytest plugin registered by the harness: every setup/call/teardown and collection
    report, as it happens."""

    def __init__(self, fd):
        self.fd = fd

    def pytest_runtest_logreport(self, report):
        record = {"id": report.nodeid, "when": report.when, "outcome": report.outcome}
        if hasattr(report, "wasxfail"):
            record["xfail"] = True
        if report.failed:
            record["message"] = _message(report)
        _emit(self.fd, record)

    def pytest_collectreport(self, report):
        if report.failed:
            _emit(self.fd, {"id": report.nodeid, "when": "collect", "outcome": "failed", "message": _message(report)})


def main():
    fd = int(os.environ.pop("SWE_RL_REPORT_FD"))
    paths = [p for p in os.environ.pop("SWE_RL_PATH", "").split(os.pathsep) if p]
    if sys.path and os.path.dirname(os.path.abspath(__file__)) == os.path.abspath(sys.path[0] or "."):
        del sys.path[0]  # the harness's own directory
    sys.path.extend(paths)
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    import pytest

    code = pytest.main(sys.argv[1:], plugins=[Recorder(fd)])
    _emit(fd, {"exit": int(code)})
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
