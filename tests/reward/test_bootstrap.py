"""reward/execution/bootstrap.py's probe, on the host: which values it questions and what it
finds, without a sandbox (the sandboxed forgeries are in test_always_equal.py)."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from reward.execution.bootstrap import Probe


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


def finding(value: object, mine: bool = True) -> str:
    probe = Probe([__file__] if mine else [])
    probe.question(value)
    return probe.found


@pytest.mark.parametrize("value", [Honest(1), OldStyle(), Refuses(), Point(1), 3, "x"], ids=repr)
def test_honest_values_and_plain_data_are_not_findings(value: object) -> None:
    assert finding(value) == ""


def test_an_always_equal_value_is_a_finding_only_when_its_class_is_the_candidates() -> None:
    assert finding(Yes()) == f"{__name__}.Yes == a fresh object() is true"
    assert finding(Yes(), mine=False) == ""  # a class of files the candidate did not change


def test_the_probe_switched_off_or_toggled_during_a_test_is_a_finding() -> None:
    probe = Probe([__file__])
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
