"""What to judge next (retrieval/judging/judge_next.py), by hand: MTC weights from nDCG@10's discount
1/log2(rank + 1), the queue's priority (weight × the discount of the best rank), its order and
ties, judged pairs left out, the budget, the depth pool's order, a reproducible random order,
and more than two configs."""

import math

import pytest

from retrieval.judging.judge_next import (
    Candidate,
    depth_pool,
    discount,
    mtc_weight,
    next_to_judge,
    random_order,
    unjudged_pairs,
)

# q1: A = d1 d2 d3, B = d3 d4 d1
#   d1: rank 1 in A, 3 in B → |1/log2 2 − 1/log2 4| = |1 − 0.5| = 0.5
#   d2: rank 2 in A only   → |1/log2 3 − 0| ≈ 0.6309
#   d3: rank 3 in A, 1 in B → |0.5 − 1| = 0.5
#   d4: rank 2 in B only   → 1/log2 3 ≈ 0.6309
# priority = weight × 1/log2(best rank + 1): d1, d3 0.5 × 1 = 0.5; d2, d4 0.6309 × 0.6309 ≈ 0.398
A = {"q1": ["d1", "d2", "d3"]}
B = {"q1": ["d3", "d4", "d1"]}
ONE_OVER_LOG2_3 = 1 / math.log2(3)


def pairs(candidates):
    return [(c.query_id, c.doc_id) for c in candidates]


def test_discount_is_ndcg_at_10s():
    assert discount(1) == 1.0
    assert discount(3) == 0.5  # 1/log2 4
    assert discount(10) == pytest.approx(1 / math.log2(11))
    assert discount(11) == 0.0 and discount(None) == 0.0  # outside the top 10
    assert discount(3, k=2) == 0.0


def test_weights_by_hand_and_the_queue_order():
    queue = next_to_judge([A, B], {})
    by_doc = {c.doc_id: c for c in queue}
    assert by_doc["d1"].weight == pytest.approx(0.5) and by_doc["d1"].ranks == (1, 3)
    assert by_doc["d2"].weight == pytest.approx(ONE_OVER_LOG2_3) and by_doc["d2"].ranks == (2, None)
    assert by_doc["d3"].weight == pytest.approx(0.5) and by_doc["d3"].ranks == (3, 1)
    assert by_doc["d4"].weight == pytest.approx(ONE_OVER_LOG2_3) and by_doc["d4"].ranks == (None, 2)
    assert by_doc["d1"].priority == pytest.approx(0.5)  # 0.5 × 1/log2 2
    assert by_doc["d2"].priority == pytest.approx(ONE_OVER_LOG2_3 ** 2)  # 0.631 × 1/log2 3 ≈ 0.398
    # 0.5 before 0.398, though d2's weight is larger; d1 and d3 tie (best rank 1 each): A's first;
    # d2 and d4 tie (best rank 2 each): A's first
    assert pairs(queue) == [("q1", "d1"), ("q1", "d3"), ("q1", "d2"), ("q1", "d4")]
    assert [c.best_rank for c in queue] == [1, 1, 2, 2]


def test_a_document_both_rank_alike_weighs_nothing_and_comes_last():
    queue = next_to_judge([{"q": ["same", "x"]}, {"q": ["same", "y"]}], {})
    # same: rank 1 in both → |1 − 1| = 0; x and y: rank 2 in one top 10 only → 1/log2 3
    assert pairs(queue) == [("q", "x"), ("q", "y"), ("q", "same")]
    assert queue[-1].weight == 0.0


def test_rank_11_is_outside_the_top_10():
    a = {"q": [f"a{i}" for i in range(1, 11)] + ["z"]}  # z at rank 11 in A
    b = {"q": ["z"]}  # z at rank 1 in B
    z = next(c for c in next_to_judge([a, b], {}) if c.doc_id == "z")
    assert z.ranks == (None, 1) and z.weight == 1.0  # |0 − 1/log2 2|
    # a1 (rank 1 in A only) weighs 1 too: priorities 1 × 1, A's first; then a2 at (1/log2 3)²
    assert [c.doc_id for c in next_to_judge([a, b], {}, budget=3)] == ["a1", "z", "a2"]


def test_judged_pairs_are_left_out_whatever_their_grade_and_fresh_queries_are_eligible():
    qrels = {"q1": {"d2": 0, "d3": 2}}
    assert pairs(next_to_judge([A, B], qrels)) == [("q1", "d1"), ("q1", "d4")]
    # q2 has no judgment at all: it is judged from scratch, after q1 where weights tie
    a, b = {**A, "q2": ["e1"]}, {**B, "q2": ["e2"]}
    queue = next_to_judge([a, b], qrels)
    # e1, e2: rank 1 in one top 10 only → weight 1, priority 1, above every q1 pair
    assert pairs(queue) == [("q2", "e1"), ("q2", "e2"), ("q1", "d1"), ("q1", "d4")]
    assert next_to_judge([A, B], {"q1": dict.fromkeys(["d1", "d2", "d3", "d4"], 1)}) == []


def test_ties_across_queries_go_in_query_order():
    a = {"q2": ["x", "s"], "q1": ["y", "t"]}
    b = {"q2": ["s", "x"], "q1": ["t", "y"]}
    # every pair: ranks 1 and 2 → 1 − 1/log2 3 ≈ 0.369, best rank 1 → priority 0.369 too;
    # q2 first (the rankings' order), then within a query the pool order
    queue = next_to_judge([a, b], {})
    assert {round(c.weight, 12) for c in queue} == {round(1 - ONE_OVER_LOG2_3, 12)}
    assert pairs(queue) == [("q2", "x"), ("q2", "s"), ("q1", "y"), ("q1", "t")]


def test_budget():
    assert pairs(next_to_judge([A, B], {}, budget=2)) == [("q1", "d1"), ("q1", "d3")]
    assert next_to_judge([A, B], {}, budget=0) == []
    assert len(next_to_judge([A, B], {}, budget=99)) == 4
    assert len(depth_pool([A, B], {}, budget=3)) == 3
    assert len(random_order([A, B], {}, budget=1, seed=3)) == 1
    with pytest.raises(ValueError, match="budget"):
        next_to_judge([A, B], {}, budget=-1)


def test_depth_pool_goes_query_by_query_rank_by_rank_configs_interleaved():
    a = {**A, "q2": ["e1", "e2"]}
    b = {**B, "q2": ["e2", "e3"]}
    # q1 rank 1: d1 (A), d3 (B); rank 2: d2, d4; rank 3: d3, d1 already in. q2 rank 1: e1, e2; rank 2: e2 (in), e3
    assert pairs(depth_pool([a, b], {})) == [("q1", "d1"), ("q1", "d3"), ("q1", "d2"), ("q1", "d4"),
                                             ("q2", "e1"), ("q2", "e2"), ("q2", "e3")]
    assert pairs(depth_pool([a, b], {}, depth=1)) == [("q1", "d1"), ("q1", "d3"), ("q2", "e1"), ("q2", "e2")]
    assert pairs(depth_pool([a, b], {"q1": {"d3": 1}, "q2": {"e1": 0}}, depth=1)) == [("q1", "d1"), ("q2", "e2")]
    # a query only the second config ranked comes after the first config's queries
    assert pairs(depth_pool([{"q1": ["x"]}, {"q0": ["y"], "q1": ["x"]}], {})) == [("q1", "x"), ("q0", "y")]


def test_random_order_is_the_same_pairs_and_reproducible_with_a_seed():
    a = {f"q{i}": [f"a{j}" for j in range(10)] for i in range(5)}
    b = {f"q{i}": [f"b{j}" for j in range(10)] for i in range(5)}
    first = random_order([a, b], {}, seed=7)
    assert pairs(first) == pairs(random_order([a, b], {}, seed=7))
    assert pairs(first) != pairs(random_order([a, b], {}, seed=8))
    assert sorted(pairs(first)) == sorted(pairs(depth_pool([a, b], {}))) and len(first) == 100
    # each document in one top 10 only: its weight is its own discount (a1 at rank 2: 1/log2 3)
    assert all(c.weight == pytest.approx(discount(c.best_rank)) for c in first)
    assert next(c for c in first if c.doc_id == "a1").weight == pytest.approx(ONE_OVER_LOG2_3)


def test_three_configs_sum_every_pair():
    c = {"q1": ["d4", "d1"]}
    queue = next_to_judge([A, B, c], {})
    by_doc = {x.doc_id: x for x in queue}
    # d1 ranks (1, 3, 2): |1 − 0.5| + |1 − 1/log2 3| + |0.5 − 1/log2 3| = 0.5 + 0.369 + 0.131 = 1
    assert by_doc["d1"].ranks == (1, 3, 2)
    assert by_doc["d1"].weight == pytest.approx(0.5 + (1 - ONE_OVER_LOG2_3) + (ONE_OVER_LOG2_3 - 0.5))
    # d4 ranks (None, 2, 1): 1/log2 3 + 1 + (1 − 1/log2 3) = 2
    assert by_doc["d4"].weight == pytest.approx(2.0)
    # d2 ranks (2, None, None): 1/log2 3 twice (A vs B, A vs C), B vs C 0
    assert by_doc["d2"].weight == pytest.approx(2 * ONE_OVER_LOG2_3)
    # d3 ranks (3, 1, None): 0.5 + 0.5 + 1 = 2
    assert by_doc["d3"].weight == pytest.approx(2.0)
    # priorities: d3 2 × 1, d4 2 × 1 (a tie: best rank 1 each, B's d3 before C's d4), d1 1 × 1,
    # d2 2/log2 3 × 1/log2 3 ≈ 0.796
    assert pairs(queue) == [("q1", "d3"), ("q1", "d4"), ("q1", "d1"), ("q1", "d2")]
    assert mtc_weight((1, 3, 2)) == pytest.approx(1.0)


def ndcg_delta(a, b, qrels):
    """Δ = mean nDCG@10(B) − mean nDCG@10(A), the library's (ranx), normalised by `qrels` alone."""
    from retrieval.evaluation.evaluate import QrelsEvaluator

    evaluator = QrelsEvaluator(qrels)
    return (evaluator.evaluate_rankings(b, ("ndcg@10",))[0]["ndcg@10"]
            - evaluator.evaluate_rankings(a, ("ndcg@10",))[0]["ndcg@10"])


def test_the_weight_is_what_one_relevant_judgment_moves_the_ndcg_difference():
    a = {"q": ["d1", "d2", "d3", "x"]}
    b = {"q": ["d3", "d4", "d1", "x"]}
    base = {"q": {"x": 1}}  # x at rank 4 in both: the same in A and B

    for candidate in unjudged_pairs([a, b], base):
        moved = ndcg_delta(a, b, {"q": {**base["q"], candidate.doc_id: 1}}) - ndcg_delta(a, b, base)
        assert abs(moved) == pytest.approx(candidate.weight, abs=1e-12), candidate
    assert Candidate("q", "d", 0.5, (1, 3)).best_rank == 1


def test_a_document_both_rank_alike_weighs_when_its_grade_would_rescale_the_query():
    # q1: r judged relevant, rank 2 in A, 1 in B: D = 1 − 1/log2 3 = 0.36907, IDCG 1 → +0.36907
    # q2: t judged relevant, rank 2 in A, 5 in B: D = 1/log2 6 − 1/log2 3 = −0.24408 → −0.24408
    # Δ = (0.36907 − 0.24408) / 2 = +0.06250. s is rank 3 in both (MTC weight 0); judged relevant
    # it raises q1's IDCG to 1 + 1/log2 3 = 1.63093: q1's term 0.36907 / 1.63093 = 0.22629 and
    # Δ = (0.22629 − 0.24408) / 2 = −0.00889: the sign flips. Its weight is q1's move, 0.14278.
    a = {"q1": ["x", "r", "s"], "q2": ["a1", "t"]}
    b = {"q1": ["r", "x", "s"], "q2": ["b1", "b2", "b3", "b4", "t"]}
    judged = {"q1": {"r": 1, "x": 0}, "q2": {"t": 1}}
    before = ndcg_delta(a, b, judged)
    after = ndcg_delta(a, b, {**judged, "q1": {**judged["q1"], "s": 1}})
    assert before == pytest.approx(0.06250, abs=1e-5) and after == pytest.approx(-0.00889, abs=1e-5)
    s = next(c for c in next_to_judge([a, b], judged) if c.doc_id == "s")
    assert s.ranks == (3, 3) and mtc_weight(s.ranks) == 0.0
    assert s.weight == pytest.approx(0.14278, abs=1e-5)
    assert s.weight == pytest.approx(2 * abs(after - before), abs=1e-12)  # n = 2 queries
    # a higher grade than any judged one is considered too: with grades up to 3 judged elsewhere,
    # s graded 3 makes q1's IDCG 3 + 1/log2 3: 0.36907 × (1 − 1/3.63093) = 0.26743
    graded = {**judged, "q3": {"z": 3}}
    s3 = next(c for c in next_to_judge([a, b], graded) if c.doc_id == "s")
    assert s3.weight == pytest.approx(0.36907 * (1 - 1 / (3 + ONE_OVER_LOG2_3)), abs=1e-5)
    # a query whose configs do not differ yet: the same-rank document cannot move Δ (weight 0)
    assert next(c for c in next_to_judge([a, b], {}) if c.doc_id == "s").weight == 0.0


def test_a_memo_re_weighs_only_the_query_whose_judgments_changed():
    # the rankings of the rescaling test above: after s is judged in q1, q2's pairs come from the
    # memo (the very same objects), q1's are made again; the order equals the one made without it
    a = {"q1": ["x", "r", "s"], "q2": ["a1", "t"]}
    b = {"q1": ["r", "x", "s"], "q2": ["b1", "b2", "b3", "b4", "t"]}
    judged = {"q1": {"r": 1, "x": 0}, "q2": {"t": 1}}
    memo: dict = {}
    first = next_to_judge([a, b], judged, memo=memo)
    assert first == next_to_judge([a, b], judged) and len(memo) == 2  # one entry per query
    later = {**judged, "q1": {**judged["q1"], "s": 0}}
    second = next_to_judge([a, b], later, memo=memo)
    assert second == next_to_judge([a, b], later) and len(memo) == 3  # q1 made again, q2 reused
    assert {id(c) for c in second if c.query_id == "q2"} == {id(c) for c in first if c.query_id == "q2"}
    assert [c.doc_id for c in unjudged_pairs([a, b], {}, queries=["q2"])] == ["a1", "b1", "t", "b2", "b3", "b4"]
