"""The lean evaluation path (ids and scores only: `evaluate.ranked_lean`, `Workbench.source_results`,
the vector source's `search_batch`, `RankingPlan.first_stage`) gives exactly the explained path's
rankings and metrics (`Workbench.search` per query: rows read, fusion explained)."""

from pathlib import Path

import numpy as np
import pytest
from counting import CountingWorkbench

from retrieval.evaluation.evaluate import evaluate_collection
from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.search.config import SearchConfig
from retrieval.search.plan import RankingPlan
from retrieval.search.workbench import Workbench
from retrieval.sources.base import top_hits
from retrieval.sources.dense import InMemoryDenseSource, exact_similarities, unit
from retrieval.store import Store
from retrieval.types import Hit

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "xquad"  # the bundled BEIR sample

# Our own six animals with numbers to break ties on and to filter by.
ANIMALS = """id,title,text,quality,year
cat,Cats,"Cats are small felines that sleep most of the day and hunt mice at night.",3,2001
dog,Dogs,"Dogs are loyal companions that need daily walks and enjoy playing fetch.",5,2010
owl,Owls,"Owls are nocturnal birds of prey with silent flight and excellent night vision.",4,2015
bee,Bees,"Bees pollinate flowers and produce honey in their hives.",2,2003
fox,Foxes,"Foxes are clever wild canines that hunt small animals such as mice and rabbits.",3,2020
cow,Cows,"Cows graze on grass and give milk on dairy farms.",3,2012
"""
ANIMAL_QUERIES = {"q-mice": "which animals hunt mice", "q-night": "awake at night", "q-none": "zzzz qqqq",
                  "q-honey": "who makes honey", "q-zh": "哪些动物会捕捉老鼠 mice"}
ANIMAL_QRELS = {"q-mice": {"cat": 2, "fox": 1}, "q-night": {"owl": 1, "cat": 1}, "q-none": {"cow": 1},
                "q-honey": {"bee": 2}, "q-zh": {"cat": 1, "fox": 1}}


@pytest.fixture(scope="module")
def sample_store(xsmall):
    """The shared 'xsmall' collection (tests/conftest.py): 60 English paragraphs, 20 English and 10
    Chinese questions (judged on the English paragraph they ask about: they cross languages)."""
    return xsmall.store, xsmall.queries, xsmall.qrels


@pytest.fixture(scope="module")
def animal_store(tmp_path_factory):
    store = Store(str(tmp_path_factory.mktemp("lancedb")))
    create_collection(store, "animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    return store


def both_paths(store, collection, queries, qrels, config):
    """The lean and the explained report, each on a fresh Workbench (no candidate shared through a
    cache, so the vector source's batch and its one-query search are both really run)."""
    lean_wb, explained_wb = CountingWorkbench(store), CountingWorkbench(store)
    lean = evaluate_collection(lean_wb, collection, queries, qrels, config, metrics=("ndcg@10", "mrr@10", "map"))
    explained = evaluate_collection(explained_wb, collection, queries, qrels, config,
                                    metrics=("ndcg@10", "mrr@10", "map"), explained=True)
    assert explained_wb.searches == len(queries) and explained_wb.rows_read > 0
    return lean, explained, lean_wb


def assert_same(lean, explained):
    assert lean.runs == explained.runs  # every system's ranking, order included
    assert list(lean.runs) == list(explained.runs)
    assert lean.metrics == explained.metrics  # exactly, not approximately
    assert lean.per_query == explained.per_query


SAMPLE_CONFIGS = {
    "the default (weighted l2 arithmetic), depth 100": SearchConfig(),
    "rrf depth 100": SearchConfig(fusion="rrf"),
    "rrf k=5 depth 10, weights": SearchConfig(fusion="rrf", weights={"bm25": 0.3, "dense": 0.7}, rrf_k=5.0,
                                              depth=10),
    "weighted minmax arithmetic": SearchConfig(fusion="weighted", normalization="minmax", depth=20),
    "weighted zscore harmonic": SearchConfig(fusion="weighted", normalization="zscore", combination="harmonic",
                                             depth=15),
    "weighted l2 geometric": SearchConfig(fusion="weighted", normalization="l2", combination="geometric", depth=8),
    "weighted none arithmetic": SearchConfig(fusion="weighted", normalization="none", depth=12),
    "thresholds and top-k (not cutting evaluation runs)": SearchConfig(fusion="weighted", min_score=0.4,
                                                                       min_display_score=0.5, top_k=3, depth=10),
    "per-source minimums": SearchConfig(min_raw={"bm25": 3.0, "dense": 0.3}, depth=25),
    "language-aware off": SearchConfig(language_aware=False, depth=10),
    "language-aware, rrf": SearchConfig(fusion="rrf", depth=10),
    "dense alone, depth 5": SearchConfig(weights={"dense": 1.0}, depth=5),
    "keyword and graph sources": SearchConfig(weights={"bm25": 1.0, "dense": 1.0, "keyword": 0.5, "graph": 0.5},
                                              depth=10),
    "a zero weight": SearchConfig(weights={"bm25": 0.0, "dense": 1.0}, fusion="weighted", depth=10),
}


@pytest.mark.parametrize("name", list(SAMPLE_CONFIGS))
def test_lean_evaluation_equals_the_explained_path_on_the_sample(sample_store, name):
    store, queries, qrels = sample_store
    config = SAMPLE_CONFIGS[name]
    lean, explained, lean_wb = both_paths(store, "xsmall", queries, qrels, config)
    assert_same(lean, explained)
    assert lean_wb.rows_read == 0 and lean_wb.searches == 0  # the lean path reads no row, explains nothing
    assert set(lean.runs) == {*config.sources, "hybrid"} and len(lean.runs["hybrid"]) == 30
    assert all(len(ranking) <= config.depth for ranking in lean.runs["hybrid"].values())


ANIMAL_CONFIGS = {
    # Ties everywhere (zero weight on the only source that scores "zzzz qqqq"): the quality field
    # orders them, then the id.
    "tie field": SearchConfig(weights={"dense": 0.0, "bm25": 1.0}, tie_field="quality", depth=6),
    "tie field, weighted": SearchConfig(weights={"dense": 1.0, "bm25": 1.0}, fusion="weighted",
                                        normalization="minmax", combination="harmonic", tie_field="quality", depth=4),
    "filter": SearchConfig(fusion="rrf", filters=["year>=2005"], depth=3),
    "filter and tie field": SearchConfig(filters=["quality=3|5"], tie_field="year", fusion="weighted", depth=2),
    "rerank": SearchConfig(rerank=True, rerank_top_n=3, depth=5),
}


@pytest.mark.parametrize("name", list(ANIMAL_CONFIGS))
def test_lean_evaluation_equals_the_explained_path_with_ties_filters_and_rerank(animal_store, name):
    config = ANIMAL_CONFIGS[name]
    lean, explained, lean_wb = both_paths(animal_store, "animals", ANIMAL_QUERIES, ANIMAL_QRELS, config)
    assert_same(lean, explained)
    assert lean_wb.searches == 0  # the plan run lean, rerank included
    if config.rerank:  # rerank reads the texts of each query's head, at most top-N rows a query
        assert 0 < lean_wb.rows_read <= config.rerank_top_n * len(ANIMAL_QUERIES)
    else:
        assert lean_wb.rows_read == 0 and lean_wb.searches == 0


def test_ties_are_broken_by_the_field_then_the_id(animal_store):
    config = ANIMAL_CONFIGS["tie field"]
    lean, _, _ = both_paths(animal_store, "animals", ANIMAL_QUERIES, ANIMAL_QRELS, config)
    # nothing matches "zzzz qqqq": every fused score is 0, quality descending then id
    assert list(lean.runs["hybrid"]["q-none"]) == ["dog", "owl", "cat", "cow", "fox", "bee"]


class _Loaded:
    """What `InMemoryDenseSource` reads of a collection: ids and unit vectors, the largest norm."""

    def __init__(self, ids, matrix):
        self.vectors = (ids, matrix)
        self.row_norm_max = float(np.linalg.norm(matrix, axis=1).max())


def near_tie_matrix(rng, n=400, dim=384):
    """Unit rows in groups of exact duplicates and copies moved by one float32 step: similarities
    a rounding apart, where a BLAS product and the one-query product disagree."""
    base = rng.standard_normal((n // 4, dim)).astype(np.float32)
    rows = [base, base.copy(), np.nextafter(base, np.float32(np.inf)), base * np.float32(1 + 2 ** -22)]
    matrix = np.concatenate(rows)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def test_search_batch_gives_search_s_hits_and_float32_scores_exactly():
    rng = np.random.default_rng(7)
    matrix = near_tie_matrix(rng)
    ids = [f"d{i:03d}" for i in range(len(matrix))]
    queries = [f"q{i}" for i in range(40)] + ["   ", "zero"]
    vectors = {q: rng.standard_normal(matrix.shape[1]).astype(np.float32) for q in queries}
    # a query close to a duplicated row: its best similarities tie and nearly tie
    vectors["q0"] = matrix[3] + np.float32(1e-4) * vectors["q0"]
    vectors["zero"] = np.zeros(matrix.shape[1], np.float32)
    source = InMemoryDenseSource(_Loaded(ids, matrix), lambda q: vectors[q])
    allowed = frozenset(ids[::3])
    for depth in (1, 5, 37, 100, 399, 400, 500):
        for subset in (None, allowed, frozenset()):
            batch = source.search_batch(queries, depth, subset)
            single = [source.search(q, depth, subset) for q in queries]
            assert batch == single, (depth, subset is None)
            # Hit equality compares ids, ranks and the float scores bit for bit
            assert [[h.raw_score for h in hits] for hits in batch] == [[h.raw_score for h in hits] for hits in single]
    # The batch's BLAS product does round differently from the one-query product, so the
    # shortlist's re-scoring is what makes the scores equal.
    units = np.stack([unit(vectors[q]) for q in queries[:40]])
    exact = np.stack([exact_similarities(matrix, u) for u in units])
    assert not np.array_equal(units @ matrix.T, exact)


def test_top_hits_orders_by_score_then_id_with_ties():
    rng = np.random.default_rng(3)
    ids = [f"doc{i}" for i in rng.permutation(300)]
    scores = rng.integers(-3, 6, 300).astype(np.float64) / 2  # many ties, zeros and negatives
    mask = rng.random(300) < 0.5
    for keep_zero in (False, True):
        for m in (None, mask):
            keep = (np.ones(300, bool) if keep_zero else scores > 0) & (True if m is None else m)
            expected = sorted(np.flatnonzero(keep).tolist(), key=lambda i: (-scores[i], ids[i]))
            for depth in (1, 10, 57, 300):
                want = [Hit(ids[i], float(scores[i]), r) for r, i in enumerate(expected[:depth], start=1)]
                assert top_hits(ids, scores, depth, keep_zero=keep_zero, mask=m) == want


def test_the_plan_s_first_stage_is_the_explained_ranking_with_the_language_rule(sample_store):
    store, queries, _ = sample_store
    workbench = Workbench(store)
    language = workbench.reads.language("xsmall")
    for config in (SearchConfig(depth=10), SearchConfig(fusion="weighted", normalization="l2", depth=10),
                   SearchConfig(fusion="dbsf", depth=10)):
        plan = RankingPlan(config)
        for qid in list(queries)[15:25]:  # English and crossing (Chinese) queries
            candidates = workbench.candidates("xsmall", queries[qid], config)
            explained = [r.doc_id for r in workbench.rank(candidates, config).outcome.ranked]
            assert plan.first_stage(candidates.sources, queries[qid], language)[0] == explained
            assert plan.first_stage(candidates.sources, queries[qid], language, limit=4)[0] == explained[:4]
