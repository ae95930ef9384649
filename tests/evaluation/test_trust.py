"""Trust in a metric with holes in the judgments (retrieval/evaluation/trust.py), by hand: judged@k, the
condensed-list nDCG'@k, bpref (trec_eval's rule), and whether judging the holes can reverse a
comparison."""

import math

import pytest

from retrieval.evaluation.trust import (
    bpref,
    completed,
    condensed,
    flip_check,
    judged_at,
    judgment_trust,
    trust_metrics,
)

QRELS = {"q1": {"d1": 1, "d2": 0, "d3": 1, "d4": 0}, "q2": {"e1": 2}}


def test_judged_share_and_condensed_list():
    assert judged_at(["x", "d2", "d1", "d4", "d3"], QRELS["q1"]) == 0.4
    assert condensed(["x", "d2", "y", "d1"], QRELS["q1"]) == ["d2", "d1"]


def test_condensed_ndcg_and_bpref_by_hand():
    rankings = {"q1": ["x", "d2", "d1", "d4", "d3"], "q2": ["y", "z"]}
    means, per_query = trust_metrics(rankings, QRELS)
    # q1 condensed: d2 d1 d4 d3 = grades 0 1 0 1; DCG = 1/log2(3) + 1/log2(5), ideal 1 + 1/log2(3)
    ndcg = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert per_query["q1"]["ndcg'@10"] == pytest.approx(ndcg, abs=1e-12)
    # bpref, R = 2, N = 2: d1 has 1 judged non-relevant above it (1 − 1/2), d3 two (1 − 2/2) → 0.25
    assert per_query["q1"]["bpref"] == pytest.approx(0.25, abs=1e-12)
    assert per_query["q2"] == {"judged@10": 0.0, "ndcg'@10": 0.0, "bpref": 0.0}  # found nothing judged
    assert means == pytest.approx({"judged@10": 0.2, "ndcg'@10": ndcg / 2, "bpref": 0.125})


@pytest.mark.parametrize(("ranking", "expected"), [
    (["n1", "r1", "u", "r2"], 0.0),  # R = 3, N = 1: one non-relevant above r1 and r2 → both terms 0
    (["r1", "n1", "r2"], 1 / 3),  # r1 has none above (1), r2 one (0); r3 never found
    (["u1", "r1", "u2", "r2", "r3"], 1.0),  # unjudged documents do not count
])
def test_bpref_follows_trec_eval(ranking, expected):
    qrels = {"q": {"r1": 1, "r2": 2, "r3": 1, "n1": 0}}
    assert trust_metrics({"q": ranking}, qrels)[1]["q"]["bpref"] == pytest.approx(expected, abs=1e-12)


def test_holes_that_can_reverse_a_comparison_are_found():
    a = {"q1": ["d1", "x", "d3"], "q2": ["e1", "y"]}
    b = {"q1": ["x", "d1", "d3"], "q2": ["y", "e1"]}
    # favouring B: the unjudged x (B ranks it first) and y (B first) get the highest grade, 2
    assert completed(a, b, QRELS, "b") == {"q1": {**QRELS["q1"], "x": 2}, "q2": {"e1": 2, "y": 2}}
    assert completed(a, b, QRELS, "a") == {"q1": {**QRELS["q1"], "x": 0}, "q2": {"e1": 2, "y": 0}}
    check = flip_check(a, b, QRELS)
    assert check.delta < 0 and check.delta_favouring_a == pytest.approx(check.delta)  # holes read as 0 today
    assert check.delta_favouring_b > 0 and check.can_flip and check.unjudged == 2
    assert check.sentence().startswith("Unjudged documents could change this conclusion: 2 (query, document)")
    # the same rankings with x and y judged: nothing can flip
    full = {"q1": {**QRELS["q1"], "x": 0}, "q2": {"e1": 2, "y": 0}}
    settled = flip_check(a, b, full)
    assert settled.unjudged == 0 and not settled.can_flip
    assert settled.sentence().startswith("Every document in both top 10s is judged")


def test_bpref_equals_ranx_where_ranx_defines_it_and_trec_eval_where_it_does_not():
    from ranx import Qrels, Run, evaluate

    qrels = {"q": {"r1": 1, "r2": 2, "r3": 1, "n1": 0, "n2": 0}}
    for ranking in (["n1", "r1", "u", "r2"], ["r1", "n2", "r2", "n1", "r3"], ["u", "n2", "n1", "r3"]):
        run = Run({"q": {d: float(len(ranking) - i) for i, d in enumerate(ranking)}})
        assert bpref(ranking, qrels["q"]) == pytest.approx(float(evaluate(Qrels(qrels), run, "bpref")), abs=1e-12)
    # no judged non-relevant document (N = 0): trec_eval counts each relevant one retrieved as 1
    assert bpref(["x", "r1", "r3"], {"r1": 1, "r2": 1, "r3": 2}) == pytest.approx(2 / 3, abs=1e-12)
    assert bpref(["x"], {"n": 0}) == 0.0  # nothing relevant


def test_judgment_trust_reads_runs_best_first():
    """Runs (doc id -> score) become rankings by score: the A/B page's and compare_configs' check."""
    run_a = {"q1": {"d1": 3.0, "x": 2.0, "d3": 1.0}, "q2": {"e1": 2.0, "y": 1.0}}
    run_b = {"q1": {"x": 3.0, "d1": 2.0, "d3": 1.0}, "q2": {"y": 2.0, "e1": 1.0}}
    a = {"q1": ["d1", "x", "d3"], "q2": ["e1", "y"]}
    b = {"q1": ["x", "d1", "d3"], "q2": ["y", "e1"]}
    trust = judgment_trust(run_a, run_b, QRELS, "mrr@10")
    assert trust["A"] == trust_metrics(a, QRELS)[0] and trust["B"] == trust_metrics(b, QRELS)[0]
    assert trust["flip"] == flip_check(a, b, QRELS, "mrr@10")
    assert judgment_trust(run_a, run_b, QRELS, "map")["flip"].metric == "ndcg@10"  # not cut at 10: nDCG@10


def _pytrec_delta(a, b, qrels, measure="ndcg_cut_10"):
    """Δ = mean(B) − mean(A) of a measure as trec_eval computes it (pytrec_eval)."""
    import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {measure})
    def mean(run):
        scored = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in run.items()}
        values = evaluator.evaluate(scored)
        return sum(v[measure] for v in values.values()) / len(qrels)
    return mean(b) - mean(a)


def test_the_completion_favouring_the_leader_can_reverse_the_result():
    # Judging u relevant (A ranks it higher) raises q1's ideal DCG, which costs A more than B:
    # the completion "favouring A" turns a Δ in A's favour into one in B's.
    qrels = {"q1": {"r": 1, "n1": 0, "n2": 0, "n3": 0, "n4": 0}, "q2": {"s": 1, "m1": 0, "m2": 0, "m3": 0},
             "q3": {"t": 3}}
    a = {"q1": ["r", "n1", "u", "n2"], "q2": ["m1", "m2", "m3", "s"], "q3": ["t"]}
    b = {"q1": ["n1", "r", "n2", "u"], "q2": ["m1", "s", "m2", "m3"], "q3": ["t"]}
    check = flip_check(a, b, qrels)
    assert check.delta == pytest.approx(_pytrec_delta(a, b, qrels), abs=1e-12)
    assert check.delta == pytest.approx(-0.0563, abs=1e-4)
    favouring_a = completed(a, b, qrels, "a")
    assert favouring_a["q1"]["u"] == 3  # the highest grade of the judgments
    assert check.delta_favouring_a == pytest.approx(_pytrec_delta(a, b, favouring_a), abs=1e-12)
    # by hand: q1 A (1 + 3/log2 4) / (3 + 1/log2 3), B (1/log2 3 + 3/log2 5) / the same; q2 B − A = 1/log2 3 − 1/log2 5
    idcg = 3 + 1 / math.log2(3)
    q1 = (1 / math.log2(3) + 3 / math.log2(5)) / idcg - (1 + 3 / math.log2(4)) / idcg
    q2 = 1 / math.log2(3) - 1 / math.log2(5)
    assert check.delta_favouring_a == pytest.approx((q1 + q2) / 3, abs=1e-12)
    assert check.delta_favouring_a > 0 > check.delta and check.can_flip
    assert check.sentence().startswith("Unjudged documents could change this conclusion")


@pytest.mark.parametrize("ranking", [["b", "a"], ["c", "a"], ["b", "c", "a"], ["a"], ["x", "b", "y"]])
def test_bpref_reads_a_negative_grade_as_unjudged_as_trec_eval_does(ranking):
    import pytrec_eval

    judgments = {"a": 2, "b": -1, "c": 0}
    evaluator = pytrec_eval.RelevanceEvaluator({"q": judgments}, {"bpref"})
    expected = evaluator.evaluate({"q": {d: float(len(ranking) - i) for i, d in enumerate(ranking)}})["q"]["bpref"]
    assert bpref(ranking, judgments) == pytest.approx(expected, abs=1e-12)
    if ranking == ["b", "a"]:
        assert bpref(ranking, judgments) == 1.0  # b (grade −1) is not a non-relevant document above a


def test_bpref_with_only_negative_non_relevant_grades_is_the_share_retrieved():
    # N = 0 once the negative grades are unjudged: each relevant document retrieved counts 1 (trec_eval 0.5, 1.0)
    judgments = {"a": 2, "b": -1, "c": -2, "d": 1}
    assert bpref(["b", "a"], judgments) == 0.5
    assert bpref(["c", "a", "d"], judgments) == 1.0
