"""What an answer holds: its code, its final answer line, its choice. Pure standard library.

Each function returns None when the answer holds nothing of the kind, so that the summary
counts answers with nothing to grade apart from wrong ones (`extracted`).

Code (HumanEval, MBPP): the first fenced block that defines the function the problem names,
else the first fenced block; with no fence, the answer read as the continuation of the
prompt's function (a base model's completion) when prompt + answer is valid Python.
"""

from __future__ import annotations

import ast
import re

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
# "Answer: X" at the start of a line (the strict reading of MATH, and of our other prompts).
_ANSWER_LINE = re.compile(r"^[ \t*]*(?:final )?answer[ \t*]*:[ \t*]*(.+?)[ \t*]*$", re.IGNORECASE | re.MULTILINE)


def fenced_blocks(text: str) -> list[str]:
    """The bodies of the answer's fenced code blocks (python or untagged), in order; an unclosed
    last fence counts (an answer cut by the token limit keeps what it wrote)."""
    return [body for tag, body in _FENCE.findall(text) if tag.lower() in ("", "python", "py", "python3")]


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def _defines(source: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", source, re.MULTILINE) is not None


def code_of(answer: str, prompt: str, entry_point: str) -> tuple[str, str] | None:
    """(program text that defines `entry_point`, how it was found: "fenced" or "completion"),
    or None. A fenced function gets the prompt's imports put before it (a model that rewrites
    the function often drops them)."""
    blocks = fenced_blocks(answer)
    chosen = next((b for b in blocks if _defines(b, entry_point)), blocks[0] if blocks else None)
    if chosen is not None:
        return imports_of(prompt) + chosen, "fenced"
    if prompt and _defines(prompt, entry_point) and _adds_code(prompt, answer):
        return prompt + answer, "completion"
    return None


def _adds_code(prompt: str, answer: str) -> bool:
    """Whether prompt + answer is valid Python with more in it than the prompt: a function with
    only its docstring is valid too, so blank lines or a comment after it are not an answer."""
    if not _parses(prompt + answer) or not _parses(prompt):
        return False
    return ast.dump(ast.parse(prompt + answer)) != ast.dump(ast.parse(prompt))


def imports_of(source: str) -> str:
    """The top-level import lines of `source` (the prompt's `from typing import List`, ...)."""
    lines = [ln for ln in source.splitlines() if re.match(r"(?:import|from)\s+\w", ln)]
    return "\n".join(lines) + "\n" if lines else ""


def answer_line(text: str) -> str | None:
    """The last "Answer: ..." line's value, stripped of a trailing period and $...$."""
    found = _ANSWER_LINE.findall(text)
    if not found:
        return None
    value = found[-1].strip()
    if value.endswith(".") and not value.endswith(".."):
        value = value[:-1].rstrip()
    if len(value) >= 2 and value[0] == "$" and value[-1] == "$":
        value = value.strip("$").strip()
    return value or None


def boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (braces balanced), or None."""
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip() or None
    return None


def choice_letter(text: str, letters: str = "ABCD") -> str | None:
    """The letter of a multiple-choice answer: the "Answer:" line's first letter, else the answer
    itself when it is one letter (optionally "(B)" or "B."), else None."""
    line = answer_line(text)
    for candidate in (line, text.strip()):
        if candidate is None:
            continue
        m = re.fullmatch(rf"\(?([{letters}])\)?(?:[.:)\s].*)?", candidate.strip(), re.DOTALL)
        if m:
            return m.group(1)
    return None
