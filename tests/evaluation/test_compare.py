"""Rank changes, overlap@k and rank-biased overlap, against values computed by hand."""

import pytest

from retrieval.evaluation.compare import RankChange, overlap_at_k, rank_changes, rbo


def test_rank_changes_label_moves_new_and_dropped():
    changes = rank_changes(["a", "b", "c", "d"], ["c", "a", "e", "b"])
    assert [(c.doc_id, c.before, c.after, c.status, c.label) for c in changes] == [
        ("c", 3, 1, "up", "▲2"),
        ("a", 1, 2, "down", "▼1"),
        ("e", None, 3, "new", "new"),
        ("b", 2, 4, "down", "▼2"),
        ("d", 4, None, "dropped", "dropped"),
    ]
    assert changes[0].delta == 2 and changes[1].delta == -1 and changes[2].delta is None


def test_unchanged_rank_reads_equal():
    assert RankChange("x", 3, 3).label == "="
    assert RankChange("x", 3, 3).delta == 0


def test_duplicates_are_rejected():
    with pytest.raises(ValueError, match="more than once"):
        rank_changes(["a", "a"], ["a"])
    with pytest.raises(ValueError):
        rbo(["a", "b"], ["b", "b"])


def test_overlap_at_k_is_jaccard_of_top_k_sets():
    a = ["a", "b", "c", "d"]
    b = ["b", "x", "a", "y"]
    assert overlap_at_k(a, b, 2) == pytest.approx(1 / 3)  # {a,b} vs {b,x}: 1 shared of 3
    assert overlap_at_k(a, b, 3) == pytest.approx(2 / 4)  # {a,b,c} vs {b,x,a}
    assert overlap_at_k(a, b, 4) == pytest.approx(2 / 6)
    assert overlap_at_k(a, a, 3) == 1.0
    assert overlap_at_k([], [], 5) == 1.0
    with pytest.raises(ValueError):
        overlap_at_k(a, b, 0)


def test_rbo_identical_and_disjoint():
    assert rbo(["a", "b", "c"], ["a", "b", "c"]) == pytest.approx(1.0)
    assert rbo(["a", "b"], ["c", "d"]) == 0.0
    assert rbo([], []) == 1.0
    assert rbo(["a"], []) == 0.0


def test_rbo_equal_lengths_by_hand():
    # S = a b c, L = a c b, p = 0.9: X = 1, 1, 3.
    # (1-p)/p · (1·0.9 + 1/2·0.81 + 3/3·0.729) + 3/3·0.729 = 2.034/9 + 0.729 = 0.955
    assert rbo(["a", "b", "c"], ["a", "c", "b"]) == pytest.approx(0.955, abs=1e-12)
    # S = a b c d, L = b a d c: X = 0, 2, 2, 4.
    # (0 + 2/2·0.81 + 2/3·0.729 + 4/4·0.6561)/9 + 0.6561 = 1.9521/9 + 0.6561 = 0.873
    assert rbo(["a", "b", "c", "d"], ["b", "a", "d", "c"]) == pytest.approx(0.873, abs=1e-12)


def test_rbo_uneven_lengths_by_hand():
    # S = a (s = 1), L = a b (l = 2): X1 = 1, X2 = 1.
    # (1-p)/p · (0.9 + 1/2·0.81 + 1·(2-1)/(1·2)·0.81) + ((1-1)/2 + 1/1)·0.81 = 1.71/9 + 0.81 = 1.0
    assert rbo(["a"], ["a", "b"]) == pytest.approx(1.0, abs=1e-12)
    # S = a b (s = 2), L = c a b (l = 3): X1 = 0, X2 = 1, X3 = 2.
    # (0 + 1/2·0.81 + 2/3·0.729 + 1·(3-2)/(2·3)·0.729)/9 + (1/3 + 1/2)·0.729 = 1.0125/9 + 0.6075 = 0.72
    assert rbo(["a", "b"], ["c", "a", "b"]) == pytest.approx(0.72, abs=1e-12)
    assert rbo(["c", "a", "b"], ["a", "b"]) == pytest.approx(0.72, abs=1e-12)  # symmetric


def test_rbo_p_changes_weighting():
    # p = 0.5, S = a b, L = b a: X1 = 0, X2 = 2: (1/1)·(0 + 2/2·0.25) + 2/2·0.25 = 0.5
    assert rbo(["a", "b"], ["b", "a"], p=0.5) == pytest.approx(0.5, abs=1e-12)
    with pytest.raises(ValueError):
        rbo(["a"], ["a"], p=1.0)
