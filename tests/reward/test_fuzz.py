"""Generated outputs: the fast parser equals the regex, and the scorer equals the literal rules.

Thousands of outputs are built from the format's own pieces (fences, headers, dividers, tags,
CRLF, paths with `..` or a leading `/`, binary-looking bytes) so that most of them come close
to valid, which is where parsers go wrong; plain random text covers the rest.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reward import score_output
from reward.apply import apply_edits
from reward.parse import EDIT_PATTERN, Rejected, find_edit_blocks, find_edits, parse_output
from reward.similarity import compare_diffs, file_diffs
from reward.spec import reference_diffs, reference_file_ratios, reference_new_content

PIECES = [
    "```",
    "```python\n",
    "\n```",
    "\n",
    "\r\n",
    "### ",
    "### a.py\n",
    "### ../etc/passwd\n",
    "### /abs.py\n",
    "<<<<<<< SEARCH\n",
    "\n=======\n",
    "=======",
    "\n>>>>>>> REPLACE\n```",
    ">>>>>>> REPLACE",
    "x = 1",
    "y",
    " ",
    "`",
    "#",
    "\x00\xff",
    "é",
    "<think>",
    "</think>",
    "<solution>",
    "</solution>",
    "```\n### a.py\n<<<<<<< SEARCH\n",
    "```python\n### a.py\n<<<<<<< SEARCH\nx = 1\n=======\ny\n>>>>>>> REPLACE\n```",
]
soup = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)

CONTEXT = {
    "a.py": "x = 1\ny = 2\nx = 1\n",
    "crlf.py": "x = 1\r\ny\r\n",
    "../etc/passwd": "root\n",
}
ORACLE = {"a.py": "x = 1\ny = 3\nx = 1\n", "b.py": "y\n"}
lines = st.sampled_from(["x = 1", "y = 2", "y = 3", "y", "", "x = 1\r", "é", "\x00"])
texts = st.lists(lines, max_size=3).map("\n".join)
# Searches: mostly text that occurs in the context (at a line start or not), some that does not.
searches = st.one_of(st.sampled_from(["x = 1", "y = 2", "x = 1\ny = 2", "", "y", "x = 1\r", "root", "= 1"]), texts)
# Mostly paths of the context and the oracle, so that many outputs apply and score in (0, 1].
paths = st.sampled_from(["a.py"] * 4 + ["b.py", "crlf.py", "./a.py", "../etc/passwd", "/abs.py", "a.py "])


@st.composite
def outputs(draw: st.DrawFn) -> str:
    blocks = draw(st.lists(st.tuples(paths, searches, texts), min_size=1, max_size=4))
    body = "\n".join(
        f"```python\n### {p}\n<<<<<<< SEARCH\n{s}\n=======\n{r}\n>>>>>>> REPLACE\n```" for p, s, r in blocks
    )
    thought = draw(st.sampled_from(["why"] * 5 + ["", " ", "a\nb"]))
    noise = draw(soup)
    return draw(
        st.sampled_from(
            [
                f"<think>{thought}</think><solution>{body}</solution>",
                f"<think>{thought}</think>\n<solution>\n{body}\n</solution>",
                f"<think>{thought}</think>{noise}<solution>{body}{noise}</solution>",
                f"<solution>{body}</solution><think>{thought}</think>",
                f"<think>{thought}</think><solution>{noise}{body}",
            ]
        )
    )


FUZZ = settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(soup)
def test_find_edits_equals_regex_findall(answer: str) -> None:
    assert find_edits(answer) == EDIT_PATTERN.findall(answer)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="`#<>=\n SEARCHREPLAC.ap", max_size=300))
def test_find_edits_equals_regex_findall_on_character_soup(answer: str) -> None:
    assert find_edits(answer) == EDIT_PATTERN.findall(answer)


def _regex_blocks(answer: str) -> list[tuple[int, int, str, str, str]]:
    return [(*m.span(), *m.groups()) for m in EDIT_PATTERN.finditer(answer)]


@FUZZ
@given(soup)
def test_edit_blocks_span_the_regex_matches(answer: str) -> None:
    # The agent's turn parser skips these spans: they must be the regex's, not near them.
    assert [tuple(b) for b in find_edit_blocks(answer)] == _regex_blocks(answer)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="`#<>=\n SEARCHREPLAC.ap", max_size=300))
def test_edit_blocks_span_the_regex_matches_on_character_soup(answer: str) -> None:
    assert [tuple(b) for b in find_edit_blocks(answer)] == _regex_blocks(answer)


def _fast_new_content(output: str) -> dict[str, str] | None:
    try:
        return apply_edits(CONTEXT, parse_output(output)).new_content
    except Rejected:
        return None


@FUZZ
@given(outputs())
def test_score_output_equals_the_literal_rules(output: str) -> None:
    result = score_output(CONTEXT, ORACLE, output)
    expected_content = reference_new_content(CONTEXT, output)
    assert _fast_new_content(output) == expected_content
    if expected_content is None:
        assert result.reward == -1.0 and result.error
        return
    expected = reference_file_ratios(reference_diffs(CONTEXT, expected_content), reference_diffs(CONTEXT, ORACLE))
    got = compare_diffs(file_diffs(CONTEXT, expected_content), file_diffs(CONTEXT, ORACLE))
    assert got.ratios == expected  # identical per-file ratios, bit for bit
    assert abs(result.reward - sum(expected.values()) / max(len(expected), 1)) <= 1e-12 or not expected
    assert 0.0 <= result.reward <= 1.0 and result.error is None


@FUZZ
@given(st.one_of(soup, st.text(max_size=500), st.binary(max_size=300).map(lambda b: b.decode("latin-1"))))
def test_score_output_never_raises_on_arbitrary_text(output: str) -> None:
    result = score_output(CONTEXT, ORACLE, output, max_pair_seconds=1.0)
    assert result.reward == -1.0 or 0.0 <= result.reward <= 1.0
    assert (result.reward == -1.0) == (result.error is not None and not result.timed_out)
