"""The oracle answer: an instance's oracle patch written as a well-formed model output.

`oracle_answer(code_context, oracle_new_content)` returns a `<think>` thought and one fenced
SEARCH/REPLACE block per hunk that, applied by rule 3, rebuild every oracle file exactly, so
the answer scores 1.0 against its own oracle. The learner's supervised warm start, guided GRPO
(`rollout.oracle_samples_per_group`) and the evaluation reuse it. Not in the paper (its model
was already able to answer); the edits look like a model's: each hunk is the changed lines
with one line of context on each side.

How the blocks are chosen, per file, top to bottom on the text as edited so far:
- hunks are difflib's grouped opcodes on lines split at "\\n" (the unit rule 3 works on), so
  CRLF files and files without a final newline are rebuilt byte for byte;
- both the search and the replace hold at least one line (a block that replaced lines by
  nothing would leave an empty line behind, because rule 3 prefixes both with a newline);
- the block grows one line of context at a time until its search occurs exactly once, at the
  intended line: `str.replace` then changes only the intended spot;
- a new file is one block with an empty search; a deleted file one block whose replace is empty.
Finally the answer is checked by applying it; any mismatch raises OracleAnswerError.

A file cannot be written in this format when a search would contain, after its first line, a
line `=======` (the divider ends the search early) or a replace a line `>>>>>>> REPLACE`
followed by a fence: those raise OracleAnswerError naming the file, for the caller to skip.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import cydifflib

from reward.apply import apply_edits
from reward.parse import Rejected, parse_output

if TYPE_CHECKING:
    from data.schema import Instance

log = logging.getLogger(__name__)

_CONTEXT_LINES = 1
# After this many one-line growths, a block grows by half its size per step: a file of many
# identical lines would otherwise cost one full-text search per line of context.
_SINGLE_STEPS = 8


class OracleAnswerError(ValueError):
    """The oracle change cannot be written as SEARCH/REPLACE blocks; the message names the file."""


def _join(lines: list[str]) -> str:
    return "\n".join(lines)


def _is_unique_at(text: str, lines: list[str], start: int, end: int) -> bool:
    """Whether newline + lines[start:end] occurs in text (newline + the file) only at line start."""
    needle = "\n" + _join(lines[start:end])
    offset = len(_join(lines[:start])) + 1 if start else 0
    return text.find(needle) == offset and text.count(needle) == 1


def _widen(lines: list[str], first: int, last: int, new: list[str]) -> tuple[int, int]:
    """The block [start, end) around the change lines[first:last] -> new that rule 3 applies there.

    Both sides must hold a line (a block replacing lines by nothing leaves an empty line,
    since rule 3 prefixes search and replace with a newline) and the search must be unique.
    """
    text = "\n" + _join(lines)
    start, end, steps = first, last, 0
    while True:
        replace_size = (first - start) + len(new) + (end - last)
        if end > start and replace_size > 0 and _is_unique_at(text, lines, start, end):
            return start, end
        if start == 0 and end == len(lines):
            return start, end  # the whole file is always unique
        amount = 1 if steps < _SINGLE_STEPS else max(1, (end - start) // 2)
        if (steps % 2 == 0 and start > 0) or end == len(lines):
            start = max(0, start - amount)
        else:
            end = min(len(lines), end + amount)
        steps += 1


def file_blocks(old: str, new: str) -> list[tuple[str, str]]:
    """(search, replace) blocks that turn old into new under rule 3, top to bottom."""
    lines, target = old.split("\n"), new.split("\n")
    matcher = cydifflib.SequenceMatcher(None, lines, target, autojunk=False)
    blocks: list[tuple[str, str]] = []
    shift = 0  # lines added minus lines removed by the blocks above
    for group in matcher.get_grouped_opcodes(_CONTEXT_LINES):
        first, last = group[0][1] + shift, group[-1][2] + shift
        new_lines = target[group[0][3] : group[-1][4]]
        start, end = _widen(lines, first, last, new_lines)
        replace = lines[start:first] + new_lines + lines[last:end]
        blocks.append((_join(lines[start:end]), _join(replace)))
        lines = lines[:start] + replace + lines[end:]
        shift += len(new_lines) - (last - first)
    return blocks


def _render(path: str, search: str, replace: str) -> str:
    return f"```python\n### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```"


def _thought(changed: dict[str, list[tuple[str, str]]]) -> str:
    parts = [f"{path} ({len(blocks)} edit{'s' if len(blocks) > 1 else ''})" for path, blocks in changed.items()]
    return f"The fix changes {len(changed)} file{'s' if len(changed) > 1 else ''}: {', '.join(parts)}."


def _verify(code_context: Mapping[str, str], oracle_new_content: Mapping[str, str], answer: str) -> None:
    try:
        rebuilt = apply_edits(code_context, parse_output(answer)).new_content
    except Rejected as exc:
        raise OracleAnswerError(f"the oracle answer is rejected by its own rule: {exc.reason}") from exc
    for path, content in oracle_new_content.items():
        if rebuilt.get(path, code_context.get(path, "")) != content:
            raise OracleAnswerError(
                f"{path}: its blocks do not rebuild the oracle content (a block holds a line that the "
                "format reads as a divider or an end of block, or the path holds a newline)"
            )


def oracle_answer(code_context: Mapping[str, str], oracle_new_content: Mapping[str, str]) -> str:
    """A model-style answer (thought + SEARCH/REPLACE blocks) that scores 1.0 against this oracle.

    Deterministic; files in the order of oracle_new_content; raises OracleAnswerError naming the
    file when the change cannot be expressed (see the module docstring) or changes nothing.
    """
    changed: dict[str, list[tuple[str, str]]] = {}
    for path, new in oracle_new_content.items():
        old = code_context.get(path, "")  # the schema's rule: a file the patch creates starts empty
        if new != old:
            changed[path] = file_blocks(old, new)
    if not changed:
        raise OracleAnswerError("the oracle changes no file: no edit can express it")
    blocks = [_render(path, search, replace) for path, pairs in changed.items() for search, replace in pairs]
    answer = f"<think>\n{_thought(changed)}\n</think>\n<solution>\n" + "\n\n".join(blocks) + "\n</solution>"
    _verify(code_context, oracle_new_content, answer)
    return answer


def oracle_completion(tokenizer: Any, instance: Instance) -> tuple[str, list[int]] | None:
    """The oracle answer in the answer format (oracle_answer) and its token ids with the
    end-of-turn token, as the model would have to write it; None (logged) when the format cannot
    express the oracle change. The target of the SFT warm start and of guided GRPO."""
    try:
        text = oracle_answer(instance.code_context, instance.oracle_new_content)
    except OracleAnswerError as exc:
        log.info("[oracle] %s: no oracle answer (%s)", instance.instance_id, exc)
        return None
    return text, [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
