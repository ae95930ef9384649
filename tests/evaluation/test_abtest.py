"""A/B significance on real BM25 runs (the bundled XQuAD sample), checked against scipy and an exact test."""

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import ttest_rel

from retrieval.evaluation.abtest import ABResult, compare, verdict
from retrieval.evaluation.evaluate import evaluate_run, run_from_rankings
from retrieval.evaluation.paired import randomization_p
from retrieval.sources.bm25 import RankBM25Source
from retrieval.text.tokenize import tokenize
from retrieval.types import RetrievalError

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "xquad"  # the bundled BEIR sample


@pytest.fixture(scope="module")
def runs():
    """BM25 (k1 0.9, b 0.4) vs BM25 (k1 2.0, b 1.0) over the sample's 120 paragraphs (English and
    Chinese), on its 638 judged questions."""
    docs = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    ids = [d["_id"] for d in docs]
    tokens = [tokenize(f"{d.get('title', '')}\n{d['text']}") for d in docs]
    keep = set(ids)
    qrels = {}
    for line in (SAMPLE / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc_id, grade = line.split("\t")
        if doc_id in keep:
            qrels.setdefault(qid, {})[doc_id] = int(grade)
    lines = (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries = {q["_id"]: q["text"] for q in map(json.loads, lines)}
    made = {}
    for name, (k1, b) in {"a": (0.9, 0.4), "b": (2.0, 1.0)}.items():
        source = RankBM25Source(ids, tokens, k1=k1, b=b)
        made[name] = run_from_rankings({q: [h.doc_id for h in source.search(queries[q], 100)] for q in qrels})
    return qrels, made["a"], made["b"]


def test_t_test_p_value_equals_scipy_on_the_per_query_values(runs):
    qrels, run_a, run_b = runs
    result = compare(qrels, run_a, run_b, "ndcg@10", "t-test")
    _, per_a = evaluate_run(qrels, run_a, ["ndcg@10"])
    _, per_b = evaluate_run(qrels, run_b, ["ndcg@10"])
    a = [per_a[q]["ndcg@10"] for q in per_a]
    b = [per_b[q]["ndcg@10"] for q in per_a]
    assert result.n_queries == len(qrels) > 30
    assert result.per_query_a == {q: per_a[q]["ndcg@10"] for q in per_a}
    assert result.deltas == pytest.approx({q: y - x for q, x, y in zip(per_a, a, b, strict=True)}, abs=1e-15)
    assert result.p_value == pytest.approx(ttest_rel(b, a).pvalue, abs=1e-9)
    assert 0 < result.p_value < 1
    assert result.mean_delta == pytest.approx(np.mean(b) - np.mean(a), abs=1e-12)
    assert result.wins == sum(y > x for x, y in zip(a, b, strict=True))
    assert result.losses == sum(y < x for x, y in zip(a, b, strict=True))
    assert result.wins + result.ties + result.losses == result.n_queries
    assert result.significant == (result.p_value < 0.05)
    assert "B wins" in result.summary()
    # Δ's 95 % interval: the percentile bootstrap of the per-query differences (seed 42), around Δ
    low, high = result.delta_ci
    means = np.random.default_rng(42).choice(list(result.deltas.values()), size=(10_000, result.n_queries)).mean(axis=1)
    assert low < result.mean_delta < high and (low, high) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])),
                                                                          abs=0.01)


def test_randomization_is_reproducible_and_agrees_with_the_exact_test(runs):
    qrels, run_a, run_b = runs
    first = compare(qrels, run_a, run_b, "mrr@10", "randomization", n_permutations=5000, seed=7)
    again = compare(qrels, run_a, run_b, "mrr@10", "randomization", n_permutations=5000, seed=7)
    assert first.p_value == again.p_value and first.seed == 7 and first.n_permutations == 5000
    # exact two-sided sign-flip test over 14 queries' deltas (the first 14 that are not 0: the two
    # BM25 settings agree on most of the sample's easy questions): all 2^14 flips enumerated
    deltas = np.array([d for d in first.deltas.values() if d][:14])
    assert len(deltas) == 14
    observed = abs(deltas.mean())
    flips = np.array(list(itertools.product((1, -1), repeat=len(deltas))))
    exact = float(np.mean(np.abs((flips * deltas).mean(axis=1)) >= observed - 1e-12))
    sampled = randomization_p(deltas, n_permutations=20_000, seed=1)
    assert sampled == pytest.approx(exact, abs=0.02)  # ~6 standard errors of a 20,000-draw estimate


def test_identical_runs_and_bad_input(runs):
    qrels, run_a, _ = runs
    same = compare(qrels, run_a, run_a, "map", "t-test")
    assert same.p_value == 1.0 and same.ties == same.n_queries and same.mean_delta == 0.0
    # B retrieves nothing: all 0 (nDCG@10: A's recall@100 is 1 on almost every question, and deltas
    # that nearly all equal -1 make scipy warn of precision loss)
    empty = compare(qrels, run_a, {}, "ndcg@10", "t-test")
    assert empty.mean_b == 0.0 and empty.losses > 0 and empty.p_value < 1e-6
    with pytest.raises(RetrievalError, match="test must be one of"):
        compare(qrels, run_a, run_a, test="wilcoxon")
    with pytest.raises(RetrievalError, match="n_permutations"):
        compare(qrels, run_a, run_a, test="randomization", n_permutations=5)


def test_a_t_test_without_enough_queries_says_so():
    # one query: B finds the relevant document first, A second
    one = compare({"q": {"r": 1}}, {"q": {"x": 2.0, "r": 1.0}}, {"q": {"r": 2.0, "x": 1.0}}, "mrr@10", "t-test")
    assert one.mean_delta == 0.5 and one.p_value is None and not one.significant
    assert one.summary().endswith("t-test not enough queries: not enough queries for a t-test (it needs at least two "
                                  "queries whose differences are not all the same): no verdict")
    # two queries, each better by exactly 0.5: no spread, no p (scipy would give NaN)
    qrels = {"q1": {"r": 1}, "q2": {"s": 1}}
    a = {"q1": {"x": 2.0, "r": 1.0}, "q2": {"y": 2.0, "s": 1.0}}
    b = {"q1": {"r": 2.0, "x": 1.0}, "q2": {"s": 2.0, "y": 1.0}}
    equal = compare(qrels, a, b, "mrr@10", "t-test")
    assert equal.deltas == {"q1": 0.5, "q2": 0.5} and equal.p_value is None
    assert verdict(equal).answer == "not enough queries"
    randomized = compare(qrels, a, b, "mrr@10", "randomization", n_permutations=999)
    assert 0 < randomized.p_value <= 1  # the sign-flip test has a p: (b + 1) / (m + 1), about 2/4 here
    assert randomized.p_value == pytest.approx(0.5, abs=0.06)


def test_one_verdict_weighs_the_test_and_the_holes():
    from retrieval.evaluation.trust import FlipCheck

    def result(p):
        return ABResult(metric="ndcg@10", test="t-test", n_queries=40, per_query_a={}, per_query_b={}, deltas={},
                        mean_a=0.4, mean_b=0.5, mean_delta=0.1, wins=30, ties=0, losses=10, p_value=p, alpha=0.05)

    holes = FlipCheck("ndcg@10", delta=0.1, delta_favouring_b=0.2, delta_favouring_a=-0.01, unjudged=12)
    settled = FlipCheck("ndcg@10", delta=0.1, delta_favouring_b=0.2, delta_favouring_a=0.05, unjudged=12)
    assert holes.can_flip and not settled.can_flip
    said = verdict(result(0.001), holes)
    assert (said.answer, said.believed) == ("not yet: judge first", False)  # never "yes" above "judge these"
    assert "judge them before trusting it" in said.sentence
    assert (verdict(result(0.001), settled).answer, verdict(result(0.001), settled).believed) == ("yes", True)
    assert verdict(result(0.001)).answer == "yes"  # no trust check given
    assert verdict(result(0.2), holes).answer == "no"
    assert "not yet: judge first" not in result(0.001).summary() and "judge them" in result(0.001).summary(holes)
