"""cydifflib gives the standard library's difflib results bit for bit (ratios and unified diffs)."""

from __future__ import annotations

import difflib
import random

import cydifflib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reward.similarity import diff_body, diff_ratio

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Diff-like text: few distinct characters, so that matches are frequent and ties common.
code_text = st.text(alphabet="ab \n+-@()_:", max_size=400)
# >= 200 elements dominated by a few characters: the autojunk heuristic would drop them.
popular_text = st.text(alphabet="aab \n", min_size=200, max_size=900)
unicode_text = st.text(max_size=300)  # any code point, surrogates and combining marks included


def stdlib_ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


@FAST
@given(code_text, code_text)
def test_ratio_equals_stdlib_on_diff_like_text(a: str, b: str) -> None:
    assert diff_ratio(a, b).hex() == stdlib_ratio(a, b).hex()


@FAST
@given(unicode_text, unicode_text)
def test_ratio_equals_stdlib_on_unicode_and_empty_strings(a: str, b: str) -> None:
    assert diff_ratio(a, b).hex() == stdlib_ratio(a, b).hex()


@SLOW
@given(popular_text, popular_text)
def test_ratio_equals_stdlib_where_autojunk_would_matter(a: str, b: str) -> None:
    assert diff_ratio(a, b).hex() == stdlib_ratio(a, b).hex()
    # The default (autojunk=True) must agree too: it is what unified_diff uses on lines.
    assert cydifflib.SequenceMatcher(None, a, b).ratio() == difflib.SequenceMatcher(None, a, b).ratio()


def test_the_autojunk_cases_are_real() -> None:
    """The popular-character strategy does produce inputs on which autojunk changes the ratio."""
    a, b = "a" * 150 + "b" * 100, "b" * 100 + "a" * 150
    with_junk = difflib.SequenceMatcher(None, a, b).ratio()
    assert with_junk != stdlib_ratio(a, b)
    assert cydifflib.SequenceMatcher(None, a, b).ratio() == with_junk
    assert diff_ratio(a, b) == stdlib_ratio(a, b) == 0.6


def test_ratio_equals_stdlib_on_long_lines() -> None:
    rng = random.Random(0)
    for length in (2_000, 6_000):
        base = "".join(rng.choice("abcdefgh ()=") for _ in range(length))
        edited = "".join(c if rng.random() > 0.05 else rng.choice("xyz\n") for c in base)
        assert diff_ratio(edited, base).hex() == stdlib_ratio(edited, base).hex()
        assert diff_ratio(base + "\n" + edited, edited).hex() == stdlib_ratio(base + "\n" + edited, edited).hex()


def test_empty_strings() -> None:
    assert diff_ratio("", "") == stdlib_ratio("", "") == 1.0
    assert diff_ratio("", "x") == stdlib_ratio("", "x") == 0.0


lines_text = st.lists(
    st.sampled_from(["", "a", "b", "x = 1", "  pass", "\r", "é", "a\x0cb", "c\u2028d"]), max_size=300
).map("\n".join)


@FAST
@given(lines_text, lines_text)
def test_unified_diff_equals_stdlib(old: str, new: str) -> None:
    expected = list(difflib.unified_diff(old.splitlines(), new.splitlines(), n=3, lineterm=""))
    assert diff_body(old, new) == "\n".join(expected[2:])
