"""Semantic version parsing and ordering (https://semver.org, version 2.0.0)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering

_VERSION_RE = re.compile(
    r"^v?(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z.-]+))?(?:\+(?P<build>[0-9A-Za-z.-]+))?$"
)


class InvalidVersion(ValueError):
    """The text is not a semantic version."""


@total_ordering
@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    # Build metadata never takes part in comparisons.
    build: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, text: str) -> Version:
        match = _VERSION_RE.match(text.strip())
        if match is None:
            raise InvalidVersion(f"not a semantic version: {text!r}")
        pre, build = match.group("pre"), match.group("build")
        return cls(
            int(match.group("major")),
            int(match.group("minor")),
            int(match.group("patch")),
            tuple(pre.split(".")) if pre else (),
            tuple(build.split(".")) if build else (),
        )

    def _key(self) -> tuple:
        return (self.major, self.minor, self.patch, self.prerelease)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    def next_major(self) -> Version:
        return Version(self.major + 1, 0, 0)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text
