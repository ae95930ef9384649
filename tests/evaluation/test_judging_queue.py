"""The Judge page's whole queue (retrieval/evaluation/judging_queue.py, `page_queue`), by hand: the
judged pairs first in pool order, then the unjudged ones in what-to-judge-next order given the
judgments, which re-weighs a same-rank document once a grade has made the configs differ."""

import pytest

from retrieval.evaluation.judging_queue import page_queue
from retrieval.judging.judge_next import depth_pool, next_to_judge

# q1: A = x r s, B = r x s (s rank 3 in both); q2: A = a1 t, B = b1 b2 b3 b4 t
A = {"q1": ["x", "r", "s"], "q2": ["a1", "t"]}
B = {"q1": ["r", "x", "s"], "q2": ["b1", "b2", "b3", "b4", "t"]}


def keys(candidates):
    return [(c.query_id, c.doc_id) for c in candidates]


def test_nothing_judged_is_the_order_of_what_to_judge_next_or_of_the_pool():
    assert page_queue([A, B], {}) == next_to_judge([A, B], {})
    assert page_queue([A, B], {}, pool=True) == depth_pool([A, B], {})
    # weights with nothing judged (MTC): s 0; a1, b1 1 (rank 1 in one top 10 only) → first
    assert keys(page_queue([A, B], {})[:2]) == [("q2", "a1"), ("q2", "b1")]
    assert page_queue([A, B], {})[-1].doc_id == "s"


def test_judged_pairs_come_first_and_the_rest_is_weighed_by_the_judgments_so_far():
    judged = {"q1": {"r": 1, "x": 0}, "q2": {"t": 1}, "q3": {"elsewhere": 2}}
    queue = page_queue([A, B], judged)
    # judged pairs in pool order: q1 x (rank 1 in A), r (rank 1 in B), then q2 t; q3 is in no ranking
    assert keys(queue[:3]) == [("q1", "x"), ("q1", "r"), ("q2", "t")]
    rest = queue[3:]
    assert rest == next_to_judge([A, B], judged)
    # s, rank 3 in both (weight 0 with nothing judged), now moves q1's term: D = 1 − 1/log2 3 =
    # 0.36907 over an IDCG of 1; graded 2 (the top grade judged) s raises the IDCG to
    # 2 + 1/log2 3 = 2.63093, the term to 0.36907 / 2.63093 = 0.14028: a move of 0.22879
    # (graded 1: 0.14278, smaller); its priority is that × 1/log2 4 = 0.11439
    s = next(c for c in rest if c.doc_id == "s")
    assert s.weight == pytest.approx(0.36907 - 0.36907 / (2 + 1 / 1.5849625), abs=1e-5)
    assert s.priority == pytest.approx(0.11439, abs=1e-5)
    assert next(c for c in page_queue([A, B], {}) if c.doc_id == "s").weight == 0.0
