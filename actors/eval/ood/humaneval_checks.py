"""HumanEval's tests, graded on the host from the values an answer's program reported.

A HumanEval test is `def check(candidate): assert candidate(...) == ... ...`. Run as written,
it would compare inside the answer's process, where the answer can reach the comparison. So
it is read instead, two ways:

    read_check     a check whose body is only `assert`s (and strings, or a bare `print`) over
                   literals, arithmetic, `abs`/`tuple`/`str`/`len`/`list` and calls of the
                   candidate (by its parameter's name or the entry point's) with arguments
                   free of such calls: its calls' arguments are evaluated here, the answer's
                   program reports the candidate's value for each, and `verdict_of` evaluates
                   the asserts here over those values. 158 of the 164 problems.
    record/replay  any other check (loops, locals, random inputs, the prompt's helpers: 6
                   problems, 32, 38, 44, 50, 53 and 151): a trusted program runs it with the
                   canonical solution as the candidate and records the calls (`random` seeded,
                   so the inputs are the same each time); the answer's program reports its
                   values for those calls; another trusted program runs the check again,
                   seeded alike, with a candidate that returns those values (and fails on a
                   call it did not record), and reports whether it returned. The check runs
                   on plain data in a sandbox that no answer's code entered.

Either way the answer's program holds the arguments and nothing of the expected values, and
the comparison is never in a process it ran in.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors.eval.ood.programs import VALUES_SOURCE, Call, said
from actors.eval.ood.values import Raised, Unplain, encode_results

# The builtins a simple check may apply (to literals or to the answer's values: all are pure on plain data).
FUNCTIONS: dict[str, Callable[..., Any]] = {"abs": abs, "tuple": tuple, "str": str, "len": len, "list": list}
BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_REPEAT_LIMIT = 1 << 20  # a test's `*` on the answer's values builds nothing larger
_POWER_LIMIT = 1 << 10  # nor its `**` a number past this exponent


class Unsupported(Exception):
    """A check that read_check does not read (it is recorded and replayed instead)."""


class _AnswerRaised(Exception):
    def __init__(self, result: Raised | Unplain) -> None:
        self.result = result


@dataclass(frozen=True)
class Check:
    asserts: tuple[ast.expr, ...]  # the tests of the check's asserts, in order
    calls: tuple[ast.Call, ...]  # the candidate's calls among them, in evaluation order
    arguments: tuple[tuple[tuple[Any, ...], dict[str, Any]], ...]  # each call's, evaluated here


def read_check(test: str, entry_point: str) -> Check | None:
    """The check of `test` read as data, or None when it is not of the simple form."""
    module = ast.parse(test)
    checks = [s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == "check"]
    others = [s for s in module.body if s not in checks]
    if len(checks) != 1 or not all(_inert(s) for s in others) or len(checks[0].args.args) != 1:
        return None
    candidate = (checks[0].args.args[0].arg, entry_point)
    asserts: list[ast.expr] = []
    for stmt in checks[0].body:
        if isinstance(stmt, ast.Assert):
            asserts.append(stmt.test)
        elif not (isinstance(stmt, ast.Expr) and _noop(stmt.value)):
            return None
    calls: list[ast.Call] = []
    try:
        for node in asserts:
            _collect(node, candidate, calls)
        arguments = tuple(_arguments(call) for call in calls)
    except Unsupported:
        return None
    return Check(tuple(asserts), tuple(calls), arguments)


def _inert(stmt: ast.stmt) -> bool:
    """A module-level statement that binds nothing a check could read (METADATA, imports, strings)."""
    if isinstance(stmt, ast.Assign):
        return all(isinstance(t, ast.Name) and t.id == "METADATA" for t in stmt.targets)
    return isinstance(stmt, (ast.Import, ast.ImportFrom)) or (isinstance(stmt, ast.Expr) and _noop(stmt.value))


def _noop(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) or (isinstance(node, ast.Name) and node.id == "print")


def _is_candidate(node: ast.expr, candidate: tuple[str, str]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in candidate


def _collect(node: ast.expr, candidate: tuple[str, str], calls: list[ast.Call]) -> None:
    """Check that `node` is of the simple form; append its candidate calls in evaluation order."""
    if _is_candidate(node, candidate):
        assert isinstance(node, ast.Call)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise Unsupported("unpacked arguments")
        for part in [*node.args, *(k.value for k in node.keywords)]:
            inner: list[ast.Call] = []
            _collect(part, candidate, inner)
            if inner:
                raise Unsupported("a candidate call inside another's arguments")
        calls.append(node)
        return
    if isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS) or node.keywords:
            raise Unsupported(ast.unparse(node.func))
        children: list[ast.expr] = list(node.args)
    elif isinstance(node, ast.Constant):
        children = []
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        children = list(node.elts)
    elif isinstance(node, ast.Dict) and None not in node.keys:
        children = [x for pair in zip(node.keys, node.values, strict=True) for x in pair if x is not None]
    elif isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        children = [node.left, node.right]
    elif isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        children = [node.operand]
    elif isinstance(node, ast.BoolOp):
        children = list(node.values)
    elif isinstance(node, ast.Compare) and all(type(op) in COMPARE for op in node.ops):
        children = [node.left, *node.comparators]
    else:
        raise Unsupported(type(node).__name__)
    for child in children:
        if isinstance(child, ast.Starred):
            raise Unsupported("unpacking")
        _collect(child, candidate, calls)


def _arguments(call: ast.Call) -> tuple[tuple[Any, ...], dict[str, Any]]:
    args = tuple(evaluate(a, {}) for a in call.args)
    return args, {str(k.arg): evaluate(k.value, {}) for k in call.keywords}


def evaluate(node: ast.expr, answers: dict[int, Any]) -> Any:
    """The value of a simple-form expression; a candidate call is its entry in `answers` (by
    node id). An answer's exception raises _AnswerRaised; other errors propagate as they are."""
    if isinstance(node, ast.Call) and id(node) in answers:
        value = answers[id(node)]
        if isinstance(value, (Raised, Unplain)):
            raise _AnswerRaised(value)
        return value
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List):
        return [evaluate(e, answers) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(evaluate(e, answers) for e in node.elts)
    if isinstance(node, ast.Set):
        return {evaluate(e, answers) for e in node.elts}
    if isinstance(node, ast.Dict):
        return {
            evaluate(k, answers): evaluate(v, answers)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }
    if isinstance(node, ast.BinOp):
        left, right = evaluate(node.left, answers), evaluate(node.right, answers)
        if isinstance(node.op, ast.Mult) and _too_long(left, right):
            raise ValueError("a repetition past the grader's limit")
        if isinstance(node.op, ast.Pow) and not (type(right) in (int, float) and abs(right) <= _POWER_LIMIT):
            raise ValueError("a power past the grader's limit")
        return BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        return UNARY[type(node.op)](evaluate(node.operand, answers))
    if isinstance(node, ast.BoolOp):
        result = evaluate(node.values[0], answers)
        for part in node.values[1:]:
            if bool(result) == isinstance(node.op, ast.Or):
                return result
            result = evaluate(part, answers)
        return result
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, answers)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = evaluate(right_node, answers)
            if not COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return FUNCTIONS[node.func.id](*(evaluate(a, answers) for a in node.args))
    raise Unsupported(type(node).__name__)


def _too_long(left: Any, right: Any) -> bool:
    sizes = [len(x) for x in (left, right) if isinstance(x, (str, bytes, list, tuple))]
    counts = [x for x in (left, right) if isinstance(x, int)]
    return bool(sizes and counts) and sizes[0] * max(counts[0], 0) > _REPEAT_LIMIT


def verdict_of(check: Check, results: list[Any]) -> str | None:
    """None when every assert holds over the answer's `results` (one per call), else why not."""
    answers = {id(call): value for call, value in zip(check.calls, results, strict=True)}
    for node in check.asserts:
        try:
            if evaluate(node, answers):
                continue
        except _AnswerRaised as raised:
            return said(raised.result)
        except Exception as exc:  # the test's own operations on the answer's values (abs of a str)
            return f"{type(exc).__name__} in `assert {ast.unparse(node)[:100]}`"
        inside = {id(n) for n in ast.walk(node)}
        got = [answers[id(c)] for c in check.calls if id(c) in inside]
        shown = f"; got {got[0]!r:.80}" if got else ""
        return f"failed: assert {ast.unparse(node)[:100]}{shown}"
    return None


# -- record and replay ------------------------------------------------------------------------------

RECORD = """
import copy as _copy, random as _random

def _record():
    calls = []
    def candidate(*args, **kwargs):
        calls.append((ENTRY, _copy.deepcopy(args), _copy.deepcopy(kwargs)))
        return globals()[ENTRY](*args, **kwargs)
    _random.seed(0)
    check(candidate)
    return calls
"""
REPLAY = """
import random as _random

def _replay():
    pending = list(zip(decode_results(CALLS), decode_results(VALUES)))
    def candidate(*args, **kwargs):
        if not pending:
            raise AssertionError("a call the reference run did not make")
        (_, want_args, want_kwargs), value = pending.pop(0)
        if (args, kwargs) != (want_args, want_kwargs):
            raise AssertionError("a call the reference run did not make")
        if isinstance(value, (Raised, Unplain)):
            raise AssertionError(f"the answer's call gave {value}")
        return value
    _random.seed(0)
    check(candidate)
    return True
"""


def record_code(prompt: str, solution: str, test: str, entry_point: str) -> tuple[str, list[Call]]:
    """The trusted program's code and call that report the check's calls of the canonical solution."""
    return f"{prompt}{solution}\n\n{test}\n\nENTRY = {entry_point!r}\n{RECORD}", [("_record", (), {})]


def replay_code(prompt: str, test: str, calls: list[Call], results: list[Any]) -> tuple[str, list[Call]]:
    """The trusted program's code and call that run the check on the answer's `results` for `calls`."""
    given = f"CALLS = {encode_results(calls)!r}\nVALUES = {encode_results(results)!r}\n"
    # values.py first (the decoder, and its `from __future__`, which must lead).
    return f"{VALUES_SOURCE}\n{prompt}\n\n{test}\n\n{given}{REPLAY}", [("_replay", (), {})]
