"""Version ranges as package managers write them: "^1.2.3", "~1.2.3", ">=1.0.0 <2.0.0"."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable

from tinysemver.version import Version

_OPERATORS: dict[str, Callable[[Version, Version], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "=": operator.eq,
}


def _expand(term: str) -> list[tuple[str, Version]]:
    """One term of a range -> the comparators it stands for."""
    if term.startswith("^"):
        # Caret: any later version that does not change the major version.
        low = Version.parse(term[1:])
        return [(">=", low), ("<", low.next_major())]
    if term.startswith("~"):
        # Tilde: patch updates only.
        low = Version.parse(term[1:])
        return [(">=", low), ("<", Version(low.major, low.minor + 1, 0))]
    for symbol in (">=", "<=", ">", "<", "="):
        if term.startswith(symbol):
            return [(symbol, Version.parse(term[len(symbol):]))]
    return [("=", Version.parse(term))]


class Range:
    """The intersection of space-separated terms: ">=1.2.0 <1.5.0" needs both."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.comparators = [c for term in spec.split() for c in _expand(term)]
        if not self.comparators:
            raise ValueError(f"empty version range: {spec!r}")

    def contains(self, version: Version | str) -> bool:
        if isinstance(version, str):
            version = Version.parse(version)
        return all(_OPERATORS[symbol](version, bound) for symbol, bound in self.comparators)

    __contains__ = contains

    def __repr__(self) -> str:
        return f"Range({self.spec!r})"


def max_satisfying(versions: Iterable[str], spec: str) -> Version | None:
    """The highest of `versions` inside the range, or None."""
    allowed = Range(spec)
    return max((v for v in map(Version.parse, versions) if allowed.contains(v)), default=None)
