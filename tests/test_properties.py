"""Property tests (hypothesis) for the numbers that used to break: normalisation edge cases,
overflow-safe fusion within the documented bounds, and config validation that names the field
instead of failing later. See docs/reliability.md, "Hardened inputs and limits"."""

from __future__ import annotations

import contextlib
import itertools
import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from retrieval import limits
from retrieval.search.config import COMBINATIONS, FUSION_METHODS, NORMALIZATIONS, SearchConfig
from retrieval.search.fusion.methods import method_of
from retrieval.search.fusion.normalize import l2, min_max, normalize, z_score
from retrieval.search.plan import fuse, fused_order
from retrieval.types import Hit, RetrievalError, SourceResult

# Module-level settings, applied per test (a loaded profile would change every other module's).
checked = settings(deadline=None, max_examples=150,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

finite = st.floats(allow_nan=False, allow_infinity=False)
score_lists = st.lists(finite, min_size=1, max_size=40)


# ---- normalisation -------------------------------------------------------------------------
@checked
@given(score_lists, st.sampled_from(NORMALIZATIONS))
def test_normalisations_are_finite_and_keep_the_order(scores, method):
    out = normalize(scores, method)
    assert len(out) == len(scores)
    assert all(math.isfinite(x) for x in out)
    pairs = sorted(zip(scores, out, strict=True))
    for (_, x), (_, y) in itertools.pairwise(pairs):
        assert x <= y  # a higher raw score never gets a lower normalised one


@checked
@given(finite, st.integers(1, 50))
def test_equal_scores_take_the_documented_value(value, n):
    scores = [value] * n
    assert z_score(scores) == [0.0] * n  # documented: no candidate stands out (was −1.0 for 0.1 × 3)
    assert min_max(scores) == [1.0] * n  # documented: all the best this source offered
    expected = 0.0 if value == 0 else math.copysign(1 / math.sqrt(n), value)
    assert l2(scores) == pytest.approx([expected] * n, rel=1e-9)


def test_equal_scores_hand_cases():
    assert z_score([0.1, 0.1, 0.1]) == [0.0, 0.0, 0.0]
    assert z_score([7.25]) == [0.0]
    assert min_max([0.0]) == [1.0] and min_max([0.0, 0.0]) == [1.0, 1.0]
    assert l2([0.0, 0.0, 0.0]) == [0.0, 0.0, 0.0] and l2([-4.0]) == [-1.0]
    assert min_max([1e308, -1e308]) == [1.0, 0.0]  # the span overflowed to inf: [nan, 0.0]
    assert l2([1e200, 1e200]) == pytest.approx([2 ** -0.5] * 2)  # Σx² overflowed: [0.0, 0.0]
    assert l2([1e-200]) == [1.0]  # Σx² underflowed: [0.0]
    assert z_score([1e308, -1e308]) == [1.0, -1.0]  # raised OverflowError


@checked
@given(score_lists)
def test_normalisation_ranges(scores):
    assert all(0.0 <= x <= 1.0 for x in min_max(scores))
    assert all(-1.0 <= x <= 1.0 for x in l2(scores))
    z = z_score(scores)
    if min(scores) != max(scores):
        assert abs(math.fsum(z)) <= 1e-9 * len(z)  # mean 0
        assert math.fsum(x * x for x in z) / len(z) == pytest.approx(1.0, rel=1e-6)  # std 1
    assert all(abs(x) <= limits.SCORE_MAX for x in normalize(scores, "none"))


# ---- fusion --------------------------------------------------------------------------------
SOURCES = ("bm25", "dense", "keyword")
DOC_IDS = [f"d{i}" for i in range(12)]
weights_strategy = st.one_of(st.just(0.0), st.floats(limits.WEIGHT_MIN, limits.WEIGHT_MAX))


@st.composite
def source_results(draw, source: str) -> SourceResult:
    ids = draw(st.lists(st.sampled_from(DOC_IDS), unique=True, max_size=len(DOC_IDS)))
    scores = sorted(draw(st.lists(finite, min_size=len(ids), max_size=len(ids))), reverse=True)
    return SourceResult(source, tuple(Hit(d, s, r) for r, (d, s) in enumerate(zip(ids, scores, strict=True), 1)))


@st.composite
def fusion_cases(draw):
    sources = draw(st.lists(st.sampled_from(SOURCES), unique=True, min_size=1, max_size=3))
    weights = {s: draw(weights_strategy) for s in sources}
    assume(any(w > 0 for w in weights.values()))
    config = SearchConfig(
        fusion=draw(st.sampled_from(FUSION_METHODS)), weights=weights,
        rrf_k=draw(st.floats(limits.RRF_K_MIN, limits.RRF_K_MAX)),
        normalization=draw(st.sampled_from(NORMALIZATIONS)), combination=draw(st.sampled_from(COMBINATIONS)),
        min_raw={s: draw(finite.filter(lambda x: abs(x) <= limits.SCORE_MAX))
                 for s in draw(st.lists(st.sampled_from(sources), unique=True))},
        top_k=draw(st.integers(1, 20)))
    candidates = {s: draw(source_results(s)) for s in sources}
    return candidates, config


@checked
@given(fusion_cases())
def test_fusion_is_finite_and_explained_by_its_contributions(case):
    candidates, config = case
    outcome = fuse(candidates, config)
    for result in outcome.ranked:
        assert math.isfinite(result.score) and math.isfinite(result.display_score)
        parts = [c.contribution for c in result.sources.values()]
        assert all(math.isfinite(p) for p in parts)
        total = math.fsum(parts)
        assert math.isclose(total, result.score, rel_tol=1e-9, abs_tol=1e-300), (total, result.score, parts)
        if method_of(config).additive(config):  # RRF, arithmetic and DBSF: the terms themselves
            assert sum(parts) == pytest.approx(result.score, rel=1e-12, abs=1e-300)
    # The sweep's path ranks the same documents in the same order.
    assert fused_order(candidates, config) == [r.doc_id for r in outcome.ranked]


@checked
@given(fusion_cases())
def test_display_scores_stay_in_their_documented_range(case):
    candidates, config = case
    for result in fuse(candidates, config).ranked:
        if config.fusion == "rrf":  # rank 1 in every source reads 1.0
            assert 0 <= result.display_score <= 1 + 1e-9
        else:  # a share of the best possible score (fusion.methods): never above 1
            assert result.display_score <= 1 + 1e-9
            if config.fusion == "weighted" and config.normalization == "minmax":  # of values in [0, 1]
                assert result.display_score >= -1e-12


def test_extreme_but_allowed_settings_give_finite_scores():
    hits = (Hit("a", 1e308, 1), Hit("b", -1e308, 2))
    candidates = {"bm25": SourceResult("bm25", hits), "dense": SourceResult("dense", hits[::-1])}
    for fusion in FUSION_METHODS:
        for normalization in NORMALIZATIONS:
            for combination in COMBINATIONS:
                config = SearchConfig(fusion=fusion, weights={"bm25": limits.WEIGHT_MAX, "dense": limits.WEIGHT_MIN},
                                      rrf_k=limits.RRF_K_MAX, normalization=normalization, combination=combination)
                for r in fuse(candidates, config).ranked:
                    assert math.isfinite(r.score) and math.isfinite(r.display_score)


# ---- config validation ---------------------------------------------------------------------
@pytest.mark.parametrize(("data", "field"), [
    ({"depth": "10"}, "depth"),
    ({"depth": True}, "depth"),
    ({"depth": 10.0}, "depth"),
    ({"depth": limits.DEPTH_MAX + 1}, "depth"),
    ({"top_k": 0}, "top_k"),
    ({"rerank_top_n": 10 ** 9}, "rerank_top_n"),
    ({"weights": {"bm25": "x"}}, "weights"),
    ({"weights": {"bm25": 1e9}}, "weight of 'bm25'"),
    ({"weights": {"bm25": 1e-9}}, "weight of 'bm25'"),
    ({"weights": {"bm25": True}}, "weights"),
    ({"weights": []}, "weights"),
    ({"weights": {"": 1.0}}, "weights"),
    ({"rerank": "yes"}, "rerank"),
    ({"rerank": 1}, "rerank"),
    ({"bm25_k1": float("nan")}, "bm25_k1"),
    ({"bm25_k1": 1000.0}, "bm25_k1"),
    ({"bm25_b": float("inf")}, "bm25_b"),
    ({"rrf_k": float("inf")}, "rrf_k"),
    ({"rrf_k": 1e300}, "rrf_k"),
    ({"rrf_k": "60"}, "rrf_k"),
    ({"min_score": float("nan")}, "min_score"),
    ({"min_display_score": "0.5"}, "min_display_score"),
    ({"min_raw": {"bm25": float("-inf")}}, "min_raw"),
    ({"keyword": {"limit": "x"}}, "keyword"),
    ({"graph": {"depth": float("nan")}}, "graph"),
    ({"graph": {"depth": 1e9}}, "graph"),
    ({"graph": [1, 2]}, "graph"),
    ({"fusion": 3}, "fusion"),
    ({"normalization": ["minmax"]}, "normalization"),
    ({"tie_field": 3}, "tie_field"),
    ({"reranker": None}, "reranker"),
    ({"graph_focus": 1}, "graph_focus"),
])
def test_mistyped_or_out_of_range_fields_fail_validation_naming_the_field(data, field):
    with pytest.raises(RetrievalError, match="Invalid search config") as info:
        SearchConfig.from_dict(data)
    assert field in str(info.value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6)
field_names = st.sampled_from(list(SearchConfig.__dataclass_fields__))


@checked
@given(st.dictionaries(field_names, json_values, max_size=4))
def test_any_json_config_is_either_valid_or_a_retrieval_error(data):
    try:
        config = SearchConfig.from_dict(data)
    except RetrievalError:
        return
    # A config that passed is usable end to end: JSON and link round trips, and fusion.
    assert SearchConfig.from_json(config.to_json()) == config
    hits = (Hit("a", 2.0, 1), Hit("b", 1.0, 2))
    outcome = fuse({s: SourceResult(s, hits) for s in config.weights}, config)
    assert all(math.isfinite(r.score) and math.isfinite(r.display_score) for r in outcome.ranked)


@checked
@given(st.sampled_from(["depth", "top_k", "rerank_top_n", "rrf_k", "bm25_k1", "bm25_b", "min_score", "rerank",
                        "weights", "keyword", "graph"]),
       st.text(max_size=12) | st.sampled_from(["nan", "inf", "-inf", "1e400", "bm25=nan", "bm25=inf", "limit=nan"]))
def test_any_link_value_is_either_valid_or_a_retrieval_error(name, raw):
    with contextlib.suppress(RetrievalError):
        SearchConfig.from_query_params({name: raw})


def test_cli_style_nan_is_refused_with_the_field_name():
    with pytest.raises(RetrievalError, match="bm25_k1 must be a finite number"):
        SearchConfig.from_dict({"bm25_k1": float("nan")})
    with pytest.raises(RetrievalError, match="weights: 'bm25' must be a finite number"):
        SearchConfig.from_query_params({"weights": "bm25=nan"})


# ---- identifiers ---------------------------------------------------------------------------
# `$` also matches before a final newline, so `re.match(r"^…$")` accepts "name\n". The validators
# use `fullmatch`, which does not.
@pytest.mark.parametrize("check", ["collection", "query set", "document id", "config"])
def test_names_and_ids_ending_in_a_newline_are_refused(check):
    from retrieval.judging.validation import validate_id
    from retrieval.search.saved_configs import validate_config_name
    from retrieval.store import validate_collection_name

    validate = {"collection": validate_collection_name,
                "query set": lambda n: validate_collection_name(n, "query set name"),
                "document id": lambda n: validate_id(n, "document"),
                "config": validate_config_name}[check]
    validate("name")
    with pytest.raises(RetrievalError):
        validate("name\n")
