"""Unified-diff texts: rule 6's file-level changes, and applying a diff to file contents.

Rule 6 (the diff-vs-diff variant of the reward, for agents that emit patches): each text is
parsed with `unidiff.PatchSet`; a text that fails to parse contributes no files. Per patched
file: binary files are skipped; the key is `PatchedFile.path`, except for a rename, whose key
is the source path and whose change starts with the line `rename from A to B` (A without a
leading `a/`, B without a leading `b/`); the change is that header line (empty for
non-renames), a newline, and each hunk's `str(hunk).strip()` (the `@@` line included) joined
with newlines, the whole stripped. A path seen again later replaces the earlier one. The
changes are then compared by rule 5 (`reward.similarity.compare_diffs`).

`apply_patch` is not part of the reward: it turns a unified diff into new file contents, so
that the benchmark and the tests can build model-like answers from real alternative patches
(SWE-bench `resolved_by`), and so that data builders can derive `oracle_new_content`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from unidiff import PatchedFile, PatchSet
from unidiff.patch import Line
from unidiff.constants import DEV_NULL


class PatchError(ValueError):
    """A diff does not apply to the given files; the message names the file and the hunk."""


def as_patch_list(patches: str | Iterable[str]) -> list[str]:
    """A single diff text or a list of them, as a list."""
    return [patches] if isinstance(patches, str) else list(patches)


def _file_change(patched: PatchedFile) -> tuple[str, str]:
    header, path = "", patched.path
    if patched.is_rename:
        source = patched.source_file.removeprefix("a/")
        target = patched.target_file.removeprefix("b/")
        header, path = f"rename from {source} to {target}", source
    body = "\n".join(str(hunk).strip() for hunk in patched)
    return path, (header + "\n" + body).strip()


def _text_changes(text: str) -> dict[str, str]:
    changes: dict[str, str] = {}
    for patched in PatchSet(text):
        if not patched.is_binary_file:
            path, change = _file_change(patched)
            changes[path] = change
    return changes


def file_changes(patches: str | Iterable[str]) -> dict[str, str]:
    """Rule 6: path -> file-level change text over all the diffs, later ones replacing earlier."""
    changes: dict[str, str] = {}
    for text in as_patch_list(patches):
        try:
            # The whole text is read before any of it counts: a text that fails halfway
            # contributes no files at all, not the files before the failure.
            changes.update(_text_changes(text))
        except Exception:  # any parse failure: the rule says the text contributes nothing
            continue
    return changes


def _strip_prefix(path: str, prefix: str) -> str:
    return path[len(prefix):] if path.startswith(prefix) else path


def _apply_hunks(path: str, old: str, patched: PatchedFile) -> str:
    lines = old.splitlines(keepends=True)
    out: list[str] = []
    cursor = 0
    for number, hunk in enumerate(patched, start=1):
        start = max(hunk.source_start - 1, 0) if hunk.source_length else hunk.source_start
        source = [line.value for line in hunk if line.is_context or line.is_removed]
        if [line.rstrip("\r\n") for line in lines[start:start + len(source)]] != \
                [line.rstrip("\r\n") for line in source]:
            raise PatchError(f"{path}: hunk {number} (@@ -{hunk.source_start}) does not match the file")
        out.extend(lines[cursor:start])
        out.extend(line.value for line in hunk if line.is_context or line.is_added)
        cursor = start + len(source)
    out.extend(lines[cursor:])
    text = "".join(out)
    if len(patched) and _target_lacks_final_newline(list(patched[-1])) and text.endswith("\n"):
        text = text[:-1]
    return text


def _target_lacks_final_newline(lines: list[Line]) -> bool:
    """Whether "\\ No newline at end of file" follows the last context or added line.

    unidiff keeps the newline in that line's value; the marker applies to the line before it.
    """
    kept = [index for index, line in enumerate(lines) if line.is_context or line.is_added]
    return bool(kept) and kept[-1] + 1 < len(lines) and lines[kept[-1] + 1].line_type == "\\"


def apply_patch(files: Mapping[str, str], patch: str) -> dict[str, str]:
    """New content of every file the diff touches (a deleted file becomes ""); raises PatchError.

    Hunks must apply at their stated lines (no fuzz): real diffs at their base commit do.
    A rename maps the new path to the patched source content and the old path to "".
    """
    try:
        patch_set = PatchSet(patch)
    except Exception as exc:
        raise PatchError(f"unparseable diff: {exc}") from exc
    new_content: dict[str, str] = {}
    for patched in patch_set:
        if patched.is_binary_file:
            raise PatchError(f"{patched.path}: binary diffs cannot be applied to text")
        source = _strip_prefix(patched.source_file, "a/")
        target = _strip_prefix(patched.target_file, "b/")
        old = "" if patched.is_added_file or patched.source_file == DEV_NULL else files.get(source)
        if old is None:
            raise PatchError(f"{source}: the diff changes a file that is not among the given files")
        new = "" if patched.is_removed_file else _apply_hunks(patched.path, old, patched)
        if patched.is_rename:
            new_content[source] = ""
            new_content[target] = new
        else:
            new_content[patched.path] = new
    return new_content
