"""Rules 1 and 2 of the SWE-RL reward: the output's format and its SEARCH/REPLACE edits.

Rule 1: each of `<think>`, `</think>`, `<solution>`, `</solution>` occurs exactly once; the
thought (after `<think>`, cut at the first `</think>` after it, stripped) is not empty; the
answer is cut the same way from `<solution>`. Tag order is not checked, as in the paper's
released rule (it splits the text; it does not match an ordered pattern).

Rule 2: the edits are the `re.findall` matches of `EDIT_PATTERN` in the answer. `find_edits`
returns exactly those matches but finds them with `str.find` in time linear in the answer:
the regular expression, tried at every fence, rescans the rest of the answer for each one, so
an output with thousands of unterminated blocks would stall a reward actor for minutes. The
equivalence is argued in `find_edits` and checked against `re.findall` by property tests.

A rejected output raises `Rejected`; `reward.core` turns it into reward -1 (the one boundary).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from data.paths import path_problem

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SOLUTION_OPEN, SOLUTION_CLOSE = "<solution>", "</solution>"
TAGS = (THINK_OPEN, THINK_CLOSE, SOLUTION_OPEN, SOLUTION_CLOSE)

# The format's definition (SWE-RL prompt): a fence line, `### path`, the search lines, a
# divider, the replace lines, a closing fence. Kept for the tests; `find_edits` is its fast twin.
EDIT_PATTERN = re.compile(r"```.*?\n### (.*)\n<<<<<<< SEARCH\n([\s\S]*?)\n=======\n([\s\S]*?)\n>>>>>>> REPLACE\n```")
_FENCE = "```"
_PATH_PREFIX = "### "
_SEARCH_LINE = "<<<<<<< SEARCH\n"
_DIVIDER = "\n=======\n"
_TAIL = "\n>>>>>>> REPLACE\n```"

# Paths and texts quoted in error messages are cut to this many characters (outputs can be huge).
_QUOTE_CHARS = 120

Edit = tuple[str, str]  # (search, replace), both verbatim


class Rejected(Exception):
    """The output earns reward -1; `reason` says why, `format_ok` is False for rules 1-2."""

    def __init__(self, reason: str, *, format_ok: bool):
        super().__init__(reason)
        self.reason = reason
        self.format_ok = format_ok


def quote(text: str) -> str:
    """A short, single-line rendering of a path or text for error messages."""
    shown = text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "..."
    return repr(shown) if not shown or shown != shown.strip() or "\n" in shown else shown


def split_output(output: str) -> tuple[str, str]:
    """Rule 1: (thought, answer), both stripped; raises Rejected when the format is broken."""
    for tag in TAGS:
        count = output.count(tag)
        if count != 1:
            raise Rejected(f"format: {tag} occurs {count} times", format_ok=False)
    thought = output.split(THINK_OPEN, 1)[1].split(THINK_CLOSE, 1)[0].strip()
    if not thought:
        raise Rejected("format: empty thought", format_ok=False)
    answer = output.split(SOLUTION_OPEN, 1)[1].split(SOLUTION_CLOSE, 1)[0].strip()
    return thought, answer


class EditBlock(NamedTuple):
    """One SEARCH/REPLACE block: where it lies in the text (`re.Match.span()`: from its opening
    fence to just after its closing one) and its three groups, verbatim."""

    start: int
    end: int
    path: str
    search: str
    replace: str


def find_edits(answer: str) -> list[tuple[str, str, str]]:
    """Rule 2: exactly `EDIT_PATTERN.findall(answer)`, as (path, search, replace), in linear time."""
    return [(block.path, block.search, block.replace) for block in find_edit_blocks(answer)]


def find_edit_blocks(answer: str) -> list[EditBlock]:
    """The matches of `EDIT_PATTERN.finditer(answer)` with their spans, in linear time. The
    spans let a reader of free text (actors/agent/actions.py) skip the blocks' contents.

    Why this equals the regex, attempt by attempt (findall tries every start left to right and
    resumes after each match):
    - A match starts at a fence. `.*?` cannot cross a newline and must be followed by "\\n### ",
      so it ends at the fence line's first newline: every fence on one line leads to the same
      attempt, and a failed line is skipped whole.
    - `(.*)` cannot cross a newline: the path is the rest of the `### ` line, which must be
      followed by the line `<<<<<<< SEARCH`.
    - The lazy search group ends at the first divider after the head. The lazy replace group
      ends at the first tail after that divider; if there is none, no later divider (the
      regex's backtracking) and no later attempt can find one either, so scanning stops. The
      same holds when there is no divider at all.
    """
    blocks: list[EditBlock] = []
    pos = 0
    while (fence := answer.find(_FENCE, pos)) >= 0:
        line_end = answer.find("\n", fence + len(_FENCE))
        if line_end < 0:
            break
        pos = line_end + 1
        if not answer.startswith(_PATH_PREFIX, pos):
            continue
        path_end = answer.find("\n", pos + len(_PATH_PREFIX))
        if path_end < 0 or not answer.startswith(_SEARCH_LINE, path_end + 1):
            continue
        search_start = path_end + 1 + len(_SEARCH_LINE)
        divider = answer.find(_DIVIDER, search_start)
        if divider < 0:
            break
        replace_start = divider + len(_DIVIDER)
        tail = answer.find(_TAIL, replace_start)
        if tail < 0:
            break
        path = answer[pos + len(_PATH_PREFIX) : path_end]
        pos = tail + len(_TAIL)
        blocks.append(EditBlock(fence, pos, path, answer[search_start:divider], answer[replace_start:tail]))
    return blocks


def group_edits(edits: list[tuple[str, str, str]]) -> dict[str, list[Edit]]:
    """Edits grouped by path (paths verbatim, in order of first appearance; edits in order)."""
    grouped: dict[str, list[Edit]] = {}
    for path, search, replace in edits:
        grouped.setdefault(path, []).append((search, replace))
    return grouped


def parse_output(output: str) -> dict[str, list[Edit]]:
    """Rules 1-2: the output's edits grouped by path; raises Rejected (format_ok=False).

    Rule 2's path check (a departure from the released rule, docs/reward.md): every `### path`
    must be a plain repository path (data/paths.py); an absolute path, `..`, `.` or an empty
    component is a malformed answer, whatever reward kind reads it next."""
    _, answer = split_output(output)
    edits = find_edits(answer)
    if not edits:
        raise Rejected("format: no SEARCH/REPLACE edit in the solution", format_ok=False)
    for path, _, _ in edits:
        if (problem := path_problem(path)) is not None:
            raise Rejected(f"format: unsafe path {quote(path)}: {problem}", format_ok=False)
    return group_edits(edits)
