"""Rule 3 of the SWE-RL reward: apply the SEARCH/REPLACE edits to the code context.

Per path: start from a newline followed by the file's content in the context (nothing for a
path the context lacks, so an empty search creates a file); for each edit in order, reject
when search equals replace, prefix both with a newline (a search then matches from a line
start), reject when the search is absent, else replace every occurrence (`str.replace`). The
leading newline is dropped at the end. No normalisation of CRLF, paths or whitespace: a path
is a dictionary key, nothing here touches the file system.

Departure from the paper's released rule (a guard, not a semantic change on real outputs):
`str.replace` multiplies the text when a short search matches many times (an empty search
inserts its replacement before every line), and a few such edits in a row grow a file
exponentially until the process runs out of memory. The new size is known before replacing
(count x growth), so a path whose content would exceed `MAX_CONTENT_CHARS` is not built: it is
returned in `oversized`, its remaining edits are skipped, and the caller scores it like a pair
over the time cap (0, with a reason).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reward.parse import Edit, Rejected, quote

# 64 Mi characters (64-256 MiB per copy): far beyond any real source file, small enough that a
# reward actor survives the few copies str.replace makes.
MAX_CONTENT_CHARS = 1 << 26


@dataclass(frozen=True)
class Applied:
    """The predicted new content of every edited path, and the paths too large to build."""

    new_content: dict[str, str]
    oversized: tuple[str, ...] = field(default=())


def apply_path_edits(path: str, original: str, edits: list[Edit], max_chars: int) -> str | None:
    """Apply one path's edits in order; None when the content would exceed max_chars."""
    content = "\n" + original
    for number, (search, replace) in enumerate(edits, start=1):
        if search == replace:
            raise Rejected(f"edit {number} of {quote(path)}: search equals replace", format_ok=True)
        search, replace = "\n" + search, "\n" + replace
        count = content.count(search)
        if count == 0:
            raise Rejected(f"search block {number} not found in {quote(path)}", format_ok=True)
        if len(content) + count * (len(replace) - len(search)) > max_chars + 1:
            return None
        content = content.replace(search, replace)
    return content[1:]


def apply_edits(
    code_context: Mapping[str, str], edits: Mapping[str, list[Edit]], max_chars: int = MAX_CONTENT_CHARS
) -> Applied:
    """Rule 3 for every edited path; raises Rejected (format_ok=True) on a failed edit.

    A path that grows too large stops being edited, but the other paths are still applied so
    that a failed search anywhere still gives -1, as in the reference.
    """
    new_content: dict[str, str] = {}
    oversized: list[str] = []
    for path, path_edits in edits.items():
        # The spec's rule: a path missing from the context starts empty (a new file).
        result = apply_path_edits(path, code_context.get(path, ""), path_edits, max_chars)
        if result is None:
            oversized.append(path)
        else:
            new_content[path] = result
    return Applied(new_content, tuple(oversized))
