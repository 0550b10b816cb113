"""oracle_answer: a well-formed answer that scores exactly 1.0 against its own oracle."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reward import OracleAnswerError, oracle_answer, score_output
from reward.parse import find_edits, split_output
from reward.spec import reference_score_output


def test_one_hunk_has_one_line_of_context_and_a_thought() -> None:
    context = {"a.py": "a\nb\nc\nd\ne\n"}
    answer = oracle_answer(context, {"a.py": "a\nb\nC\nd\ne\n"})
    thought, solution = split_output(answer)
    assert thought == "The fix changes 1 file: a.py (1 edit)."
    assert find_edits(solution) == [("a.py", "b\nc\nd", "b\nC\nd")]
    assert score_output(context, {"a.py": "a\nb\nC\nd\ne\n"}, answer).reward == 1.0


def test_new_deleted_and_several_files_with_several_hunks() -> None:
    body = "".join(f"line {i}\n" for i in range(30))
    context = {"keep.py": body, "gone.py": "x = 1\n", "other.txt": "unchanged\n"}
    oracle = {
        "keep.py": body.replace("line 3\n", "LINE 3\n").replace("line 25\n", "line 25\nextra\n"),
        "gone.py": "",
        "new.py": "print('hi')\n",
    }
    answer = oracle_answer(context, oracle)
    edits = find_edits(split_output(answer)[1])
    assert [path for path, _, _ in edits] == ["keep.py", "keep.py", "gone.py", "new.py"]
    assert ("new.py", "", "print('hi')\n") in edits  # a new file: an empty search
    assert ("gone.py", "x = 1\n", "") in edits  # a deleted file: an empty replace
    assert score_output(context, oracle, answer).reward == 1.0
    assert oracle_answer(context, oracle) == answer  # deterministic


def test_ambiguous_search_grows_until_unique() -> None:
    # "    return None" appears three times; only the second one changes.
    context = {"m.py": "def a():\n    return None\n\ndef b():\n    return None\n\ndef c():\n    return None\n"}
    oracle = {"m.py": context["m.py"].replace("def b():\n    return None", "def b():\n    return 0")}
    answer = oracle_answer(context, oracle)
    ((_, search, _),) = find_edits(split_output(answer)[1])
    assert "def b():" in search  # the context that makes the search unique
    assert score_output(context, oracle, answer).reward == 1.0


def test_repetitive_file_and_prefix_lines() -> None:
    # Identical lines everywhere, and a line that is a prefix of another ("x" of "xx").
    context = {"r.py": "x\n" * 50 + "xx\n" + "x\n" * 50}
    oracle = {"r.py": "x\n" * 50 + "xx\n" + "x\n" * 20 + "y\n" + "x\n" * 30}
    assert score_output(context, oracle, oracle_answer(context, oracle)).reward == 1.0


def test_crlf_and_missing_final_newline_are_rebuilt_exactly() -> None:
    context = {"w.py": "a = 1\r\nb = 2\r\nc = 3"}
    oracle = {"w.py": "a = 1\r\nb = 20\r\nc = 3\r\n"}
    assert score_output(context, oracle, oracle_answer(context, oracle)).reward == 1.0


def test_unexpressible_changes_raise_naming_the_file() -> None:
    # A divider line as the first line of a search is fine; inside a search it ends it early.
    context = {"doc.rst": "Title\n=======\nold\n"}
    assert (
        score_output(
            context, {"doc.rst": "Title\n=======\nnew\n"}, oracle_answer(context, {"doc.rst": "Title\n=======\nnew\n"})
        ).reward
        == 1.0
    )
    with pytest.raises(OracleAnswerError, match="doc.rst"):
        oracle_answer(context, {"doc.rst": "TITLE\n=======\nnew\n"})
    with pytest.raises(OracleAnswerError, match="changes no file"):
        oracle_answer(context, dict(context))


file_lines = st.lists(st.sampled_from(["a", "b", "", "x = 1", "  pass", "a\r", "é", "<", "```"]), max_size=25)
contents = file_lines.map("\n".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contents, contents, contents)
def test_oracle_answer_scores_one_on_generated_files(old: str, new: str, other: str) -> None:
    context = {"f.py": old, "g.py": other}
    oracle = {"f.py": new, "h.py": other}
    if new == old and not other:
        with pytest.raises(OracleAnswerError):
            oracle_answer(context, oracle)
        return
    answer = oracle_answer(context, oracle)
    assert score_output(context, oracle, answer).reward == 1.0
    assert reference_score_output(context, oracle, answer) == 1.0
