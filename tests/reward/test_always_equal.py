"""Always-equal and friends: a candidate whose code returns an object that compares equal to
anything passes weak `==` tests. Each test is a candidate that leaves demo__calspan-3's bug
(add_months raises on Jan 31 + 1 month) and returns such an object where the real code raises;
the recorder's probe (bootstrap.EqualityProbe) must make the run `tampered`. The gold patch, under every
assertion style used here, must still resolve (no false alarm).
"""

from __future__ import annotations

import dataclasses

import pytest

from data.patching import apply_patch, make_patch
from data.schema import Instance
from reward.execution import sandbox
from reward.execution.runner import TestJob
from tests.reward.test_containment import _instance, runner  # noqa: F401 - the module-scoped Runner fixture

pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}")

MONTHS = "calspan/months.py"
BROKEN = "    return day.replace(year=year, month=month0 + 1)\n"

# Each: classes at the module's end, and what add_months returns where the real code raises.
ALWAYS_EQUAL = {
    "object": ("class Yes:\n    __eq__ = lambda self, other: True\n    __hash__ = object.__hash__\n", "Yes()"),
    "date subclass": (
        "class Day(date):\n    def __eq__(self, other):\n        return True\n\n    __hash__ = date.__hash__\n",
        "Day(year, month0 + 1, 1)",
    ),
    "str subclass": (
        "class Text(str):\n    def __eq__(self, other):\n        return True\n\n"
        "    def __ne__(self, other):\n        return False\n\n    __hash__ = str.__hash__\n",
        "Text('')",
    ),
    # A C function as __eq__ (true for any two distinct objects) and a module that is not the
    # candidate's: the class is still a class the candidate made.
    "disguised": (
        "import functools, operator\n\n\nclass Yes:\n    __module__ = 'datetime'\n"
        "    __eq__ = functools.partialmethod(operator.is_not)\n"
        "    __hash__ = object.__hash__\n",
        "Yes()",
    ),
    # Only `!=` lies: `assert not (x != y)` passes, `x == y` stays honest.
    "ne only": ("class Same:\n    def __ne__(self, other):\n        return False\n", "Same()"),
    # The probe switched off by the code under test before it hands out the object, and switched
    # off then on again around it.
    "probe off": (
        "import sys\n\n\nclass Yes:\n    __eq__ = lambda self, other: True\n    __hash__ = object.__hash__\n",
        "(sys.setprofile(None), Yes())[1]",
    ),
    "probe off and on": (
        "import sys\n\n\nclass Yes:\n    __eq__ = lambda self, other: True\n    __hash__ = object.__hash__\n\n\n"
        "def _quietly():\n    hook = sys.getprofile()\n    sys.setprofile(None)\n    value = Yes()\n"
        "    sys.setprofile(hook)\n    return value\n",
        "_quietly()",
    ),
}

# Test files in other assertion styles (the demo's own is `assert add_months(...) == expected`).
STYLES = {
    "unittest assertEqual": (
        "import unittest\nfrom datetime import date\n\nfrom calspan.months import add_months\n\n\n"
        "class TestClamp(unittest.TestCase):\n    def test_clamp(self):\n"
        "        self.assertEqual(add_months(date(2024, 1, 31), 1), date(2024, 2, 29))\n",
        "tests/test_styles.py::TestClamp::test_clamp",
    ),
    "forged on the right": (
        "from datetime import date\n\nfrom calspan.months import add_months\n\n\n"
        "def test_clamp():\n    assert date(2024, 2, 29) == add_months(date(2024, 1, 31), 1)\n",
        "tests/test_styles.py::test_clamp",
    ),
    "not unequal": (
        "from datetime import date\n\nfrom calspan.months import add_months\n\n\n"
        "def test_clamp():\n    assert not (add_months(date(2024, 1, 31), 1) != date(2024, 2, 29))\n",
        "tests/test_styles.py::test_clamp",
    ),
}


def forged_months(name: str) -> str:
    """A candidate patch: calspan/months.py unfixed, returning the forged object where it raises."""
    classes, value = ALWAYS_EQUAL[name]
    original = _instance().code_context[MONTHS]
    assert BROKEN in original
    body = f"    try:\n    {BROKEN}    except ValueError:\n        return {value}\n"
    return make_patch({MONTHS: original}, {MONTHS: original.replace(BROKEN, body) + "\n\n" + classes})


def styled(*styles: str) -> Instance:
    """demo__calspan-3 with a test patch of the given styles' tests (one file), all FAIL_TO_PASS."""
    source = "\n\n".join(STYLES[s][0].replace("test_clamp", f"test_clamp_{i}") for i, s in enumerate(styles))
    ids = tuple(STYLES[s][1].replace("test_clamp", f"test_clamp_{i}") for i, s in enumerate(styles))
    test_patch = make_patch({}, {"tests/test_styles.py": source})
    return dataclasses.replace(_instance(), test_patch=test_patch, fail_to_pass=ids, pass_to_pass=())


@pytest.mark.parametrize(
    ("forgery", "style", "shown"),
    [
        ("object", None, "Yes == a fresh object() is true"),
        ("date subclass", None, "Day == a fresh object() is true"),
        ("str subclass", None, "Text == a fresh object() is true"),
        ("disguised", None, "datetime.Yes == a fresh object() is true"),
        ("probe off", None, "switched off"),
        ("probe off and on", None, "called sys.setprofile"),
        ("object", "unittest assertEqual", "Yes == a fresh object() is true"),
        ("object", "forged on the right", "Yes == a fresh object() is true"),
        ("ne only", "not unequal", "Same != a fresh object() is false"),
    ],
    ids=[
        "object",
        "date-subclass",
        "str-subclass",
        "disguised",
        "probe-off",
        "probe-off-on",
        "unittest",
        "right-hand",
        "ne",
    ],
)
def test_an_always_equal_value_in_a_passing_test_is_tampered(runner, forgery, style, shown):  # noqa: F811
    inst = styled(style) if style else _instance()
    run = runner.run(TestJob(inst, forged_months(forgery)))
    assert run.resolved is not True, f"forged: {run.status}, {run.outcomes}"
    assert run.status == "tampered" and shown in (run.reason or ""), (run.status, run.reason)


def test_the_gold_patch_under_every_style_resolves_with_the_probe_on(runner):  # noqa: F811
    inst = styled(*STYLES)
    fixed = apply_patch(inst.code_context, inst.patch)[MONTHS]
    patch = make_patch({MONTHS: inst.code_context[MONTHS]}, {MONTHS: fixed})
    run = runner.run(TestJob(inst, patch))
    assert (run.status, run.resolved) == ("ok", True), (run.status, run.reason, run.outcomes)
