"""The `rules` injector's bugs in JavaScript and TypeScript sources: mutations.py's operators,
read off tree-sitter's syntax trees.

The same contract as mutations.py (its `Mutation`, `apply_all` and `choose` take these as they
are): each operator lists the places in a file where it applies (`sites`), a rewrite touches
only the text span of the node it changes (the tree's byte positions, turned into character
offsets), and a mutation whose result tree-sitter parses with an error (an ERROR or MISSING
node), or that leaves the source unchanged, is not listed. The grammar is the file's: .js .jsx
.mjs .cjs JavaScript's (JSX included), .ts .mts .cts TypeScript's, .tsx TSX's. Nothing here
runs code.

    operator      what it changes                                   example
    binop         an arithmetic operator for its usual confusion     a + b    -> a - b
    compare       a comparison for its neighbour                     i < n    -> i <= n
                                                                     a === b  -> a !== b
    boolop        `&&` for `||` and back                             a && b   -> a || b
    invert_if     the condition of an if / while / do / ternary      if (ok)  -> if (!ok)
    off_by_one    an integer in an index, a slice-like call's        a[1]     -> a[2]
                  arguments (slice, substring, splice, at...) or a   i < 10   -> i < 11
                  for loop's initializer or condition
    constant      a non-integer number, a boolean                   0.5 -> 1.5, true -> false
    swap_args     the first two arguments of a call or `new`         f(a, b)  -> f(b, a)
    drop_return   a `return value` loses its value                  return x; -> return;
    drop_stmt     an expression statement in a block of several     total += x; (line gone)

`+` with a string literal beside it is left alone (a - "px" is no bug a person writes), and so
are literals inside TypeScript types (`type Half = 0.5` runs nothing). A declaration file
(.d.ts) has no code to break, and a test file (data/git/diffs.is_test_path: test/, tests/,
__tests__/, spec/ folders, *.test.*, *.spec.*; or a __mocks__/ folder) is never mutated.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import PurePosixPath

import tree_sitter
import tree_sitter_javascript
import tree_sitter_typescript

from data.bugs.mutations import OPERATORS, Mutation, Rewrite, listed
from data.git.diffs import is_test_path

# File extension -> the tree-sitter grammar that reads it.
GRAMMARS = {
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
}
_LANGUAGES = {
    "javascript": tree_sitter_javascript.language,
    "typescript": tree_sitter_typescript.language_typescript,
    "tsx": tree_sitter_typescript.language_tsx,
}

_BINOP_SWAP = {
    "+": "-",
    "-": "+",
    "*": "/",
    "/": "*",
    "%": "/",
    "**": "*",
    "&": "|",
    "|": "&",
    "<<": ">>",
    ">>": "<<",
    ">>>": "<<",
}
_COMPARE_SWAP = {
    "<": "<=",
    "<=": "<",
    ">": ">=",
    ">=": ">",
    "===": "!==",
    "!==": "===",
    "==": "!=",
    "!=": "==",
}
_BOOLOP_SWAP = {"&&": "||", "||": "&&"}
# Methods whose integer arguments are positions: an off-by-one there is the slice bug of Python.
_POSITIONAL = frozenset({"slice", "substring", "substr", "splice", "at", "charAt", "charCodeAt", "codePointAt"})
# A condition that `!` negates without parentheses.
_PRIMARY = frozenset(
    {"identifier", "member_expression", "call_expression", "subscript_expression", "parenthesized_expression", "this"}
)
_INTEGER = re.compile(r"(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?")
_STRINGS = frozenset({"string", "template_string"})
_MOCKS = "__mocks__"  # jest's module mocks: test code, whatever folder holds it


def grammar_of(path: str) -> str | None:
    """The grammar of a JavaScript/TypeScript source, or None (another language, a .d.ts)."""
    if path.endswith((".d.ts", ".d.mts", ".d.cts")):
        return None
    return GRAMMARS.get(PurePosixPath(path).suffix)


def is_test_file(path: str) -> bool:
    return is_test_path(path) or _MOCKS in PurePosixPath(path).parts[:-1]


@functools.cache
def _parser(grammar: str) -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(_LANGUAGES[grammar]()))


def _tree(grammar: str, source: str) -> tree_sitter.Tree:
    return _parser(grammar).parse(source.encode("utf-8"))


class _Text:
    """Character offsets of a tree's nodes (tree-sitter counts UTF-8 bytes)."""

    def __init__(self, source: str) -> None:
        self.source = source
        data = source.encode("utf-8")
        self.chars: list[int] | None = None
        if len(data) != len(source):  # non-ASCII: map each byte offset to its character
            self.chars = [0] * (len(data) + 1)
            at = 0
            for i, ch in enumerate(source):
                width = len(ch.encode("utf-8"))
                for k in range(width):
                    self.chars[at + k] = i
                at += width
            self.chars[at] = len(source)

    def at(self, byte: int) -> int:
        return byte if self.chars is None else self.chars[byte]

    def span(self, node: tree_sitter.Node) -> tuple[int, int]:
        return self.at(node.start_byte), self.at(node.end_byte)

    def text(self, node: tree_sitter.Node) -> str:
        start, end = self.span(node)
        return self.source[start:end]


def _named(node: tree_sitter.Node | None) -> list[tree_sitter.Node]:
    """A node's named children, comments left out."""
    return [] if node is None else [c for c in node.named_children if c.type != "comment"]


def _walk(root: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def _swap(text: _Text, node: tree_sitter.Node) -> Rewrite | None:
    """A binary expression's operator token for its confusion, and the operator's name."""
    op = node.child_by_field_name("operator")
    if op is None:
        return None
    token = op.type
    for name, swaps in (("binop", _BINOP_SWAP), ("compare", _COMPARE_SWAP), ("boolop", _BOOLOP_SWAP)):
        if token in swaps:
            if token == "+" and any(
                (side := node.child_by_field_name(f)) is not None and side.type in _STRINGS for f in ("left", "right")
            ):
                return None
            return (name, *text.span(op), swaps[token])
    return None


def _negated(text: _Text, cond: tree_sitter.Node, enclosed: bool) -> str:
    """`!cond`, or `cond` for a `!cond`; `enclosed`: the statement's own parentheses hold it
    (if / while / do), so `!(a % 2)` becomes `a % 2`, not `(a % 2)`."""
    op, argument = cond.child_by_field_name("operator"), cond.child_by_field_name("argument")
    if cond.type == "unary_expression" and op is not None and op.type == "!" and argument is not None:
        inner = _named(argument)
        if enclosed and argument.type == "parenthesized_expression" and len(inner) == 1:
            return text.text(inner[0])
        return text.text(argument)
    return f"!{text.text(cond)}" if cond.type in _PRIMARY else f"!({text.text(cond)})"


def _condition(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The condition of an if / while / do (inside its parentheses) or a ternary."""
    cond = node.child_by_field_name("condition")
    if cond is not None and cond.type == "parenthesized_expression":
        inner = _named(cond)
        return inner[0] if len(inner) == 1 else None
    return cond


def _integers(text: _Text, node: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The integer literals where an off-by-one bites: an index, a slice-like call's
    arguments, a for loop's initializer and condition."""
    parts: list[tree_sitter.Node] = []
    if node.type == "subscript_expression":
        parts = _named(node)[1:]  # the object, then the index
    elif node.type == "call_expression":
        callee = node.child_by_field_name("function")
        prop = callee.child_by_field_name("property") if callee is not None else None
        if prop is not None and text.text(prop) in _POSITIONAL:
            parts = _named(node.child_by_field_name("arguments"))
    elif node.type == "for_statement":
        bounds = [node.child_by_field_name(field) for field in ("initializer", "condition")]
        parts = [n for bound in bounds if bound is not None for n in _walk(bound)]
    return [p for p in parts if p.type == "number" and _INTEGER.fullmatch(text.text(p))]


def _in_type(node: tree_sitter.Node) -> bool:
    return node.parent is not None and node.parent.type == "literal_type"


def _constant(text: _Text, node: tree_sitter.Node) -> str | None:
    """A non-integer number plus one, a boolean flipped; None for any other node."""
    if node.type in ("true", "false") and not _in_type(node):
        return "false" if node.type == "true" else "true"
    if node.type != "number" or _in_type(node):
        return None
    literal = text.text(node)
    if _INTEGER.fullmatch(literal) or not _FLOAT.fullmatch(literal):
        return None
    value = float(literal) + 1.0
    return repr(value) if value != float("inf") else None


def _swapped_args(text: _Text, node: tree_sitter.Node) -> Rewrite | None:
    args = _named(node.child_by_field_name("arguments"))
    if len(args) < 2 or any(a.type == "spread_element" for a in args[:2]):
        return None
    (start, mid), (mid2, end) = text.span(args[0]), text.span(args[1])
    return "swap_args", start, end, text.text(args[1]) + text.source[mid:mid2] + text.text(args[0])


def _rewrites(text: _Text, root: tree_sitter.Node) -> Iterator[Rewrite]:
    """Every candidate rewrite, in no particular order (mutations.listed sorts them)."""
    for node in _walk(root):
        kind = node.type
        found: Rewrite | None = None
        if kind == "binary_expression":
            found = _swap(text, node)
        elif kind in ("call_expression", "new_expression"):
            found = _swapped_args(text, node)
        if found:
            yield found
        if kind in ("if_statement", "while_statement", "do_statement", "ternary_expression"):
            cond = _condition(node)
            if cond is not None:
                yield ("invert_if", *text.span(cond), _negated(text, cond, kind != "ternary_expression"))
        for number in _integers(text, node):
            yield ("off_by_one", *text.span(number), str(int(text.text(number)) + 1))
        if (flipped := _constant(text, node)) is not None:
            yield ("constant", *text.span(node), flipped)
        if kind == "return_statement":
            value = _named(node)
            if value and text.text(value[0]) != "undefined":
                yield "drop_return", text.at(node.start_byte), text.at(value[0].end_byte), "return"
        if kind == "statement_block":
            body = _named(node)
            for stmt in body if len(body) >= 2 else []:
                if stmt.type == "expression_statement" and not _is_directive(stmt):
                    yield ("drop_stmt", *_statement_lines(text, stmt), "")


def _is_directive(stmt: tree_sitter.Node) -> bool:
    """'use strict' and its kind: a string expression statement is a directive, not code."""
    inner = _named(stmt)
    return len(inner) == 1 and inner[0].type == "string"


def _statement_lines(text: _Text, stmt: tree_sitter.Node) -> tuple[int, int]:
    """The whole lines a statement occupies (indentation and newline included) when it is
    alone on them; else the statement and the blanks after it."""
    start, end = text.span(stmt)
    source = text.source
    line_start = source.rfind("\n", 0, start) + 1
    line_end = source.find("\n", end)
    line_end = len(source) if line_end < 0 else line_end + 1
    before, after = source[line_start:start], source[end:line_end]
    if not before.strip() and not after.strip():
        return line_start, line_end
    if not after.strip():  # last on its line: the blanks before it go with it
        return line_start + len(before.rstrip(" \t")), end
    return start, end + len(after) - len(after.lstrip(" \t"))


class _Reparse:
    """Whether a mutation of the parsed source still parses cleanly: tree-sitter re-reads only
    the edited span's neighbourhood of the old tree (a 5,000-line file: 0.3 ms, not 18)."""

    def __init__(self, grammar: str, source: str, tree: tree_sitter.Tree) -> None:
        self.parser, self.source, self.tree = _parser(grammar), source, tree
        self.data = source.encode("utf-8")

    def __call__(self, m: Mutation) -> bool:
        new = (self.source[: m.start] + m.after + self.source[m.end :]).encode("utf-8")
        start = len(self.source[: m.start].encode("utf-8"))
        old_end, new_end = start + len(m.before.encode("utf-8")), start + len(m.after.encode("utf-8"))
        edited = self.tree.copy()
        edited.edit(start, old_end, new_end, _point(self.data, start), _point(self.data, old_end), _point(new, new_end))
        return not self.parser.parse(new, edited).root_node.has_error


def _point(data: bytes, offset: int) -> tuple[int, int]:
    """tree-sitter's (row, byte column) of a byte offset."""
    return data.count(b"\n", 0, offset), offset - (data.rfind(b"\n", 0, offset) + 1)


def sites(
    path: str, source: str, operators: tuple[str, ...] = OPERATORS, lines: AbstractSet[int] | None = None
) -> list[Mutation]:
    """Every mutation of `operators` that applies to `source`, in source order; [] for a test
    file, a file of no JavaScript/TypeScript grammar, or a source that does not parse cleanly.
    `lines`: only those starting on these lines (mutations.sites' contract)."""
    grammar = grammar_of(path)
    if grammar is None or is_test_file(path):
        return []
    tree = _tree(grammar, source)
    if tree.root_node.has_error:
        return []
    reparse = _Reparse(grammar, source, tree)
    return listed(path, source, _rewrites(_Text(source), tree.root_node), operators, lines, reparse)
