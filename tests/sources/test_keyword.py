"""Seed 000's keyword scorer (`retrieval.sources.keyword`): the worked example, its rules, its
weaknesses, tunable points, and the source fused with BM25 and vectors on a real collection."""

import json
from pathlib import Path

import pytest

from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_path
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.sources import keyword
from retrieval.sources.keyword import (
    KEYWORD_DEFAULTS,
    KeywordSource,
    catalogue_fields,
    contains_term,
    document_fields,
    parse_query,
    score_fields,
)
from retrieval.store import Store
from retrieval.types import ParsedCorpus

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "catalogue" / "records.json"

# The seed's two example data sources (ids added).
SOURCE_A = {
    "id": "A",
    "name": {"en": "China Employment Statistics", "zh": "中国就业统计局"},
    "description": {"en": "Official unemployment data from China"},
    "tags": ["unemployment", "China", "labor", "statistics"],
    "coverage": {"domains": ["economics", "labor"]},
    "organization": {"name": "National Bureau of Statistics of China"},
    "data_content": {"en": ["unemployment rate", "job market data"]},
}
SOURCE_B = {
    "id": "B",
    "name": {"en": "World Bank Open Data"},
    "description": {"en": "Free access to global economic indicators"},
    "tags": ["economics", "global", "development"],
    "coverage": {"domains": ["economics", "development"]},
    "organization": {"name": "World Bank"},
}


def fields(record, **changes):
    record = {**record, **changes}
    return catalogue_fields(record["id"], record)


def score(record, query, **points):
    return score_fields(fields(record), parse_query(query), {**KEYWORD_DEFAULTS, **points})


def test_seed_worked_example_a_scores_15_and_b_is_filtered():
    a = score(SOURCE_A, "unemployment China")
    # name partial 5 + description 3 + two tags 2·2 + no domain 0 + organisation 2 + one content item 1
    assert a.points == {"name": 5, "description": 3, "tags": 4, "domains": 0, "organization": 2, "content": 1}
    assert a.total == 15
    assert a.detail() == {
        "name": "+5 (partial: china)",
        "description": "+3 (unemployment, china)",
        "tags": "+4 (unemployment, china)",
        "domains": "0",
        "organization": "+2 (china)",
        "content": "+1 (unemployment rate)",
        "quality": None,
    }
    b = score(SOURCE_B, "unemployment China")
    assert b.total == 0 and not any(b.matched.values())
    source = KeywordSource([fields(SOURCE_A), fields(SOURCE_B)])
    hits = source.search("unemployment China", 100)
    assert [(h.doc_id, h.raw_score, h.rank) for h in hits] == [("A", 15.0, 1)]  # B: 0 < minimum 5
    assert hits[0].detail == a.detail()
    json.dumps(hits[0].detail)  # JSON-friendly


def test_query_terms_are_lowercased_distinct_whitespace_split():
    q = parse_query("  Youth Unemployment China  china ")
    assert q.terms == ("youth", "unemployment", "china")
    assert q.whole == "youth unemployment china  china"
    assert parse_query("   ").terms == ()
    assert not contains_term("anything", parse_query(""))  # an empty query matches nothing


def test_name_exact_earns_only_the_exact_points():
    # "world bank" is inside the name: exact 10, not exact + partial
    exact = score(SOURCE_B, "World Bank")
    assert exact.points["name"] == 10 and exact.detail()["name"] == "+10 (exact: world bank)"
    assert exact.points["organization"] == 2
    assert exact.total == 12
    # "world bank data" is not inside "world bank open data": partial, for each term that matched
    partial = score(SOURCE_B, "world bank data")
    assert partial.points["name"] == 5 and partial.detail()["name"] == "+5 (partial: world, bank, data)"
    assert partial.total == 5 + 2  # + organisation ("world", "bank"); no description or tag has a term


def test_substring_matching_chin_hits_machine_and_job_misses_employment():
    machine = {"id": "ml", "name": {"en": "Machine Learning Benchmarks"}, "tags": ["machine learning"]}
    employment = {"id": "emp", "name": {"en": "Employment Situation Report"},
                  "description": {"en": "Monthly payroll employment and the unemployment rate"}}
    # a one-word query is its own whole query: a name containing it earns the exact points
    chin = score(machine, "chin")
    assert chin.detail()["name"] == "+10 (exact: chin)" and chin.detail()["tags"] == "+2 (machine learning)"
    assert chin.total == 12
    assert score(machine, "chin data").detail()["name"] == "+5 (partial: chin)"
    assert score(employment, "job").total == 0  # no synonyms: job ≠ employment
    assert score(employment, "employ").total == 10 + 3  # a prefix is a substring


def test_each_matching_tag_domain_and_content_item_counts():
    record = {"id": "r", "name": {"en": "X"}, "tags": ["labour", "labour market", "prices"],
              "coverage": {"domains": ["labour", "economics"]},
              "data_content": {"en": ["labour force", "wages"], "zh": ["劳动力"]}}
    s = score(record, "labour 劳动")
    assert s.points == {"name": 0, "description": 0, "tags": 4, "domains": 2, "organization": 0, "content": 2}
    assert s.detail()["content"] == "+2 (labour force, 劳动力)"


def test_weights_threshold_and_limit_come_from_the_config():
    a = score(SOURCE_A, "unemployment China", name_partial=8, tag=3.5, content=0, organization=0.5)
    assert a.total == 8 + 3 + 2 * 3.5 + 0 + 0.5 + 0
    assert a.detail()["tags"] == "+7 (unemployment, china)" and a.detail()["organization"] == "+0.5 (china)"
    source = KeywordSource([fields(SOURCE_A)], {"min_relevance": 15.5})
    assert source.search("unemployment China", 10) == []  # 15 < 15.5
    at_threshold = KeywordSource([fields(SOURCE_A)], {"min_relevance": 15}).search("unemployment China", 10)
    assert [h.doc_id for h in at_threshold] == ["A"]  # 15 ≥ 15: kept


def _quality(authority):
    return {"authority": authority, "methodology": 3}


def test_ties_are_broken_by_quality_then_id_and_cut_at_limit_and_depth():
    base = {"name": {"en": "Unemployment data"}, "description": {"en": "unemployment"}}
    records = [
        fields(base, id="low", quality=_quality(1)),  # quality 2
        fields(base, id="none"),  # no quality: after every record with one
        fields(base, id="high", quality=_quality(5)),  # quality 4
        fields(base, id="also-high", quality={"authority": 4, "citations": 4}),  # quality 4: id breaks the tie
        fields(base, id="best", tags=["unemployment"], quality=_quality(1)),  # one more tag: 15 points
    ]
    source = KeywordSource(records, {"limit": 50})
    hits = source.search("unemployment", 100)
    assert [h.doc_id for h in hits] == ["best", "also-high", "high", "low", "none"]
    assert [h.raw_score for h in hits] == [15, 13, 13, 13, 13]  # name exact 10 + description 3 (+ tag 2)
    assert [h.detail["quality"] for h in hits] == [2, 4, 4, 2, None]
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
    assert [h.doc_id for h in KeywordSource(records, {"limit": 2}).search("unemployment", 100)] == ["best", "also-high"]
    assert [h.doc_id for h in KeywordSource(records, {"limit": 50}).search("unemployment", 3)] == [
        "best", "also-high", "high"]


def test_documents_that_are_not_records_map_title_text_and_metadata():
    doc = document_fields("d1", "Jobs report", "Payrolls rose in March.",
                          {"tags": "labour, monthly", "category": "economy", "source": "Gazette", "quality": 4})
    s = score_fields(doc, parse_query("jobs labour gazette"), KEYWORD_DEFAULTS)
    assert s.points == {"name": 5, "description": 0, "tags": 2, "domains": 0, "organization": 2, "content": 0}
    assert s.quality == 4
    # without a title, content items (the text's sentences) let a paragraph reach the minimum of 5
    paragraph = document_fields("p", "", "The Panthers defense gave up 308 points. Tea is green. "
                                "The Panthers won the final game of the long season.", {})
    hits = KeywordSource([paragraph]).search("panthers", 10)
    assert [h.raw_score for h in hits] == [3 + 1 + 1]
    assert hits[0].detail["content"] == (  # long items cut to 40 characters
        "+2 (the panthers defense gave up 308 points., the panthers won the final game of the…)")


def test_params_follow_the_config():
    config = SearchConfig(keyword={"tag": 4})
    assert keyword.key(config) == (10, 5, 3, 4, 2, 2, 1, 5, 10)


# ---- through the workbench, on a real collection -------------------------------------------------
SUBSET = ("cn-nbs-labour-force", "cn-cgss", "ml-benchmarks", "us-bls-employment-situation", "eu-eurostat-lfs",
          "int-wb-wdi", "us-noaa-ghcnd", "int-who-gho")


@pytest.fixture(scope="module")
def workbench(tmp_path_factory):
    wb = Workbench(Store(str(tmp_path_factory.mktemp("lancedb"))))
    documents = [d for d in parse_path(SAMPLE).documents if d.id in SUBSET]
    create_collection(wb.store, "catalogue", ParsedCorpus(documents))  # mixed English/Chinese: multilingual-e5-small
    return wb


def test_chin_fused_with_bm25_and_vectors_by_rrf(workbench):
    config = SearchConfig(fusion="rrf", weights={"bm25": 0.3, "dense": 0.3, "keyword": 0.4}, rrf_k=60, top_k=8)
    result = workbench.search("catalogue", "chin", config)
    sources = result.candidates.sources
    assert sources["bm25"].hits == ()  # no indexed word is "chin": BM25 matches whole words only
    # By hand (a one-word query inside a name earns the exact 10):
    # China Labour Force Survey: name 10 + description 3 ("in china") + tag "china" 2 + organisation 2 = 17;
    # Chinese General Social Survey: name 10 + description 3 ("chinese households") + organisation 2 = 15;
    # Machine Learning Benchmarks: name 10 + tag "machine learning" 2 = 12. No other record has "chin".
    kw = [(h.doc_id, h.raw_score, h.rank) for h in sources["keyword"].hits]
    assert kw == [("cn-nbs-labour-force", 17, 1), ("cn-cgss", 15, 2), ("ml-benchmarks", 12, 3)]
    assert sources["keyword"].hits[2].detail["name"] == "+10 (exact: chin)"
    dense_rank = {h.doc_id: h.rank for h in sources["dense"].hits}
    assert len(dense_rank) == len(SUBSET)
    keyword_rank = {doc_id: rank for doc_id, _, rank in kw}
    for fused in result.outcome.results:
        parts = fused.sources
        expected_kw = 0.4 / (60 + keyword_rank[fused.doc_id]) if fused.doc_id in keyword_rank else 0.0
        assert parts["keyword"].contribution == pytest.approx(expected_kw, abs=1e-15)
        assert parts["dense"].contribution == pytest.approx(0.3 / (60 + dense_rank[fused.doc_id]), abs=1e-15)
        assert parts["bm25"].contribution == 0 and parts["bm25"].raw_score is None
        assert fused.score == pytest.approx(expected_kw + 0.3 / (60 + dense_rank[fused.doc_id]), abs=1e-15)
    assert result.outcome.results[0].sources["keyword"].detail["organization"] == "+2 (chin)"


def test_job_finds_employment_records_only_through_vectors(workbench):
    config = SearchConfig(weights={"bm25": 0.5, "dense": 0.5, "keyword": 0.5})
    sources = workbench.search("catalogue", "job", config).candidates.sources
    assert sources["keyword"].hits == () and sources["bm25"].hits == ()
    top3 = [h.doc_id for h in sources["dense"].hits[:3]]
    labour = {"cn-nbs-labour-force", "us-bls-employment-situation", "eu-eurostat-lfs"}
    assert labour & set(top3), top3


def test_a_points_change_rescores_from_the_records_loaded_once(workbench):
    first = workbench.retriever.source("catalogue", "keyword", SearchConfig())
    moved = workbench.retriever.source("catalogue", "keyword", SearchConfig(keyword={"tag": 6}))
    assert moved.records is first.records  # the same loaded records: only the points differ
    scores = {}
    for tag in (2, 6):
        config = SearchConfig(weights={"keyword": 1.0}, keyword={"tag": tag})
        hits = workbench.candidates("catalogue", "chin", config).sources["keyword"].hits
        scores[tag] = {h.doc_id: h.raw_score for h in hits}
    # labour force and machine learning have one matching tag each (+4 at tag 6), the social survey none
    assert scores[2] == {"cn-nbs-labour-force": 17, "cn-cgss": 15, "ml-benchmarks": 12}
    assert scores[6] == {"cn-nbs-labour-force": 21, "cn-cgss": 15, "ml-benchmarks": 16}
