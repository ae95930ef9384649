"""Fusion formulas against hand-computed values (seed 001's table among them)."""

import math

import pytest

from retrieval.search.config import SearchConfig
from retrieval.search.fusion.fuse import rrf_display_factor, rrf_term
from retrieval.search.plan import fuse
from retrieval.types import Hit, SourceResult


def ranked(source, *pairs):
    """A SourceResult from (doc_id, raw score) pairs, ranks 1..n in the given order."""
    return SourceResult(source, tuple(Hit(d, s, r) for r, (d, s) in enumerate(pairs, start=1)))


def by_id(outcome):
    return {r.doc_id: r for r in outcome.ranked}


# Seed 001 §2.3: k = 60, α = 0.5; vector ranks and FTS ranks.
SEED_001 = {
    "dense": ranked("dense", ("r1", 0.9), ("r2", 0.8), ("x3", 0.7), ("x4", 0.6), ("r5", 0.5)),
    "bm25": ranked("bm25", ("r1", 9.0), ("x2", 8.0), ("r2", 7.0), ("x4b", 6.0), ("r5", 5.0)),
}


def test_seed_001_table_rank_1_1_and_2_3():
    config = SearchConfig(fusion="rrf", rrf_k=60, weights={"dense": 0.5, "bm25": 0.5}, top_k=100)
    results = by_id(fuse(SEED_001, config))
    assert results["r1"].score == pytest.approx(0.5 / 61 + 0.5 / 61, abs=1e-15)
    assert results["r1"].score == pytest.approx(0.016393, abs=1e-6)
    assert results["r2"].score == pytest.approx(0.5 / 62 + 0.5 / 63, abs=1e-15)
    assert results["r2"].score == pytest.approx(0.016001, abs=1e-6)
    assert results["r5"].score == pytest.approx(1 / 65, abs=1e-15)  # seed's 0.0154


def test_display_score_reads_one_for_rank_one_everywhere():
    config = SearchConfig(fusion="rrf", rrf_k=60, weights={"dense": 0.5, "bm25": 0.5}, top_k=100)
    results = by_id(fuse(SEED_001, config))
    assert results["r1"].display_score == pytest.approx(1.0, abs=1e-12)
    # seed 001 §4.2: rank 5 in both reads 0.94 after scaling by (k + 1)
    assert results["r5"].display_score == pytest.approx(61 / 65, abs=1e-12)
    assert round(results["r5"].display_score, 2) == 0.94


def test_rrf_generic_weights_and_k():
    config = SearchConfig(fusion="rrf", rrf_k=10, weights={"dense": 0.3, "bm25": 0.7}, top_k=100)
    results = by_id(fuse(SEED_001, config))
    assert results["r2"].score == pytest.approx(0.3 / 12 + 0.7 / 13, abs=1e-15)
    assert results["r2"].display_score == pytest.approx((0.3 / 12 + 0.7 / 13) * 11 / 1.0, abs=1e-15)
    assert rrf_term(3, 10, 0.7) == pytest.approx(0.7 / 13)
    assert rrf_display_factor(60, 2.0) == pytest.approx(61 / 2)


def test_contributions_sum_to_fused_score_and_explain_absence():
    config = SearchConfig(fusion="rrf", rrf_k=60, weights={"dense": 0.5, "bm25": 0.5}, top_k=100)
    outcome = fuse(SEED_001, config)
    for result in outcome.ranked:
        assert sum(c.contribution for c in result.sources.values()) == pytest.approx(result.score, abs=1e-15)
    x2 = by_id(outcome)["x2"]
    assert x2.sources["dense"].rank is None
    assert x2.sources["dense"].raw_score is None
    assert x2.sources["dense"].contribution == 0.0
    assert "not in dense's top 100 candidates" in x2.sources["dense"].note
    assert x2.sources["bm25"].rank == 2
    assert x2.sources["bm25"].raw_score == 8.0
    assert x2.sources["bm25"].contribution == pytest.approx(0.5 / 62)


def test_weighted_minmax_seed_003_default():
    candidates = {
        "bm25": ranked("bm25", ("a", 12.0), ("b", 6.0), ("c", 2.0)),
        "dense": ranked("dense", ("b", 0.8), ("c", 0.6), ("d", 0.4)),
    }
    config = SearchConfig(fusion="weighted", normalization="minmax", weights={"bm25": 0.4, "dense": 0.6}, top_k=10)
    outcome = fuse(candidates, config)
    scores = {r.doc_id: r.score for r in outcome.ranked}
    # bm25 min-max: a 1.0, b 0.4, c 0.0; dense: b 1.0, c 0.5, d 0.0
    assert scores["a"] == pytest.approx(0.4 * 1.0)
    assert scores["b"] == pytest.approx(0.4 * 0.4 + 0.6 * 1.0)
    assert scores["c"] == pytest.approx(0.4 * 0.0 + 0.6 * 0.5)
    assert scores["d"] == pytest.approx(0.0)
    assert [r.doc_id for r in outcome.ranked] == ["b", "a", "c", "d"]
    b = by_id(outcome)["b"]
    assert b.sources["bm25"].normalized == pytest.approx(0.4)
    assert b.display_score == pytest.approx(b.score / 1.0)
    a = by_id(outcome)["a"]
    assert a.sources["dense"].contribution == 0.0 and "contributes 0" in a.sources["dense"].note


def test_weighted_zscore_and_none():
    candidates = {"bm25": ranked("bm25", ("a", 3.0), ("b", 1.0)), "dense": ranked("dense", ("a", 0.5), ("b", 0.7))}
    z = fuse(candidates, SearchConfig(fusion="weighted", normalization="zscore", weights={"bm25": 1, "dense": 1}))
    # each list of two becomes (+1, −1) under population z-score
    assert by_id(z)["a"].score == pytest.approx(1.0 - 1.0)
    assert by_id(z)["a"].sources["bm25"].normalized == pytest.approx(1.0)
    raw = fuse(candidates, SearchConfig(fusion="weighted", normalization="none", weights={"bm25": 0.5, "dense": 2}))
    assert by_id(raw)["b"].score == pytest.approx(0.5 * 1.0 + 2 * 0.7)
    # ÷ the best possible, every source's top raw score: 0.5 · 3.0 + 2 · 0.7
    assert by_id(raw)["b"].display_score == pytest.approx((0.5 + 1.4) / (1.5 + 1.4))
    assert by_id(raw)["a"].display_score == pytest.approx((1.5 + 1.0) / (1.5 + 1.4))


def test_thresholds_report_what_they_removed():
    candidates = {
        "bm25": ranked("bm25", ("a", 10.0), ("b", 5.0), ("c", 1.0)),
        "dense": ranked("dense", ("a", 0.9), ("d", 0.8), ("e", 0.1)),
    }
    config = SearchConfig(fusion="rrf", rrf_k=1, weights={"bm25": 1, "dense": 1}, min_raw={"bm25": 2.0},
                          min_display_score=0.5, top_k=2)
    outcome = fuse(candidates, config)
    # c is dropped from bm25 (1.0 < 2.0) and appears nowhere else.
    assert outcome.n_candidates == 5
    assert outcome.removed["min raw bm25"] == 1
    # display = score × (k+1)/Σw = score; a: 1/2+1/2 = 1.0, b: 1/3, d: 1/3, e: 1/4
    display = {r.doc_id: r.display_score for r in outcome.ranked}
    assert display == pytest.approx({"a": 1.0, "b": 1 / 3, "d": 1 / 3, "e": 1 / 4})
    assert outcome.removed["min display score"] == 3
    assert outcome.removed["top-k"] == 0
    assert [r.doc_id for r in outcome.results] == ["a"]
    no_min = fuse(candidates, SearchConfig(fusion="rrf", rrf_k=1, weights={"bm25": 1, "dense": 1}, top_k=2))
    assert no_min.removed == {"top-k": 3}
    assert [r.doc_id for r in no_min.results] == ["a", "b"]  # b and d tie at 1/3: id order


def test_min_raw_explains_zero_contribution():
    candidates = {"bm25": ranked("bm25", ("a", 1.0)), "dense": ranked("dense", ("a", 0.9))}
    outcome = fuse(candidates, SearchConfig(weights={"bm25": 1, "dense": 1}, min_raw={"bm25": 2.0}))
    a = outcome.ranked[0]
    assert a.sources["bm25"].contribution == 0.0
    assert a.sources["bm25"].raw_score == 1.0
    assert "below the bm25 minimum 2" in a.sources["bm25"].note


def test_ties_broken_by_quality_field_then_id():
    candidates = {"bm25": ranked("bm25", ("z", 1.0)), "dense": ranked("dense", ("y", 1.0))}
    config = SearchConfig(weights={"bm25": 1, "dense": 1}, tie_field="quality")
    # z and y tie at 1/61; without tie values the id decides.
    assert [r.doc_id for r in fuse(candidates, config).ranked] == ["y", "z"]
    tied = fuse(candidates, config, tie_values={"z": 4.5, "y": 3.0})
    assert [r.doc_id for r in tied.ranked] == ["z", "y"]
    assert tied.ranked[0].tie_value == 4.5
    # a document without the field loses the tie to one that has it
    assert [r.doc_id for r in fuse(candidates, config, tie_values={"z": -1.0}).ranked] == ["z", "y"]


def test_missing_empty_and_failed_sources_are_noted_not_fatal():
    candidates = {
        "bm25": SourceResult("bm25", (), error="RuntimeError: index missing"),
        "dense": ranked("dense", ("a", 0.5)),
    }
    outcome = fuse(candidates, SearchConfig(fusion="rrf", weights={"bm25": 1, "dense": 1, "graph": 1}))
    assert [r.doc_id for r in outcome.results] == ["a"]
    assert outcome.results[0].score == pytest.approx(1 / 61)
    assert any("bm25 failed" in n and "index missing" in n for n in outcome.notes)
    assert any(n.startswith("graph: no candidates") for n in outcome.notes)
    empty = fuse({"bm25": SourceResult("bm25"), "dense": SourceResult("dense")}, SearchConfig())
    assert empty.results == [] and empty.n_candidates == 0
    assert "bm25 returned no candidates" in empty.notes


def test_zero_weight_source_still_explained():
    outcome = fuse(SEED_001, SearchConfig(fusion="rrf", weights={"dense": 1.0, "bm25": 0.0}, top_k=100))
    x2 = by_id(outcome)["x2"]
    assert x2.score == 0.0 and x2.sources["bm25"].rank == 2 and x2.sources["bm25"].contribution == 0.0
    assert math.isclose(by_id(outcome)["r1"].display_score, 1.0)


# ---- weighted-fusion combinations (OpenSearch's arithmetic / harmonic / geometric) -------------
# bm25 min-max: a 1.0, b 0.4, c 0.0; dense min-max: b 1.0, c 0.5, d 0.0; weights 0.4 / 0.6.
COMBO = {
    "bm25": ranked("bm25", ("a", 12.0), ("b", 6.0), ("c", 2.0)),
    "dense": ranked("dense", ("b", 0.8), ("c", 0.6), ("d", 0.4)),
}


def combo_config(combination, normalization="minmax", **extra):
    return SearchConfig(fusion="weighted", normalization=normalization, combination=combination,
                        weights={"bm25": 0.4, "dense": 0.6}, top_k=10, **extra)


def test_harmonic_mean_leaves_out_zero_normalised_scores():
    outcome = fuse(COMBO, combo_config("harmonic"))
    scores = {r.doc_id: r.score for r in outcome.ranked}
    assert scores["a"] == pytest.approx(0.4 / (0.4 / 1.0), abs=1e-15)  # dense did not return a
    assert scores["b"] == pytest.approx((0.4 + 0.6) / (0.4 / 0.4 + 0.6 / 1.0), abs=1e-15)  # 0.625
    assert scores["b"] == pytest.approx(0.625, abs=1e-15)
    assert scores["c"] == pytest.approx(0.6 / (0.6 / 0.5), abs=1e-15)  # bm25's 0.0 is left out: 0.5
    assert scores["d"] == 0.0  # its only score is 0
    assert [r.doc_id for r in outcome.ranked] == ["a", "b", "c", "d"]
    b = by_id(outcome)["b"]
    assert b.display_score == b.score  # already a weighted mean
    # the fused score split in proportion to w·x: 0.4·0.4 = 0.16 and 0.6·1.0 = 0.6
    assert b.sources["bm25"].contribution == pytest.approx(0.625 * 0.16 / 0.76, abs=1e-15)
    assert b.sources["dense"].contribution == pytest.approx(0.625 * 0.6 / 0.76, abs=1e-15)
    c = by_id(outcome)["c"]
    assert c.sources["bm25"].contribution == 0.0 and c.sources["bm25"].normalized == 0.0
    assert "left out of the harmonic mean" in c.sources["bm25"].note
    assert c.sources["dense"].contribution == pytest.approx(0.5, abs=1e-15)
    for result in outcome.ranked:
        assert sum(s.contribution for s in result.sources.values()) == pytest.approx(result.score, abs=1e-15)


def test_geometric_mean_hand_values():
    outcome = fuse(COMBO, combo_config("geometric"))
    scores = {r.doc_id: r.score for r in outcome.ranked}
    assert scores["a"] == pytest.approx(1.0, abs=1e-15)
    # exp((0.4·ln 0.4 + 0.6·ln 1.0) / (0.4 + 0.6)) = 0.4^0.4 = 0.69314…
    assert scores["b"] == pytest.approx(0.4 ** 0.4, abs=1e-15)
    assert scores["b"] == pytest.approx(0.693145, abs=1e-6)
    assert scores["c"] == pytest.approx(0.5, abs=1e-15)
    assert scores["d"] == 0.0
    assert [r.doc_id for r in outcome.ranked] == ["a", "b", "c", "d"]
    b = by_id(outcome)["b"]
    assert b.sources["bm25"].contribution == pytest.approx(0.4 ** 0.4 * 0.16 / 0.76, abs=1e-15)
    assert b.sources["bm25"].contribution + b.sources["dense"].contribution == pytest.approx(b.score, abs=1e-15)
    assert "left out of the geometric mean" in by_id(outcome)["c"].sources["bm25"].note


def test_arithmetic_is_the_weighted_sum_with_mean_display():
    outcome = fuse(COMBO, combo_config("arithmetic"))
    b = by_id(outcome)["b"]
    assert b.score == pytest.approx(0.4 * 0.4 + 0.6 * 1.0, abs=1e-15)
    assert b.display_score == pytest.approx((0.4 * 0.4 + 0.6 * 1.0) / 1.0, abs=1e-15)
    assert b.sources["bm25"].contribution == pytest.approx(0.16, abs=1e-15)
    # arithmetic keeps a 0 normalised score in the sum: no "left out" note
    assert by_id(outcome)["c"].sources["bm25"].note == ""


def test_l2_normalisation_with_harmonic_and_geometric():
    # bm25 [3, 4] -> l2 0.6, 0.8; dense [0.6, 0.8] -> l2 0.6, 0.8 (reversed docs)
    candidates = {"bm25": ranked("bm25", ("y", 4.0), ("x", 3.0)), "dense": ranked("dense", ("x", 0.8), ("y", 0.6))}
    weights = {"bm25": 1.0, "dense": 3.0}
    harmonic = by_id(fuse(candidates, SearchConfig(fusion="weighted", normalization="l2", combination="harmonic",
                                                   weights=weights)))
    # x: bm25 0.6, dense 0.8 -> 4 / (1/0.6 + 3/0.8)
    assert harmonic["x"].score == pytest.approx(4 / (1 / 0.6 + 3 / 0.8), abs=1e-12)
    assert harmonic["y"].score == pytest.approx(4 / (1 / 0.8 + 3 / 0.6), abs=1e-12)
    geometric = by_id(fuse(candidates, SearchConfig(fusion="weighted", normalization="l2", combination="geometric",
                                                    weights=weights)))
    assert geometric["x"].score == pytest.approx(math.exp((math.log(0.6) + 3 * math.log(0.8)) / 4), abs=1e-12)
    assert geometric["y"].score == pytest.approx((0.8 * 0.6 ** 3) ** 0.25, abs=1e-12)


def test_zscore_negatives_are_left_out_of_the_means():
    # two candidates each: z-score (+1, −1); a: bm25 +1, dense −1 -> only bm25 enters
    candidates = {"bm25": ranked("bm25", ("a", 3.0), ("b", 1.0)), "dense": ranked("dense", ("b", 0.7), ("a", 0.5))}
    for combination in ("harmonic", "geometric"):
        outcome = by_id(fuse(candidates, SearchConfig(fusion="weighted", normalization="zscore",
                                                      combination=combination, weights={"bm25": 1, "dense": 3})))
        assert outcome["a"].score == pytest.approx(1.0, abs=1e-12)
        assert outcome["b"].score == pytest.approx(1.0, abs=1e-12)
        assert outcome["a"].sources["dense"].contribution == 0.0


def test_zero_weights_in_a_mean_give_zero_not_a_division_error():
    outcome = fuse(COMBO, SearchConfig(fusion="weighted", normalization="minmax", combination="harmonic",
                                   weights={"bm25": 0.0, "dense": 1.0}))
    a = by_id(outcome)["a"]  # only bm25, weight 0
    assert a.score == 0.0 and a.sources["bm25"].contribution == 0.0
    geometric = fuse(COMBO, SearchConfig(fusion="weighted", normalization="minmax", combination="geometric",
                                         weights={"bm25": 0.0, "dense": 1.0}))
    assert by_id(geometric)["a"].score == 0.0
    assert by_id(geometric)["b"].score == pytest.approx(1.0)


def test_fused_order_equals_fuse_order_including_ties_and_thresholds():
    from retrieval.search.plan import fused_order, fused_scores

    # many ties: equal raw scores, equal ranks across sources, a quality field on some docs
    candidates = {
        "bm25": ranked("bm25", ("a", 5.0), ("b", 5.0), ("c", 3.0), ("d", 3.0), ("e", 1.0)),
        "dense": ranked("dense", ("b", 0.5), ("a", 0.5), ("f", 0.4), ("e", 0.4), ("c", 0.1)),
    }
    ties = {"d": 2.0, "f": 2.0, "e": float("nan")}
    for fusion in ("rrf", "weighted"):
        for normalization in ("minmax", "zscore", "l2", "none"):
            for combination in ("arithmetic", "harmonic", "geometric"):
                for weights in ({"bm25": 1, "dense": 1}, {"bm25": 0.3, "dense": 0.7}, {"dense": 1.0},
                                {"bm25": 0.0, "dense": 1.0}):
                    for min_raw in ({}, {"bm25": 2.0}):
                        config = SearchConfig(fusion=fusion, normalization=normalization, combination=combination,
                                              weights=weights, min_raw=min_raw, rrf_k=1)
                        outcome = fuse(candidates, config, ties)
                        assert fused_order(candidates, config, ties) == [r.doc_id for r in outcome.ranked]
                        assert fused_scores(candidates, config) == {r.doc_id: r.score for r in outcome.ranked}
                        assert fused_order(candidates, config, ties, limit=2) == [r.doc_id for r in outcome.ranked[:2]]


def test_the_default_fusion_shows_a_perfect_match_as_1():
    """The default (weighted sum of l2-normalised scores, BM25 0.4, vector 0.6): a document both
    sources rank first reads 1.0, and every display score is the share of that best fused score,
    so a minimum display score of 0.5 keeps exactly the results with at least half of it."""
    bm25 = ranked("bm25", ("a", 4.0), ("b", 3.0), ("c", 1.0))
    dense = ranked("dense", ("a", 0.8), ("c", 0.6), ("b", 0.2))
    n_bm25, n_dense = math.sqrt(16 + 9 + 1), math.sqrt(0.64 + 0.36 + 0.04)
    best = 0.4 * 4.0 / n_bm25 + 0.6 * 0.8 / n_dense
    outcome = fuse({"bm25": bm25, "dense": dense}, SearchConfig())
    shown = by_id(outcome)
    assert shown["a"].display_score == pytest.approx(1.0, abs=1e-15)
    assert shown["b"].display_score == pytest.approx((0.4 * 3.0 / n_bm25 + 0.6 * 0.2 / n_dense) / best, abs=1e-15)
    assert shown["c"].display_score == pytest.approx((0.4 * 1.0 / n_bm25 + 0.6 * 0.6 / n_dense) / best, abs=1e-15)
    half = fuse({"bm25": bm25, "dense": dense}, SearchConfig(min_display_score=0.5))
    assert [r.doc_id for r in half.results] == [r.doc_id for r in outcome.ranked if r.score >= 0.5 * best]
    assert outcome.display_factor == pytest.approx(1 / best, abs=1e-12)
    # Without c (a filter): the normalisations change, the perfect match still reads 1.0.
    kept = fuse({"bm25": ranked("bm25", ("a", 4.0), ("b", 3.0)), "dense": ranked("dense", ("a", 0.8), ("b", 0.2))},
                SearchConfig())
    assert by_id(kept)["a"].display_score == pytest.approx(1.0, abs=1e-15)
