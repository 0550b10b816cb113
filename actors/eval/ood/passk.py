"""pass@k and its standard error. Pure standard library.

The unbiased estimator of Chen et al. 2021 (the HumanEval paper, eq. 1): with n samples of a
problem of which c pass, pass@k = 1 - C(n-c, k) / C(n, k), the chance that k samples drawn
without replacement from the n include a passing one; a suite's pass@k is its mean over
problems. Greedy pass@1 (the paper's Table 3) is the n = 1 case: the fraction passed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# The k reported for n samples: these up to n, and n itself.
KS = (1, 2, 5, 10, 20, 50, 100)


def pass_at_k(n: int, c: int, k: int) -> float:
    """One problem's estimate; needs 0 <= c <= n and 1 <= k <= n."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    # 1 - prod_{i=n-c+1}^{n} (1 - k/i): the ratio of binomials without the large factorials.
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_and_stderr(values: Sequence[float]) -> tuple[float, float]:
    """The mean over problems and its standard error (sample standard deviation / sqrt(count))."""
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var / len(values))


def pass_at_ks(counts: Sequence[tuple[int, int]]) -> dict[str, dict[str, float]]:
    """{"pass@k": {"score", "stderr"}} for each k in KS up to the smallest n, and that n, from
    per-problem (n, c)."""
    if not counts:
        return {}
    n_min = min(n for n, _ in counts)
    ks = sorted({k for k in KS if k <= n_min} | {n_min})
    out = {}
    for k in ks:
        score, stderr = mean_and_stderr([pass_at_k(n, c, k) for n, c in counts])
        out[f"pass@{k}"] = {"score": round(score, 6), "stderr": round(stderr, 6)}
    return out
