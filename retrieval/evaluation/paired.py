"""Statistics on paired per-query values: two systems (or two snapshots) scored on the same queries.

For a metric and queries q₁…qₙ, δᵢ = m_B(qᵢ) − m_A(qᵢ).

- `randomization_p`: two-sided paired randomization (Fisher) test. Each permutation flips the
  sign of every δᵢ with probability ½; p = (permutations with |mean| ≥ |mean δ|) / permutations.
  Sign flips come from `numpy.random.default_rng(seed)`: the same seed, the same p.
- `t_test_p`: two-sided paired Student's t-test, t = mean(δ) / (sd(δ) / √n), n − 1 degrees of
  freedom (`scipy.stats.ttest_rel`); p = 1 when every δ is 0.
- `bootstrap_ci`: percentile bootstrap confidence interval of a mean: resample the n values with
  replacement `n_resamples` times, take the mean of each, and report the (1 − c)/2 and (1 + c)/2
  quantiles of those means (linear interpolation), c the confidence.
- `holm`: Holm–Bonferroni step-down adjusted p-values for m tests: sort p ascending,
  p̃₍ᵢ₎ = max_{j ≤ i} min(1, (m − j + 1) · p₍ⱼ₎), returned in the input order. Reject where p̃ < α.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from retrieval.types import RetrievalError


def randomization_p(deltas: Iterable[float], n_permutations: int = 10_000, seed: int = 42) -> float:
    """Two-sided paired randomization test on per-query differences (see the module docstring)."""
    d = np.asarray(list(deltas), dtype=np.float64)
    if not np.any(d):
        return 1.0
    observed = abs(d.mean())
    rng = np.random.default_rng(seed)
    count = 0
    # In blocks, so memory stays ~n_queries × 1,000 numbers whatever n_permutations is.
    for start in range(0, n_permutations, 1000):
        size = min(1000, n_permutations - start)
        signs = rng.integers(0, 2, size=(size, d.size)) * 2 - 1
        means = np.abs((signs * d).mean(axis=1))
        # A relative tolerance so the identity flip (and its equal-valued twins) always counts.
        count += int((means >= observed - 1e-12 * max(1.0, observed)).sum())
    return count / n_permutations


def t_test_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired t-test p-value of B against A (see the module docstring)."""
    from scipy.stats import ttest_rel

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise RetrievalError(f"Paired values need the same queries: {a.size} against {b.size}")
    deltas = b - a
    if not np.any(deltas):
        return 1.0
    if a.size < 2:
        raise RetrievalError("A paired t-test needs at least two queries")
    if np.all(deltas == deltas[0]):  # no spread: t is infinite
        return 0.0
    return float(ttest_rel(b, a).pvalue)


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, n_resamples: int = 10_000,
                 seed: int = 42) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (see the module docstring)."""
    if not 0 < confidence < 1:
        raise RetrievalError(f"confidence must be between 0 and 1, got {confidence}")
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise RetrievalError("A confidence interval needs at least one value")
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, 1000):  # blocks: memory ~ n × 1,000 indexes
        size = min(1000, n_resamples - start)
        means[start:start + size] = x[rng.integers(0, x.size, size=(size, x.size))].mean(axis=1)
    low, high = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order (see the module docstring)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m, dtype=np.float64)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return adjusted.tolist()
