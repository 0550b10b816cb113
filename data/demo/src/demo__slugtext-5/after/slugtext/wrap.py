"""Greedy word wrapping for plain-text output: help screens, e-mails, commit messages."""

from __future__ import annotations


def wrap(text: str, width: int = 72) -> list[str]:
    """Split `text` into lines of at most `width` characters, breaking only between words.

    A word longer than `width` gets a line of its own rather than being cut.
    """
    if width < 1:
        raise ValueError(f"width must be at least 1, got {width}")
    lines: list[str] = []
    line = ""
    for word in text.split():
        if not line:
            line = word
        elif len(line) + 1 + len(word) <= width:
            line += " " + word
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines


def fill(text: str, width: int = 72, indent: str = "") -> str:
    """wrap() joined with newlines, every line prefixed with `indent` (counted in `width`)."""
    return "\n".join(indent + line for line in wrap(text, width - len(indent)))
