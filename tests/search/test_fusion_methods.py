"""The fusion-method registry: DBSF against hand-computed values, every method's display factor,
and that every front end reads the methods from the one registry."""

import dataclasses
import math

import pytest

from retrieval.evaluation.sweep import default_grid
from retrieval.search.config import COMBINATIONS, FUSION_METHODS, SearchConfig
from retrieval.search.fusion.methods import COMBINATIONS as COMBINATION_REGISTRY
from retrieval.search.fusion.methods import FUSION_METHODS as METHOD_REGISTRY
from retrieval.search.fusion.methods import dbsf_normalize, display_factor, method_of, method_params
from retrieval.search.plan import fuse
from retrieval.types import Hit, SourceResult


def ranked(source, *pairs):
    return SourceResult(source, tuple(Hit(d, s, r) for r, (d, s) in enumerate(pairs, start=1)))


CANDIDATES = {
    "bm25": ranked("bm25", ("d1", 3.0), ("d2", 2.0), ("d3", 1.0)),
    "dense": ranked("dense", ("d2", 0.9), ("d1", 0.5)),
}


def test_dbsf_normalisation_is_mean_plus_minus_three_sigma():
    # bm25: mean 2, population σ = √(2/3); (x − (μ − 3σ)) / 6σ = 0.5 + (x − μ)/(6σ)
    sigma = math.sqrt(2 / 3)
    assert dbsf_normalize([3.0, 2.0, 1.0]) == pytest.approx([0.5 + 1 / (6 * sigma), 0.5, 0.5 - 1 / (6 * sigma)],
                                                            abs=1e-15)
    assert dbsf_normalize([0.9, 0.5]) == pytest.approx([0.5 + 0.2 / 1.2, 0.5 - 0.2 / 1.2], abs=1e-15)
    assert dbsf_normalize([4.0, 4.0]) == [0.5, 0.5]  # no spread: every score sits at the mean
    assert dbsf_normalize([7.0]) == [0.5]
    assert dbsf_normalize([]) == []


def test_dbsf_fuses_the_weighted_sum_of_its_normalised_scores():
    config = SearchConfig(fusion="dbsf", weights={"bm25": 0.4, "dense": 0.6}, top_k=10)
    outcome = fuse(CANDIDATES, config)
    sigma = math.sqrt(2 / 3)
    bm25 = {"d1": 0.5 + 1 / (6 * sigma), "d2": 0.5, "d3": 0.5 - 1 / (6 * sigma)}
    dense = {"d2": 0.5 + 1 / 6, "d1": 0.5 - 1 / 6}
    expected = {d: 0.4 * bm25[d] + 0.6 * dense.get(d, 0.0) for d in bm25}
    assert [r.doc_id for r in outcome.ranked] == ["d2", "d1", "d3"]
    for result in outcome.ranked:
        assert result.score == pytest.approx(expected[result.doc_id], abs=1e-15)
        # ÷ the best possible: every source's top normalised score (d1's in BM25, d2's in dense)
        assert result.display_score == pytest.approx(expected[result.doc_id] / (0.4 * bm25["d1"] + 0.6 * dense["d2"]),
                                                     abs=1e-15)
        assert sum(c.contribution for c in result.sources.values()) == pytest.approx(result.score, abs=1e-15)
        assert result.sources["bm25"].normalized == pytest.approx(bm25[result.doc_id], abs=1e-15)
    assert outcome.ranked[0].score == pytest.approx(0.4 * 0.5 + 0.6 * (0.5 + 1 / 6), abs=1e-15)


def test_display_factor_of_every_method_and_combination():
    """1 / the best fused score possible from the sources' top normalised scores (tops: bm25 0.8,
    dense 0.2; a negative top adds nothing to a sum, and a mean never exceeds its largest value)."""
    weights = {"bm25": 0.5, "dense": 1.5}  # Σw = 2
    tops = {"bm25": 0.8, "dense": 0.2}
    assert display_factor(SearchConfig(fusion="rrf", rrf_k=60, weights=weights), tops) == 61 / 2  # ranks only
    arithmetic = SearchConfig(fusion="weighted", combination="arithmetic", weights=weights)
    assert display_factor(arithmetic, tops) == pytest.approx(1 / (0.5 * 0.8 + 1.5 * 0.2), abs=1e-15)
    assert display_factor(arithmetic, {"bm25": 0.8, "dense": -0.3}) == pytest.approx(1 / 0.4, abs=1e-15)
    assert display_factor(arithmetic, {"bm25": 0.8}) == pytest.approx(1 / 0.4, abs=1e-15)  # dense returned nothing
    for combination in ("harmonic", "geometric"):
        config = SearchConfig(fusion="weighted", combination=combination, weights=weights)
        assert display_factor(config, tops) == pytest.approx(1 / 0.8, abs=1e-15)
        assert display_factor(config, {"bm25": 0.8, "dense": 0.9}) == pytest.approx(1 / 0.9, abs=1e-15)
        assert display_factor(dataclasses.replace(config, weights={"bm25": 0.0, "dense": 1.0}), tops) == \
            pytest.approx(1 / 0.2, abs=1e-15)  # a source weighing 0 cannot make a mean
    assert display_factor(SearchConfig(fusion="dbsf", weights=weights), {"bm25": 0.7, "dense": 0.6}) == \
        pytest.approx(1 / (0.5 * 0.7 + 1.5 * 0.6), abs=1e-15)
    # no positive top (z-scores of one candidate each): ÷ Σw
    assert display_factor(arithmetic, {"bm25": 0.0, "dense": 0.0}) == 1 / 2
    assert display_factor(arithmetic) == 1 / 2


def test_the_config_the_cli_and_the_sweep_read_the_registry():
    assert FUSION_METHODS == tuple(METHOD_REGISTRY) == ("weighted", "rrf", "dbsf")
    assert tuple(COMBINATION_REGISTRY) == COMBINATIONS
    grid = default_grid(SearchConfig())
    # 6 weighted points + 5 RRF ks + 1 DBSF point, each × 11 weight splits
    assert len(grid) == 11 * sum(len(m.sweep_points) for m in METHOD_REGISTRY.values()) == 132
    assert sum(v.config.fusion == "dbsf" for v in grid) == 11
    assert "dbsf bm25=0.3 dense=0.7" in {v.label for v in grid}
    assert method_params() == ("normalization", "combination", "rrf_k")


def test_labels_and_parameters_come_from_each_method():
    rrf, weighted, dbsf = (SearchConfig(fusion=f) for f in ("rrf", "weighted", "dbsf"))
    assert method_of(rrf).describe(rrf) == "rrf k=60"
    assert method_of(weighted).describe(weighted) == "weighted l2 arithmetic"
    assert method_of(dbsf).describe(dbsf) == "dbsf"
    assert method_of(rrf).title(rrf) == "RRF k=60"
    assert method_of(weighted).title(weighted) == "weighted sum (l2, arithmetic)"
    assert method_of(dbsf).title(dbsf) == "DBSF"
    assert method_of(dbsf).uses("normalization") is False and method_of(rrf).uses("rrf_k") is True
    assert method_of(rrf).preparation(rrf) is None  # ranks only
    assert method_of(weighted).preparation(weighted) == "l2"
    assert method_of(dbsf).preparation(dbsf) == "dbsf"


def test_an_unknown_method_is_a_clear_config_error():
    from retrieval.types import RetrievalError

    with pytest.raises(RetrievalError, match="fusion must be one of"):
        SearchConfig(fusion="combsum")
