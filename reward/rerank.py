"""Candidate patches of the Agentless-Mini evaluation: normalization, de-duplication, the vote.

Two candidates are the same fix when the files they produce are the same up to formatting:
each changed file is normalized (Python that parses: `ast.unparse` of its tree, so whitespace,
comments, quoting and line breaks do not count; anything else: trailing whitespace and blank
lines dropped), and a candidate's key is its (path, normalized content) pairs sorted by path,
so the order of its edits and files does not count either. As in the paper, the vote is over
these normalized patches: the most frequent key among the survivors of the test filters wins,
ties broken by the reproduction tests passed, then by first appearance (deterministic).
Unlike Agentless, docstrings are kept in the key (a docstring change is rarely the fix, but
dropping them would merge candidates that differ only there; both are rare on real outputs).
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Key = tuple[tuple[str, str], ...]


def normalize_file(path: str, content: str) -> str:
    """One file's content up to formatting (see the module docstring)."""
    if path.endswith((".py", ".pyi")):
        try:
            with warnings.catch_warnings():  # invalid escapes in the candidate's code
                warnings.simplefilter("ignore")
                return ast.unparse(ast.parse(content))
        except (SyntaxError, ValueError, RecursionError):
            pass
    return "\n".join(line.rstrip() for line in content.splitlines() if line.strip())


def patch_key(changed: Mapping[str, str]) -> Key:
    """The key of a candidate given the new content of the files it changes ("" = deleted)."""
    return tuple(sorted((path, normalize_file(path, content)) for path, content in changed.items()))


@dataclass(frozen=True)
class Candidate:
    key: Key
    patch: str  # the first sample's diff with this key (what is submitted if it wins)
    votes: int  # samples that normalize to this key


def deduplicate(samples: Sequence[tuple[Key, str]]) -> list[Candidate]:
    """(key, patch) per applied sample -> one Candidate per key, in order of first appearance."""
    first: dict[Key, str] = {}
    votes: dict[Key, int] = {}
    for key, patch in samples:
        first.setdefault(key, patch)
        votes[key] = votes.get(key, 0) + 1
    return [Candidate(key, patch, votes[key]) for key, patch in first.items()]


def vote(candidates: Sequence[Candidate], repro_passed: Sequence[int]) -> int | None:
    """Index of the winner: most votes, then most reproduction tests passed, then the first;
    None for no candidate."""
    if not candidates:
        return None
    order = sorted(range(len(candidates)), key=lambda i: (-candidates[i].votes, -repro_passed[i], i))
    return order[0]
