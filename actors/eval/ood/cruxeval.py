"""CRUXEval's two tasks on its published `cruxeval.jsonl` (`data=PATH`, the file or its folder):

    cruxeval_o   the function and its input are given; the answer is the output, a Python
                 expression on a last line `Answer: ...`
    cruxeval_i   the function and its output are given; the answer is any input for which
                 `f(input) == output`, written as the arguments inside `f(...)`

Either answer may also be an `assert f(...) == ...` line, CRUXEval's own format (on the
`Answer:` line or, lacking one, as the answer's last line starting `assert f(`): its right
side is read for -O, its call for -I. The comparison is CRUXEval's `==`.

How it differs from pasting the expression into `assert f(INPUT) == OUTPUT`: the expression
is checked here to be one Python expression (else the answer holds nothing to grade), and in
the sandbox it is `eval`-ed from a string in a namespace of its own (no `f` there: an -O
answer that calls f does not pass), after the true call for -O and before the call (which
gets its values) for -I, so neither precedence (`0 or True`) nor a rebound name (`f`, the
expected value) can change what is compared; and its values
must be plain data (builtin scalars and containers, nothing subclassed), so an object whose
`__eq__` says yes does not pass. That closes the one-expression forgeries; programs.py writes
down what a determined answer can still do inside the harness.
"""

from __future__ import annotations

import ast
from typing import Any, ClassVar

from actors.eval.ood.answer_parts import answer_line
from actors.eval.ood.suite import SUITES, Problem, Program, RunPrograms, Suite, Verdict, data_file, read_jsonl

FIELDS = ("code", "input", "output", "id")

OUTPUT_REQUEST = (
    "Read the Python function below and work out the value that the call shown returns. You "
    "may reason first. End your reply with one line `Answer: <value>`, where <value> is that "
    "return value written as a Python expression (a literal such as 'ab', [1, 2] or None)."
)
INPUT_REQUEST = (
    "Read the Python function below and find arguments for which it returns the value shown "
    "(any such arguments will do). You may reason first. End your reply with one line "
    "`Answer: <arguments>`, where <arguments> is what goes between the parentheses of "
    "f(...), written as Python expressions."
)

# Run in the sandbox before the answer's values are compared: True only for builtin data.
PLAIN = """\
_SCALARS = (bool, int, float, complex, str, bytes, type(None))
def _plain(value):
    if type(value) in (list, tuple, set, frozenset):
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return type(value) in _SCALARS
"""


def _fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def _parse(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None


def _assert_sides(line: str) -> tuple[str, str] | None:
    """(the call `f(...)`, the expected value) of a line `assert f(...) == value`, or None."""
    line = line.strip()
    try:
        body = ast.parse(line).body
    except (SyntaxError, ValueError):
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Assert) or not isinstance(body[0].test, ast.Compare):
        return None
    test = body[0].test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq) or not _calls_f(test.left):
        return None
    call, value = ast.get_source_segment(line, test.left), ast.get_source_segment(line, test.comparators[0])
    return (call, value) if call and value else None


def _calls_f(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "f"


def _stated(answer: str) -> str | None:
    """What the answer states: its `Answer:` line, else its last line starting `assert f(`."""
    line = answer_line(answer)
    if line is not None:
        return line
    asserts = [ln.strip() for ln in answer.splitlines() if ln.strip().startswith("assert f(")]
    return asserts[-1] if asserts else None


class CruxEval(Suite):
    """The loader and the grader both tasks share; a task says what its answer is and how it is run."""

    data_format = "cruxeval.jsonl (CRUXEval)"
    wall_s: ClassVar[float] = 10.0  # CRUXEval's functions are a few lines on small inputs

    def load(self, data: str) -> list[Problem]:
        path = data_file(data, ("cruxeval.jsonl",), self.data_format)
        return [Problem(row["id"], self.messages(row), row) for row in read_jsonl(path, FIELDS)]

    def messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        raise NotImplementedError

    def expression(self, stated: str) -> str | None:
        """The Python expression this task evaluates, from what the answer states; None if none."""
        raise NotImplementedError

    def program(self, problem: Problem, expression: str) -> str:
        raise NotImplementedError

    def grade(self, pairs: list[tuple[Problem, str]], run: RunPrograms) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(pairs)
        programs, slots = [], []
        for i, (problem, answer) in enumerate(pairs):
            stated = _stated(answer)
            expression = self.expression(stated) if stated is not None else None
            if expression is None:
                why = "no `Answer:` line" if stated is None else f"not a Python expression: {stated[:80]!r}"
                verdicts[i] = Verdict(False, False, detail=why)
                continue
            programs.append(Program(self.program(problem, expression), self.wall_s))
            slots.append((i, expression))
        for (i, expression), result in zip(slots, run(programs), strict=True):
            verdicts[i] = Verdict(result.passed, True, result.timed_out, result.detail or expression[:120])
        return [v for v in verdicts if v is not None]


@SUITES.register("cruxeval_o")
class CruxEvalOutput(CruxEval):
    def messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        call = f"f({row['input']})"
        return [{"role": "user", "content": f"{OUTPUT_REQUEST}\n\n{_fenced(row['code'])}\n\nThe call: `{call}`"}]

    def expression(self, stated: str) -> str | None:
        sides = _assert_sides(stated)
        value = sides[1] if sides else stated
        return value.strip() if _parse(value) is not None else None

    def program(self, problem: Problem, expression: str) -> str:
        # The true call runs first, so the answer's expression cannot redefine f before it.
        return (
            f"{problem.data['code']}\n\n{PLAIN}\n"
            f"_want = f({problem.data['input']})\n"
            f"_got = eval({expression!r}, {{}})\n"
            f"assert _plain(_got), f'not plain data: {{type(_got).__name__}}'\n"
            f"assert _want == _got, f'got {{_got!r:.80}}, want {{_want!r:.80}}'\n"
        )

    def reference(self, problem: Problem) -> str:
        return f"Answer: {problem.data['output']}"


@SUITES.register("cruxeval_i")
class CruxEvalInput(CruxEval):
    def messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        shown = f"f(...) == {row['output']}"
        return [{"role": "user", "content": f"{INPUT_REQUEST}\n\n{_fenced(row['code'])}\n\nThe value: `{shown}`"}]

    def expression(self, stated: str) -> str | None:
        """The call `f(ARGS)`: the assert's left side, the answer itself when it is a call of f,
        else the answer read as ARGS (it must then parse as exactly one call)."""
        sides = _assert_sides(stated)
        if sides:
            return sides[0]
        if _calls_f(_parse(stated)):
            return stated.strip()
        call = f"f({stated.strip()})"
        return call if _calls_f(_parse(call)) else None

    def program(self, problem: Problem, expression: str) -> str:
        # The answer's call is evaluated with `f` capturing its arguments, so the real f runs
        # only on values already built (and checked to be plain data).
        return (
            f"{problem.data['code']}\n\n{PLAIN}\n"
            f"_args, _kwargs = eval({expression!r}, {{'f': lambda *a, **k: (a, k)}})\n"
            f"assert _plain(_args) and _plain(_kwargs), 'the arguments are not plain data'\n"
            f"_got = f(*_args, **_kwargs)\n"
            f"assert _got == ({problem.data['output']}), f'f(...) returned {{_got!r:.80}}'\n"
        )

    def reference(self, problem: Problem) -> str:
        return f"Answer: {problem.data['input']}"
