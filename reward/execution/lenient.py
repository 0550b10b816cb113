"""A snapshot's build metadata read leniently: the requirement strings its own build refuses,
repaired or dropped, for the sandboxed build alone.

A release's pyproject.toml, setup.cfg or setup.py may declare a requirement in a form the build's
parser refuses (`pytest>=7.*`: a wildcard after `>=`; `foo; python_version<3.8`: an unquoted
marker value; `cloudpickle; python_implementation == "CPython"`: a marker name packaging 22
dropped, which the build's pip refuses as it reads the built metadata). setuptools validates
every dependency and extra as it reads the metadata, and pip every requirement of the built
wheel, so the build fails the same way on every interpreter, with every requirement set, and no
candidate of the derivation can run the tests. When the snapshot's build failed and its metadata has such a
requirement, environments.py builds it once more over `repaired(snapshot)`: the same files with
each refused requirement

    repaired    read another way that means what it says: `.*` dropped after an ordering
                operator (`>=7.*` is `>=7`), a single `=` read as `==` (`tree-sitter=0.24`), a
                marker's legacy name by its PEP 508 one (`python_implementation` is
                `platform_python_implementation`: attrs 23.2.0's extras), a marker's bare
                value quoted, a trailing comma dropped
    dropped     removed from its list when no such reading parses, with a note

Only that build sees the change (sandbox.run's `changes`, over the snapshot's files in its
overlay): the tests run on the commit's files as they are. Every change is a note in the
environment (environments.REPAIRED) and in the derivation's record. The text is the snapshot's:
read here as data, never run; setup.py is changed only at the string literal that is the
refused requirement.
"""

from __future__ import annotations

import configparser
import contextlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

# An ordering operator followed by a wildcard version (`>=7.*`): PEP 440 allows `.*` after
# == and != only.
_ORDERED_WILDCARD = re.compile(r"(>=|<=|~=|>|<)\s*([0-9][0-9A-Za-z.+!-]*?)\.\*")
# A single `=` between the name and a version (`tree-sitter=0.24`), which means `==`.
_SINGLE_EQUALS = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?)\s*=\s*(?=[0-9])")
# A marker variable compared with a bare value (`python_version < 3.8`), which PEP 508 quotes.
_MARKER_VARS = (
    "python_version|python_full_version|os_name|sys_platform|platform_release|platform_system"
    "|platform_version|platform_machine|platform_python_implementation|implementation_name"
    "|implementation_version|extra"
)
# Marker names packaging 22 no longer takes (attrs 23.2.0's `python_implementation == "CPython"`),
# and the names PEP 508 has for them.
_LEGACY_MARKERS = {
    "python_implementation": "platform_python_implementation",
    "platform.python_implementation": "platform_python_implementation",
    "os.name": "os_name",
    "sys.platform": "sys_platform",
    "platform.version": "platform_version",
    "platform.machine": "platform_machine",
}
_LEGACY_MARKER = re.compile(
    r"(?<![\w.])(" + "|".join(re.escape(k) for k in sorted(_LEGACY_MARKERS, key=len, reverse=True)) + r")(?![\w.])"
)
_BARE_MARKER = re.compile(rf"\b({_MARKER_VARS})\s*(===|==|!=|<=|>=|~=|<|>)\s*([A-Za-z0-9_.*+-]+)")
# A setup.py string literal that reads as a requirement with a version (a name, then an operator).
_SETUP_PY_LITERAL = re.compile(
    r"""(['"])([A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]'"]*\])?\s*\(?\s*(?:===|==|!=|<=|>=|~=|<|>)[^'"\n]*)\1"""
)


@dataclass(frozen=True)
class Repair:
    """One refused requirement of a metadata file, and what the build reads instead."""

    file: str  # "pyproject.toml", "setup.cfg", "setup.py"
    written: str  # the requirement as the file has it
    read_as: str | None  # what the build reads; None: dropped

    def note(self) -> str:
        if self.read_as is None:
            return f"{self.file}: {self.written!r} dropped (no reading of it is a requirement)"
        return f"{self.file}: {self.written!r} read as {self.read_as!r}"


def valid(requirement: str) -> bool:
    try:
        Requirement(requirement)
    except InvalidRequirement:
        return False
    return True


def reading(requirement: str) -> str | None:
    """`requirement` read another way that parses (module docstring), or None when none does."""
    text = requirement.strip().rstrip(",").strip()
    name, semi, marker = text.partition(";")
    name = _SINGLE_EQUALS.sub(r"\1==", _ORDERED_WILDCARD.sub(r"\1\2", name))
    if semi:
        marker = _LEGACY_MARKER.sub(lambda m: _LEGACY_MARKERS[m.group(1)], marker)
        marker = _BARE_MARKER.sub(lambda m: f'{m.group(1)} {m.group(2)} "{m.group(3)}"', marker)
    text = f"{name.strip()}; {marker.strip()}" if semi else name.strip()
    return text if valid(text) else None


def refused(snapshot: Path) -> list[Repair]:
    """Each requirement of the snapshot's build metadata that does not parse, and its reading."""
    out: list[Repair] = []
    for file, found in (
        ("pyproject.toml", _pyproject(_read(snapshot / "pyproject.toml"))),
        ("setup.cfg", _setup_cfg(_read(snapshot / "setup.cfg"))),
        ("setup.py", [m.group(2) for m in _SETUP_PY_LITERAL.finditer(_read(snapshot / "setup.py"))]),
    ):
        for written in dict.fromkeys(found):
            if not valid(written):
                out.append(Repair(file, written, reading(written)))
    return out


def repaired(snapshot: Path) -> tuple[dict[str, str | None], list[Repair]]:
    """(the metadata files as the build reads them, for sandbox.run's `changes`; the repairs made).
    Empty when every requirement parses."""
    repairs = refused(snapshot)
    changes: dict[str, str | None] = {}
    for file in dict.fromkeys(r.file for r in repairs):
        text = _read(snapshot / file)
        for r in (r for r in repairs if r.file == file):
            text = _setup_cfg_edit(text, r) if file == "setup.cfg" else _literal_edit(text, r)
        changes[file] = text
    return changes, repairs


def _literal_edit(text: str, r: Repair) -> str:
    """The quoted literal `r.written` replaced (TOML, Python), or removed with its comma."""
    for quote in ('"', "'"):
        literal = f"{quote}{r.written}{quote}"
        if literal in text:
            if r.read_as is not None:
                return text.replace(literal, quote + r.read_as.replace(quote, "'" if quote == '"' else '"') + quote)
            return re.sub(re.escape(literal) + r"\s*,?", "", text)
    return text


def _setup_cfg_edit(text: str, r: Repair) -> str:
    """The line of a setup.cfg list that is `r.written` replaced or removed (on its key's line:
    emptied)."""
    written = r.written.strip()
    keyed = re.compile(r"^\s*[\w.-]+\s*[=:]\s*" + re.escape(written) + r"\s*$")  # `key = value` on one line
    lines = []
    for line in text.splitlines(keepends=True):
        if line.strip() == written or keyed.match(line):
            if r.read_as is None and line.strip() == written:
                continue
            line = line.replace(written, r.read_as or "", 1)
        lines.append(line)
    return "".join(lines)


def _pyproject(text: str) -> list[str]:
    try:
        project: Any = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError:
        return []
    if not isinstance(project, dict):
        return []
    found = list(project.get("dependencies", []) or [])
    extras = project.get("optional-dependencies", {}) or {}
    for reqs in extras.values() if isinstance(extras, dict) else []:
        found += reqs if isinstance(reqs, list) else []
    return [r for r in found if isinstance(r, str)]


def _setup_cfg(text: str) -> list[str]:
    cfg = configparser.RawConfigParser(strict=False)
    with contextlib.suppress(configparser.Error):
        cfg.read_string(text)
    values = [cfg.get("options", "install_requires")] if cfg.has_option("options", "install_requires") else []
    if cfg.has_section("options.extras_require"):
        values += [cfg.get("options.extras_require", k) for k in cfg.options("options.extras_require")]
    # A dangling list: one requirement a line (comments and blank lines are not requirements).
    return [ln.strip() for v in values for ln in v.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
