"""CRUXEval's two tasks on its published `cruxeval.jsonl` (`data=PATH`, the file or its folder):

    cruxeval_o   the function and its input are given; the answer is the output, a Python
                 expression on a last line `Answer: ...`
    cruxeval_i   the function and its output are given; the answer is any input for which
                 `f(input) == output`, written as the arguments inside `f(...)`

Either answer may also be an `assert f(...) == ...` line, CRUXEval's own format (on the
`Answer:` line or, lacking one, as the answer's last line starting `assert f(`): its right
side is read for -O, its call for -I. The comparison is CRUXEval's `==`.

How it differs from pasting the expression into `assert f(INPUT) == OUTPUT`: the expression
is checked here to be one Python expression (else the answer holds nothing to grade), and it
is `eval`-ed from a string, in the sandbox, in a program that holds nothing else: no f, no
input and no expected value (an -O answer that calls f does not pass; for -I, `f` there only
captures the arguments). That program reports the expression's value as plain data
(values.py: builtin scalars and containers, nothing subclassed, so an object whose `__eq__`
says yes is not a value); the true output (-O: f on the input; -I: f on the answer's
arguments, and the stated output) comes from a second program in a sandbox of its own that
no answer's code entered, and the two are compared here, on the host, with CRUXEval's `==`.
So neither precedence (`0 or True`), nor a rebound name (`f`, the expected value), nor a
frame's globals reach what is compared.
"""

from __future__ import annotations

import ast
from typing import Any, ClassVar

from actors.eval.ood.answer_parts import answer_line
from actors.eval.ood.programs import calls_program, is_arguments, reported, said
from actors.eval.ood.suite import SUITES, Problem, Program, RunPrograms, Suite, Verdict, data_file, read_jsonl
from actors.eval.ood.values import Raised, Unplain

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

    def grade(self, pairs: list[tuple[Problem, str]], run: RunPrograms) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(pairs)
        found = []
        for i, (_, answer) in enumerate(pairs):
            stated = _stated(answer)
            expression = self.expression(stated) if stated is not None else None
            if expression is None:
                why = "no `Answer:` line" if stated is None else f"not a Python expression: {stated[:80]!r}"
                verdicts[i] = Verdict(False, False, detail=why)
            else:
                found.append((i, expression))
        whys = self.check([(pairs[i][0], expression) for i, expression in found], run)
        for (i, expression), (wrong, timed_out) in zip(found, whys, strict=True):
            verdicts[i] = Verdict(wrong is None, True, timed_out, wrong or expression[:120])
        return [v for v in verdicts if v is not None]

    def check(self, answers: list[tuple[Problem, str]], run: RunPrograms) -> list[tuple[str | None, bool]]:
        """(None if right else why not, whether a program timed out) for each (problem, expression)."""
        raise NotImplementedError


def _evaluated(expression: str, namespace: str, wall_s: float) -> Program:
    """The answer's program: the expression's value, `eval`-ed in `namespace` and nothing else."""
    code = f"_EXPRESSION = {expression!r}\n\ndef _value():\n    return eval(_EXPRESSION, {namespace})\n"
    return calls_program(code, [("_value", (), {})], wall_s)


def _value(result: list[object] | str) -> object:
    """A program's one value, or why there is none (a str: `said` wrote it)."""
    if isinstance(result, str):
        return result
    if isinstance(result[0], (Raised, Unplain)):
        return said(result[0])
    return result[0]


@SUITES.register("cruxeval_o")
class CruxEvalOutput(CruxEval):
    def messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        call = f"f({row['input']})"
        return [{"role": "user", "content": f"{OUTPUT_REQUEST}\n\n{_fenced(row['code'])}\n\nThe call: `{call}`"}]

    def expression(self, stated: str) -> str | None:
        sides = _assert_sides(stated)
        value = sides[1] if sides else stated
        return value.strip() if _parse(value) is not None else None

    def check(self, answers: list[tuple[Problem, str]], run: RunPrograms) -> list[tuple[str | None, bool]]:
        problems = list({p.pid: p for p, _ in answers}.values())
        programs = [
            calls_program(
                f"{p.data['code']}\n\ndef _reference():\n    return f({p.data['input']})\n",
                [("_reference", (), {})],
                self.wall_s,
            )
            for p in problems
        ]
        programs += [_evaluated(expression, "{}", self.wall_s) for _, expression in answers]
        results = run(programs)
        wants = {p.pid: reported(r, 1) for p, r in zip(problems, results, strict=False)}
        out: list[tuple[str | None, bool]] = []
        for (problem, _), result in zip(answers, results[len(problems) :], strict=True):
            want, got = wants[problem.pid], reported(result, 1)
            if isinstance(want, str) or isinstance(want[0], (Raised, Unplain)):
                why: str | None = f"the reference's run: {_value(want)}"
            elif isinstance(got, str) or isinstance(got[0], (Raised, Unplain)):
                why = str(_value(got))
            else:
                why = None if want[0] == got[0] else f"got {got[0]!r:.80}, want {want[0]!r:.80}"
            out.append((why, result.timed_out))
        return out

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

    def check(self, answers: list[tuple[Problem, str]], run: RunPrograms) -> list[tuple[str | None, bool]]:
        # The answer's call is evaluated with `f` capturing its arguments; the real f runs on
        # those values (plain data, checked here) in a program of its own.
        capture = "{'f': lambda *args, **kwargs: (args, kwargs)}"
        results = run([_evaluated(expression, capture, self.wall_s) for _, expression in answers])
        out: list[tuple[str | None, bool]] = [("", r.timed_out) for r in results]
        programs, slots = [], []
        for n, ((problem, _), result) in enumerate(zip(answers, results, strict=True)):
            got = _value(reported(result, 1))
            if not is_arguments(got):  # (positional, keyword), as the capturing f returns them
                out[n] = (got if isinstance(got, str) else "the arguments are not plain data", result.timed_out)
                continue
            code = f"{problem.data['code']}\n\ndef _output():\n    return ({problem.data['output']})\n"
            programs.append(calls_program(code, [("f", *got), ("_output", (), {})], self.wall_s))  # type: ignore[misc]
            slots.append(n)
        for n, result in zip(slots, run(programs), strict=True):
            ran = reported(result, 2)
            if isinstance(ran, str) or any(isinstance(v, (Raised, Unplain)) for v in ran):
                why: str | None = f"f(...): {ran if isinstance(ran, str) else said(ran[0])}"
            else:
                why = None if ran[0] == ran[1] else f"f(...) returned {ran[0]!r:.80}"
            out[n] = (why, out[n][1] or result.timed_out)
        return out

    def reference(self, problem: Problem) -> str:
        return f"Answer: {problem.data['input']}"
