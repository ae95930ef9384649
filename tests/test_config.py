import pytest

from retrieval.config import SearchConfig, candidate_key, parse_weights
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
