"""Typed access to a parsed INI file: `Config.from_text(text).get_int("server", "port")`."""

from __future__ import annotations

from inireader.parser import parse


class Config:
    def __init__(self, sections: dict[str, dict[str, str]]) -> None:
        self._sections = sections

    @classmethod
    def from_text(cls, text: str) -> Config:
        return cls(parse(text))

    def sections(self) -> list[str]:
        return list(self._sections)

    def get(self, section: str, key: str, default: str | None = None) -> str | None:
        # The parser lower-cases keys, so lookups must too.
        return self._sections.get(section, {}).get(key.lower(), default)

    def get_int(self, section: str, key: str, default: int | None = None) -> int | None:
        value = self.get(section, key)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"[{section}] {key} = {value!r} is not an integer") from None

    def get_bool(self, section: str, key: str, default: bool = False) -> bool:
        value = self.get(section, key)
        if value is None:
            return default
        return bool(value)
