"""Search through the workbench on a small real corpus with the real bundled models."""

import math

import pytest
from corpora import ANIMALS_WITH_QUALITY

from retrieval.indexing.indexes import build_vector_index
from retrieval.indexing.pipeline import add_documents, create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.sources.base import run_source
from retrieval.sources.bm25 import NO_TERMS, RankBM25Source
from retrieval.store import Store
from retrieval.text.tokenize import TOKENIZER_NAME, TOKENIZER_V1, reindex_note
from retrieval.types import Hit


@pytest.fixture(scope="module")
def workbench(tmp_path_factory):
    wb = Workbench(Store(str(tmp_path_factory.mktemp("lancedb"))))
    create_collection(wb.store, "animals", parse_bytes(ANIMALS_WITH_QUALITY.encode(), "animals.csv"))
    return wb


def test_rank_bm25_matches_hand_computed_formula():
    # N = 3; "mice" is in one document: idf = ln(1 + (3 − 1 + 0.5)/(1 + 0.5)) = ln(8/3)
    docs = [["cat", "mice", "mice"], ["dog", "walk"], ["owl", "night", "sky", "tree"]]
    source = RankBM25Source(["a", "b", "c"], docs, k1=1.2, b=0.75)
    avgdl = 9 / 3
    tf, dl = 2, 3
    expected = math.log(8 / 3) * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))
    hits = source.search("mice", 10)
    assert hits == [Hit("a", pytest.approx(expected, abs=1e-12), 1)]
    assert source.search("the of", 10) == []  # only stopwords: nothing to score


def test_both_bm25_backends_agree_at_lancedb_parameters(workbench):
    query = "which animals hunt mice at night"
    by_backend = {}
    for backend in ("rank_bm25", "lancedb"):
        config = SearchConfig(bm25_backend=backend, bm25_k1=1.2, bm25_b=0.75, weights={"bm25": 1.0})
        hits = workbench.candidates("animals", query, config).sources["bm25"].hits
        by_backend[backend] = [(h.doc_id, h.raw_score) for h in hits]
    assert [d for d, _ in by_backend["rank_bm25"]] == [d for d, _ in by_backend["lancedb"]]
    for (_, a), (_, b) in zip(by_backend["rank_bm25"], by_backend["lancedb"], strict=True):
        assert a == pytest.approx(b, rel=1e-5)  # LanceDB scores in float32


def test_dense_finds_paraphrase_and_reports_cosine_similarity(workbench):
    # no word of the query occurs in the bees row: only meaning connects them
    result = workbench.search("animals", "insects making something sweet", SearchConfig(weights={"dense": 1.0}))
    top = result.outcome.results[0]
    assert top.doc_id == "bee"
    similarity = top.sources["dense"].raw_score
    assert 0.0 < similarity < 1.0


def test_hybrid_explains_every_result(workbench):
    config = SearchConfig(fusion="rrf", rrf_k=60, weights={"bm25": 0.5, "dense": 0.5}, top_k=3)
    result = workbench.search("animals", "night hunters", config)
    assert len(result.outcome.results) == 3
    for fused in result.outcome.results:
        parts = fused.sources
        assert set(parts) == {"bm25", "dense"}
        assert sum(p.contribution for p in parts.values()) == pytest.approx(fused.score)
        for p in parts.values():
            if p.rank is not None:
                assert p.contribution == pytest.approx(0.5 / (60 + p.rank))
        assert fused.doc_id in result.documents


def test_candidates_are_retrieved_once_and_sliders_only_refuse(workbench):
    query = "honey and flowers"
    first = workbench.candidates("animals", query, SearchConfig(depth=5))
    assert not first.from_cache and set(first.seconds) == {"bm25", "dense"}
    for k, fusion in ((1, "rrf"), (200, "rrf"), (60, "weighted")):
        again = workbench.candidates("animals", query, SearchConfig(depth=5, rrf_k=k, fusion=fusion))
        assert again.from_cache and again.seconds == {}
    shallower = workbench.candidates("animals", query, SearchConfig(depth=2))
    assert shallower.from_cache and all(len(r.hits) <= 2 for r in shallower.sources.values())
    assert workbench.candidates("animals", query, SearchConfig(depth=50)).from_cache is False
    # a BM25 parameter is a source parameter: only bm25 re-runs
    tuned = workbench.candidates("animals", query, SearchConfig(depth=50, bm25_k1=2.0))
    assert set(tuned.seconds) == {"bm25"}


def test_a_write_bumps_the_version_and_invalidates_candidates(tmp_path):
    wb = Workbench(Store(str(tmp_path / "db")))
    create_collection(wb.store, "notes", parse_bytes(b"id,text\na,apples are red\n", "n.csv"))
    config = SearchConfig(weights={"bm25": 1.0})
    assert [h.doc_id for h in wb.candidates("notes", "apples", config).sources["bm25"].hits] == ["a"]
    add_documents(wb.store, "notes", parse_bytes(b"id,text\nb,green apples and red apples\n", "m.csv"))
    after = wb.candidates("notes", "apples", config)
    assert not after.from_cache
    assert [h.doc_id for h in after.sources["bm25"].hits] == ["b", "a"]


def test_tie_field_from_metadata(workbench):
    # A query no document matches lexically: dense alone, with weight 0 → every score is 0,
    # so the quality field orders everything.
    config = SearchConfig(weights={"dense": 0.0, "bm25": 1.0}, tie_field="quality", top_k=6, depth=6)
    result = workbench.search("animals", "zzzz", config)
    assert [r.doc_id for r in result.outcome.ranked] == ["dog", "owl", "cat", "cow", "bee", "fox"]
    assert [r.tie_value for r in result.outcome.ranked][:2] == [5.0, 4.0]


class _Broken:
    name = "graph"

    def search(self, query, depth):
        raise RuntimeError("graph store offline")


class _NaNs:
    name = "weird"

    def search(self, query, depth):
        return [Hit("a", float("nan"), 1), Hit("b", 0.5, 2), Hit("c", float("inf"), 3), Hit("d", 0.1, 4)]


def test_run_source_turns_failures_and_non_finite_scores_into_notes():
    broken = run_source(_Broken(), "q", 10)
    assert broken.hits == () and broken.error == "RuntimeError: graph store offline"
    weird = run_source(_NaNs(), "q", 10)
    assert weird.hits == (Hit("b", 0.5, 1), Hit("d", 0.1, 2))
    assert weird.notes == ("2 hit(s) with NaN or infinite scores dropped",)


def test_unknown_source_is_reported_and_others_still_fused(workbench):
    config = SearchConfig(weights={"bm25": 1.0, "dense": 1.0, "nosuch": 1.0})
    result = workbench.search("animals", "milk", config)
    assert result.outcome.results[0].doc_id == "cow"
    assert result.candidates.sources["nosuch"].error.startswith("unknown source 'nosuch'")
    assert any(n.startswith("nosuch failed") for n in result.outcome.notes)


def test_rerank_top_n_then_first_stage_tail_cut_at_top_k(workbench):
    config = SearchConfig(weights={"bm25": 0.5, "dense": 0.5}, top_k=4, rerank=True, rerank_top_n=2, rerank_lambda=0.0)
    result = workbench.search("animals", "which animal makes honey", config)
    assert result.reranker_kind == "bi-encoder re-scoring (multilingual-e5-small, full text)"
    fused_order = [r.doc_id for r in result.outcome.ranked]
    assert sorted(r.first_stage_rank for r in result.reranked) == [1, 2]
    assert [r.rerank_score for r in result.reranked] == sorted((r.rerank_score for r in result.reranked), reverse=True)
    final = result.final_ranking()
    assert len(final) == 4
    assert [fused.doc_id for fused, _ in final[:2]] == [r.doc_id for r in result.reranked]
    assert [fused.doc_id for fused, reranked in final[2:]] == fused_order[2:4]
    assert all(reranked is None for _, reranked in final[2:])
    # scores are cached per (model, query, doc): a slider move reranks nothing new
    cached = len(workbench.caches.rerank)
    workbench.search("animals", "which animal makes honey", SearchConfig.from_dict({**config.to_dict(), "rrf_k": 5.0}))
    assert len(workbench.caches.rerank) == cached


def test_vector_index_keeps_similarities_exact(tmp_path):
    wb = Workbench(Store(str(tmp_path / "db")))
    create_collection(wb.store, "zoo", parse_bytes(ANIMALS_WITH_QUALITY.encode(), "animals.csv"))
    config = SearchConfig(weights={"dense": 1.0}, depth=6)
    exact = [(h.doc_id, h.raw_score) for h in wb.candidates("zoo", "night hunters", config).sources["dense"].hits]
    build_vector_index(wb.store, "zoo", index_type="IVF_FLAT", num_partitions=2)
    source = wb.retriever.source("zoo", "dense", config)
    assert source.has_index
    indexed = [(h.doc_id, h.raw_score) for h in wb.candidates("zoo", "night hunters", config).sources["dense"].hits]
    assert [d for d, _ in indexed] == [d for d, _ in exact]
    assert [s for _, s in indexed] == pytest.approx([s for _, s in exact], abs=1e-6)


def test_parameter_slides_of_one_source_never_evict_another_built_source(workbench):
    config = SearchConfig(weights={"bm25": 1.0, "dense": 1.0, "keyword": 1.0})
    dense = workbench.retriever.source("animals", "dense", config)
    bm25 = workbench.retriever.source("animals", "bm25", config)
    for points in range(40):  # more keyword parameter sets than any per-source cache holds
        moved = SearchConfig(weights=config.weights, keyword={"description": float(points)})
        workbench.search("animals", "milk", moved)
    assert workbench.retriever.source("animals", "dense", config) is dense
    assert workbench.retriever.source("animals", "bm25", config) is bm25


def test_a_deleted_and_recreated_collection_never_hits_the_old_caches(tmp_path):
    # LanceDB restarts version numbers for a re-created table: caches must not key on them alone.
    wb = Workbench(Store(str(tmp_path / "db")))
    config = SearchConfig(weights={"bm25": 1.0, "dense": 1.0, "keyword": 1.0}, keyword={"min_relevance": 3})
    create_collection(wb.store, "again", parse_bytes(b"id,text\nold,Cows give milk on dairy farms.\n", "a.csv"))
    first = wb.search("again", "milk", config)
    assert [r.doc_id for r in first.outcome.results] == ["old"]
    wb.store.delete("again")
    create_collection(wb.store, "again", parse_bytes(b"id,text\nnew,Goats give milk in the mountains.\n", "b.csv"))
    second = wb.search("again", "milk", config)
    assert [r.doc_id for r in second.outcome.results] == ["new"]
    assert [h.doc_id for h in second.candidates.sources["keyword"].hits] == ["new"]


def test_a_search_reads_only_the_rows_it_shows(tmp_path):
    """Rows are read on demand: none with the candidates, the shown top-K's with a search (one
    batch), the rest when a view asks, all of them when a tie field needs their metadata."""
    wb = Workbench(Store(str(tmp_path / "db")))
    create_collection(wb.store, "animals", parse_bytes(ANIMALS_WITH_QUALITY.encode(), "animals.csv"))
    read: list[set[str]] = []
    original = wb.store.documents

    def counting(name, ids, row_ids=None, state=None):
        ids = list(ids)
        read.append(set(ids))
        return original(name, ids, row_ids, state)

    wb.store.documents = counting
    config = SearchConfig(weights={"bm25": 0.5, "dense": 0.5}, depth=6, top_k=2)
    candidates = wb.candidates("animals", "night hunters", config)
    assert read == [] and candidates.documents == {}
    assert len(candidates.all_ids()) == 6  # the dense source ranks every document
    result = wb.search("animals", "night hunters", config)
    shown = [r.doc_id for r in result.outcome.results]
    assert read == [set(shown)] and set(result.documents) == set(shown)
    assert result.documents[shown[0]]["title"] == {"cat": "Cats", "owl": "Owls", "fox": "Foxes"}[shown[0]]
    # the same search again: every row it shows is cached for this collection state
    read.clear()
    assert set(wb.search("animals", "night hunters", config).documents) == set(shown) and read == []
    # a view of every candidate reads the others, once
    rows = result.candidates.rows(result.candidates.all_ids())
    assert read == [result.candidates.all_ids() - set(shown)] and len(rows) == 6
    # a tie field needs every candidate's metadata: read before fusing (a fresh workbench: no row cached)
    fresh = Workbench(wb.store)
    read.clear()
    tied = fresh.search("animals", "night hunters", SearchConfig(weights={"bm25": 1.0}, depth=6, top_k=1,
                                                                 tie_field="quality"))
    assert len(tied.candidates.all_ids()) > 1 and read == [tied.candidates.all_ids()]


def test_a_collection_is_searched_and_appended_to_with_the_analyser_it_was_built_with(tmp_path, monkeypatch):
    """A collection built before one-letter words were dropped (analyser v1) keeps matching its
    stored tokens with both BM25 backends, and documents added later are tokenised as its own
    were; a new collection gets today's analyser, which drops the one-letter query."""
    import retrieval.indexing.plan as plan

    wb = Workbench(Store(str(tmp_path)))
    monkeypatch.setattr(plan, "TOKENIZER_NAME", TOKENIZER_V1)  # as created before v2 existed
    create_collection(wb.store, "old", parse_bytes(b"id,text\nq,Q wrote a letter\nx,nothing here\n", "old.csv"))
    monkeypatch.undo()
    create_collection(wb.store, "new", parse_bytes(b"id,text\nq,Q wrote a letter\nx,nothing here\n", "new.csv"))
    add_documents(wb.store, "old", parse_bytes(b"id,text\nj,J wrote this\n", "more.csv"))
    assert (wb.store.info("old").tokenizer, wb.store.info("new").tokenizer) == (TOKENIZER_V1, TOKENIZER_NAME)
    tokens = wb.store.column("old", ["tokens"]).column("tokens").to_pylist()
    assert sorted(tokens) == ["j wrote", "noth here", "q wrote letter"]
    for backend in ("rank_bm25", "lancedb"):
        config = SearchConfig(bm25_backend=backend, weights={"bm25": 1.0})
        old = wb.candidates("old", "J or Q?", config).sources["bm25"]
        new = wb.candidates("new", "J or Q?", config).sources["bm25"]
        assert sorted(h.doc_id for h in old.hits) == ["j", "q"]
        assert old.backend.endswith(reindex_note(TOKENIZER_V1)) and "re-ingest" not in new.backend
        assert new.hits == () and NO_TERMS in new.notes
    assert reindex_note(wb.store.info("old").tokenizer) is not None
