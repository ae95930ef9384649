"""Metadata filters (retrieval/search/filters.py): parsing and matching by hand, and on a hand-built
collection where every source's unfiltered top 3 is category A while the filtered top 3 is
category B — with the same raw scores the documents have unfiltered (filters mask, they do not
change BM25's whole-collection statistics or a cosine)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from retrieval.indexing.pipeline import create_collection
from retrieval.search.config import SearchConfig
from retrieval.search.filters import Filter, allowed_ids, matches, parse_filter
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.types import Document, ParsedCorpus, RetrievalError

# Category A documents are about "river" and nothing else, B mention it among other words, C once
# in passing: BM25, cosine and the keyword scorer all rank A first for the query "river".
DOCS = (
    [Document(f"a{i}", "river river river", title="river",
              metadata={"category": "A", "year": 2000 + i, "tags": ["x", "shared"], "date": f"2020-01-0{i + 1}"})
     for i in range(3)]
    + [Document(f"b{i}", f"river river bank near farm {i}", title=f"river B{i}",
                metadata={"category": "B", "year": 2010 + i, "tags": ["y", "shared"], "date": f"2021-06-0{i + 1}"})
       for i in range(3)]
    + [Document(f"c{i}", f"a quiet river town number {i}", title=f"town C{i}",
                metadata={"category": "C", "year": 2020 + i, "tags": ["z"]}) for i in range(3)]
)


def test_parse_filter():
    assert parse_filter("category=hair_problem") == Filter("category", "=", ("hair_problem",))
    assert parse_filter(" tags = a | b ") == Filter("tags", "=", ("a", "b"))
    assert parse_filter("year>=2010") == Filter("year", ">=", ("2010",))
    assert str(parse_filter("date<2021-01-01")) == "date<2021-01-01"
    for bad in ("", "category", "=x", "year>=soon", "tags=a||b", "x=\n"):
        with pytest.raises(RetrievalError):
            parse_filter(bad)


def test_matches_by_hand():
    meta = {"category": "B", "tags": ["y", "shared"], "year": 2011, "date": "2021-06-02", "code": "007"}
    assert matches(meta, parse_filter("category=B")) and not matches(meta, parse_filter("category=b"))
    assert matches(meta, parse_filter("category=A|B"))
    assert matches(meta, parse_filter("tags=shared")) and not matches(meta, parse_filter("tags=x"))
    assert matches(meta, parse_filter("year=2011")) and matches(meta, parse_filter("year>=2011"))
    assert not matches(meta, parse_filter("year>2011")) and matches(meta, parse_filter("year<2011.5"))
    assert matches(meta, parse_filter("date>=2021-06-02")) and not matches(meta, parse_filter("date<2021-06-02"))
    assert matches(meta, parse_filter("code=007")) and not matches(meta, parse_filter("code=7"))
    assert not matches(meta, parse_filter("missing=1"))
    rows = [(d.id, d.metadata) for d in DOCS]
    assert allowed_ids(rows, (parse_filter("category=B"), parse_filter("year>=2011"))) == {"b1", "b2"}


@pytest.fixture(scope="module")
def workbench(tmp_path_factory):
    wb = Workbench(Store(str(tmp_path_factory.mktemp("filters"))))
    create_collection(wb.store, "f", ParsedCorpus(DOCS), model="all-MiniLM-L6-v2")
    return wb


def ranked(workbench, source: str, filters: list[str], depth: int = 3, **config):
    cfg = SearchConfig(weights={source: 1.0}, depth=depth, filters=filters, **config)
    return [(h.doc_id, h.raw_score) for h in workbench.candidates("f", "river", cfg).sources[source].hits]


@pytest.mark.parametrize("source,config", [
    ("bm25", {}), ("bm25", {"bm25_backend": "lancedb"}), ("dense", {}),
    ("keyword", {"keyword": {"min_relevance": 1}}),
])
def test_each_source_ranks_only_the_filtered_documents_with_unchanged_scores(workbench, source, config):
    everything = dict(ranked(workbench, source, [], depth=9, **config))
    top = ranked(workbench, source, [], **config)
    assert {d[0] for d, _ in top} == {"a"}
    filtered = ranked(workbench, source, ["category=B"], **config)
    assert {d for d, _ in filtered} == {"b0", "b1", "b2"}
    for doc_id, score in filtered:  # whole-collection statistics: the very same raw score
        assert score == pytest.approx(everything[doc_id], rel=1e-6)
    # depth counts matching documents: depth 2 gives two B documents, not zero
    assert len(ranked(workbench, source, ["category=B"], depth=2, **config)) == 2


def test_filters_combine_and_key_the_cache(workbench):
    assert {d for d, _ in ranked(workbench, "bm25", ["category=B", "year>=2011"])} == {"b1", "b2"}
    assert {d for d, _ in ranked(workbench, "bm25", ["tags=shared", "date<2021-01-01"])} == {"a0", "a1", "a2"}
    # the same query with and without a filter are two cache entries, never mixed up
    assert {d[0] for d, _ in ranked(workbench, "bm25", [])} == {"a"}


def test_the_explanation_says_how_many_documents_the_filter_left(workbench):
    result = workbench.search("f", "river", SearchConfig(filters=["category=A|C"]))
    assert result.outcome.notes[0].startswith("filter category=A|C left 6 of 9 documents")
    assert {r.doc_id[0] for r in result.outcome.results} <= {"a", "c"}


def test_bad_filters_say_what_is_wrong(workbench):
    with pytest.raises(RetrievalError, match="unknown metadata field 'colour'"):
        workbench.search("f", "river", SearchConfig(filters=["colour=red"]))
    with pytest.raises(RetrievalError, match="compares 'category' as a number"):
        workbench.search("f", "river", SearchConfig(filters=["category>=3"]))
    with pytest.raises(RetrievalError, match="filters must be a list of strings"):
        SearchConfig(filters="category=A")


def test_filters_round_trip_through_json_and_the_url():
    config = SearchConfig(filters=["category=a|b", "year>=2010"])
    assert SearchConfig.from_json(config.to_json()).filters == config.filters
    assert SearchConfig.from_query_params(config.to_query_params()).filters == config.filters
    assert "filters" not in SearchConfig().to_query_params()


def test_cli_filter_option(workbench):
    done = subprocess.run([sys.executable, "-m", "retrieval", "--db", workbench.store.uri, "search", "f", "river",
                           "--filter", "category=B", "--filter", "year>=2011", "--weights", "bm25=1", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    results = out["results"] if isinstance(out, dict) else out
    assert {r["id"] for r in results} == {"b1", "b2"}


HISTORY = [
    Document("g0", "公元200年，曹操在官渡击败袁绍。", metadata={"category": "war"}),
    Document("g1", "袁绍死后，曹操平定河北。", metadata={"category": "politics"}),
    Document("g2", "公元208年，曹操在赤壁败给周瑜。", metadata={"category": "war"}),
    Document("g3", "袁绍出身名门，四世三公。", metadata={"category": "family"}),
]


def test_the_graph_source_ranks_only_the_filtered_events(workbench):
    create_collection(workbench.store, "g", ParsedCorpus(HISTORY))
    config = SearchConfig(weights={"graph": 1.0}, graph={"threshold": 0.05})
    unfiltered = {h.doc_id: h.raw_score for h in workbench.candidates("g", "袁绍", config).sources["graph"].hits}
    assert {"g0", "g1", "g3"} <= set(unfiltered)
    filtered = SearchConfig(weights={"graph": 1.0}, graph={"threshold": 0.05}, filters=["category=war|family"],
                            depth=2)
    hits = workbench.candidates("g", "袁绍", filtered).sources["graph"].hits
    assert len(hits) == 2 and {h.doc_id for h in hits} <= {"g0", "g2", "g3"}
    for h in hits:
        assert h.raw_score == pytest.approx(unfiltered[h.doc_id])
