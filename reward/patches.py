"""Rule 6: the file-level changes of unified-diff texts, read as the paper's released rule does.

Rule 6 (the diff-vs-diff variant of the reward, for agents that emit patches): each text is
parsed with `unidiff.PatchSet`; a text that fails to parse contributes no files. Per patched
file: binary files are skipped; the key is `PatchedFile.path`, except for a rename, whose key
is the source path and whose change starts with the line `rename from A to B` (A without a
leading `a/`, B without a leading `b/`); the change is that header line (empty for
non-renames), a newline, and each hunk's `str(hunk).strip()` (the `@@` line included) joined
with newlines, the whole stripped. A path seen again later replaces the earlier one. The
changes are then compared by rule 5 (`reward.similarity.compare_diffs`).

Applying a diff to file contents is not part of the reward: the project's one diff library
for that is data/patching.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from unidiff import PatchedFile, PatchSet


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
