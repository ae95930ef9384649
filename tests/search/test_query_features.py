"""Query features and query-dependent weights (retrieval/search/query_features.py), computed by hand, and
the ranking plan using them: the split per query, its explanation, and the config round trips."""

import math

import pytest

from retrieval.search.config import SearchConfig
from retrieval.search.plan import RankingPlan
from retrieval.search.query_features import QueryWeights, cjk_share, query_features, score_gap, sigmoid
from retrieval.types import Hit, RetrievalError, SourceResult


def result(source: str, scores: list[float], coverage=None) -> SourceResult:
    hits = tuple(Hit(f"d{i}", s, i) for i, s in enumerate(scores, start=1))
    return SourceResult(source, hits, coverage=coverage)


MODEL = {"sources": ["bm25", "dense"], "intercept": 0.5,
         "coefficients": {"length": -1.0, "bm25_gap": 2.0, "oov": 1.5},
         "mean": {"length": 2.0, "bm25_gap": 0.5, "oov": 0.1}, "scale": {"length": 0.5, "bm25_gap": 0.25, "oov": 0.2}}


def test_features_by_hand():
    bm25 = result("bm25", [8.0, 6.0, 5.0, 4.0, 3.0, 2.5, 2.0, 1.5, 1.0, 0.8, 0.1], coverage=(4, 3))
    features = query_features("red fox jumps high", {"bm25": bm25})
    assert features["length"] == pytest.approx(math.log2(1 + 4))  # red fox jump high
    assert features["cjk"] == 0.0
    assert features["oov"] == pytest.approx(0.25)
    assert features["bm25_gap"] == pytest.approx((8.0 - 0.8) / 8.0)  # the 10th score, not the 11th
    assert score_gap(result("bm25", [4.0, 1.0])) == pytest.approx(0.75)  # fewer than 10: the last
    assert score_gap(result("bm25", [4.0])) is None and score_gap(result("bm25", [0.0, 0.0])) is None
    assert cjk_share("北京 is 大") == pytest.approx(3 / 5)
    none = query_features("fox", {"dense": result("dense", [0.9, 0.8])})
    assert none["oov"] is None and none["bm25_gap"] is None


def test_query_weights_formula_and_explanation():
    model = QueryWeights.from_dict(MODEL)
    features = {"length": 3.0, "cjk": 0.0, "oov": None, "bm25_gap": 0.75}
    # z: length (3 − 2)/0.5 = 2 → −2; gap (0.75 − 0.5)/0.25 = 1 → +2; oov unknown → 0
    assert model.terms(features) == pytest.approx({"length": -2.0, "bm25_gap": 2.0, "oov": 0.0})
    first, second = model.shares(features)
    assert first == pytest.approx(1 / (1 + math.exp(-0.5))) and second == pytest.approx(1 - first)
    said = model.explain(features)
    assert said.startswith(f"query-dependent weights: bm25 {first:.2f}, dense {second:.2f} = σ(+0.50 base")
    assert "terms no document holds +0.00 (unknown: counted as average)" in said
    assert sigmoid(-800) == pytest.approx(0.0) and sigmoid(800) == 1.0  # no overflow


def test_the_plan_splits_the_weight_per_query_and_says_why():
    config = SearchConfig(weights={"bm25": 2.0, "dense": 2.0}, query_weights=MODEL)
    plan = RankingPlan(config)
    bm25 = result("bm25", [8.0, 6.0, 2.0], coverage=(2, 2))
    dense = result("dense", [0.9, 0.5, 0.4])
    fused, note = plan.fused_config("red fox", None, {"bm25": bm25, "dense": dense})
    features = query_features("red fox", {"bm25": bm25})
    first = QueryWeights.from_dict(MODEL).shares(features)[0]
    assert fused.weights == pytest.approx({"bm25": 4.0 * first, "dense": 4.0 * (1 - first)})
    assert note == QueryWeights.from_dict(MODEL).explain(features)
    # the explained ranking carries the note and scores with the query's weights
    outcome = plan.explain({"bm25": bm25, "dense": dense}, "red fox", None)
    assert outcome.notes[0] == note
    fixed = RankingPlan(SearchConfig(weights=fused.weights)).explain({"bm25": bm25, "dense": dense}, "red fox", None)
    assert [r.doc_id for r in outcome.ranked] == [r.doc_id for r in fixed.ranked]
    assert [r.score for r in outcome.ranked] == pytest.approx([r.score for r in fixed.ranked])


def test_a_config_with_query_weights_round_trips_and_bad_ones_are_refused():
    config = SearchConfig(query_weights=MODEL)
    assert SearchConfig.from_json(config.to_json()) == config
    assert SearchConfig.from_query_params(config.to_query_params()) == config
    assert "query_weights" not in SearchConfig().to_query_params()
    with pytest.raises(RetrievalError, match="does not weigh"):
        SearchConfig(weights={"bm25": 1.0}, query_weights=MODEL)
    with pytest.raises(RetrievalError, match="unknown feature"):
        SearchConfig(query_weights={**MODEL, "coefficients": {"colour": 1.0}})
    with pytest.raises(RetrievalError, match="a mean and a scale > 0"):
        SearchConfig(query_weights={**MODEL, "scale": {"length": 0.0, "bm25_gap": 1.0, "oov": 1.0}})
    with pytest.raises(RetrievalError, match="two different sources"):
        SearchConfig(query_weights={**MODEL, "sources": ["bm25", "bm25"]})
    with pytest.raises(RetrievalError, match="within ±20"):
        SearchConfig(query_weights={**MODEL, "intercept": 50})
