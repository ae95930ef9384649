"""Paired statistics (retrieval/evaluation/paired.py) on values small enough to compute by hand, and the
bootstrap against scipy."""

import math

import numpy as np
import pytest
from scipy.stats import bootstrap

from retrieval.evaluation.paired import bootstrap_ci, holm, p_text, randomization_p, smallest_p, t_test_p
from retrieval.types import RetrievalError


def test_t_test_p_by_hand():
    # δ = 1, 2, 3: mean 2, sd 1, t = 2 / (1 / √3) = √12 with 2 degrees of freedom, whose two-sided
    # p is 1 − t / √(2 + t²) (Student's t with 2 df has cdf ½ + t / (2√(2 + t²))).
    assert t_test_p([0, 0, 0], [1, 2, 3]) == pytest.approx(1 - math.sqrt(12) / math.sqrt(14), abs=1e-12)
    assert t_test_p([1, 2, 3], [0, 0, 0]) == pytest.approx(1 - math.sqrt(12) / math.sqrt(14), abs=1e-12)
    assert t_test_p([0.3, 0.5], [0.3, 0.5]) == 1.0  # the same values: indistinguishable
    from scipy.stats import ttest_rel

    a, b = [0.1, 0.4, 0.2], [0.3, 0.5, 0.6]
    assert t_test_p(a, b) == pytest.approx(ttest_rel(b, a).pvalue, abs=1e-12)


def test_t_test_needs_pairs_and_spread():
    with pytest.raises(RetrievalError, match="same queries: 2 against 3"):
        t_test_p([0, 1], [0, 1, 2])
    # no p, not p = 0 or NaN: one query, or every query better by the same amount (sd 0, t undefined)
    assert t_test_p([0], [1]) is None
    assert t_test_p([0.0, 0.5], [0.25, 0.75]) is None
    assert t_test_p([0.0, 0.2], [0.1, 0.3]) is None  # 0.1 − 0 and 0.3 − 0.2 differ only by rounding
    assert p_text(t_test_p([0], [1])) == "not enough queries"


def test_randomization_p_is_the_exact_share_of_sign_flips():
    # δ = (1, 1): the four flips have means 1, 0, 0, −1; two reach |1|, so the exact p is ½.
    assert randomization_p([1.0, 1.0], n_permutations=40_000, seed=3) == pytest.approx(0.5, abs=0.01)
    assert randomization_p([0.0, 0.0, 0.0]) == 1.0
    assert randomization_p([0.2, -0.1, 0.4], seed=5) == randomization_p([0.2, -0.1, 0.4], seed=5)


def test_a_randomization_p_is_never_0():
    # 30 queries all better by 1: no random flip of 10,000 reaches |mean| 1 (chance 2 / 2³⁰ each),
    # so b = 0 and p = (0 + 1) / (10,000 + 1), the observed assignment counted once
    assert randomization_p([1.0] * 30, n_permutations=10_000) == 1 / 10_001
    # δ = (1, 1, 1): the exact p is 2/8; (b + 1)/(m + 1) with b ≈ m/4
    p = randomization_p([1.0, 1.0, 1.0], n_permutations=999, seed=0)
    b = round(p * 1000) - 1
    assert p == (b + 1) / 1000 and b / 999 == pytest.approx(0.25, abs=0.05)


def test_p_text_and_the_smallest_p_of_a_sign_flip_test():
    assert p_text(0.01234) == "p = 0.0123" and p_text(0.05) == "p = 0.05"
    assert p_text(1 / 10_001) == "p < 0.001" and p_text(0.001) == "p = 0.001"
    assert p_text(None) == "not enough queries"
    assert smallest_p(2) == 0.5 and smallest_p(5) == 2 / 32 and smallest_p(6) == 2 / 64 and smallest_p(0) == 1.0
    assert smallest_p(1) == 1.0 and smallest_p(3219) == 0.0  # no overflow on a large set
    # enumerated: δ all of one sign, every flip of 5 queries: the identity and its mirror reach |mean δ|
    flips = np.array(np.meshgrid(*[[1, -1]] * 5)).reshape(5, -1).T
    assert np.mean(np.abs((flips * np.ones(5)).mean(axis=1)) >= 1) == smallest_p(5)


def test_bootstrap_ci_by_hand():
    # Two values 0 and 1: a resample's mean is 0, ½ or 1 with probability ¼, ½, ¼, so the 2.5 %
    # and 97.5 % quantiles of the means are 0 and 1.
    assert bootstrap_ci([0.0, 1.0], n_resamples=20_000) == (0.0, 1.0)
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)
    with pytest.raises(RetrievalError, match="at least one value"):
        bootstrap_ci([])
    with pytest.raises(RetrievalError, match="between 0 and 1"):
        bootstrap_ci([1.0], confidence=95)


def test_bootstrap_ci_agrees_with_scipy():
    values = np.random.default_rng(11).beta(2, 5, size=60)  # per-query nDCG-like values
    ours = bootstrap_ci(values, n_resamples=20_000, seed=1)
    theirs = bootstrap((values,), np.mean, confidence_level=0.95, n_resamples=20_000, method="percentile",
                       rng=np.random.default_rng(2)).confidence_interval
    # Two independent Monte Carlo estimates of the same quantiles: equal to well under the
    # interval's own width (~0.11 here).
    assert ours[0] == pytest.approx(theirs.low, abs=0.004)
    assert ours[1] == pytest.approx(theirs.high, abs=0.004)
    assert ours[0] < values.mean() < ours[1]


def test_holm_by_hand():
    # Sorted: 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → kept monotone: 0.06.
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert holm([0.02]) == [0.02]  # one test: unchanged


def test_the_cross_validated_interval_by_hand():
    from retrieval.evaluation.paired import corrected_cv_ci

    # d = (0.1, 0.3): mean 0.2, s² = 0.02, J = 2, n_test/n_train = 1: sqrt(1.5 · 0.02) = 0.173205;
    # t_{1, 0.975} = 12.706205 → 0.2 ± 2.200779
    low, high = corrected_cv_ci([0.1, 0.3], 1.0)
    assert (low, high) == pytest.approx((0.2 - 12.706204736 * 0.0300 ** 0.5, 0.2 + 12.706204736 * 0.03 ** 0.5))
    # five folds: the training sets overlap, so the interval is wider than the naive t's (1/J alone)
    d = [0.01, 0.03, -0.02, 0.04, 0.02]
    naive = corrected_cv_ci(d, 0.0)
    corrected = corrected_cv_ci(d, 1 / 4)
    assert corrected[1] - corrected[0] == pytest.approx((naive[1] - naive[0]) * ((1 / 5 + 1 / 4) / (1 / 5)) ** 0.5)
    assert corrected_cv_ci([0.0, 0.0, 0.0], 0.5) == (0.0, 0.0)
    with pytest.raises(RetrievalError, match="at least 2 folds"):
        corrected_cv_ci([0.1], 1.0)
