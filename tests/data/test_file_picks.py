"""The shared reader of a model's list of paths (data/context/file_picks.py)."""

from __future__ import annotations

from data.context.file_picks import read_picks, render_tree

KNOWN = ["requests/models.py", "requests/sessions.py", "requests/__init__.py", "tests/test_models.py", "setup.py"]


def test_messy_answer_maps_to_repository_paths_in_order():
    answer = (
        "The bug is in `./requests/sessions.py`, e.g. in session.send.\n"
        "1. a/requests/models.py\n"
        "- requests/sessions.py (again)\n"
        "* requests/adapters.py\n"  # not in the repository
        "Also setup.py."
    )
    picks = read_picks(answer, KNOWN, limit=5)
    assert picks.paths == ["requests/sessions.py", "requests/models.py", "setup.py"]
    assert picks.unknown == ["requests/adapters.py"]


def test_unique_suffix_maps_and_ambiguous_suffix_is_unknown():
    known = ["pkg/a/util.py", "pkg/b/util.py", "pkg/core.py"]
    picks = read_picks("core.py and util.py and a/util.py", known, limit=5)
    # "a/util.py" is a prefix-stripped "util.py" too: a/ is a diff prefix, so it is ambiguous.
    assert picks.paths == ["pkg/core.py"]
    assert picks.unknown == ["util.py"]


def test_limit_and_nothing_named():
    assert read_picks("setup.py requests/models.py", KNOWN, limit=1).paths == ["setup.py"]
    assert read_picks("I do not know.", KNOWN, limit=3).paths == []
    assert read_picks("setup.py", KNOWN, limit=0).paths == []


def test_tree_lists_each_directory_once_before_its_files():
    assert render_tree(KNOWN).splitlines() == [
        "requests/",
        "  __init__.py",
        "  models.py",
        "  sessions.py",
        "setup.py",
        "tests/",
        "  test_models.py",
    ]
