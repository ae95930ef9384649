"""Paired statistics (retrieval/evaluation/paired.py) on values small enough to compute by hand, and the
bootstrap against scipy."""

import math

import numpy as np
import pytest
from scipy.stats import bootstrap

from retrieval.evaluation.paired import bootstrap_ci, holm, randomization_p, t_test_p
from retrieval.types import RetrievalError


def test_t_test_p_by_hand():
    # δ = 1, 2, 3: mean 2, sd 1, t = 2 / (1 / √3) = √12 with 2 degrees of freedom, whose two-sided
    # p is 1 − t / √(2 + t²) (Student's t with 2 df has cdf ½ + t / (2√(2 + t²))).
    assert t_test_p([0, 0, 0], [1, 2, 3]) == pytest.approx(1 - math.sqrt(12) / math.sqrt(14), abs=1e-12)
    assert t_test_p([1, 2, 3], [0, 0, 0]) == pytest.approx(1 - math.sqrt(12) / math.sqrt(14), abs=1e-12)
    assert t_test_p([0.3, 0.5], [0.3, 0.5]) == 1.0  # the same values: indistinguishable
    assert t_test_p([0.0, 0.5], [0.25, 0.75]) == 0.0  # every query better by the same amount


def test_t_test_needs_pairs():
    with pytest.raises(RetrievalError, match="same queries: 2 against 3"):
        t_test_p([0, 1], [0, 1, 2])
    with pytest.raises(RetrievalError, match="at least two queries"):
        t_test_p([0], [1])


def test_randomization_p_is_the_exact_share_of_sign_flips():
    # δ = (1, 1): the four flips have means 1, 0, 0, −1; two reach |1|, so the exact p is ½.
    assert randomization_p([1.0, 1.0], n_permutations=40_000, seed=3) == pytest.approx(0.5, abs=0.01)
    assert randomization_p([0.0, 0.0, 0.0]) == 1.0
    assert randomization_p([0.2, -0.1, 0.4], seed=5) == randomization_p([0.2, -0.1, 0.4], seed=5)


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
