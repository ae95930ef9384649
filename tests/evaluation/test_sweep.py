"""Sweeps on a small real corpus (the bundled sample's 60 English paragraphs, 30 judged questions),
real models."""

from pathlib import Path

import pytest
from counting import CountingWorkbench

from retrieval.evaluation.candidates import retrieval_plan
from retrieval.evaluation.evaluate import evaluate_collection
from retrieval.evaluation.sweep import Variant, default_grid, rerank_grid, run_sweep, with_rerank_grid
from retrieval.search.config import SearchConfig
from retrieval.search.plan import fuse, fused_order
from retrieval.search.workbench import Workbench
from retrieval.types import RetrievalError

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "xquad"  # the bundled BEIR sample
N_EN, N_ZH = 20, 10  # the shared collection's English and Chinese questions (tests/conftest.py)
N_QUERIES = N_EN + N_ZH


@pytest.fixture(scope="module")
def small_sample(xsmall):
    """The shared 'xsmall' collection, read through a Workbench that counts its row reads."""
    return CountingWorkbench(xsmall.store), xsmall.corpus


def test_default_grid_has_132_variants_split_as_documented():
    base = SearchConfig(depth=50, bm25_k1=1.2, rerank=True, top_k=7)
    grid = default_grid(base)
    assert len(grid) == 132
    assert len({v.label for v in grid}) == 132
    weighted = [v for v in grid if v.config.fusion == "weighted"]
    rrf = [v for v in grid if v.config.fusion == "rrf"]
    dbsf = [v for v in grid if v.config.fusion == "dbsf"]
    assert len(weighted) == 66 and len(rrf) == 55 and len(dbsf) == 11
    assert [v.config.fusion for v in grid] == ["weighted"] * 66 + ["rrf"] * 55 + ["dbsf"] * 11  # the rows' tie order
    assert {(v.config.normalization, v.config.combination) for v in weighted} == {
        (n, c) for n in ("minmax", "l2") for c in ("arithmetic", "harmonic", "geometric")}
    assert sorted({v.config.rrf_k for v in rrf}) == [1.0, 5.0, 10.0, 20.0, 60.0]
    assert sorted({v.weight for v in grid}) == [i / 10 for i in range(11)]
    by_label = {v.label: v for v in grid}
    assert by_label["rrf k=60 bm25=0.3 dense=0.7"].config.weights == {"bm25": 0.3, "dense": 0.7}
    # weight 0 on a source: the other source alone
    assert by_label["rrf k=60 bm25=0 dense=1"].config.weights == {"dense": 1.0}
    assert by_label["weighted l2 geometric bm25=1 dense=0"].config.weights == {"bm25": 1.0}
    for variant in grid:  # everything else from the base config; the sweep is first-stage only
        assert (variant.config.depth, variant.config.bm25_k1, variant.config.top_k) == (50, 1.2, 7)
        assert variant.config.rerank is False
        assert isinstance(variant, Variant)
    with pytest.raises(RetrievalError, match="two different sources"):
        default_grid(base, sources=("bm25", "dense", "keyword"))


def test_fused_order_equals_fuse_for_every_grid_variant_on_real_candidates(small_sample):
    workbench, corpus = small_sample
    base = SearchConfig(depth=100)
    grid = default_grid(base)
    compared = 0
    for qid in list(corpus.qrels)[:12]:
        candidates = workbench.candidates("xsmall", corpus.queries[qid], base)
        for variant in grid:
            expected = [r.doc_id for r in fuse(candidates.sources, variant.config).ranked]
            assert fused_order(candidates.sources, variant.config) == expected, (qid, variant.label)
            compared += 1
    assert compared == 12 * 132


def test_sweep_retrieves_once_per_query_and_matches_evaluate_collection(small_sample):
    workbench, corpus = small_sample
    base = SearchConfig(depth=100)
    grid = default_grid(base)
    assert len(retrieval_plan([v.config for v in grid])) == 1  # both sources in one candidates call
    workbench.calls = workbench.rows_read = 0
    seen = []
    result = run_sweep(workbench, "xsmall", corpus.queries, corpus.qrels, grid,
                       progress=lambda done, total: seen.append((done, total)))
    assert workbench.calls == N_QUERIES and workbench.rows_read == 0
    assert seen[-1] == (N_QUERIES + 132, N_QUERIES + 132) and len(seen) == N_QUERIES + 132
    assert result.n_queries == N_QUERIES and len(result.rows) == 132
    # rows best first by the first metric
    firsts = [row["ndcg@10"] for row in result.rows]
    assert firsts == sorted(firsts, reverse=True)
    assert result.best().label == result.rows[0]["label"]
    frame = result.frame()
    assert list(frame.columns) == ["label", "fusion", "normalization", "combination", "weight", "rrf_k",
                                   "rerank_top_n", "rerank_lambda", "ndcg@10", "mrr@10", "recall@100",
                                   "precision@10", "map"]
    assert len(result.per_query) == 132 and len(result.per_query[result.best().label]) == N_QUERIES
    rows = {row["label"]: row for row in result.rows}
    assert rows["rrf k=10 bm25=0.3 dense=0.7"]["rrf_k"] == 10.0
    assert rows["rrf k=10 bm25=0.3 dense=0.7"]["normalization"] is None
    assert rows["weighted l2 harmonic bm25=0.3 dense=0.7"]["combination"] == "harmonic"
    assert rows["weighted l2 harmonic bm25=0.3 dense=0.7"]["rrf_k"] is None
    assert rows["weighted l2 harmonic bm25=0.3 dense=0.7"]["rerank_lambda"] is None

    # The same numbers through the explained path: workbench.search + fuse + evaluate_run.
    for label, system in (("rrf k=60 bm25=0.4 dense=0.6", "hybrid"),
                          ("weighted l2 geometric bm25=0.7 dense=0.3", "hybrid"),
                          ("weighted minmax harmonic bm25=0.2 dense=0.8", "hybrid"),
                          ("rrf k=60 bm25=1 dense=0", "bm25")):
        config = result.variant(label).config
        if system == "bm25":
            config = SearchConfig.from_dict({**config.to_dict(), "weights": {"bm25": 1.0, "dense": 1.0}})
        report = evaluate_collection(workbench, "xsmall", corpus.queries, corpus.qrels, config, explained=True)
        for metric, value in report.metrics[system].items():
            assert rows[label][metric] == pytest.approx(value, abs=1e-12), (label, metric)
        for qid, values in report.per_query[system].items():
            assert result.per_query[label][qid] == pytest.approx(values, abs=1e-12)
    # JSON list: label, config, metric means, best first
    listed = result.to_json_list()
    assert listed[0]["label"] == result.best().label
    assert SearchConfig.from_dict(listed[0]["config"]) == result.best().config


def test_sweep_rejects_bad_input(small_sample):
    workbench, corpus = small_sample
    grid = default_grid(SearchConfig())
    with pytest.raises(RetrievalError, match="at least one variant"):
        run_sweep(workbench, "xsmall", corpus.queries, corpus.qrels, [])
    with pytest.raises(RetrievalError, match="unique"):
        run_sweep(workbench, "xsmall", corpus.queries, corpus.qrels, [grid[0], grid[0]])
    with pytest.raises(RetrievalError, match="None of the judged queries"):
        run_sweep(workbench, "xsmall", {}, corpus.qrels, grid[:2])
    with pytest.raises(RetrievalError, match="No variant labelled"):
        run_sweep(workbench, "xsmall", corpus.queries, corpus.qrels, grid[:2]).variant("nope")


def test_held_out_estimate_by_hand():
    from retrieval.evaluation.sweep import SweepResult, held_out_estimate

    # Two variants, four queries. Folds (ids sorted): {a, c} and {b, d}.
    per_query = {
        "x": {"a": {"m": 1.0}, "b": {"m": 0.0}, "c": {"m": 1.0}, "d": {"m": 0.0}},  # mean 0.5
        "y": {"a": {"m": 0.0}, "b": {"m": 0.8}, "c": {"m": 0.2}, "d": {"m": 0.8}},  # mean 0.45
    }
    rows = [{"label": "x", "m": 0.5}, {"label": "y", "m": 0.45}]
    result = SweepResult(("m",), 4, rows, {}, per_query)
    estimate = held_out_estimate(result)
    # fold 0 tests {a, c}: trained on {b, d}, y wins (0.8 vs 0.0) and scores (0.0 + 0.2)
    # fold 1 tests {b, d}: trained on {a, c}, x wins (1.0 vs 0.1) and scores (0.0 + 0.0)
    assert estimate.chosen == ("y", "x")
    assert estimate.score == pytest.approx((0.0 + 0.2 + 0.0 + 0.0) / 4)
    assert estimate.in_sample == 0.5
    assert estimate.per_query == {"a": 0.0, "b": 0.0, "c": 0.2, "d": 0.0}
    # given folds {a, b} and {c, d}: fold 0 trains on {c, d}, x and y tie at 0.5 → the earlier row,
    # x; fold 1 trains on {a, b}: x 0.5 beats y 0.4
    given = held_out_estimate(result, fold_ids=[["a", "b"], ["c", "d"]])
    assert given.chosen == ("x", "x") and given.per_query == {"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0}
    with pytest.raises(RetrievalError, match="every query of the sweep exactly once"):
        held_out_estimate(result, fold_ids=[["a", "b"], ["c"]])
    with pytest.raises(RetrievalError, match="folds must be between 2"):
        held_out_estimate(result, folds=5)
    with pytest.raises(RetrievalError, match="was not measured"):
        held_out_estimate(result, "ndcg@10")


def test_rerank_grid_labels_and_fields():
    base = SearchConfig(depth=40, rerank_top_n=20, rerank_lambda=0.9)
    grid = rerank_grid(base, lambdas=(0.0, 0.5, 1.0), top_ns=(10, 20, 10))
    assert [v.label for v in grid] == [
        f"rerank e5 top-{n} λ={lam} · weighted l2 arithmetic bm25=0.4 dense=0.6"
        for n in (10, 20) for lam in ("0", "0.5", "1")]
    assert all(v.config.rerank and v.config.depth == 40 for v in grid)
    assert [(v.config.rerank_top_n, v.config.rerank_lambda) for v in grid] == [
        (n, lam) for n in (10, 20) for lam in (0.0, 0.5, 1.0)]
    assert [v.config.rerank_top_n for v in rerank_grid(base, lambdas=(0.3,))] == [20]  # base's top-N
    # the baseline (no rerank) is added only when no variant has that config already
    grid = default_grid(base)
    extended = with_rerank_grid(grid, base, lambdas=(0.5,))
    assert extended[:132] == grid and [v.label for v in extended[132:]] == [
        "rerank e5 top-20 λ=0.5 · weighted l2 arithmetic bm25=0.4 dense=0.6"]
    odd = SearchConfig(weights={"bm25": 0.45, "dense": 0.55})
    assert [v.label for v in with_rerank_grid(grid, odd, lambdas=(0.5,))[132:]] == [
        "weighted l2 arithmetic bm25=0.45 dense=0.55 · no rerank",
        "rerank e5 top-20 λ=0.5 · weighted l2 arithmetic bm25=0.45 dense=0.55"]  # the default top-N
    with pytest.raises(RetrievalError, match="at least one λ"):
        rerank_grid(base, lambdas=())


def test_rerank_variants_score_once_per_query_and_match_evaluate_collection(small_sample):
    """Rerank variants (E5 over the stored cross-lingual passage vectors) rank each query as
    `evaluate_collection` does with that config: the same metrics, query by query."""
    workbench, corpus = small_sample
    base = SearchConfig(depth=30, fusion="rrf", weights={"bm25": 0.5, "dense": 0.5})
    variants = with_rerank_grid([], base, lambdas=(0.0, 0.4, 0.9, 1.0), top_ns=(5, 20))
    assert len(variants) == 1 + 8 and not variants[0].config.rerank
    calls = []
    original = workbench.rerank_scores

    def counting(collection, query, doc_ids, name, state=None):
        calls.append((query, tuple(doc_ids)))
        return original(collection, query, doc_ids, name, state)

    workbench.rerank_scores = counting
    seen = []
    try:
        result = run_sweep(workbench, "xsmall", corpus.queries, corpus.qrels, variants,
                           progress=lambda done, total: seen.append((done, total)))
    finally:
        del workbench.rerank_scores
    # one reranker call per query, for the union of the heads: the top 20 (the top 5 are in it)
    assert len(calls) == N_QUERIES and all(len(ids) == 20 for _, ids in calls)
    assert seen[-1] == (2 * N_QUERIES + 9, 2 * N_QUERIES + 9) and len(seen) == 2 * N_QUERIES + 9
    rows = {row["label"]: row for row in result.rows}
    assert rows["rerank e5 top-5 λ=0.4 · rrf k=60 bm25=0.5 dense=0.5"]["rerank_lambda"] == 0.4
    assert rows["rerank e5 top-5 λ=0.4 · rrf k=60 bm25=0.5 dense=0.5"]["rerank_top_n"] == 5
    assert rows["rrf k=60 bm25=0.5 dense=0.5 · no rerank"]["rerank_top_n"] is None
    # λ changes the ranking: replacing (λ 0) and keeping (λ 1) the first stage's order differ
    assert result.per_query["rerank e5 top-20 λ=0 · rrf k=60 bm25=0.5 dense=0.5"] != \
        result.per_query["rerank e5 top-20 λ=1 · rrf k=60 bm25=0.5 dense=0.5"]
    for variant in variants:
        # a fresh workbench: no cache shared with the sweep
        report = evaluate_collection(Workbench(workbench.store), "xsmall", corpus.queries, corpus.qrels,
                                     variant.config)
        assert result.per_query[variant.label] == report.per_query["hybrid"], variant.label
        for metric, value in report.metrics["hybrid"].items():
            assert rows[variant.label][metric] == pytest.approx(value, abs=1e-12), (variant.label, metric)


def test_a_rerank_variant_takes_a_query_without_candidates(small_sample):
    workbench, corpus = small_sample
    qid = next(iter(corpus.qrels))
    queries = {qid: corpus.queries[qid], "nothing": "qqqzzx vvwwk"}  # no indexed word: BM25 returns nothing
    qrels = {qid: corpus.qrels[qid], "nothing": dict(corpus.qrels[qid])}
    variants = rerank_grid(SearchConfig(weights={"bm25": 1.0}, depth=10), lambdas=(0.5,), top_ns=(5,))
    result = run_sweep(workbench, "xsmall", queries, qrels, variants, metrics=("ndcg@10",))
    values = result.per_query[variants[0].label]
    assert values["nothing"]["ndcg@10"] == 0.0 and values[qid]["ndcg@10"] > 0.0


def test_the_headline_puts_the_current_config_beside_the_best_and_names_ties():
    """By hand: three queries; 'a' and 'b' tie at the best mean 0.8, the current config scores 0.5."""
    from retrieval.evaluation.paired import randomization_p
    from retrieval.evaluation.sweep import CURRENT_LABEL, SweepResult, Variant, headline, with_current

    per_query = {"a": {"q1": 1.0, "q2": 0.9, "q3": 0.5}, "b": {"q1": 0.8, "q2": 0.8, "q3": 0.8},
                 CURRENT_LABEL: {"q1": 0.5, "q2": 0.6, "q3": 0.4}}
    means = {label: sum(v.values()) / 3 for label, v in per_query.items()}
    rows = [{"label": label, "ndcg@10": means[label]} for label in ("a", "b", CURRENT_LABEL)]
    result = SweepResult(("ndcg@10",), 3, rows, {label: Variant(label, SearchConfig()) for label in per_query},
                         {label: {q: {"ndcg@10": v} for q, v in values.items()} for label, values in per_query.items()})
    said = headline(result, CURRENT_LABEL)
    assert said.tied == ("a", "b") and said.best == "a"
    assert said.current_value == pytest.approx(0.5) and said.best_value == pytest.approx(0.8)
    assert said.p_value == randomization_p([0.5, 0.3, 0.1])  # a − current, per query
    assert said.sentence().startswith("Current config: nDCG@10 0.5000. Best of 3 variants: 0.8000 (Δ +0.3000, "
                                      "paired randomization p = ")
    assert "2 variants tie at the best" in said.sentence()
    # three queries all better: a sign-flip test cannot go below 2/8 — not significant
    assert said.p_value > 0.05 and not said.significant
    assert "not significantly better: the difference may be noise over these queries" in said.sentence()
    already = headline(result, "b")
    assert already.sentence() == ("Current config: nDCG@10 0.8000. Best of 3 variants: 0.8000 — the current config "
                                  "is already the best, tied with 1 other variant(s).")
    # with_current finds the config in the grid, or adds it
    grid = default_grid(SearchConfig())
    assert with_current(grid, SearchConfig()) == (grid, "weighted l2 arithmetic bm25=0.4 dense=0.6")
    extended, label = with_current(grid, SearchConfig(depth=7))
    assert label == CURRENT_LABEL and extended[-1].config == SearchConfig(depth=7) and len(extended) == 133


def test_a_stopped_sweep_keeps_the_variants_judged_so_far(small_sample):
    workbench, corpus = small_sample
    grid = default_grid(SearchConfig())[:4]
    asked = []

    def stop() -> bool:
        asked.append(True)
        return len(asked) >= 2  # asked before the 2nd and 3rd variants: stop before the 3rd

    result = run_sweep(workbench, "xsmall", corpus.queries, corpus.qrels, grid, should_stop=stop)
    full = run_sweep(workbench, "xsmall", corpus.queries, corpus.qrels, grid[:2])
    assert result.stopped and not full.stopped
    assert set(result.per_query) == set(result.variants) == {v.label for v in grid[:2]}
    assert result.rows == full.rows and result.per_query == full.per_query
