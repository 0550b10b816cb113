"""The strict patch applier (data/patching.py) that checks every mined instance."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data.patching import PatchError, apply_patch, parse_patch, split_lines

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def _udiff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(split_lines(before), split_lines(after), f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


_line = st.text(alphabet="ab \t\r{}", max_size=6).map(lambda s: s + "\n")


@settings(max_examples=150, deadline=None)
@given(st.lists(_line, max_size=30), st.lists(_line, max_size=30))
def test_difflib_diffs_apply_exactly(before: list[str], after: list[str]) -> None:
    old, new = "".join(before), "".join(after)
    patch = _udiff("m.py", old, new)
    if old == new:
        assert apply_patch({"m.py": old}, patch) == {"m.py": old}
    else:
        assert apply_patch({"m.py": old}, patch) == {"m.py": new}


def test_no_newline_at_end_of_file_on_either_side() -> None:
    patch = (
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n"
        "\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
    )
    assert apply_patch({"x": "a\nb"}, patch) == {"x": "a\nc"}
    grow = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-a\n\\ No newline at end of file\n+a\n+b\n"
    assert apply_patch({"x": "a"}, grow) == {"x": "a\nb\n"}


def test_new_deleted_and_renamed_files() -> None:
    patch = (
        "diff --git a/n.py b/n.py\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n"
        "+++ b/n.py\n@@ -0,0 +1 @@\n+x = 1\n"
        "diff --git a/d.py b/d.py\ndeleted file mode 100644\n--- a/d.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-y\n"
        "diff --git a/o.py b/r.py\nsimilarity index 90%\nrename from o.py\nrename to r.py\n"
        "--- a/o.py\n+++ b/r.py\n@@ -1,2 +1,2 @@\n keep\n-old\n+new\n"
    )
    out = apply_patch({"d.py": "y\n", "o.py": "keep\nold\n"}, patch)
    assert out == {"n.py": "x = 1\n", "d.py": "", "o.py": "", "r.py": "keep\nnew\n"}


def test_hunk_at_an_offset_applies_but_wrong_context_does_not() -> None:
    patch = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
    assert apply_patch({"f": "z\nz\na\nb\n"}, patch) == {"f": "z\nz\na\nB\n"}
    with pytest.raises(PatchError, match="hunk at -1 does not match"):
        apply_patch({"f": "a\nc\n"}, patch)
    with pytest.raises(PatchError, match="not in the context"):
        apply_patch({}, patch)


def test_crlf_and_form_feed_lines_are_kept() -> None:
    old, new = "a\r\nb\x0cc\r\n", "a\r\nB\x0cc\r\n"
    assert apply_patch({"w.py": old}, _udiff("w.py", old, new)) == {"w.py": new}


def test_malformed_patches_name_the_problem() -> None:
    with pytest.raises(PatchError, match="ends early"):
        parse_patch("--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n")
    with pytest.raises(PatchError, match="binary"):
        parse_patch("diff --git a/i.png b/i.png\nBinary files a/i.png and b/i.png differ\n")


def test_requests_lite_patches_reproduce_their_oracle_contents() -> None:
    path = SHARED / "requests_lite.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} is absent (real data lives in ../shared/data)")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(rows) == 6
    for row in rows:
        assert apply_patch(row["code_context"], row["patch"]) == row["oracle_new_content"], row["instance_id"]
