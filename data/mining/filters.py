"""The named, counted rules that decide which pull requests become training instances.

Every candidate ends in exactly one bucket: "kept", or the first rule below that rejects it
(rules run in REASONS order, cheapest first), or a skip reason for input the miner could not
use. The build's summary table and `_manifest.json` report these counts.

How this departs from the paper: SWE-RL names the kinds of filters (bots, empty or huge
changes, no programming-language file, linked issues for the seed set) but not their limits;
the limits below are our defaults, each a field of FilterConfig with a switch.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

# Evaluation order of the rules; the summary table lists counts in this order.
FILTERS: tuple[str, ...] = (
    "excluded",  # instance id on the exclusion list (e.g. SWE-bench ids, for clean evaluation)
    "excluded_repo",  # a PR of a repository on the repository exclusion list (e.g. SWE-bench's)
    "bot",  # authored by a bot, or a "bump" PR
    "no_linked_issue",  # links no issue (with --issues: no linked issue found in the dump)
    "empty",  # changes nothing
    "tests_only",  # changes only test files
    "binary",  # changes a binary file, symlink or submodule outside the tests
    "undecodable",  # a changed non-test file (or its path) is not UTF-8
    "no_code",  # changes no programming-language file outside the tests
    "too_many_files",  # the oracle patch changes more than max_files files
    "too_many_hunks",  # ... has more than max_hunks hunks
    "too_many_lines",  # ... adds and removes more than max_changed_lines lines
    "patch_mismatch",  # applying the patch to the context does not give the new contents
    "context_too_long",  # issue + context longer than max_context_chars (or _tokens)
    "duplicate",  # the same oracle patch as an instance already kept
    "near_excluded",  # problem statement + patch close to an evaluation row's (data/mining/neardup.py)
    "near_duplicate",  # problem statement + patch close to an instance already kept
)
# Input the miner could not use at all; never fatal, always counted.
SKIPS: tuple[str, ...] = (
    "git_error",  # a git command failed for this PR (e.g. a commit missing from a shallow clone)
    "other_repo",  # a SWE-bench row of another repository than the clone given
    "unknown_commit",  # a SWE-bench row whose base_commit the clone does not have
)
REASONS: tuple[str, ...] = ("kept", *FILTERS, *SKIPS)

_BOT_RE = re.compile(r"\[bot\]|dependabot|renovate|greenkeeper|pre-commit-ci|github-actions", re.I)
_BUMP_RE = re.compile(r"\bbump(s|ed)?\b", re.I)


@dataclass(frozen=True)
class FilterConfig:
    # Drop PRs whose author or source branch is a bot ([bot], dependabot, renovate, ...) or
    # whose title says "bump".
    bots: bool = True
    # Drop PRs that link no issue; None = on exactly when an issue dump is given (a plain
    # clone has no issue text, and most of its PRs say "fixes #N" nowhere).
    require_linked_issue: bool | None = None
    # Drop PRs that change nothing.
    empty: bool = True
    # Drop PRs that change only test files.
    tests_only: bool = True
    # Drop PRs with a binary/symlink/submodule change outside the tests; False = leave such
    # files out of the instance instead.
    binary: bool = True
    # Drop PRs with a non-UTF-8 file outside the tests; False = leave such files out instead.
    undecodable: bool = True
    # Drop PRs that change no programming-language file outside the tests.
    no_code: bool = True
    # Most files the oracle patch may change (0 = no limit).
    max_files: int = 10
    # Most hunks the oracle patch may have (0 = no limit).
    max_hunks: int = 40
    # Most added + removed lines the oracle patch may have (0 = no limit).
    max_changed_lines: int = 600
    # Longest issue + code context, in characters (used when no tokenizer is set; 0 = no limit).
    # 64k characters is about the paper's 16k-token context.
    max_context_chars: int = 64_000
    # Longest issue + code context in tokens, used instead when `tokenizer` is set.
    max_context_tokens: int = 16_384
    # Hugging Face tokenizer name or local directory for measuring the context ("" = characters).
    tokenizer: str = ""
    # Drop an instance whose oracle patch equals that of one already kept.
    dedupe: bool = True
    # Drop an instance whose problem statement + patch have an estimated Jaccard similarity
    # (MinHash of 5-token shingles, data/mining/neardup.py) at least this high with an evaluation row
    # (from the `--exclude` / `--exclude-repos` files) or with an instance already kept; 0 = off.
    near_dup_threshold: float = 0.8
    # Instance ids never to emit (e.g. every SWE-bench id, to keep evaluation clean).
    exclude_ids: frozenset[str] = field(default_factory=frozenset)
    # Repositories ("owner/name", lower case: GitHub's names are case-insensitive) none of
    # whose PRs to emit: the paper leaves SWE-bench's repositories out altogether.
    exclude_repo_names: frozenset[str] = field(default_factory=frozenset)


def is_bot(author: str, title: str, source_branch: str = "") -> bool:
    """The paper's bot rule: bot accounts by name, and version-bump PRs by title."""
    return bool(_BOT_RE.search(author) or _BOT_RE.search(source_branch) or _BUMP_RE.search(title))


@lru_cache(maxsize=4)
def _tokenizer(name: str):
    from transformers import AutoTokenizer  # heavy: only when a tokenizer is configured

    return AutoTokenizer.from_pretrained(name)


def context_size(texts: Iterable[str], cfg: FilterConfig) -> int:
    """Length of `texts` in the unit the limit uses: tokens with a tokenizer, else characters."""
    if cfg.tokenizer:
        tok = _tokenizer(cfg.tokenizer)
        return sum(len(tok.encode(t, add_special_tokens=False)) for t in texts)
    return sum(len(t) for t in texts)


def context_limit(cfg: FilterConfig) -> int:
    """The context budget (0 = none) in the unit context_size measures."""
    return cfg.max_context_tokens if cfg.tokenizer else cfg.max_context_chars


def over_limits(files: int, hunks: int, lines: int, cfg: FilterConfig) -> str | None:
    """The first size rule the oracle patch breaks, or None."""
    if cfg.max_files and files > cfg.max_files:
        return "too_many_files"
    if cfg.max_hunks and hunks > cfg.max_hunks:
        return "too_many_hunks"
    if cfg.max_changed_lines and lines > cfg.max_changed_lines:
        return "too_many_lines"
    return None


def new_counts() -> Counter[str]:
    """A counter with every reason present (zeros included), so that reports list them all."""
    return Counter(dict.fromkeys(REASONS, 0))


def summary_table(counts: Counter[str], candidates: int) -> str:
    """A fixed-width table of the counts: reason, count, share of candidates."""
    lines = [f"{'reason':<18} {'count':>8} {'share':>7}", "-" * 35]
    for reason in REASONS:
        n = counts[reason]
        share = f"{100 * n / candidates:6.1f}%" if candidates else "     -"
        lines.append(f"{reason:<18} {n:>8} {share:>7}")
    lines.append("-" * 35)
    lines.append(f"{'candidates':<18} {candidates:>8}")
    return "\n".join(lines)
