import pytest

from retrieval.search.config import SearchConfig, parse_weights
from retrieval.sources import candidate_key
from retrieval.types import RetrievalError


def test_round_trips_json_and_query_params():
    config = SearchConfig(fusion="weighted", weights={"bm25": 0.4, "dense": 0.6}, rrf_k=10, normalization="zscore",
                          min_raw={"bm25": 1.5}, min_score=0.2, rerank=True, tie_field="quality")
    assert SearchConfig.from_json(config.to_json()) == config
    params = config.to_query_params()
    assert params["weights"] == "bm25=0.4,dense=0.6" and params["rerank"] == "1"
    assert "min_display_score" not in params
    assert SearchConfig.from_query_params(params) == config


def test_rejects_bad_values_with_a_readable_message():
    with pytest.raises(RetrievalError, match="rrf_k must be ≥ 1"):
        SearchConfig(rrf_k=0)
    with pytest.raises(RetrievalError, match="fusion must be one of"):
        SearchConfig(fusion="max")
    with pytest.raises(RetrievalError, match="at least one source weight must be > 0"):
        SearchConfig(weights={"bm25": 0, "dense": 0})
    with pytest.raises(RetrievalError, match="Unknown config field"):
        SearchConfig.from_dict({"colour": "red"})
    with pytest.raises(RetrievalError, match="Bad value for 'depth'"):
        SearchConfig.from_query_params({"depth": "many"})
    with pytest.raises(RetrievalError, match="cannot read"):
        parse_weights("bm25:0.4")


def test_candidate_key_ignores_fusion_only_fields():
    a = SearchConfig(rrf_k=5, weights={"bm25": 1, "dense": 0.1})
    b = SearchConfig(rrf_k=100, fusion="weighted")
    assert candidate_key(a) == candidate_key(b)
    assert candidate_key(SearchConfig(bm25_k1=1.2)) != candidate_key(a)


def test_source_parameter_dicts_complete_from_defaults_and_round_trip():
    from retrieval.sources.graph import GRAPH_DEFAULTS
    from retrieval.sources.keyword import KEYWORD_DEFAULTS

    config = SearchConfig(keyword={"name_exact": 12}, graph={"depth": 3}, graph_focus="战役", combination="harmonic")
    assert config.keyword == {**KEYWORD_DEFAULTS, "name_exact": 12.0}
    assert config.graph == {**GRAPH_DEFAULTS, "depth": 3.0}
    assert SearchConfig.from_json(config.to_json()) == config
    assert SearchConfig.from_query_params(config.to_query_params()) == config
    with pytest.raises(RetrievalError, match="unknown keyword parameter"):
        SearchConfig(keyword={"colour": 1})
    with pytest.raises(RetrievalError, match="keyword limit must be 1–50"):
        SearchConfig(keyword={"limit": 51})
    with pytest.raises(RetrievalError, match="combination must be one of"):
        SearchConfig(combination="median")


def test_candidate_key_follows_each_configured_source_params():
    base = SearchConfig(weights={"bm25": 1.0, "dense": 1.0})
    assert candidate_key(base) == candidate_key(SearchConfig(weights={"bm25": 0.2, "dense": 3.0},
                                                             combination="geometric"))
    # A source's parameters only matter when the source is configured.
    assert candidate_key(base) == candidate_key(SearchConfig(weights={"bm25": 1.0, "dense": 1.0}, graph={"depth": 3}))
