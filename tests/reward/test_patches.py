"""Rule 6 (diff-vs-diff) and apply_patch."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data.patching import PatchError, apply_patch
from reward import score_patches
from reward.patches import file_changes
from reward.spec import reference_file_changes, reference_score_patches

EDIT = "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n"
OTHER = "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 4\n"
RENAME = (
    "diff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\nrename to new.py\n"
    "--- a/old.py\n+++ b/new.py\n@@ -1 +1 @@\n-a\n+b\n"
)
MODE_ONLY = "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"
BINARY = "diff --git a/i.png b/i.png\nindex 1..2 100644\nBinary files a/i.png and b/i.png differ\n"
BROKEN = "--- a/b.py\n+++ b/b.py\n@@ -1,3 +1,1 @@\n-a\n"  # a hunk shorter than its header says


def both(oracle, pred) -> float:
    result = score_patches(oracle, pred)
    assert result.reward == reference_score_patches(
        [oracle] if isinstance(oracle, str) else oracle, [pred] if isinstance(pred, str) else pred
    )
    assert 0.0 <= result.reward <= 1.0
    return result.reward


def test_a_patch_against_itself_scores_one_and_a_close_one_less() -> None:
    assert both(EDIT, EDIT) == 1.0
    assert 0.9 < both(EDIT, OTHER) < 1.0


def test_file_change_text_is_the_stripped_hunks() -> None:
    assert file_changes(EDIT) == {"a.py": "@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3"}


def test_rename_is_keyed_by_source_with_a_header_line() -> None:
    assert file_changes(RENAME) == {"old.py": "rename from old.py to new.py\n@@ -1,1 +1,1 @@\n-a\n+b"}
    assert both(RENAME, RENAME) == 1.0


def test_binary_skipped_mode_only_empty_broken_contributes_nothing() -> None:
    assert file_changes([BINARY, MODE_ONLY, BROKEN]) == {"run.sh": ""}
    assert file_changes([EDIT + BROKEN]) == {}  # the whole text is dropped, not its first file
    assert both(MODE_ONLY, MODE_ONLY) == 0.0  # an empty change scores 0 even against itself
    assert both([EDIT, BINARY], EDIT) == 1.0


def test_a_path_seen_again_replaces_the_earlier_change() -> None:
    assert both([EDIT, OTHER], OTHER) == 1.0
    assert both([OTHER, EDIT], OTHER) < 1.0


def test_missing_files_score_zero_and_no_files_at_all_scores_one() -> None:
    two = EDIT + "--- a/c.py\n+++ b/c.py\n@@ -1 +1 @@\n-c\n+d\n"
    assert both(two, EDIT) == 0.5
    assert both("not a diff", "") == 1.0
    assert both(EDIT, "garbage") == 0.0


def test_str_and_list_inputs_agree() -> None:
    assert score_patches(EDIT, [OTHER]) == score_patches([EDIT], OTHER)
    assert reference_file_changes([RENAME, EDIT]) == file_changes([RENAME, EDIT])


def unified(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}")
    # difflib writes no "\ No newline at end of file" marker: add it as git does.
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


file_text = st.lists(st.sampled_from(["a", "b", "x = 1", "", "  pass"]), max_size=20).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(file_text, file_text)
def test_apply_patch_rebuilds_the_new_content(old: str, new: str) -> None:
    if old == new:
        return
    assert apply_patch({"f.py": old}, unified("f.py", old, new)) == {"f.py": new}


def test_apply_patch_new_deleted_and_mismatched_files() -> None:
    created = "--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+n = 1\n"
    deleted = "--- a/a.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"
    assert apply_patch({}, created) == {"n.py": "n = 1\n"}
    assert apply_patch({"a.py": "a\n"}, deleted) == {"a.py": ""}
    with pytest.raises(PatchError, match="a.py"):
        apply_patch({"a.py": "z = 0\ny = 2\n"}, EDIT)
    with pytest.raises(PatchError, match="a.py"):
        apply_patch({}, EDIT)
