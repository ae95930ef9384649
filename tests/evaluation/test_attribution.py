"""Shapley shares of a metric change (retrieval/evaluation/snapshot_diff.py), computed by hand."""

import pytest

from retrieval.evaluation.snapshot_diff import shapley, subsets
from retrieval.types import RetrievalError

F = frozenset


def test_subsets_are_every_mix_smallest_first():
    assert subsets(["config", "corpus"]) == [F(), F({"config"}), F({"corpus"}), F({"config", "corpus"})]
    assert len(subsets(["config", "corpus", "judgments"])) == 8


def test_three_factors_by_hand():
    f = {F(): 0, F("a"): 1, F("b"): 2, F("c"): 0, F("ab"): 4, F("ac"): 1, F("bc"): 2, F("abc"): 6}
    # weights 1/3 (|S| = 0), 1/6 (|S| = 1), 1/3 (|S| = 2):
    # φa = 1/3·1 + 1/6·(4−2) + 1/6·(1−0) + 1/3·(6−2) = 13/6
    # φb = 1/3·2 + 1/6·(4−1) + 1/6·(2−0) + 1/3·(6−1) = 19/6
    # φc = 1/3·0 + 1/6·(1−1) + 1/6·(2−2) + 1/3·(6−4) = 4/6
    shares = shapley(["a", "b", "c"], f)
    assert shares == pytest.approx({"a": 13 / 6, "b": 19 / 6, "c": 4 / 6})
    assert sum(shares.values()) == pytest.approx(f[F("abc")] - f[F()])  # they add up to the change


def test_an_interaction_is_split_and_a_null_factor_gets_nothing():
    both = {F(): 0.0, F({"config"}): 0.0, F({"corpus"}): 0.0, F({"config", "corpus"}): 0.1}
    assert shapley(["config", "corpus"], both) == pytest.approx({"config": 0.05, "corpus": 0.05})
    additive = lambda s: 0.5 + 0.05 * ("config" in s) - 0.02 * ("corpus" in s)  # noqa: E731 — judgments: no effect
    assert shapley(["config", "corpus", "judgments"], additive) == pytest.approx(
        {"config": 0.05, "corpus": -0.02, "judgments": 0.0})
    assert shapley(["config"], {F(): 0.4, F({"config"}): 0.45}) == pytest.approx({"config": 0.05})


def test_a_missing_mix_is_a_clear_error():
    with pytest.raises(RetrievalError, match="metric for every mix"):
        shapley(["a", "b"], {F(): 0, F("a"): 1})
