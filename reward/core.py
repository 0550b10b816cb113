"""The SWE-RL reward (Wei et al. 2025, section 2.2): one model output in, one float out.

    reward = -1                          when the output is malformed (rules 1-3)
           = mean over files of ratio    otherwise (rules 4-5), in [0, 1]

Rules 1-3 (format, edits, apply) live in `reward.parse` and `reward.apply`, rules 4-5 (diffs
and their similarity) in `reward.similarity`, rule 6 (diff-vs-diff, for agents that emit
patches) in `reward.patches`; the literal, slow transcription is `reward.spec`. This
module is the one boundary where a rejected output becomes -1 and every outcome a
`RewardResult` with its reason.

Departures from the paper's released rule, all opt-in guards that leave real outputs alone:
- `max_pair_seconds`: a (predicted, oracle) diff pair whose similarity would take longer is
  scored 0 with error "timeout: <path>" and `timed_out=True`; the decision comes from the sizes
  alone (deterministic), see `reward.similarity`. None (the default, and the CLI) = no cap.
- a predicted file that `str.replace` would grow past `reward.apply.MAX_CONTENT_CHARS` is
  treated the same way (error "too large: <path>"), always: the reference would run out of memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reward.apply import apply_edits
from reward.parse import Rejected, parse_output, quote
from reward.patches import file_changes
from reward.similarity import Comparison, compare_diffs, file_diffs


@dataclass(frozen=True)
class RewardResult:
    """The reward of one output and why."""

    reward: float  # in [-1, 1]; -1 = malformed output
    error: str | None = None  # None, or the reason ("search block 1 not found in a.py", "timeout: a.py")
    format_ok: bool = True  # False exactly when rule 1 (format) or rule 2 (no edit) failed
    timed_out: bool = False  # a pair hit the time cap (or a predicted file the size guard)
    resolved: bool | None = None  # kinds that run the tests: every FAIL_TO_PASS and PASS_TO_PASS passed


def oracle_diffs(code_context: Mapping[str, str], oracle_new_content: Mapping[str, str]) -> dict[str, str | None]:
    """Rule 4 for the oracle (never capped): compute once per instance, reuse for every rollout."""
    return file_diffs(code_context, oracle_new_content)


def _result(similarity: Comparison, oversized: Sequence[str]) -> RewardResult:
    reasons = [f"timeout: {quote(path)}" for path in similarity.timed_out if path not in oversized]
    reasons += [f"too large: {quote(path)}" for path in oversized if path in similarity.timed_out]
    return RewardResult(similarity.reward, "; ".join(reasons) or None, True, bool(reasons))


def score_with_oracle_diffs(
    code_context: Mapping[str, str],
    oracle: Mapping[str, str | None],
    output: str,
    *,
    max_pair_seconds: float | None = None,
) -> RewardResult:
    """Rules 1-5 against precomputed oracle diffs (see `oracle_diffs`)."""
    try:
        applied = apply_edits(code_context, parse_output(output))
    except Rejected as rejected:
        return RewardResult(-1.0, rejected.reason, rejected.format_ok, False)
    predicted = file_diffs(code_context, applied.new_content, max_pair_seconds)
    # An oversized file's diff is non-empty but never computed: it enters rule 5 as capped.
    predicted.update(dict.fromkeys(applied.oversized))
    return _result(compare_diffs(predicted, oracle, max_pair_seconds), applied.oversized)


def changed_files(code_context: Mapping[str, str], files: Mapping[str, str]) -> dict[str, str]:
    """The files whose content differs from the code context (a file not in it counts as "")."""
    return {p: c for p, c in files.items() if c != code_context.get(p, "")}


def exact_match(code_context: Mapping[str, str], oracle_new_content: Mapping[str, str], output: str) -> RewardResult:
    """The discrete reward (the paper's section 3.6 ablation): -1 for a malformed output (rules
    1-3), 1 when its edits leave exactly the oracle's files changed, with exactly the oracle's
    content (the evaluation's exact-match rate reads the same), else 0."""
    try:
        applied = apply_edits(code_context, parse_output(output))
    except Rejected as rejected:
        return RewardResult(-1.0, rejected.reason, rejected.format_ok, False)
    if applied.oversized:
        return RewardResult(0.0, "; ".join(f"too large: {quote(p)}" for p in applied.oversized), True, True)
    same = changed_files(code_context, applied.new_content) == changed_files(code_context, oracle_new_content)
    return RewardResult(1.0 if same else 0.0, None if same else "not the oracle's change")


def score_output(
    code_context: Mapping[str, str],
    oracle_new_content: Mapping[str, str],
    output: str,
    *,
    max_pair_seconds: float | None = None,
) -> RewardResult:
    """Rules 1-5: the reward of a model output against the oracle's new file contents."""
    return score_with_oracle_diffs(
        code_context, oracle_diffs(code_context, oracle_new_content), output, max_pair_seconds=max_pair_seconds
    )


def score_patches(
    oracle_patches: str | Sequence[str], pred_patches: str | Sequence[str], *, max_pair_seconds: float | None = None
) -> RewardResult:
    """Rule 6: the rule-5 score of predicted unified diffs against oracle ones; never -1."""
    similarity = compare_diffs(file_changes(pred_patches), file_changes(oracle_patches), max_pair_seconds)
    return _result(similarity, ())
