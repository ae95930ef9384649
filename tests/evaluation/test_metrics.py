"""The metrics (retrieval/evaluation/metrics.py): by hand, against trec_eval (pytrec_eval) on the
same hand cases, equal to ranx 0.3's values to the bit on random graded cases, and without ranx or
numba in the process."""

import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.evaluation.evaluate import QrelsEvaluator, run_from_rankings
from retrieval.evaluation.metrics import parse_metric
from retrieval.types import RetrievalError

REPO = Path(__file__).resolve().parents[2]
# One query with every kind of judgment (3, 1, 0, −1) and a ranking of four with an unjudged one.
JUDGED = {"q": {"a": 3, "b": 1, "c": 0, "d": -1}}
RANKING = {"q": ["c", "b", "x", "a"]}


def test_hand_computed_values_of_every_family_and_cut():
    names = ["ndcg@3", "ndcg", "mrr@1", "mrr@2", "mrr", "recall@2", "recall", "precision@10", "precision@1",
             "precision", "map", "map@2"]
    _, per_query = QrelsEvaluator(JUDGED).evaluate_rankings(RANKING, names)
    got = per_query["q"]
    # gains: c 0 (grade 0 is not relevant), b 1, x 0 (unjudged), a 3; R = 2 (a, b)
    assert got["ndcg@3"] == pytest.approx((1 / math.log2(3)) / (3 + 1 / math.log2(3)), abs=1e-15)
    assert got["ndcg"] == pytest.approx((1 / math.log2(3) + 3 / math.log2(5)) / (3 + 1 / math.log2(3)), abs=1e-15)
    assert (got["mrr@1"], got["mrr@2"], got["mrr"]) == (0.0, 0.5, 0.5)
    assert (got["recall@2"], got["recall"]) == (0.5, 1.0)
    assert (got["precision@10"], got["precision@1"], got["precision"]) == (0.2, 0.0, 0.5)  # misses past the end
    assert got["map"] == (1 / 2 + 2 / 4) / 2 and got["map@2"] == (1 / 2) / 2  # divided by R, not by the hits


def test_the_same_hand_case_equals_trec_eval():
    import pytrec_eval

    measures = {"ndcg_cut.3": "ndcg@3", "P.10": "precision@10", "recall.2": "recall@2", "map": "map",
                "map_cut.2": "map@2", "recip_rank": "mrr"}
    reference = pytrec_eval.RelevanceEvaluator(JUDGED, set(measures)).evaluate(run_from_rankings(RANKING))["q"]
    _, per_query = QrelsEvaluator(JUDGED).evaluate_rankings(RANKING, list(measures.values()))
    for measure, name in measures.items():
        assert per_query["q"][name] == pytest.approx(reference[measure.replace(".", "_")], abs=1e-12), name


def test_nothing_relevant_or_nothing_retrieved_scores_zero():
    qrels = {"none-relevant": {"c": 0, "d": -1}, "empty": {"a": 2}, "missing": {"a": 1}}
    mean, per_query = QrelsEvaluator(qrels).evaluate_rankings({"none-relevant": ["c", "a"], "empty": []})
    assert list(per_query) == ["empty", "missing", "none-relevant"]  # judged queries, in id order
    assert all(v == 0.0 for values in per_query.values() for v in values.values())
    assert set(mean.values()) == {0.0}


def test_metric_names_are_checked():
    assert [parse_metric(m) for m in ("ndcg@10", "map", "recall@100", "mrr")] == [
        ("ndcg", 10), ("map", 0), ("recall", 100), ("mrr", 0)]
    for bad in ("bpref", "ndcg@0", "ndcg@", "ndcg@²", "NDCG@10", "ndcg@10.5", "hit_rate@5"):
        with pytest.raises(RetrievalError, match="Unknown metric"):
            QrelsEvaluator(JUDGED).evaluate_rankings(RANKING, [bad])


def test_values_equal_ranx_to_the_bit_on_random_graded_cases():
    """ranx 0.3's metric functions (what `evaluate` called before, one query at a time as its
    parallel loops call them) on 300 random queries: grades −1 to 3, up to 25 judged documents a
    query, rankings of 0 to 60 (some queries missing), every family and cut. Each query is given as
    ranx's `Qrels` and `Run` give it: [id number, grade] rows by grade descending, [id number,
    n − rank + 1] rows best first (a `Run` and its typed containers cost 20 s more of compiling)."""
    import numpy as np
    from ranx.metrics.average_precision import _average_precision
    from ranx.metrics.ndcg import _ndcg
    from ranx.metrics.precision import _precision
    from ranx.metrics.recall import _recall
    from ranx.metrics.reciprocal_rank import _reciprocal_rank

    kernels = {"ndcg": lambda q, r, k: _ndcg(q, r, k, 1, True), "mrr": lambda q, r, k: _reciprocal_rank(q, r, k, 1),
               "recall": lambda q, r, k: _recall(q, r, k, 1), "precision": lambda q, r, k: _precision(q, r, k, 1),
               "map": lambda q, r, k: _average_precision(q, r, k, 1)}
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(60)]
    qrels, rankings = {}, {}
    for q in range(300):
        qrels[f"q{q:03d}"] = {d: rng.choice([-1, 0, 0, 1, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 25))}
        if rng.random() < 0.9:
            rankings[f"q{q:03d}"] = rng.sample(docs, rng.randint(0, 60))
    names = ["ndcg@10", "ndcg@3", "ndcg", "mrr@10", "mrr", "recall@100", "recall@5", "recall", "precision@10",
             "precision@1", "precision", "map", "map@5"]
    evaluator = QrelsEvaluator(qrels)
    _, per_query = evaluator.evaluate_rankings(rankings, names)
    mismatches = []
    for q in evaluator.query_ids:
        judged = np.array(sorted(([float(docs.index(d)), float(g)] for d, g in qrels[q].items()),
                                 key=lambda row: -row[1]), dtype=np.float64)
        ranking = rankings.get(q, [])
        run = np.array([[float(docs.index(d)), float(len(ranking) - i)] for i, d in enumerate(ranking)],
                       dtype=np.float64).reshape(len(ranking), 2)
        for name in names:
            family, k = parse_metric(name)
            if per_query[q][name] != kernels[family](judged, run, k):
                mismatches.append((name, q))
    assert mismatches == []
    assert evaluator.evaluate(run_from_rankings(rankings), names)[1] == per_query  # the run path: the same


def test_a_first_evaluation_imports_neither_ranx_nor_numba():
    """A process's first evaluation waited for importing ranx and numba and compiling numba's
    typed containers: about a third of the first evaluation of the bundled sample."""
    code = ("import sys\nfrom retrieval.evaluation.evaluate import QrelsEvaluator\n"
            "m, _ = QrelsEvaluator({'q': {'d': 1}}).evaluate_rankings({'q': ['e', 'd']})\n"
            "print(round(m['ndcg@10'], 4), sorted({'ranx', 'numba'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0.6309", "[]"]
