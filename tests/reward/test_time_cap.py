"""The time cap and the size guard: deterministic, counted as timeouts, never a stall."""

from __future__ import annotations

import difflib
import itertools

import pytest

from reward import score_output, score_patches
from reward.apply import MAX_CONTENT_CHARS
from reward.similarity import SECONDS_PER_UNIT, compare_diffs, work_units
from reward.spec import reference_score_output


def brute_force_units(a: str, b: str) -> int:
    return len(a) + len(b) + sum(x == y for x, y in itertools.product(a, b))


@pytest.mark.parametrize("a, b", [("", ""), ("abc", "cab"), ("aaab", "ab"), ("é\n", "\n\n")])
def test_work_units_count_equal_pairs(a: str, b: str) -> None:
    assert work_units(a, b, autojunk=False) == brute_force_units(a, b)


def test_work_units_follow_autojunk_on_lines() -> None:
    # 300 lines, "x" on 250 of them: popular (more than 300 // 100 + 1), so dropped as difflib does.
    new = ["x"] * 250 + [str(i) for i in range(50)]
    old = ["x"] * 10 + ["1"]
    assert work_units(old, new, autojunk=True) == len(old) + len(new) + 1
    assert "x" in difflib.SequenceMatcher(None, old, new).bpopular


CONTEXT = {"a.py": "def f():\n    return 1\n"}
ORACLE = {"a.py": "def f():\n    return 2\n"}


def huge_answer(chars: int) -> str:
    big = "\n".join(f"    v{i} = {i}" for i in range(chars // 12))
    return f"<think>t</think><solution>```python\n### a.py\n<<<<<<< SEARCH\n    return 1\n=======\n{big}\n>>>>>>> REPLACE\n```</solution>"


@pytest.mark.timeout(60)
def test_a_pair_over_the_cap_scores_zero_with_a_reason() -> None:
    answer = huge_answer(200_000)
    capped = score_output(CONTEXT, ORACLE, answer, max_pair_seconds=0.01)
    assert (capped.reward, capped.error, capped.timed_out, capped.format_ok) == (0.0, "timeout: a.py", True, True)
    # Deterministic: the decision depends on the sizes only.
    assert score_output(CONTEXT, ORACLE, answer, max_pair_seconds=0.01) == capped


def test_a_pair_under_the_cap_is_scored_exactly() -> None:
    answer = huge_answer(2_000)
    uncapped = score_output(CONTEXT, ORACLE, answer)
    assert score_output(CONTEXT, ORACLE, answer, max_pair_seconds=10.0) == uncapped
    assert 0.0 < uncapped.reward < 1.0 and not uncapped.timed_out


def test_the_cap_is_the_estimate_times_the_calibration() -> None:
    pred, oracle = "ab" * 500, "ba" * 500
    seconds = work_units(pred, oracle, autojunk=False) * SECONDS_PER_UNIT
    assert compare_diffs({"p": pred}, {"p": oracle}, seconds * 1.01).timed_out == ()
    assert compare_diffs({"p": pred}, {"p": oracle}, seconds * 0.99).timed_out == ("p",)


def test_a_capped_path_the_oracle_lacks_is_zero_without_a_timeout() -> None:
    result = compare_diffs({"p": None, "q": "x"}, {"q": "x"}, 1.0)
    assert (result.reward, result.timed_out) == (0.5, ())


def test_predicted_line_diff_is_capped_too() -> None:
    answer = huge_answer(50_000)
    result = score_output(CONTEXT, ORACLE, answer, max_pair_seconds=1e-9)
    assert (result.reward, result.error, result.timed_out) == (0.0, "timeout: a.py", True)


@pytest.mark.timeout(60)
def test_exponential_growth_is_stopped_by_the_size_guard() -> None:
    # Each edit doubles every newline of the file: 2^40 lines without the guard.
    block = "```python\n### a.py\n<<<<<<< SEARCH\n\n=======\n\n\n>>>>>>> REPLACE\n```\n"
    output = "<think>t</think><solution>" + block * 40 + "</solution>"
    result = score_output(CONTEXT, ORACLE, output)
    assert (result.reward, result.error, result.timed_out) == (0.0, "too large: a.py", True)
    assert MAX_CONTENT_CHARS < 2**40


def test_score_patches_cap() -> None:
    oracle = "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a\n+b\n"
    pred = "--- a/a.py\n+++ b/a.py\n@@ -1 +1,3000 @@\n-a\n" + "+bbbbbbbbbb\n" * 3000
    capped = score_patches(oracle, pred, max_pair_seconds=1e-6)
    assert (capped.reward, capped.error, capped.timed_out) == (0.0, "timeout: a.py", True)
    assert score_patches(oracle, pred).reward > 0.0


@pytest.mark.timeout(60)
def test_enormous_adversarial_outputs_are_handled_in_linear_time() -> None:
    # 20,000 unterminated blocks: the regular expression rescans the rest of the answer for each
    # (quadratic, minutes); the parser finds no divider once and stops.
    head = "```python\n### a.py\n<<<<<<< SEARCH\n" + "x = 1\n" * 20
    unterminated = "<think>t</think><solution>" + head * 20_000 + "</solution>"
    result = score_output(CONTEXT, ORACLE, unterminated, max_pair_seconds=10.0)
    assert (result.reward, result.format_ok) == (-1.0, False)
    # 20,000 valid blocks, each adding a line under "def": a 20,000-line file, scored exactly.
    blocks = "```\n### a.py\n<<<<<<< SEARCH\ndef\n=======\ndef\n \n>>>>>>> REPLACE\n```\n" * 20_000
    output = "<think>t</think><solution>" + blocks + "</solution>"
    many = score_output(CONTEXT, ORACLE, output, max_pair_seconds=10.0)
    assert 0.0 < many.reward < 0.01 and not many.timed_out
    assert many.reward == reference_score_output(CONTEXT, ORACLE, output)
