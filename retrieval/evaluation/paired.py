"""Statistics on paired per-query values: two systems (or two snapshots) scored on the same queries.

For a metric and queries q₁…qₙ, δᵢ = m_B(qᵢ) − m_A(qᵢ).

- `randomization_p`: two-sided paired randomization (Fisher) test. Each of m random permutations
  flips the sign of every δᵢ with probability ½; with b of them reaching |mean| ≥ |mean δ|,
  p = (b + 1) / (m + 1) (the observed assignment counts as one of the permutations: Phipson &
  Smyth 2010, "Permutation p-values should never be zero"), so p ≥ 1 / (m + 1), never 0.
  Sign flips come from `numpy.random.default_rng(seed)`: the same seed, the same p.
- `t_test_p`: two-sided paired Student's t-test, t = mean(δ) / (sd(δ) / √n), n − 1 degrees of
  freedom (`scipy.stats.ttest_rel`); p = 1 when every δ is 0; None ("not enough queries") with
  one query or when every δ is the same non-zero value (sd 0: t is undefined, not a p of 0).
- `p_text`: a p-value as shown: "p = 0.0123", "p < 0.001" below 0.001 (a sampled p is an
  estimate, its smallest values a bound), "not enough queries" for None.
- `smallest_p`: the smallest two-sided p the sign-flip test can give on n paired queries,
  2 / 2ⁿ (every δ of one sign: only the identity and the all-flipped assignment reach |mean δ|);
  a gate at α cannot fail when it is ≥ α.
- `gate_blind_spot`: why a gate "fail when the mean fell by more than a margin with p < α" cannot
  fail on the paired queries, or None. Only a query with a baseline value above 0 can fall (the
  metrics are 0–1), so with k such queries the smallest p is `smallest_p(k)`: when it is ≥ α no
  fall, however large, can fail the gate.
- `bootstrap_ci`: percentile bootstrap confidence interval of a mean: resample the n values with
  replacement `n_resamples` times, take the mean of each, and report the (1 − c)/2 and (1 + c)/2
  quantiles of those means (linear interpolation), c the confidence.
- `holm`: Holm–Bonferroni step-down adjusted p-values for m tests: sort p ascending,
  p̃₍ᵢ₎ = max_{j ≤ i} min(1, (m − j + 1) · p₍ⱼ₎), returned in the input order. Reject where p̃ < α.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from retrieval.types import RetrievalError


def randomization_p(deltas: Iterable[float], n_permutations: int = 10_000, seed: int = 42) -> float:
    """Two-sided paired randomization test on per-query differences (see the module docstring)."""
    d = np.asarray(list(deltas), dtype=np.float64)
    if not np.any(d):
        return 1.0
    if not (isinstance(n_permutations, int) and n_permutations >= 1):
        raise RetrievalError(f"n_permutations must be a whole number ≥ 1, got {n_permutations!r}")
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
    return (count + 1) / (n_permutations + 1)


NOT_ENOUGH_QUERIES = "not enough queries"
P_FLOOR = 0.001  # smaller p-values are shown as this bound


def p_text(p: float | None) -> str:
    """A p-value for a person (see the module docstring)."""
    if p is None:
        return NOT_ENOUGH_QUERIES
    return f"p < {P_FLOOR:g}" if p < P_FLOOR else f"p = {p:.3g}"


def smallest_p(n_queries: int) -> float:
    """The smallest two-sided sign-flip p on `n_queries` pairs (see the module docstring)."""
    return min(1.0, math.ldexp(1.0, 1 - n_queries)) if n_queries > 0 else 1.0  # 2^(1−n), 0.0 past the floats


def gate_blind_spot(baseline: Sequence[float], alpha: float) -> str | None:
    """Why the gate cannot fail on these paired queries (each one's `baseline` value), or None
    (see the module docstring)."""
    values = np.asarray(baseline, dtype=np.float64)
    can_fall = int((values > 0).sum())
    floor = smallest_p(can_fall)
    if floor >= alpha:
        return (f"{values.size} queries are paired with the baseline and {can_fall} of them can fall (score above "
                f"0): the smallest p the paired randomization test can give on {can_fall} is {floor:.3g}, not below "
                f"the gate's {alpha:g}, so no drop can fail it")
    return None


def t_test_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided paired t-test p-value of B against A; None when the queries cannot give one (see
    the module docstring)."""
    from scipy.stats import ttest_rel

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise RetrievalError(f"Paired values need the same queries: {a.size} against {b.size}")
    deltas = b - a
    if not np.any(deltas):
        return 1.0
    # one query, or no spread (up to rounding: 0.1 − 0 against 0.3 − 0.2): t is undefined
    if a.size < 2 or np.ptp(deltas) <= 1e-12 * max(1.0, float(np.abs(deltas).max())):
        return None
    p = float(ttest_rel(b, a).pvalue)
    return None if np.isnan(p) else p


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


def corrected_cv_ci(fold_means: Sequence[float], test_fraction: float, confidence: float = 0.95
                    ) -> tuple[float, float]:
    """Interval of a cross-validated mean difference that includes the tuning's own variance:
    the corrected resampled t of Nadeau & Bengio ("Inference for the generalization error",
    Machine Learning 52, 2003): with the J folds' mean differences d_j (each fold tuned on its
    own training queries, so their spread carries the tuning's variance), their variance s²
    and n_test / n_train = `test_fraction` (1/(k − 1) for k folds),

        mean(d) ± t_{J−1, (1+confidence)/2} · sqrt((1/J + n_test/n_train) · s²)

    (the 1/J of the naive t-interval understates it: the training sets overlap). E.g. d = (0.1,
    0.3), J = 2, ratio 1: s² = 0.02, sqrt(1.5 · 0.02) = 0.1732, t_{1, 0.975} = 12.706 → 0.2 ± 2.2."""
    from scipy.stats import t

    d = np.asarray(list(fold_means), dtype=float)
    if len(d) < 2:
        raise RetrievalError("A cross-validated interval needs at least 2 folds")
    half = float(t.ppf((1 + confidence) / 2, len(d) - 1)) * math.sqrt((1 / len(d) + test_fraction)
                                                                     * float(d.var(ddof=1)))
    return float(d.mean()) - half, float(d.mean()) + half


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
