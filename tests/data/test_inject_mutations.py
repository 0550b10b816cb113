"""data/bugs/mutations.py: the rules injector's bugs, one operator at a time, on real demo
sources and on small ones written here."""

from __future__ import annotations

import ast
import itertools
from collections import Counter
from pathlib import Path

import pytest

from data.bugs.mutations import OPERATORS, apply_all, choose, is_test_file, sites

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo" / "src"

SOURCE = '''\
def window(items, size):
    """The items in slices of `size` (a comment: a < b is not code)."""
    out = []
    for i in range(0, len(items), size):
        if i + size <= len(items) and size > 0:
            out.append(items[i:i + size])
    total = 0.5
    verbose = True
    return out
'''


def _one(operator: str, before: str) -> str:
    """The source with the first `operator` mutation whose replaced text is `before`."""
    m = next(m for m in sites("pkg/window.py", SOURCE, (operator,)) if m.before == before)
    return m.apply(SOURCE)


@pytest.mark.parametrize(
    ("operator", "before", "line_after"),
    [
        ("binop", "+", "        if i - size <= len(items) and size > 0:"),
        ("compare", "<=", "        if i + size < len(items) and size > 0:"),
        ("boolop", "and", "        if i + size <= len(items) or size > 0:"),
        ("invert_if", "i + size <= len(items) and size > 0", "        if not (i + size <= len(items) and size > 0):"),
        ("off_by_one", "0", "    for i in range(1, len(items), size):"),
        ("constant", "0.5", "    total = 1.5"),
        ("constant", "True", "    verbose = False"),
        ("swap_args", "0, len(items)", "    for i in range(len(items), 0, size):"),
        ("drop_return", "return out", "    return None"),
    ],
)
def test_each_operator_changes_only_its_token_and_keeps_the_rest(operator, before, line_after):
    mutated = _one(operator, before)
    changed = [(a, b) for a, b in zip(SOURCE.splitlines(), mutated.splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1] == line_after, changed
    ast.parse(mutated)


def test_a_dropped_statement_takes_its_whole_line():
    drops = [m for m in sites("pkg/window.py", SOURCE, ("drop_stmt",))]
    assert {m.before for m in drops} == {"    out = []\n", "    total = 0.5\n", "    verbose = True\n"}
    # The docstring is not a statement to drop, and a body of one statement keeps it.
    assert all("append" not in m.before and '"""' not in m.before for m in drops)
    assert drops[0].apply(SOURCE).count("\n") == SOURCE.count("\n") - 1


def test_sites_are_sorted_deterministic_and_never_in_tests_or_comments():
    found = sites("pkg/window.py", SOURCE)
    assert found == sites("pkg/window.py", SOURCE)
    assert [m.start for m in found] == sorted(m.start for m in found)
    assert all(m.line != 2 for m in found)  # nothing in the docstring's "a < b"
    assert set(Counter(m.operator for m in found)) == set(OPERATORS)
    for path in ("tests/test_window.py", "pkg/tests/helpers.py", "test_x.py", "x_test.py", "conftest.py"):
        assert is_test_file(path) and sites(path, SOURCE) == []
    assert sites("pkg/broken.py", "def f(:\n") == []


def test_not_in_and_is_not_swap_as_one_token():
    src = "ok = a not in b or c is not None\n"
    swaps = {m.before: m.after for m in sites("m.py", src, ("compare", "boolop"))}
    assert swaps == {"not in": "in", "is not": "is", "or": "and"}


def test_choose_is_seeded_and_combined_bugs_apply_together():
    found = sites("pkg/window.py", SOURCE)
    bug = choose(found, 3, seed=7)
    assert bug == choose(found, 3, seed=7) and bug != choose(found, 3, seed=8)
    assert len(bug) == 3 and all(a.end <= b.start for a, b in itertools.pairwise(bug))
    mutated = apply_all(SOURCE, bug)
    ast.parse(mutated)
    assert mutated != SOURCE and all(m.after in mutated for m in bug if m.after)
    invert, compare = (next(m for m in found if m.line == 5 and m.operator == op) for op in ("invert_if", "compare"))
    with pytest.raises(ValueError, match="overlap"):  # the inverted condition holds the comparison
        apply_all(SOURCE, [invert, compare])
    with pytest.raises(ValueError, match="not the one this mutation was made for"):
        bug[0].apply(SOURCE.replace("def window", "def other_name"))


def test_every_demo_source_has_bugs_to_inject():
    sources = sorted(p for p in DEMO.glob("*/after/**/*.py"))
    if not sources:
        pytest.skip(f"no demo sources under {DEMO}")
    for path in sources:
        rel = "/".join(path.relative_to(DEMO).parts[2:])  # <instance>/after/<repository path>
        found = sites(rel, path.read_text())
        assert found, rel
        for m in found:
            ast.parse(m.apply(path.read_text()))
