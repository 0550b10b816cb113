"""Rules 4 and 5 of the SWE-RL reward: per-file unified diffs and their similarity, with a time cap.

Rule 4: a file's change is `unified_diff(old.splitlines(), new.splitlines(), n=3, lineterm="")`
without its two header lines, joined with newlines; a file whose diff is empty is left out.
Rule 5: over the union of paths of the predicted and the oracle diffs, a path scores 0 when
either side is missing or empty, else `SequenceMatcher(None, pred, oracle, autojunk=False)
.ratio()`; the reward is the mean, and 1.0 when there are no paths at all.

Speed: `cydifflib` is the standard library's difflib compiled with Cython, the same algorithm
and the same arithmetic, about 20x faster; property tests check that its ratios and diffs
equal `difflib`'s bit for bit. The mean is `math.fsum(...) / n`, which does not depend on the
order of the paths (the reference sums an unordered set; means agree to 1e-12).

Time cap (the departure from the paper, which has none): SequenceMatcher is quadratic and,
running in C, cannot be interrupted from Python. The cap is therefore decided *before*
running, from the sizes alone, so that the same input always gets the same reward whatever
the machine's load. `work_units` counts the (a[i], b[j]) pairs of equal elements that
SequenceMatcher's first `find_longest_match` visits, plus both lengths; its later recursive
calls visit subsets of those pairs, and on real and random diffs one unit took 6-35 ns here
(see docs/reward.md). A pair whose units x `SECONDS_PER_UNIT` exceed `max_pair_seconds` is not
compared: the path scores 0 and is reported as timed out. The same bound guards the line diff
of rule 4 for predicted files. Inputs built to defeat the estimate (deep recursion over few
pairs) are stopped by the reward pool's per-call timeout instead (actors/driver/reward_pool.py).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import cydifflib

# Seconds per work unit, calibrated on the 2-core development machine: the slowest unit seen on
# real and random diffs (35 ns) rounded up. A fixed constant, not a measurement at run time, so
# that the decision is deterministic; faster machines only make the cap more conservative.
SECONDS_PER_UNIT = 40e-9
# difflib's autojunk heuristic (used by unified_diff, never by the ratio): in a sequence b of at
# least 200 elements, an element occurring more than len(b) // 100 + 1 times is ignored.
_AUTOJUNK_MIN_LEN = 200


def work_units(a: Sequence[Hashable], b: Sequence[Hashable], *, autojunk: bool) -> int:
    """Pairs of equal elements SequenceMatcher(None, a, b) visits in its first pass, plus lengths."""
    counts_b = Counter(b)
    if autojunk and len(b) >= _AUTOJUNK_MIN_LEN:
        popular = len(b) // 100 + 1
        counts_b = Counter({item: n for item, n in counts_b.items() if n <= popular})
    pairs = sum(n * counts_b[item] for item, n in Counter(a).items() if item in counts_b)
    return len(a) + len(b) + pairs


def over_cap(a: Sequence[Hashable], b: Sequence[Hashable], *, autojunk: bool, max_pair_seconds: float | None) -> bool:
    """True when SequenceMatcher(None, a, b) would exceed the cap (None = no cap).

    Counting the pairs costs a pass over both sequences, as much as comparing two small diffs:
    it is skipped when even every pair matching (len(a) * len(b)) stays under the cap, or when
    the lengths alone exceed it.
    """
    if max_pair_seconds is None:
        return False
    budget = max_pair_seconds / SECONDS_PER_UNIT
    if len(a) * len(b) + len(a) + len(b) <= budget:
        return False
    if len(a) + len(b) > budget:  # the lengths alone are over: no need to count
        return True
    return work_units(a, b, autojunk=autojunk) > budget


def diff_body(old: str, new: str) -> str:
    """Rule 4 for one file: the unified diff without its two header lines ("" when unchanged)."""
    return _diff_lines(old.splitlines(), new.splitlines())


def _diff_lines(old_lines: list[str], new_lines: list[str]) -> str:
    lines = cydifflib.unified_diff(old_lines, new_lines, n=3, lineterm="")
    return "\n".join(itertools.islice(lines, 2, None))


def file_diffs(
    code_context: Mapping[str, str], new_content: Mapping[str, str], max_pair_seconds: float | None = None
) -> dict[str, str | None]:
    """Rule 4 for every path of new_content: path -> diff body, empty diffs left out.

    A path whose line diff would exceed the cap maps to None (its diff is known to be non-empty
    but is not computed).
    """
    diffs: dict[str, str | None] = {}
    for path, new in new_content.items():
        # The spec's rule: a path missing from the context is diffed against "" (a new file).
        old_lines, new_lines = code_context.get(path, "").splitlines(), new.splitlines()
        if old_lines == new_lines:
            continue
        if over_cap(old_lines, new_lines, autojunk=True, max_pair_seconds=max_pair_seconds):
            diffs[path] = None
            continue
        diffs[path] = _diff_lines(old_lines, new_lines)
    return diffs


def diff_ratio(pred: str, oracle: str) -> float:
    """Rule 5 for one path with both sides non-empty (argument order matters)."""
    return cydifflib.SequenceMatcher(None, pred, oracle, autojunk=False).ratio()


@dataclass(frozen=True)
class Comparison:
    """Rule 5's result: the mean, the per-path ratios, and the paths the time cap scored 0."""

    reward: float
    ratios: dict[str, float]
    timed_out: tuple[str, ...]


def compare_diffs(
    pred: Mapping[str, str | None], oracle: Mapping[str, str | None], max_pair_seconds: float | None = None
) -> Comparison:
    """Rule 5 over the union of paths; a None diff (over the cap) scores 0 as timed out.

    A capped path that the other side lacks would have scored 0 anyway: it is not reported.
    """
    ratios: dict[str, float] = {}
    timed_out: list[str] = []
    for path in sorted(set(pred) | set(oracle)):
        left, right = pred.get(path, ""), oracle.get(path, "")
        if left == "" or right == "":
            ratios[path] = 0.0
        elif left is None or right is None or over_cap(left, right, autojunk=False, max_pair_seconds=max_pair_seconds):
            ratios[path] = 0.0
            timed_out.append(path)
        else:
            ratios[path] = diff_ratio(left, right)
    reward = math.fsum(ratios.values()) / len(ratios) if ratios else 1.0
    return Comparison(reward, ratios, tuple(timed_out))
