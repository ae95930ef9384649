"""An outside HTTP search engine as a source, against a real engine on 127.0.0.1
(tests/search_engine.py: BM25 over the collection's paragraphs plus one it lacks): hits joined by
id and fused with local BM25, explained with the engine's raw scores; answers cached so a slider
never calls again; each failure that source's error while BM25 still fuses; nDCG@10 computed by
the workbench equal to the one computed from the engine's own answers."""

import httpx2
import pytest
from search_engine import Engine, descriptor

from retrieval.evaluation.evaluate import evaluate_collection, evaluate_run, run_from_rankings
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.sources.external import close_engines, parse_descriptor

OUTSIDE = ("outside-1", "Outside only", "A paragraph only the outside engine holds, about the Panthers and Broncos.")


@pytest.fixture(scope="module")
def engine(xsmall):
    documents = {d.id: (d.title, d.text) for d in xsmall.corpus.documents}
    documents[OUTSIDE[0]] = OUTSIDE[1:]
    engine = Engine(documents, slow_s=1.5)
    engine.base = engine.start()
    yield engine
    engine.stop()
    close_engines()


@pytest.fixture
def workbench(xsmall, engine):
    wb = Workbench(xsmall.store)
    wb.use_source(parse_descriptor(descriptor(engine.base)))
    return wb


def hybrid(**weights):
    return SearchConfig(fusion="weighted", normalization="minmax", weights=weights, depth=20, top_k=10)


def test_the_engines_hits_fuse_with_bm25_and_are_explained_with_its_raw_scores(workbench, engine, xsmall):
    query = xsmall.queries[next(iter(xsmall.qrels))]
    result = workbench.search("xsmall", query, hybrid(bm25=1.0, engine=1.0))
    outside = result.candidates.sources["engine"]
    assert outside.error is None and outside.backend.startswith("outside engine (http: http://127.0.0.1:")
    expected = engine.search(query, 20)
    assert [(h.doc_id, h.raw_score, h.rank) for h in outside.hits] == [
        (i, s, r) for r, (i, s) in enumerate(expected, start=1)]
    top = result.outcome.results[0]
    part = top.sources["engine"]
    assert part.raw_score == dict(expected)[top.doc_id] and part.rank == [i for i, _ in expected].index(top.doc_id) + 1
    # minmax: the engine's best hit normalises to 1, its contribution is weight × normalised
    best = result.candidates.sources["engine"].hits[0].doc_id
    fused = {r.doc_id: r for r in result.outcome.ranked}
    assert fused[best].sources["engine"].normalized == 1.0
    assert fused[best].sources["engine"].contribution == pytest.approx(1.0 * fused[best].sources["engine"].normalized)
    assert set(result.candidates.sources) == {"bm25", "engine"} and result.candidates.sources["bm25"].hits


def test_a_hit_the_collection_lacks_is_shown_with_the_engines_title_and_text(workbench):
    result = workbench.search("xsmall", "Panthers Broncos outside engine", hybrid(engine=1.0))
    shown = {r.doc_id: result.documents[r.doc_id] for r, _ in result.final_ranking()}
    assert shown["outside-1"]["title"] == "Outside only" and shown["outside-1"]["text"].startswith("A paragraph only")
    assert shown["outside-1"]["outside"] is True
    local = next(i for i in shown if i != "outside-1")
    assert "outside" not in shown[local]  # a local document's own row


def test_answers_are_cached_so_a_slider_never_calls_the_engine_again(workbench, engine):
    query = "Which team won Super Bowl 50?"
    workbench.search("xsmall", query, hybrid(bm25=1.0, engine=1.0))
    calls = engine.calls
    for weights in ({"bm25": 0.3, "engine": 0.7}, {"bm25": 0.9, "engine": 0.1}):
        workbench.search("xsmall", query, hybrid(**weights))
    workbench.search("xsmall", query, hybrid(bm25=1.0, engine=1.0).replace(depth=10))  # smaller depth: cut
    assert engine.calls == calls
    fresh = Workbench(workbench.store, caches=workbench.caches)  # the response cache outlives a candidate miss
    fresh.use_source(parse_descriptor(descriptor(engine.base)))
    workbench.caches.candidates.clear()
    fresh.search("xsmall", query, hybrid(bm25=1.0, engine=1.0))
    assert engine.calls == calls
    assert len(workbench.caches.responses) >= 1  # the Workbench's cache, not one of the built source's own
    workbench.caches.candidates.clear()
    workbench.caches.responses.clear()  # caching off: asked again
    workbench.search("xsmall", query, hybrid(bm25=1.0, engine=1.0))
    assert engine.calls == calls + 1
    workbench.search("xsmall", query + " again", hybrid(bm25=1.0, engine=1.0))
    assert engine.calls == calls + 2


@pytest.mark.parametrize(("path", "extra", "message"), [
    ("/broken", {}, "answered HTTP 500: {\"error\": \"index unavailable\"}"),
    ("/garbled", {}, "answered with malformed JSON"),
    ("/slow", {"timeout_s": 0.3}, "within 0.3 s"),
    ("/big", {"max_bytes": 1_000_000}, "over max_bytes 1,000,000"),
    ("/moved", {}, "answered 302 (a redirect to '/search?"),
    ("/search", {"hits": "results"}, "hits path 'results' matched nothing in the response (an object with keys took"),
    ("/nowhere", {}, "answered HTTP 404"),
])
def test_each_failure_is_that_sources_error_while_bm25_still_fuses(xsmall, engine, path, extra, message):
    wb = Workbench(xsmall.store)
    wb.use_source(parse_descriptor(descriptor(engine.base, name="failing", path=path, **extra)))
    result = wb.search("xsmall", "Super Bowl", hybrid(bm25=1.0, failing=1.0))
    failing = result.candidates.sources["failing"]
    assert failing.hits == () and message in failing.error, failing.error
    assert result.outcome.results and all(r.sources["bm25"].rank is not None and r.sources["failing"].contribution == 0
                                          for r in result.outcome.results)
    assert any(message in note for note in result.outcome.notes)
    again = wb.search("xsmall", "Super Bowl", hybrid(bm25=1.0, failing=1.0))  # a failure is not cached
    assert message in again.candidates.sources["failing"].error


def test_a_stopped_engine_is_an_error_with_its_address_and_evaluation_still_completes(xsmall):
    engine = Engine({"a": ("A", "alpha")})
    base = engine.start()
    wb = Workbench(xsmall.store)
    wb.use_source(parse_descriptor(descriptor(base, name="stopped")))
    assert wb.search("xsmall", "alpha", hybrid(stopped=1.0)).candidates.sources["stopped"].error is None
    engine.stop()
    result = wb.search("xsmall", "alpha beta", hybrid(bm25=1.0, stopped=1.0))
    assert result.candidates.sources["stopped"].error == f"ExternalError: cannot reach {base}: connection refused"
    qrels = dict(list(xsmall.qrels.items())[:5])
    report = evaluate_collection(wb, "xsmall", xsmall.queries, qrels, hybrid(bm25=1.0, stopped=1.0))
    assert report.metrics["stopped"]["ndcg@10"] == 0.0 and report.metrics["bm25"]["ndcg@10"] > 0
    assert report.errors == {"stopped": (5, f"ExternalError: cannot reach {base}: connection refused")}
    assert report.to_json_dict()["errors"] == {
        "stopped": {"queries": 5, "first": f"ExternalError: cannot reach {base}: connection refused"}}


def test_ndcg_of_the_outside_source_equals_the_one_computed_from_the_engines_own_answers(workbench, engine, xsmall):
    english = {q: g for q, g in xsmall.qrels.items() if q.startswith("en-")}
    config = SearchConfig(weights={"engine": 1.0}, depth=100)
    report = evaluate_collection(workbench, "xsmall", xsmall.queries, english, config)
    answers = {q: httpx2.get(engine.base + "/search", params={"q": xsmall.queries[q], "size": 100}).json()
               for q in english}  # the engine asked directly, over HTTP
    rankings = {q: [hit["_id"] for hit in answer["hits"]["hits"]] for q, answer in answers.items()}
    direct, _ = evaluate_run(english, run_from_rankings(rankings), ["ndcg@10"])
    assert report.metrics["engine"]["ndcg@10"] == pytest.approx(direct["ndcg@10"], abs=1e-12)
    assert 0.3 < direct["ndcg@10"] < 1.0
    assert report.metrics["engine"]["ndcg@10"] == pytest.approx(report.metrics["hybrid"]["ndcg@10"], abs=1e-12)


def test_post_with_a_json_body_and_a_credential_from_the_environment(xsmall, engine, monkeypatch):
    monkeypatch.setenv("ENGINE_TOKEN", "s3cret")
    d = parse_descriptor({"name": "posted", "kind": "http", "url": engine.base + "/search", "method": "POST",
                          "headers": {"Authorization": "Bearer ${ENGINE_TOKEN}"},
                          "body": {"query": "{query}", "size": "{depth}"},
                          "hits": "hits.hits", "id": "_id", "score": "_score"})
    assert "s3cret" not in d.to_json()
    wb = Workbench(xsmall.store)
    wb.use_source(d)
    result = wb.search("xsmall", "Super Bowl halftime", hybrid(posted=1.0))
    assert result.candidates.sources["posted"].error is None
    assert engine.requests[-1] == {"path": "/search", "json": {"query": "Super Bowl halftime", "size": 20}}


def test_why_not_says_what_can_be_known_of_an_outside_engine(workbench, engine):
    query = "Broncos defense"
    config = hybrid(bm25=1.0, engine=1.0)
    returned = [i for i, _ in engine.search(query, 1000)]
    local = next(i for i in returned if i != OUTSIDE[0])
    found = workbench.explain_document("xsmall", query, config, local)
    part = next(s for s in found.standings if s.source == "engine")
    assert (part.scored, part.position, part.in_candidates) == (True, returned.index(local) + 1, True)
    assert engine.requests[-1]["args"]["size"] == "60"  # the collection's size (60), under max_depth 1000
    unreturned = next(i for i in workbench.reads.documents("xsmall", [f"en-{n:03d}" for n in range(1, 61)])
                      if i not in returned)
    part = next(s for s in workbench.explain_document("xsmall", query, config, unreturned).standings
                if s.source == "engine")
    assert not part.scored
    assert part.note == ("engine does not score it: engine (an outside engine) did not return it among its first "
                         "1000 results; its scores for other documents are unknown")


def test_query_vector_is_the_query_embedded_by_the_collections_own_encoder(xsmall, engine):
    from retrieval.models.embed import load_encoder

    d = parse_descriptor({"name": "knn", "kind": "http", "url": engine.base + "/search", "method": "POST",
                          "body": {"query": "{query}", "size": "{depth}", "vector": "{query_vector}"},
                          "hits": "hits.hits", "id": "_id", "score": "_score"})
    wb = Workbench(xsmall.store)
    wb.use_source(d)
    query = "Who sang at the halftime show?"
    assert wb.search("xsmall", query, hybrid(knn=1.0)).candidates.sources["knn"].error is None
    sent = engine.requests[-1]["json"]["vector"]
    expected = load_encoder(xsmall.store.info("xsmall").model).encode_queries([query])[0]
    assert len(sent) == len(expected) and sent == pytest.approx([float(x) for x in expected], abs=1e-6)
