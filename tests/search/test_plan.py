"""Search, "why not?", the sweep and evaluation rank through one `RankingPlan`: they give identical
scores for the same config because they run the same plan's stages, shown by watching the plan
(every path calls it and gets the same scores) and by changing it (a plan that scores otherwise
changes all four alike). Real models, the bundled sample's English paragraphs."""

import threading
from pathlib import Path

import pytest

from retrieval.evaluation.evaluate import evaluate_collection
from retrieval.evaluation.sweep import Variant, run_sweep
from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_path
from retrieval.search.config import SearchConfig
from retrieval.search.plan import RankingPlan, evaluation_config
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.types import Hit, ParsedCorpus, SourceResult

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "xquad"
CONFIGS = {
    "weighted": SearchConfig(depth=20, top_k=5),
    "rrf": SearchConfig(fusion="rrf", rrf_k=10, weights={"bm25": 0.3, "dense": 0.7}, depth=20, top_k=5),
    "dbsf": SearchConfig(fusion="dbsf", weights={"bm25": 0.5, "dense": 0.5}, depth=20, top_k=5,
                         min_raw={"bm25": 1.0}),
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    parsed = parse_path(SAMPLE)
    documents = [d for d in parsed.documents if d.id.startswith("en-")][:30]
    kept = {d.id for d in documents}
    qrels = {q: docs for q, docs in parsed.qrels.items() if q.startswith("en-") and set(docs) & kept}
    queries = {q: parsed.queries[q] for q in list(qrels)[:6]}
    qrels = {q: qrels[q] for q in queries}
    store = Store(str(tmp_path_factory.mktemp("plan")))
    # English questions on English paragraphs: no cross-lingual vectors (nor their model) to make
    create_collection(store, "plan", ParsedCorpus(documents, queries=queries, qrels=qrels), cross_lingual=False)
    return store, queries, qrels, documents[-1].id


@pytest.fixture
def watched(monkeypatch):
    """Every call of `RankingPlan.scores` as (query, fused config, scores): the query is the one
    the same thread last asked the plan's language rule about (evaluation runs on threads)."""
    calls = []
    local = threading.local()
    original_scores, original_fused_config = RankingPlan.scores, RankingPlan.fused_config

    def fused_config(self, query, language, sources=None, explained=True):
        local.query = query
        return original_fused_config(self, query, language, sources, explained)

    def scores(self, prepared, fused):
        result = original_scores(self, prepared, fused)
        calls.append((local.query, fused, result))
        return result

    monkeypatch.setattr(RankingPlan, "fused_config", fused_config)
    monkeypatch.setattr(RankingPlan, "scores", scores)
    return calls


def rank_everywhere(store, queries, qrels, why_id, config):
    """(search, why-not, sweep, evaluation) rankings per query, from one fresh Workbench: one
    query vector per query for all four (a batch of queries embeds a text within 1e-7 of one
    embedded alone; the plan is what is compared, not the encoder)."""
    workbench = Workbench(store)
    report = evaluate_collection(workbench, "plan", queries, qrels, config, metrics=["ndcg@10", "map"])
    sweep = run_sweep(workbench, "plan", queries, qrels, [Variant("v", config)], metrics=["ndcg@10", "map"])
    search = {qid: [f.doc_id for f, _ in workbench.search("plan", text, evaluation_config(config)).final_ranking()]
              for qid, text in queries.items()}
    why = {qid: workbench.explain_document("plan", text, evaluation_config(config), why_id).fused_score
           for qid, text in queries.items()}
    return search, why, sweep, report


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_path_calls_the_plan_and_gets_the_same_scores(sample, watched, name):
    store, queries, qrels, why_id = sample
    config = CONFIGS[name]
    search, _, sweep, report = rank_everywhere(store, queries, qrels, why_id, config)
    # One scoring per query and path at least; every call for the same query gave the same scores.
    # ("why not?" also tries other weights: grouped by the fused config, less what does not
    # change a score: top-K, the fused-score thresholds, rerank.)
    by_query: dict[tuple, list[dict]] = {}
    for query, fused, scores in watched:
        assert fused.fusion == config.fusion
        key = (query, fused.replace(top_k=1, min_score=None, min_display_score=None, rerank=False).to_json())
        by_query.setdefault(key, []).append(scores)
    assert len(watched) >= 4 * len(queries)
    for runs in by_query.values():
        assert all(run == runs[0] for run in runs)
    shared = [runs for runs in by_query.values() if len(runs) >= 4]  # search, why-not, sweep, evaluation
    assert len(shared) >= len(queries)
    # The rankings agree: the evaluation's hybrid run is the search's final ranking, the sweep's
    # per-query metrics are the evaluation's.
    for qid in queries:
        ranked = sorted(report.runs["hybrid"][qid], key=lambda d: -report.runs["hybrid"][qid][d])
        assert ranked == search[qid]
        assert sweep.per_query["v"][qid] == report.per_query["hybrid"][qid]


def test_a_plan_that_scores_otherwise_changes_every_path_alike(sample, monkeypatch):
    """Not four copies that agree: change the plan's scoring and all four follow it."""
    store, queries, qrels, why_id = sample
    config = CONFIGS["weighted"]
    before = rank_everywhere(store, queries, qrels, why_id, config)
    original = RankingPlan.scores

    def reversed_scores(self, prepared, fused):
        return {doc: -score for doc, score in original(self, prepared, fused).items()}

    monkeypatch.setattr(RankingPlan, "scores", reversed_scores)
    search, why, sweep, report = rank_everywhere(store, queries, qrels, why_id, config)
    for qid in queries:
        assert search[qid] != before[0][qid]
        assert search[qid] == sorted(report.runs["hybrid"][qid], key=lambda d: -report.runs["hybrid"][qid][d])
        assert sweep.per_query["v"][qid] == report.per_query["hybrid"][qid]
        assert why[qid] is None or why[qid] == -before[1][qid]


def test_the_thresholds_and_rerank_stages_are_the_plan_s():
    """The lean run of a plan with thresholds, top-K and a rerank, by hand."""
    hits = SourceResult("bm25", tuple(Hit(d, s, r) for r, (d, s) in enumerate(
        [("a", 4.0), ("b", 3.0), ("c", 2.0), ("d", 1.0)], start=1)))
    config = SearchConfig(fusion="weighted", normalization="minmax", weights={"bm25": 1.0}, top_k=2,
                          min_score=0.3, rerank=True, rerank_top_n=3, rerank_lambda=0.0)
    plan = RankingPlan(config)
    # minmax: a 1, b 2/3, c 1/3, d 0 → min fused 0.3 keeps a, b, c; the reranker reverses them
    assert plan.first_stage({"bm25": hits}, "q", "en") == (["a", "b", "c", "d"],
                                                          {"a": 1.0, "b": 2 / 3, "c": 1 / 3, "d": 0.0})
    asked = []

    def rerank_scores(head):
        asked.append(head)
        return {"a": 0.1, "b": 0.2, "c": 0.3}

    assert plan.final_ids({"bm25": hits}, "q", "en", rerank_scores=rerank_scores) == ["c", "b"]
    assert asked == [["a", "b", "c"]]
