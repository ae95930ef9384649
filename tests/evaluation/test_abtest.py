"""A/B significance on real BM25 runs (the bundled XQuAD sample), checked against scipy and an exact test."""

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import ttest_rel

from retrieval.evaluation.abtest import compare
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
