"""reward/execution/bootstrap.py's network note: a failing test that looked up or connected to
a host beyond the sandbox's loopback says so in its message, whatever its assertion says (a
link checker reports "broken", not the socket's error), so validation can name it.

Its probe, on the host: which values it questions and what it finds, without a sandbox (the
sandboxed forgeries are in test_always_equal.py)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from data.validate import NETWORK_ERROR
from reward.execution import bootstrap
from reward.execution.bootstrap import EqualityProbe

TESTS = """
import sys


def test_outside_name():
    sys.audit("socket.getaddrinfo", "www.example.com", 443, 0, 0, 0)  # the event only: no lookup
    assert "broken" == "working"


def test_loopback_only():
    sys.audit("socket.getaddrinfo", "localhost", 80, 0, 0, 0)
    sys.audit("socket.connect", None, ("127.0.0.1", 8080))
    assert "broken" == "working"


def test_outside_address():
    sys.audit("socket.connect", None, ("10.255.255.1", 80))
    assert False


def test_next_test_starts_clean():
    assert False
"""


def test_a_failing_test_that_tried_the_network_says_so(tmp_path: Path):
    (tmp_path / "test_links.py").write_text(TESTS)
    read, write = os.pipe()
    env = {**os.environ, "SWE_RL_REPORT_FD": str(write), "SWE_RL_PATH": str(tmp_path)}
    script = Path(bootstrap.__file__)
    args = [sys.executable, "-s", "-B", str(script), "-p", "no:cacheprovider", "-q", "test_links.py"]
    proc = subprocess.run(args, cwd=tmp_path, env=env, pass_fds=(write,), capture_output=True, timeout=120)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        records = [json.loads(line) for line in stream.read().splitlines()]
    assert proc.returncode == 1, proc.stdout[-2000:]
    messages = {r["id"].split("::")[-1]: r.get("message", "") for r in records if r.get("when") == "call"}
    assert messages["test_outside_name"].endswith(" [tried the network: www.example.com]")
    assert messages["test_outside_address"].endswith(" [tried the network: 10.255.255.1]")
    assert "tried the network" not in messages["test_loopback_only"] + messages["test_next_test_starts_clean"]
    assert NETWORK_ERROR.search(messages["test_outside_name"]) and not NETWORK_ERROR.search(
        messages["test_loopback_only"]
    )


def test_the_hosts_files_loopback_names_are_the_sandboxs_own(tmp_path: Path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n127.0.0.1 httpbin.org www.httpbin.org  # stand-in\n10.0.0.2 db\n")
    local = bootstrap._loopback_names(str(hosts))
    assert local == {"localhost", "httpbin.org", "www.httpbin.org"}
    assert not bootstrap._outside("HTTPBIN.org.", local) and not bootstrap._outside("::1", local)
    assert bootstrap._outside("db", local) and bootstrap._outside(b"93.184.216.34", local)
    assert not bootstrap._outside(None, local)


class Honest:
    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Honest) and self.x == other.x

    __hash__ = object.__hash__


class OldStyle:
    """Python 2 era: `__ne__` inverts `__eq__`'s NotImplemented into "not unequal"."""

    def __eq__(self, other: object) -> bool:
        return self is other if isinstance(other, OldStyle) else NotImplemented  # type: ignore[return-value]

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__


class Refuses:
    """numpy's and sympy's answers to an unknown type: something with no truth value."""

    def __eq__(self, other: object) -> bool:
        raise TypeError("no truth value")

    __hash__ = object.__hash__


@dataclasses.dataclass
class Point:
    x: int


class Yes:
    __eq__ = lambda self, other: True  # noqa: E731
    __hash__ = object.__hash__


def finding(value: object, mine: bool = True, returned: bool = False) -> str:
    probe = EqualityProbe([__file__] if mine else [])
    probe.question(value, returned)
    return probe.found


@pytest.mark.parametrize(
    "value", [Honest(1), OldStyle(), Refuses(), Point(1), 3, "x", datetime.date(2024, 1, 1)], ids=repr
)
@pytest.mark.parametrize("returned", [False, True])
def test_honest_values_and_plain_data_are_not_findings(value: object, returned: bool) -> None:
    assert finding(value, returned=returned) == ""


def test_an_always_equal_value_is_a_finding_only_when_its_class_is_the_candidates() -> None:
    assert finding(Yes()) == f"{__name__}.Yes == a fresh object() is true"
    assert finding(Yes(), mine=False) == ""  # a class of files the candidate did not change


class Borrowed(datetime.date):
    __module__ = "datetime"
    __eq__ = type(mock.ANY).__eq__
    __hash__ = datetime.date.__hash__


def test_a_value_the_candidate_returns_is_questioned_whatever_its_class() -> None:
    assert finding(mock.ANY, mine=False) == ""  # compared as the test's own value: not questioned
    assert finding(mock.ANY, mine=False, returned=True) == "unittest.mock._ANY == a fresh object() is true"
    # a comparison borrowed from another class makes the class the candidate's wherever it claims to be
    assert finding(Borrowed(2024, 1, 1), mine=False) == "datetime.Borrowed == a fresh object() is true"


def test_a_watched_name_replaced_is_seen_at_the_tests_call_before_the_replacement_runs() -> None:
    calls: list[str] = []
    probe = EqualityProbe([], tests=[__file__])
    probe.watched = lambda: "pytest's math:isclose" if calls else None
    probe.start()
    try:
        len("x")  # a call from this (test) file, nothing replaced yet
        calls.append("replaced")
        len("y")
    finally:
        found = probe.stop()
    assert found == "pytest's math:isclose was replaced when the test called it"


def test_a_trace_function_set_during_the_test_is_a_finding() -> None:
    probe = EqualityProbe([__file__])
    probe.start()
    before = sys.gettrace()
    sys.settrace(lambda *a: None)
    try:
        found = probe.stop()
    finally:
        sys.settrace(before)
    assert found == "a trace or profile function was set during the test (sys.settrace, threading)"


def test_the_probe_switched_off_or_toggled_during_a_test_is_a_finding() -> None:
    probe = EqualityProbe([__file__])
    probe.start()
    sys.setprofile(None)  # the guard: noted, and done
    assert sys.getprofile() is None
    assert probe.stop() == "the probe was switched off during the test (sys.setprofile)"
    assert sys.setprofile is probe.setprofile and sys.getprofile() is None  # restored
    probe.start()
    hook = sys.getprofile()
    sys.setprofile(None)
    sys.setprofile(hook)
    assert probe.stop() == "the code under test called sys.setprofile during the test"
