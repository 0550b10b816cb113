"""Which rules mutate a file, by its extension: Python's (mutations.py, read with `ast`) or
JavaScript/TypeScript's (js_mutations.py, read with tree-sitter). Both list `Mutation`s of the
same operators under the same contract, so the injector's draws and trees (injector.py) and a
repository's sources and tests (repository.py) ask here and never about a language.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import PurePosixPath

from data.bugs import js_mutations, mutations
from data.bugs.mutations import OPERATORS, Mutation


@dataclass(frozen=True)
class Rules:
    language: str
    sites: Callable[[str, str, tuple[str, ...], AbstractSet[int] | None], list[Mutation]]
    is_test_file: Callable[[str], bool]
    has_code: Callable[[str], bool]  # false for a file of the extension that holds no code (.d.ts)


PYTHON = Rules("python", mutations.sites, mutations.is_test_file, lambda path: True)
JAVASCRIPT = Rules(
    "javascript", js_mutations.sites, js_mutations.is_test_file, lambda path: js_mutations.grammar_of(path) is not None
)
# Extension -> its rules (TypeScript is JavaScript's: one runtime, one family of test runners).
RULES = {".py": PYTHON, **dict.fromkeys(js_mutations.GRAMMARS, JAVASCRIPT)}


def rules_of(path: str) -> Rules | None:
    """The rules of a source file the injector may mutate, or None (another language, a
    declaration file)."""
    rules = RULES.get(PurePosixPath(path).suffix)
    return rules if rules is not None and rules.has_code(path) else None


def language_of(path: str) -> str | None:
    """ "python", "javascript" (TypeScript included) or None: a file no rule mutates."""
    rules = rules_of(path)
    return rules.language if rules is not None else None


def is_test_file(path: str) -> bool:
    """A test file of its language (never mutated); a file of no language is none."""
    rules = rules_of(path)
    return rules is not None and rules.is_test_file(path)


def sites(
    path: str, source: str, operators: tuple[str, ...] = OPERATORS, lines: AbstractSet[int] | None = None
) -> list[Mutation]:
    """The mutations of `path`'s language (mutations.sites' contract); [] for a file of none."""
    rules = rules_of(path)
    return rules.sites(path, source, operators, lines) if rules is not None else []
