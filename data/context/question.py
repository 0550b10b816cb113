"""Relevant unchanged files chosen by a model (`--context model`): the question and its answer.

The paper asks Llama-3.1-70B-Instruct, given an issue and the files its PR changes, which
other files of the repository are relevant, and adds them to the context. This module is the
pure part of that step: it lists the candidate files of the repository at the base commit,
writes one question per instance, and turns the model's answer into paths (data/context/file_picks.py
reads the answer). The engine that answers lives in actors/rollout/context_engine.py; data/build.py
batches every instance's question into a few generate calls and falls back to the import
heuristic (data/context/imports.py) when the model names no usable file.

How it differs from the paper: the paper's prompt is not published; ours shows the issue
text, the oracle patch (trimmed to a budget: the paper says "the changed files", we show how
they change) and the repository's tree of candidates, and asks for at most K paths, one per
line. Candidates are the repository's code files at the base commit minus the changed files
and test files; in a large repository only the `max_tree_files` nearest the changed files
(by shared directory prefix) are shown, so the question fits a small model's context.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from data.context.file_picks import Picks, read_picks, render_tree
from data.git.diffs import is_code_path, is_test_path

SYSTEM = "You are an expert software engineer who knows which files of a repository belong together."

# Ways the context of one instance was chosen (the sidecar's `chosen`, the manifest's counts).
CHOSEN = ("model", "imports_fallback", "none")


@dataclass(frozen=True)
class Question:
    instance_id: str
    messages: list[dict[str, str]]  # chat messages (system, user) for the model's template
    known: list[str]  # every file of the tree at the base commit (what the answer may name)
    candidates: list[str]  # the files the answer may pick: shown in the tree


@dataclass(frozen=True)
class Answer:
    picks: list[str]  # candidate paths, in the answer's order, at most K
    unknown: list[str]  # path-like tokens naming no file of the repository
    not_candidates: list[str]  # files of the repository that may not be picked (changed, tests)


@dataclass
class ContextStats:
    """What the manifest reports under `context` (one record per build)."""

    asked: int = 0  # questions put to the model
    too_long: int = 0  # questions over the engine's prompt budget: not asked (fallback instead)
    answers_with_picks: int = 0  # answers naming at least one candidate
    files_picked: int = 0  # candidate files named by the model (before the context budget)
    files_added: int = 0  # of those, added to a context (the rest did not fit its budget)
    unknown_paths: int = 0  # path-like tokens naming no file of the repository: dropped
    not_candidates: int = 0  # named files that may not be picked (changed files, tests): dropped
    fallback: int = 0  # instances whose context came from the import heuristic instead
    model_s: float = 0.0  # seconds in the model's generate calls (engine start-up included)
    chosen: Counter[str] = field(default_factory=Counter)  # instances per CHOSEN entry

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {k: v for k, v in vars(self).items() if k != "chosen"}
        out["chosen"] = {k: self.chosen[k] for k in CHOSEN}
        return out


def candidate_files(tree: list[str], changed: list[str], max_files: int) -> list[str]:
    """Code files of `tree` the model may pick: not changed, not tests; the `max_files` whose
    directories share the longest prefix with a changed file's (ties by path) when there are
    more. Sorted by path (the tree renders them in that order anyway)."""
    skip = set(changed)
    files = [p for p in tree if p and p not in skip and is_code_path(p) and not is_test_path(p)]
    if max_files and len(files) > max_files:
        dirs = [PurePosixPath(c).parent.parts for c in changed]

        def nearness(path: str) -> tuple[int, str]:
            parts = PurePosixPath(path).parent.parts
            shared = max((_common(parts, d) for d in dirs), default=0)
            return -shared, path

        files = sorted(files, key=nearness)[:max_files]
    return sorted(files)


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[... trimmed]"


def question(
    instance_id: str,
    statement: str,
    patch: str,
    changed: list[str],
    tree: list[str],
    k: int,
    *,
    max_tree_files: int,
    max_text_chars: int,
) -> Question:
    """One instance's question: the issue, the oracle patch, the candidates' tree, the ask.

    `max_text_chars` bounds the issue text and the patch, each (the tree is bounded by
    `max_tree_files`)."""
    candidates = candidate_files(tree, changed, max_tree_files)
    user = "\n".join(
        [
            "An issue of a software repository was fixed by changing the files listed below.",
            "",
            "<issue>",
            _trim(statement.strip(), max_text_chars),
            "</issue>",
            "",
            "<changed_files>",
            *changed,
            "</changed_files>",
            "",
            "<patch>",
            _trim(patch.strip(), max_text_chars),
            "</patch>",
            "",
            "<repository_files>",
            render_tree(candidates),
            "</repository_files>",
            "",
            f"Which of the repository files above, other than the changed files, would a developer "
            f"read to understand and fix this issue? Answer with at most {k} full paths from the "
            "repository files, one per line, most relevant first, and nothing else.",
        ]
    )
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    return Question(instance_id, messages, [p for p in tree if p], candidates)


def read_answer(text: str, q: Question, k: int) -> Answer:
    """The model's answer -> at most `k` candidate paths; every other named path is counted."""
    picks: Picks = read_picks(text, q.known, limit=len(q.known))
    allowed = set(q.candidates)
    chosen = [p for p in picks.paths if p in allowed]
    return Answer(chosen[:k], picks.unknown, [p for p in picks.paths if p not in allowed])
