"""The project's one unified-diff library: parse, apply and write git-style diffs.

Used by the miners (every instance is checked before it is written), the demo set's builder,
the evaluation's predictions file and the benchmarks. (The reward's rule 6 reads diffs with
`unidiff`, as the paper's released rule does: that is scoring, not applying; reward/patches.py.)

An instance stores the files before (`code_context`) and after (`oracle_new_content`) its
oracle patch; the two must agree with the patch exactly, or the reward would compare the
model against a diff that does not describe the stored files. `apply_patch` reproduces what
`git apply` does without fuzz: hunk context must match line for line (line endings included);
a hunk may sit at an offset from its header's line number (the nearest match wins), as in git.
It understands git's extended headers (new/deleted file, rename, copy, mode changes) and
`\\ No newline at end of file`; binary patches are rejected. Every path a patch names (old,
new, rename and copy sources) must be a plain repository path (data/paths.py): a patch naming
`/abs`, `../x` or `a//b` is malformed (PatchError "unsafe path ..."), before any byte is read.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from data.paths import UnsafePath, path_problem, repo_path

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\ No newline at end of file"


class PatchError(ValueError):
    """The patch is malformed or does not apply; the message names the file and hunk."""


@dataclass
class Hunk:
    old_start: int  # 1-based line of the first old line (0 when the old side is empty)
    lines: list[str] = field(default_factory=list)  # each starts with " ", "-" or "+"; keeps "\n"


@dataclass
class FilePatch:
    old_path: str | None  # None: the patch creates the file
    new_path: str | None  # None: the patch deletes the file
    is_copy: bool = False
    hunks: list[Hunk] = field(default_factory=list)


def split_lines(text: str) -> list[str]:
    """Lines of `text` with their "\\n" kept; only "\\n" ends a line (not "\\r", "\\x0c", ...)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _unquote(path: str) -> str:
    """git C-quotes paths with unusual characters ("a/x\\ty"); undo it."""
    if len(path) >= 2 and path[0] == path[-1] == '"':
        return (
            path[1:-1]
            .encode("latin-1", "backslashreplace")
            .decode("unicode_escape")
            .encode("latin-1")
            .decode("utf-8", "replace")
        )
    return path


def _strip_prefix(path: str) -> str | None:
    path = _unquote(path.split("\t", 1)[0].rstrip("\n"))
    if path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def _git_header_paths(rest: str) -> tuple[str, str] | None:
    """Paths of `diff --git a/X b/Y` when X == Y (the only case the line alone can decide)."""
    rest = rest.rstrip("\n")
    half = (len(rest) - 1) // 2
    a, b = rest[:half], rest[half + 1 :]
    if a.startswith("a/") and b.startswith("b/") and a[2:] == b[2:]:
        return a[2:], b[2:]
    return None


def _read_hunk(lines: list[str], i: int, m: re.Match[str], where: str) -> tuple[Hunk, int]:
    old_left = int(m.group(2)) if m.group(2) is not None else 1
    new_left = int(m.group(4)) if m.group(4) is not None else 1
    hunk = Hunk(old_start=int(m.group(1)))
    i += 1
    while old_left > 0 or new_left > 0 or (i < len(lines) and lines[i].startswith(_NO_NEWLINE)):
        if i >= len(lines):
            raise PatchError(f"{where}: hunk at -{hunk.old_start} ends early")
        line = lines[i]
        i += 1
        if line.startswith(_NO_NEWLINE):
            if not hunk.lines:
                raise PatchError(f"{where}: '{_NO_NEWLINE}' before any line of hunk at -{hunk.old_start}")
            hunk.lines[-1] = hunk.lines[-1].removesuffix("\n")  # that line ends its file
            continue
        if line == "\n":  # some tools drop the space of an empty context line
            line = " \n"
        tag = line[:1]
        if tag not in (" ", "-", "+"):
            raise PatchError(f"{where}: unexpected line {line[:40]!r} in hunk at -{hunk.old_start}")
        old_left -= tag in (" ", "-")
        new_left -= tag in (" ", "+")
        hunk.lines.append(line)
    if old_left < 0 or new_left < 0:
        raise PatchError(f"{where}: hunk at -{hunk.old_start} has more lines than its header says")
    return hunk, i


def parse_patch(text: str) -> list[FilePatch]:
    """Parse a (possibly multi-file) unified diff, with or without git's extended headers."""
    lines = split_lines(text)
    files: list[FilePatch] = []
    cur: FilePatch | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            paths = _git_header_paths(line[len("diff --git ") :])
            cur = FilePatch(old_path=paths[0] if paths else None, new_path=paths[1] if paths else None)
            files.append(cur)
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _strip_prefix(line[4:]), _strip_prefix(lines[i + 1][4:])
            if cur is None or cur.hunks:  # a plain diff (no "diff --git" lines): each "---" starts a file
                cur = FilePatch(old_path=old, new_path=new)
                files.append(cur)
            cur.old_path, cur.new_path = old, new
            i += 1
        elif cur is not None and line.startswith(("rename from ", "copy from ")):
            cur.old_path = _unquote(line.split(" from ", 1)[1].rstrip("\n"))
            cur.is_copy = line.startswith("copy")
        elif cur is not None and line.startswith(("rename to ", "copy to ")):
            cur.new_path = _unquote(line.split(" to ", 1)[1].rstrip("\n"))
        elif cur is not None and line.startswith("new file mode"):
            cur.old_path = None
        elif cur is not None and line.startswith("deleted file mode"):
            cur.new_path = None
        elif line.startswith(("Binary files ", "GIT binary patch")):
            raise PatchError(f"{_name(cur)}: binary patches are not supported")
        elif line.startswith("@@"):
            m = _HUNK_RE.match(line)
            if cur is None or m is None:
                raise PatchError(f"{_name(cur)}: malformed hunk header {line.rstrip()!r}")
            hunk, i = _read_hunk(lines, i, m, _name(cur))
            cur.hunks.append(hunk)
            continue
        i += 1
    for fp in files:
        if fp.old_path is None and fp.new_path is None:
            raise PatchError("a file patch names no path (diff --git line with unequal paths and no ---/+++)")
        try:
            for path in (fp.old_path, fp.new_path):
                if path is not None:
                    repo_path(path)
        except UnsafePath as exc:
            raise PatchError(str(exc)) from None
    return files


def _name(fp: FilePatch | None) -> str:
    if fp is None:
        return "patch"
    return fp.new_path or fp.old_path or "patch"


def _find(old: list[str], want: list[str], start: int) -> int | None:
    """Line index where `want` occurs in `old`, nearest to `start` (git apply's offset search)."""
    n = len(want)
    for delta in range(0, len(old) + 1):
        for pos in (start - delta, start + delta) if delta else (start,):
            if 0 <= pos <= len(old) - n and old[pos : pos + n] == want:
                return pos
    return None


def apply_file(content: str, fp: FilePatch) -> str:
    """Apply one file's hunks to `content`; raise PatchError naming the hunk that does not fit."""
    old = split_lines(content)
    out: list[str] = []
    cursor = 0  # hunks apply in order, each after the previous one
    for hunk in fp.hunks:
        want = [ln[1:] for ln in hunk.lines if ln[0] in (" ", "-")]
        new = [ln[1:] for ln in hunk.lines if ln[0] in (" ", "+")]
        start = max(hunk.old_start - 1, 0) if want else hunk.old_start
        pos = _find(old[cursor:], want, start - cursor)
        if pos is None:
            raise PatchError(f"{_name(fp)}: hunk at -{hunk.old_start} does not match the file")
        pos += cursor
        out.extend(old[cursor:pos])
        out.extend(new)
        cursor = pos + len(want)
    out.extend(old[cursor:])
    return "".join(out)


def apply_patch(files: Mapping[str, str], patch: str) -> dict[str, str]:
    """{path: content before} + patch -> {path: content after} for every path the patch touches.

    A deleted file (and the old path of a rename) maps to ""; a created file starts from "".
    """
    result: dict[str, str] = {}
    for fp in parse_patch(patch):
        if fp.old_path is None:
            before = ""
        elif fp.old_path in result:
            before = result[fp.old_path]
        elif fp.old_path in files:
            before = files[fp.old_path]
        else:
            raise PatchError(f"{fp.old_path}: the patch changes a file that is not in the context")
        after = apply_file(before, fp)
        if fp.new_path is None:
            if after:
                raise PatchError(f"{fp.old_path}: the patch deletes the file but leaves lines in it")
            result[fp.old_path or ""] = ""
            continue
        if fp.old_path is not None and fp.old_path != fp.new_path and not fp.is_copy:
            result[fp.old_path] = ""
        result[fp.new_path] = after
    return result


def unified_diff(path: str, old: str | None, new: str | None) -> str:
    """Git-style unified diff of one file (3 lines of context); `old=None` = created, `new=None`
    = deleted. Where a side does not end with a newline git's "\\ No newline at end of file"
    marker follows, so that `git apply` and `apply_patch` rebuild the content byte for byte."""
    if old is None and new is None:
        raise ValueError(f"{path}: neither an old nor a new version")
    header = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        header.append("new file mode 100644\n")
    elif new is None:
        header.append("deleted file mode 100644\n")
    lines = difflib.unified_diff(
        split_lines(old or ""),
        split_lines(new or ""),
        "/dev/null" if old is None else f"a/{path}",
        "/dev/null" if new is None else f"b/{path}",
        n=3,
    )
    return "".join(header) + "".join(ln if ln.endswith("\n") else ln + "\n" + _NO_NEWLINE + "\n" for ln in lines)


def name_problem(path: str) -> str | None:
    """Why a unified diff cannot name `path` as it is (None: it can): a path `unified_diff`
    writes must come back whole from `parse_patch`, never as another path (a newline would end
    the header line, a tab the name, a byte that is not UTF-8 the patch's text)."""
    if (problem := path_problem(path)) is not None:
        return f"not a repository path: {problem}"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        return "a control character (a newline, a carriage return, a tab) in its name"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "a name that is not UTF-8"
    try:
        parsed = [(fp.old_path, fp.new_path) for fp in parse_patch(unified_diff(path, "a\n", "b\n"))]
    except PatchError:
        parsed = []
    return None if parsed == [(path, path)] else "a name a unified diff does not carry"


def make_patch(old_files: Mapping[str, str], new_files: Mapping[str, str]) -> str:
    """Diff of every path in either mapping (sorted); a path in only one is created/deleted."""
    return "".join(
        unified_diff(path, old_files.get(path), new_files.get(path))
        for path in sorted(old_files.keys() | new_files.keys())
    )


def created_files(patch: str) -> set[str]:
    """Paths a unified diff creates (an instance's code context shows them as "")."""
    try:
        return {fp.new_path for fp in parse_patch(patch) if fp.old_path is None and fp.new_path}
    except PatchError:
        return set()


def files_patch(context: Mapping[str, str], new_content: Mapping[str, str], created: set[str]) -> str:
    """New file contents (an answer's edits applied) as one diff against the code context. A
    path not in the context, or in `created` (shown as "" but absent at the base commit), is a
    new file; a context file whose new content is "" is deleted (the schema's convention)."""
    parts = []
    for path, new in new_content.items():
        old = None if path not in context or path in created else context[path]
        if new == (old or ""):
            continue
        parts.append(unified_diff(path, old, None if new == "" and old else new))
    return "".join(parts)
