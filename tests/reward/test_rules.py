"""Hand-made cases pinning each rule of the reward (docs/reward.md, rules 1-5)."""

from __future__ import annotations

import difflib

import pytest

from reward import RewardResult, score_output
from reward.apply import apply_edits
from reward.parse import EDIT_PATTERN, find_edits, quote, split_output
from reward.similarity import compare_diffs
from reward.spec import reference_score_output

CONTEXT = {"a.py": "def f():\n    return 1\n\n\ndef g():\n    return 2\n"}
ORACLE = {"a.py": "def f():\n    return 10\n\n\ndef g():\n    return 2\n"}


def block(path: str, search: str, replace: str, fence: str = "```python") -> str:
    return f"{fence}\n### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```"


def answer(*blocks: str, thought: str = "Fix f.") -> str:
    return f"<think>\n{thought}\n</think>\n<solution>\n" + "\n".join(blocks) + "\n</solution>"


GOOD = answer(block("a.py", "    return 1", "    return 10"))


def score(output: str, context=CONTEXT, oracle=ORACLE) -> RewardResult:
    result = score_output(context, oracle, output)
    assert result.reward == reference_score_output(context, oracle, output)
    return result


# Rule 1: format ---------------------------------------------------------------------------


def test_the_oracle_edit_scores_one() -> None:
    assert score(GOOD) == RewardResult(1.0)


@pytest.mark.parametrize("tag", ["<think>", "</think>", "<solution>", "</solution>"])
def test_each_tag_must_occur_exactly_once(tag: str) -> None:
    missing = score(GOOD.replace(tag, ""))
    assert (missing.reward, missing.format_ok, missing.error) == (-1.0, False, f"format: {tag} occurs 0 times")
    doubled = score(GOOD + tag)
    assert (doubled.reward, doubled.error) == (-1.0, f"format: {tag} occurs 2 times")


def test_empty_or_blank_thought_is_malformed() -> None:
    result = score(answer(block("a.py", "    return 1", "    return 10"), thought=" \n\t "))
    assert (result.reward, result.format_ok, result.error) == (-1.0, False, "format: empty thought")


def test_tag_order_is_not_checked() -> None:
    # The solution before the thought, and </think> before <think>: split semantics, not order.
    swapped = "<solution>" + block("a.py", "    return 1", "    return 10") + "</solution><think>why</think>"
    assert score(swapped).reward == 1.0
    backwards = "</think>x<think>thought<solution>" + block("a.py", "    return 1", "    return 10") + "</solution>"
    # The thought is everything after <think> (no </think> follows it): non-empty, so accepted.
    assert split_output(backwards)[0].startswith("thought<solution>")
    assert score(backwards).reward == 1.0


def test_thought_and_answer_are_cut_and_stripped() -> None:
    thought, solution = split_output("pre <think>  a b \n</think> mid <solution>\n x \n</solution> post")
    assert (thought, solution) == ("a b", "x")


# Rule 2: edits ----------------------------------------------------------------------------


def test_no_edit_is_malformed() -> None:
    result = score(answer("I would change f."))
    assert (result.reward, result.format_ok) == (-1.0, False)
    assert result.error == "format: no SEARCH/REPLACE edit in the solution"


def test_path_is_verbatim() -> None:
    # "a.py " is another file: a new empty file, in which "    return 1" is not found.
    result = score(answer(block("a.py ", "    return 1", "    return 10")))
    assert (result.reward, result.format_ok, result.error) == (-1.0, True, "search block 1 not found in 'a.py '")


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("./a.py", "path component '.'"),
        ("../etc/passwd", "path component '..'"),
        ("/abs.py", "absolute path"),
        ("pkg//a.py", "path component ''"),
        ("pkg\\a.py", "backslash in path"),
    ],
)
def test_a_path_outside_the_repository_is_malformed(path: str, why: str) -> None:
    # Rule 2's path check (docs/reward.md): -1 with format_ok False, even beside a good edit.
    output = answer(block("a.py", "    return 1", "    return 10") + "\n" + block(path, "", "x = 1"))
    result = score(output)
    assert (result.reward, result.format_ok) == (-1.0, False)
    assert result.error == f"format: unsafe path {quote(path)}: {why}"
    assert reference_score_output(CONTEXT, ORACLE, output) == -1.0


def test_fence_language_is_free_and_search_may_be_empty() -> None:
    edits = find_edits(block("x", "", "new", fence="```") + "\n" + block("y", "s", "r", fence="```diff-ish"))
    assert edits == [("x", "", "new"), ("y", "s", "r")]


def test_find_edits_matches_the_regex_on_tricky_text() -> None:
    text = (
        "``` ```\n### p\n<<<<<<< SEARCH\na\n=======\n=======\nb\n>>>>>>> REPLACE\n``````\n### q\n"
        "<<<<<<< SEARCH\n\n=======\n\n>>>>>>> REPLACE\n```"
    )
    assert find_edits(text) == EDIT_PATTERN.findall(text)
    assert find_edits(text) == [("p", "a", "=======\nb"), ("q", "", "")]


# Rule 3: apply ----------------------------------------------------------------------------


def test_search_equal_to_replace_is_rejected() -> None:
    result = score(answer(block("a.py", "    return 1", "    return 10"), block("a.py", "x", "x")))
    assert (result.reward, result.format_ok, result.error) == (-1.0, True, "edit 2 of a.py: search equals replace")


def test_search_matches_from_a_line_start_only() -> None:
    # "return 1" is inside a line: with the newline prefix it is not found.
    result = score(answer(block("a.py", "return 1", "return 10")))
    assert (result.reward, result.error) == (-1.0, "search block 1 not found in a.py")


def test_search_may_end_inside_a_line_and_replaces_every_occurrence() -> None:
    context = {"a.py": "x = 1\nx = 2\ny = 3\n"}
    oracle = {"a.py": "z = 1\nz = 2\ny = 3\n"}
    # "x" matches at two line starts: str.replace changes both.
    assert score(answer(block("a.py", "x", "z")), context, oracle).reward == 1.0


def test_empty_search_on_existing_file_inserts_before_every_line() -> None:
    context = {"a.py": "x = 1\ny = 2\n"}
    # The search "\n" matches every newline, the leading one included; so does the empty line
    # after the last newline: the replacement lands at the start of every line.
    applied = apply_edits(context, {"a.py": [("", "# c")]}).new_content
    assert applied == {"a.py": "# cx = 1\n# cy = 2\n# c"}
    own_lines = {"a.py": "# c\nx = 1\n# c\ny = 2\n# c\n"}
    assert score(answer(block("a.py", "", "# c\n")), context, own_lines).reward == 1.0


def test_empty_search_creates_a_new_file_and_edits_apply_in_order() -> None:
    oracle = {"new.py": "A = 2\n"}
    output = answer(block("new.py", "", "A = 1\n"), block("new.py", "A = 1", "A = 2"))
    assert score(output, {}, oracle).reward == 1.0


def test_crlf_is_not_normalised() -> None:
    context = {"w.py": "a = 1\r\nb = 2\r\n"}
    oracle = {"w.py": "a = 1\r\nb = 3\r\n"}
    assert score(answer(block("w.py", "b = 2\r", "b = 3\r")), context, oracle).reward == 1.0
    # Without the "\r" the search ends inside the line: the "\r" stays, the content differs.
    lf_only = score(answer(block("w.py", "b = 2", "b = 3")), context, oracle)
    assert lf_only.reward == 1.0  # "b = 2" matches as a prefix of "b = 2\r": same new content
    assert score(answer(block("w.py", "b = 2\n", "b = 3\n")), context, oracle).reward == -1.0


# Rules 4-5: diffs and similarity ------------------------------------------------------------


def test_partial_credit_is_the_sequence_matcher_ratio_of_the_diffs() -> None:
    result = score(answer(block("a.py", "    return 1", "    return 11")))
    pred = "@@ -1,5 +1,5 @@\n def f():\n-    return 1\n+    return 11\n \n \n def g():"
    oracle = "@@ -1,5 +1,5 @@\n def f():\n-    return 1\n+    return 10\n \n \n def g():"
    assert result.reward == difflib.SequenceMatcher(None, pred, oracle, autojunk=False).ratio()
    assert 0.9 < result.reward < 1.0


def test_ratio_argument_order_matters_and_is_pred_then_oracle() -> None:
    pred, oracle = "baba", "abbba"  # longest-match tie-breaking makes the ratio asymmetric
    forward = difflib.SequenceMatcher(None, pred, oracle, autojunk=False).ratio()
    backward = difflib.SequenceMatcher(None, oracle, pred, autojunk=False).ratio()
    assert compare_diffs({"p": pred}, {"p": oracle}).reward == forward
    assert (forward, backward) == (4 / 9, 6 / 9)


def test_a_file_the_oracle_does_not_touch_halves_the_mean() -> None:
    context = dict(CONTEXT, **{"b.py": "k = 0\n"})
    output = answer(block("a.py", "    return 1", "    return 10"), block("b.py", "k = 0", "k = 1"))
    assert score(output, context).reward == 0.5


def test_edits_that_change_nothing_leave_no_paths_and_score_one() -> None:
    # Two edits that cancel out: the predicted diff is empty, and so is the oracle's.
    context = {"a.py": "x\n"}
    output = answer(block("a.py", "x", "y"), block("a.py", "y", "x"))
    assert score(output, context, {"a.py": "x\n"}).reward == 1.0
    # Same edits against a real oracle change: the oracle's path scores 0.
    assert score(output, context, {"a.py": "z\n"}).reward == 0.0


def test_trailing_newline_only_change_is_an_empty_diff() -> None:
    # splitlines() hides a missing final newline: the oracle's diff is empty, the file left out.
    result = score(answer(block("a.py", "    return 1", "    return 10")), CONTEXT, {"a.py": CONTEXT["a.py"][:-1]})
    assert result.reward == 0.0  # only the predicted path remains, and the oracle lacks it
