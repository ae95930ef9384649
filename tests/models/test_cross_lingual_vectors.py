"""Cross-lingual vectors (issue 12, item 2): a one-language collection whose model reads one
language also stores multilingual-E5 vectors (`vector_xl`), and the vector source searches them
for a query in the other language. Scores are checked against the encoders by hand."""

import dataclasses

import numpy as np
import pytest
from corpora import ANIMALS

from retrieval import limits
from retrieval.indexing.pipeline import add_documents
from retrieval.indexing.plan import wants_cross_lingual
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.indexing.readers.stream import open_stream
from retrieval.models.embed import E5, MINILM, backend_for, load_encoder
from retrieval.search.config import SearchConfig
from retrieval.search.whynot.explain import explain
from retrieval.search.workbench import Workbench
from retrieval.store import XL_COLUMN, Store
from retrieval.text.passages import embedding_text
from retrieval.types import Document

CHINESE_QUERY = "哪些动物在夜里捕捉老鼠"  # "which animals catch mice at night"
DENSE = SearchConfig(weights={"dense": 1.0}, depth=6, top_k=6)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    wb = Workbench(Store(str(tmp_path_factory.mktemp("xl") / "db")))
    wb.create("zoo", parse_bytes(ANIMALS.encode(), "animals.csv"))
    return wb


def passages(wb: Workbench, collection: str, model: str) -> dict[str, np.ndarray]:
    """Each stored document's passage embedding by `model`, computed here."""
    rows = wb.store.column(collection, ["id", "title", "text"]).to_pylist()
    texts = [embedding_text(Document(id=r["id"], text=r["text"], title=r["title"])) for r in rows]
    return dict(zip([r["id"] for r in rows], load_encoder(model).encode_passages(texts), strict=True))


def by_hand(model: str, query: str, wb: Workbench, collection: str) -> dict[str, float]:
    """cos(query, document) with `model`'s query and passage encodings, over the stored texts."""
    q = load_encoder(model).encode_queries([query])[0]
    return {doc: float(np.dot(p, q)) for doc, p in passages(wb, collection, model).items()}


def dense_hits(wb: Workbench, query: str, config: SearchConfig = DENSE, collection: str = "zoo"):
    result = wb.candidates(collection, query, config).sources["dense"]
    return result, {h.doc_id: h.raw_score for h in result.hits}


# ---- which collections get them ----------------------------------------------------------------
def test_which_collections_get_cross_lingual_vectors(monkeypatch):
    monkeypatch.setattr(limits, "CROSS_LINGUAL_AUTO_MAX", 100)
    assert wants_cross_lingual("en", MINILM, 99)
    assert wants_cross_lingual("zh", MINILM, 99)  # a Chinese collection on the English model, too
    assert not wants_cross_lingual("en", MINILM, 100)  # auto stops at CROSS_LINGUAL_AUTO_MAX …
    assert wants_cross_lingual("en", MINILM, 100, requested=True)  # … unless asked for
    assert not wants_cross_lingual("en", MINILM, 5, requested=False)
    assert not wants_cross_lingual("zh", E5, 5, requested=True)  # the multilingual model reads both
    assert not wants_cross_lingual("mixed", MINILM, 5, requested=True)  # a mixed collection is never crossed


def test_an_english_collection_stores_e5_vectors_beside_its_own(zoo):
    info = zoo.info("zoo")
    assert (info.model, info.language, info.xl_model, info.xl_dim) == (MINILM, "en", E5, 384)
    stored = zoo.store.column("zoo", ["id", XL_COLUMN]).to_pylist()
    expected = passages(zoo, "zoo", E5)
    assert len(stored) == 6
    for row in stored:
        assert np.allclose(row[XL_COLUMN], expected[row["id"]], atol=1e-6)


# ---- which vectors a query searches ---------------------------------------------------------------
def test_a_chinese_query_searches_the_cross_lingual_vectors(zoo):
    result, scores = dense_hits(zoo, CHINESE_QUERY)
    hand = by_hand(E5, CHINESE_QUERY, zoo, "zoo")
    assert set(scores) == set(hand)
    for doc, score in scores.items():
        assert score == pytest.approx(hand[doc], abs=1e-5)
    assert [h.doc_id for h in result.hits] == sorted(hand, key=lambda d: (-hand[d], d))
    assert result.backend == ("exact scan (in memory, cosine), over the cross-lingual vectors "
                              "(multilingual-e5-small): the query is in the other language")


def test_an_english_query_keeps_the_collections_own_model(zoo):
    result, scores = dense_hits(zoo, "which animals hunt mice at night")
    hand = by_hand(MINILM, "which animals hunt mice at night", zoo, "zoo")
    for doc, score in scores.items():
        assert score == pytest.approx(hand[doc], abs=1e-5)
    assert result.backend == "exact scan (in memory, cosine)"


def test_language_aware_off_keeps_the_own_model_and_says_so(zoo):
    config = dataclasses.replace(DENSE, language_aware=False)
    result, scores = dense_hits(zoo, CHINESE_QUERY, config)
    hand = by_hand(MINILM, CHINESE_QUERY, zoo, "zoo")
    for doc, score in scores.items():
        assert score == pytest.approx(hand[doc], abs=1e-5)
    assert result.backend == ("exact scan (in memory, cosine), with all-MiniLM-L6-v2 although the query is "
                              "in the other language: language-aware fusion is off")


def test_a_collection_without_them_says_why(tmp_path):
    wb = Workbench(Store(str(tmp_path / "db")))
    info = wb.create("plain", parse_bytes(ANIMALS.encode(), "animals.csv"), cross_lingual=False).info
    assert (info.xl_model, info.xl_dim) == ("", 0)
    assert XL_COLUMN not in wb.store.table("plain").schema.names
    result, scores = dense_hits(wb, CHINESE_QUERY, collection="plain")
    hand = by_hand(MINILM, CHINESE_QUERY, wb, "plain")
    assert scores == pytest.approx({d: hand[d] for d in scores}, abs=1e-5)
    assert result.backend.endswith("the collection has no cross-lingual vectors (re-ingest it to add them)")


def test_batch_query_embedding_uses_each_querys_model(zoo):
    wb = Workbench(zoo.store)  # fresh caches
    english = "dogs that like walks"
    assert wb.retriever.embed_queries("zoo", [english, CHINESE_QUERY, english], DENSE) == 2
    assert wb.caches.query_vectors.get((MINILM, english)) is not None
    assert wb.caches.query_vectors.get((E5, CHINESE_QUERY)) is not None
    assert wb.caches.query_vectors.get((MINILM, CHINESE_QUERY)) is None  # not needed by the vector source
    # the graph source embeds with the collection's model: that one is needed too
    graph = SearchConfig(weights={"dense": 1.0, "graph": 1.0})
    assert wb.retriever.embed_queries("zoo", [CHINESE_QUERY], graph) == 1
    assert wb.caches.query_vectors.get((MINILM, CHINESE_QUERY)) is not None


def test_why_not_scores_a_document_in_the_same_vectors(zoo):
    hand = by_hand(E5, CHINESE_QUERY, zoo, "zoo")
    worst = min(hand, key=lambda d: (hand[d], d))
    explanation = explain(zoo, "zoo", CHINESE_QUERY, dataclasses.replace(DENSE, top_k=1), worst)
    dense = next(s for s in explanation.standings if s.source == "dense")
    assert dense.score == pytest.approx(hand[worst], abs=1e-5)
    assert dense.rank == 6  # last of the six in the whole collection


# ---- writes keep both columns ------------------------------------------------------------------------
MORE = "id,title,text\nyak,Yaks,\"Yaks are shaggy cattle of the high mountains that carry loads.\"\n"


def test_added_and_streamed_documents_get_cross_lingual_vectors_too(tmp_path):
    wb = Workbench(Store(str(tmp_path / "db")))
    wb.create("zoo", parse_bytes(ANIMALS.encode(), "animals.csv"))
    add_documents(wb.store, "zoo", parse_bytes(MORE.encode(), "more.csv"))
    (tmp_path / "zoo.csv").write_text(ANIMALS + MORE.split("\n", 1)[1], encoding="utf-8")
    streamed = wb.ingest_stream("streamed", open_stream(tmp_path / "zoo.csv", batch_size=3)).info
    assert (streamed.xl_model, streamed.doc_count) == (E5, 7)
    for name in ("zoo", "streamed"):
        _, scores = dense_hits(wb, "牦牛", dataclasses.replace(DENSE, depth=7), collection=name)
        hand = by_hand(E5, "牦牛", wb, name)
        assert set(scores) == set(hand) and len(hand) == 7
        for doc, score in scores.items():
            assert score == pytest.approx(hand[doc], abs=1e-5)


# ---- the E5 reranker reads the stored E5 passage vectors -------------------------------------------
def test_e5_rerank_takes_stored_passage_vectors_instead_of_embedding(zoo, monkeypatch):
    from retrieval.search.rerank import get_reranker

    reranker = get_reranker("e5")
    config = SearchConfig(rerank=True, rerank_top_n=4, top_k=6)
    wb = Workbench(zoo.store)  # empty caches
    embedded: list[int] = []
    real = reranker.encoder.encode_passages
    monkeypatch.setattr(reranker.encoder, "encode_passages",
                        lambda batch, **kw: embedded.append(len(batch)) or real(batch, **kw))
    query = "animals that hunt at night"
    result = wb.search("zoo", query, config)
    assert embedded == []  # all four passages came from the collection's vector_xl column
    q = reranker.encoder.encode_queries([query])[0]
    stored = passages(zoo, "zoo", E5)  # recomputed here, the way the reranker would
    assert len(result.reranked) == 4
    for r in result.reranked:
        assert r.rerank_score == pytest.approx(float(np.dot(stored[r.doc_id], q)), abs=1e-5)
    # a rerun of the same head (a slider move, a new query) reads no vectors from the store again
    reads: list[list[str]] = []
    real_read = wb.stored_vectors
    monkeypatch.setattr(wb, "stored_vectors", lambda c, ids, m, b: reads.append(list(ids)) or real_read(c, ids, m, b))
    wb.search("zoo", "animals awake at night", config)
    assert reads == [] and embedded == []
    # a collection without E5 vectors: the reranker embeds the passages itself
    plain = Workbench(Store(str(zoo.store.uri) + "-plain"))
    plain.create("plain", parse_bytes(ANIMALS.encode(), "animals.csv"), cross_lingual=False)
    plain.search("plain", query, config)
    assert embedded == [4]
    # vectors stored on another backend than the reranker's are not its own: it embeds the passages
    assert zoo.info("zoo").encoder_backend == reranker.backend == backend_for(E5)
    monkeypatch.setattr(reranker, "backend", "another backend")
    Workbench(zoo.store).search("zoo", query, config)  # empty caches
    assert embedded == [4, 4]
