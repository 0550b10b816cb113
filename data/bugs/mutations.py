"""The `rules` injector's bugs: seeded, deterministic transformations of Python sources.

SWE-smith's procedural bugs (Yang et al. 2025) and mutation testing's classic operators: each
operator lists the places in a module where it applies (`sites`), and a `Mutation` rewrites one
of them. The rewrite touches only the text span of the node it changes (its positions from the
AST), so the bug's diff is a line or two, as a human's bug would be, and the rest of the file,
its comments and formatting, is left as it was. Pure standard library; nothing here runs code.

    operator      what it changes                                   example
    binop         an arithmetic operator for its usual confusion     a + b   -> a - b
    compare       a comparison for its neighbour                     i < n   -> i <= n
    boolop        `and` for `or` and back                            a and b -> a or b
    invert_if     the condition of an if / while / ternary           if ok:  -> if not ok:
    off_by_one    an int in a slice, an index or range()             x[1:]   -> x[2:]
    constant      a number, a bool                                  0.5 -> 1.5, True -> False
    swap_args     the first two positional arguments of a call       f(a, b) -> f(b, a)
    drop_return   a `return value` loses its value                  return x -> return None
    drop_stmt     a statement in a body of several is removed       total += x (line gone)

A test file (tests/ or test_*.py / *_test.py / conftest.py) is never mutated: `is_test_file`.
A mutation that would not parse, or would leave the source unchanged, is not listed.
"""

from __future__ import annotations

import ast
import itertools
import random
import re
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

OPERATORS = (
    "binop",
    "compare",
    "boolop",
    "invert_if",
    "off_by_one",
    "constant",
    "swap_args",
    "drop_return",
    "drop_stmt",
)

# Operator -> its confusion, as source text (the rewrite changes the operator's token alone).
_BINOP_SWAP = {
    "+": "-",
    "-": "+",
    "*": "//",
    "//": "*",
    "/": "*",
    "%": "//",
    "**": "*",
    "&": "|",
    "|": "&",
    "<<": ">>",
    ">>": "<<",
}
_COMPARE_SWAP = {
    "<": "<=",
    "<=": "<",
    ">": ">=",
    ">=": ">",
    "==": "!=",
    "!=": "==",
    "in": "not in",
    "not in": "in",
    "is": "is not",
    "is not": "is",
}


@dataclass(frozen=True)
class Mutation:
    """One bug: replace `before` (source[start:end], 0-based character offsets) by `after`."""

    path: str
    operator: str
    line: int  # 1-based, where the span starts
    start: int
    end: int
    before: str
    after: str

    def apply(self, source: str) -> str:
        if source[self.start : self.end] != self.before:
            raise ValueError(f"{self.path}:{self.line}: the source is not the one this mutation was made for")
        return source[: self.start] + self.after + source[self.end :]


def is_test_file(path: str) -> bool:
    p = PurePosixPath(path)
    name = p.name
    in_tests = any(part in ("test", "tests", "testing") for part in p.parts[:-1])
    return in_tests or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def _offsets(source: str) -> list[int]:
    """The character offset of each line's start (index 0 = line 1)."""
    starts, total = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(total)
        total += len(line)
    starts.append(total)
    return starts


class _Source:
    """Character offsets of a parsed module's nodes (ast counts UTF-8 bytes within a line)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.starts = _offsets(source)

    def at(self, line: int, col: int) -> int:
        text = self.source[self.starts[line - 1] : self.starts[line]]
        return self.starts[line - 1] + len(text.encode("utf-8")[:col].decode("utf-8", "replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        n: Any = node
        return self.at(n.lineno, n.col_offset), self.at(n.end_lineno, n.end_col_offset)

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def lines(self, node: ast.AST) -> tuple[int, int]:
        """The whole lines a statement occupies, indentation and newline included."""
        n: Any = node
        return self.starts[n.lineno - 1], self.starts[n.end_lineno]


Rewrite = tuple[str, int, int, str]  # operator, start, end, replacement


def _swap_token(src: _Source, left: ast.AST, right: ast.AST, swaps: dict[str, str], operator: str) -> Rewrite | None:
    """The operator between `left` and `right` swapped for its confusion; None when the text
    between them is more than the operator (a comment, a line continuation)."""
    start, end = src.span(left)[1], src.span(right)[0]
    gap = src.source[start:end]
    token = " ".join(gap.replace("(", " ").replace(")", " ").split())
    if token not in swaps:
        return None
    # The token's own text in the gap ("not in" / "is not" may be spaced or split by parens).
    found = re.search(r"[\s()]+".join(map(re.escape, token.split())), gap)
    assert found is not None  # the token was read from this gap
    return operator, start + found.start(), start + found.end(), swaps[token]


def _rewrites(src: _Source, tree: ast.AST) -> Iterator[Rewrite]:
    """Every candidate rewrite, in no particular order (sites() sorts them)."""
    for node in ast.walk(tree):
        found: Rewrite | None = None
        if isinstance(node, ast.BinOp):
            found = _swap_token(src, node.left, node.right, _BINOP_SWAP, "binop")
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            found = _swap_token(src, node.left, node.comparators[0], _COMPARE_SWAP, "compare")
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            found = _swap_token(src, node.values[0], node.values[1], {"and": "or", "or": "and"}, "boolop")
        if found:
            yield found
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            start, end = src.span(node.test)
            if isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not):
                yield "invert_if", start, end, src.text(node.test.operand)
            elif isinstance(node.test, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
                yield "invert_if", start, end, f"not {src.text(node.test)}"
            else:
                yield "invert_if", start, end, f"not ({src.text(node.test)})"
        for part, value in _int_positions(node):
            start, end = src.span(part)
            yield "off_by_one", start, end, repr(value + 1)
        if isinstance(node, ast.Constant) and isinstance(node.value, (bool, float)):
            start, end = src.span(node)
            flipped = not node.value if isinstance(node.value, bool) else node.value + 1.0
            yield "constant", start, end, repr(flipped)
        if (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and not any(isinstance(a, ast.Starred) for a in node.args[:2])
        ):
            first, second = node.args[0], node.args[1]
            (start, mid), (mid2, end) = src.span(first), src.span(second)
            yield "swap_args", start, end, src.text(second) + src.source[mid:mid2] + src.text(first)
        if isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
            start, end = src.span(node)
            yield "drop_return", start, end, "return None"
        bodies = (ast.FunctionDef, ast.AsyncFunctionDef, ast.For, ast.While, ast.If, ast.With)
        if isinstance(node, bodies) and len(node.body) >= 2:
            for stmt in node.body:
                if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr)) and not _is_docstring(stmt, node):
                    start, end = src.lines(stmt)
                    yield "drop_stmt", start, end, ""


def _int_positions(node: ast.AST) -> list[tuple[ast.Constant, int]]:
    """The int literals where an off-by-one bites: slice bounds, an index, range()'s arguments."""
    if isinstance(node, ast.Slice):
        parts = [node.lower, node.upper]
    elif isinstance(node, ast.Subscript):
        parts = [node.slice]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
        parts = list(node.args)
    else:
        return []
    return [(p, p.value) for p in parts if isinstance(p, ast.Constant) and type(p.value) is int]


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_docstring(stmt: ast.stmt, parent: ast.AST) -> bool:
    body = getattr(parent, "body", [])
    return bool(body) and stmt is body[0] and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)


def sites(
    path: str, source: str, operators: tuple[str, ...] = OPERATORS, lines: AbstractSet[int] | None = None
) -> list[Mutation]:
    """Every mutation of `operators` that applies to `source`, in source order; [] for a test
    file or a source that does not parse. `lines`: only those starting on these lines (each
    listed one is parsed once mutated, so a module's 1,000 sites cost 1,000 parses: the lines
    the tests run are a fraction of them)."""
    if is_test_file(path):
        return []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return listed(path, source, _rewrites(_Source(source), tree), operators, lines, lambda m: _parses(m.apply(source)))


def listed(
    path: str,
    source: str,
    rewrites: Iterable[Rewrite],
    operators: tuple[str, ...],
    lines: AbstractSet[int] | None,
    parses: Callable[[Mutation], bool],
) -> list[Mutation]:
    """The `rewrites` of `operators` on `lines` (None: all) that change the source and whose
    result parses (`parses`, given the mutation), one per span and operator, in source order:
    the contract every language's `sites` keeps."""
    found: dict[tuple[int, int, str], Mutation] = {}
    for operator, start, end, after in rewrites:
        before = source[start:end]
        if operator not in operators or after == before:
            continue
        line = source.count("\n", 0, start) + 1
        if lines is not None and line not in lines:
            continue
        mutation = Mutation(path, operator, line, start, end, before, after)
        if parses(mutation):
            found.setdefault((start, end, operator), mutation)
    return sorted(found.values(), key=lambda m: (m.start, m.end, m.operator))


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def apply_all(source: str, mutations: list[Mutation]) -> str:
    """Several mutations of one file at once (their spans must not overlap), last first so
    that the earlier offsets stay right."""
    ordered = sorted(mutations, key=lambda m: m.start, reverse=True)
    for later, earlier in itertools.pairwise(ordered):
        if earlier.end > later.start:
            raise ValueError(f"{later.path}: mutations at lines {earlier.line} and {later.line} overlap")
    for m in ordered:
        source = m.apply(source)
    return source


def choose(candidates: list[Mutation], count: int, seed: int) -> list[Mutation]:
    """`count` mutations drawn without replacement with `seed` (spans not overlapping within a
    file): the same seed and candidates give the same bug."""
    rng = random.Random(seed)
    pool = list(candidates)
    rng.shuffle(pool)
    chosen: list[Mutation] = []
    for m in pool:
        if all(m.path != c.path or m.end <= c.start or c.end <= m.start for c in chosen):
            chosen.append(m)
        if len(chosen) == count:
            break
    return sorted(chosen, key=lambda m: (m.path, m.start))
