"""A small INI parser: `[section]` headers, `key = value` lines, `#` and `;` comment lines."""

from __future__ import annotations


class ParseError(ValueError):
    """A line that is not a header, an assignment, a comment or blank."""

    def __init__(self, lineno: int, line: str, reason: str) -> None:
        super().__init__(f"line {lineno}: {reason}: {line!r}")
        self.lineno = lineno


def parse(text: str) -> dict[str, dict[str, str]]:
    """INI text -> {section: {key: value}}; keys are lower-cased, values stripped."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            # A repeated header continues the earlier section rather than replacing it.
            current = sections.setdefault(line[1:-1].strip(), {})
            continue
        if current is None:
            raise ParseError(lineno, raw, "assignment before the first [section]")
        if "=" not in line:
            raise ParseError(lineno, raw, "expected 'key = value'")
        # Only the first "=" separates: values such as URLs or base64 may contain more.
        key, value = line.split("=", 1)
        key = key.strip().lower()
        if not key:
            raise ParseError(lineno, raw, "empty key")
        current[key] = value.strip()
    return sections


def parse_file(path: str, encoding: str = "utf-8") -> dict[str, dict[str, str]]:
    with open(path, encoding=encoding) as f:
        return parse(f.read())
