"""Chroma (the chromadb package's server, a third-party engine from PyPI) as an outside source,
through the preset descriptor examples/sources/chroma.json: the real server started on a free
loopback port (telemetry off), the collection's paragraphs added with the vectors of the
collection's own encoder (Chroma embeds nothing), queried over its HTTP API v2 with
`{query_vector}`. Its parallel arrays are read by `zip`, its distances ranked lower-is-better
(score 1 / (1 + d)); its nDCG@10 computed by the workbench equals the one computed from Chroma's own answers; it fuses
with local BM25; stopped mid-run, it is that source's error while BM25 still fuses."""

import json

import pytest
from chroma_server import Chroma

from retrieval.evaluation.evaluate import evaluate_collection, evaluate_run, run_from_rankings
from retrieval.models.embed import load_encoder
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.sources.external import close_engines
from retrieval.text.passages import embedding_text

DEPTH = 100


@pytest.fixture(scope="module")
def chroma(xsmall, tmp_path_factory):
    """The server holding the xsmall collection's 60 paragraphs, embedded by its own encoder."""
    server = Chroma(tmp_path_factory.mktemp("chroma"))
    try:
        documents = xsmall.corpus.documents
        encoder = load_encoder(xsmall.store.info("xsmall").model)
        server.load("xsmall", documents, encoder.encode_passages([embedding_text(d) for d in documents]))
        server.preset = server.descriptor()
        yield server
    finally:
        server.stop()
        close_engines()


def workbench(xsmall, chroma) -> Workbench:
    wb = Workbench(xsmall.store)  # its own caches: nothing answered by another test's workbench
    wb.use_source(chroma.preset)
    return wb


def asked_directly(chroma, xsmall, queries: dict[str, str]) -> dict[str, dict]:
    """Chroma's own answers (POST …/query over HTTP) to the queries embedded by the collection's encoder."""
    vectors = load_encoder(xsmall.store.info("xsmall").model).encode_queries(list(queries.values()))
    return {qid: chroma.query(vector, DEPTH) for qid, vector in zip(queries, vectors, strict=True)}


def test_ndcg_of_chroma_alone_equals_the_one_computed_from_its_own_answers(xsmall, chroma):
    report = evaluate_collection(workbench(xsmall, chroma), "xsmall", xsmall.queries, xsmall.qrels,
                                 SearchConfig(weights={"chroma": 1.0}, depth=DEPTH))
    answers = asked_directly(chroma, xsmall, {q: xsmall.queries[q] for q in xsmall.qrels})
    direct, _ = evaluate_run(xsmall.qrels, run_from_rankings({q: a["ids"][0] for q, a in answers.items()}),
                             ["ndcg@10"])
    assert report.errors == {}
    assert report.metrics["chroma"]["ndcg@10"] == pytest.approx(direct["ndcg@10"], abs=1e-12)
    assert 0.3 < direct["ndcg@10"] < 1.0
    assert report.metrics["chroma"]["ndcg@10"] == pytest.approx(report.metrics["hybrid"]["ndcg@10"], abs=1e-12)


def test_chroma_fuses_with_bm25_its_score_the_similarity_of_its_distance(xsmall, chroma):
    wb = workbench(xsmall, chroma)
    query = xsmall.queries[next(iter(xsmall.qrels))]
    config = SearchConfig(fusion="weighted", normalization="minmax", weights={"bm25": 1.0, "chroma": 1.0},
                          depth=20, top_k=10)
    result = wb.search("xsmall", query, config)
    hits = result.candidates.sources["chroma"].hits
    answer = asked_directly(chroma, xsmall, {"q": query})["q"]
    assert [h.doc_id for h in hits] == answer["ids"][0][:20]
    assert [(h.raw_score, h.detail["engine_score"]) for h in hits] == [(1 / (1 + d), d)
                                                                       for d in answer["distances"][0][:20]]
    document = next(d for d in xsmall.corpus.documents if d.id == hits[0].doc_id)  # its title and text mapped too
    assert hits[0].detail == {"engine_score": answer["distances"][0][0], "title": document.title,
                              "text": document.text[:500]}
    fused = {r.doc_id: r for r in result.outcome.ranked}
    nearest, farthest = fused[hits[0].doc_id].sources["chroma"], fused[hits[-1].doc_id].sources["chroma"]
    assert (nearest.rank, nearest.normalized, farthest.normalized) == (1, 1.0, 0.0)  # the nearest is the best
    assert result.candidates.sources["bm25"].hits and result.candidates.sources["bm25"].error is None

    both = evaluate_collection(wb, "xsmall", xsmall.queries, xsmall.qrels, config.replace(depth=DEPTH))
    alone = evaluate_collection(wb, "xsmall", xsmall.queries, xsmall.qrels,
                                SearchConfig(weights={"chroma": 1.0}, depth=DEPTH))
    bm25 = evaluate_collection(wb, "xsmall", xsmall.queries, xsmall.qrels, SearchConfig(weights={"bm25": 1.0},
                                                                                       depth=DEPTH))
    assert both.errors == {}
    assert both.metrics["chroma"] == alone.metrics["chroma"] and both.metrics["bm25"] == bm25.metrics["bm25"]
    assert both.metrics["hybrid"]["ndcg@10"] not in (alone.metrics["chroma"]["ndcg@10"],
                                                     bm25.metrics["bm25"]["ndcg@10"])


def test_chroma_stopped_mid_run_is_that_sources_error_while_bm25_still_fuses(xsmall, chroma):
    """Last in the module: it stops the module's server."""
    wb = workbench(xsmall, chroma)
    config = SearchConfig(fusion="weighted", normalization="minmax", weights={"bm25": 1.0, "chroma": 1.0},
                          depth=DEPTH)
    judged = list(xsmall.qrels)
    first = {q: xsmall.qrels[q] for q in judged[:10]}
    before = evaluate_collection(wb, "xsmall", xsmall.queries, first, config)  # these 10 answers are cached
    assert before.errors == {}
    chroma.stop()
    gone = f"ExternalError: cannot reach {chroma.base}: connection refused"
    result = wb.search("xsmall", "Who won Super Bowl 50?", config)
    assert result.candidates.sources["chroma"].error == gone
    assert result.outcome.results and all(r.sources["chroma"].contribution == 0 for r in result.outcome.results)

    report = evaluate_collection(wb, "xsmall", xsmall.queries, xsmall.qrels, config)
    assert report.errors == {"chroma": (len(judged) - 10, gone)}
    assert report.metrics["bm25"]["ndcg@10"] > 0
    for qid in judged[:10]:  # answered before the stop: from the response cache
        assert report.per_query["chroma"][qid] == before.per_query["chroma"][qid]
    for qid in judged[10:]:  # after it: Chroma retrieved nothing, the fusion is BM25's ranking
        assert report.per_query["chroma"][qid]["ndcg@10"] == 0.0
        assert report.per_query["hybrid"][qid]["ndcg@10"] == report.per_query["bm25"][qid]["ndcg@10"]
    assert json.loads(json.dumps(report.to_json_dict()))["errors"] == {"chroma": {"queries": 20, "first": gone}}
