"""Normalization, de-duplication and the vote of the Agentless evaluation's candidates (reward/rerank.py)."""

from __future__ import annotations

from reward.rerank import Candidate, deduplicate, normalize_file, patch_key, vote


def test_formatting_does_not_make_a_different_fix():
    a = {"pkg/m.py": "def f(x):\n    return x+1   # bump\n", "README.md": "Title  \n\nText\n"}
    b = {"README.md": "Title\nText", "pkg/m.py": "def f(x):\n\n    return (x + 1)\n"}
    assert patch_key(a) == patch_key(b)  # spacing, comments, parentheses, file order
    assert patch_key(a) != patch_key({**a, "pkg/m.py": "def f(x):\n    return x + 2\n"})
    # Code that does not parse falls back to the whitespace rule, and still compares.
    assert normalize_file("m.py", "def f(:\n    pass  \n\n") == "def f(:\n    pass"


def test_duplicates_are_votes_for_the_first_patch():
    k1, k2 = patch_key({"a.py": "x = 1\n"}), patch_key({"a.py": "x = 2\n"})
    cands = deduplicate([(k1, "p1"), (k2, "p2"), (k1, "p1-formatted-otherwise")])
    assert cands == [Candidate(k1, "p1", 2), Candidate(k2, "p2", 1)]


def test_the_vote_prefers_votes_then_reproduction_tests_then_the_first():
    k = [patch_key({"a.py": f"x = {i}\n"}) for i in range(3)]
    assert vote([Candidate(k[0], "a", 1), Candidate(k[1], "b", 3)], [5, 0]) == 1
    assert vote([Candidate(k[0], "a", 2), Candidate(k[1], "b", 2), Candidate(k[2], "c", 2)], [0, 1, 1]) == 1
    assert vote([Candidate(k[0], "a", 1), Candidate(k[1], "b", 1)], [0, 0]) == 0
    assert vote([], []) is None
