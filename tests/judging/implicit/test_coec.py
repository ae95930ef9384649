"""COEC on a hand-made UBI sample equals SRW's definition computed by hand; CTR beside it."""

from pathlib import Path

import pytest

from retrieval.judging.implicit.coec import coec_scores, ctr_scores, position_ctr, srw_round
from retrieval.judging.implicit.counts import ClickCounts
from retrieval.judging.implicit.grading import implicit_judgments
from retrieval.judging.implicit.logs import read_logs

DATA = Path(__file__).resolve().parents[2] / "data" / "implicit"


@pytest.fixture(scope="module")
def counts():
    events, _ = read_logs(DATA / "ubi_events.ndjson", DATA / "ubi_queries.ndjson")
    return ClickCounts(max_rank=3).add_all(events)


def test_position_ctr_is_srws_rank_aggregated_ctr(counts):
    # Impression events at 0: A(q1) B(q2) S1(q3) S2(q4) = 4, clicks B(q2) S1(q3) S2(q4) = 3;
    # at 1: B(q1) A(q2) S2(q3) S1(q4) = 4, clicks B(q1) S5(q3, no impression) = 2; at 2: C C = 2,
    # click C(q2) = 1. Position 3 = max rank has no CTR; position 4 is beyond it.
    assert position_ctr(counts) == {0: 0.75, 1: 0.5, 2: 0.5}


def test_coec_equals_a_hand_computation_of_srw(counts):
    # rating = clicks / (CTR(lowest position seen) × impressions), 0 when that is 0; %.3f.
    assert coec_scores(counts) == {
        ("red dress", "A"): 0.0,        # 0 / (0.75 × 2)
        ("red dress", "B"): 1.333,      # 2 / (0.75 × 2), lowest position 0 (q2), not 1 (q1)
        ("red dress", "C"): 1.0,        # 1 / (0.5 × 2)
        ("shoes", "S1"): 0.667,         # 1 / (0.75 × 2)
        ("shoes", "S2"): 0.667,         # 1 / (0.75 × 2): q4 showed it at 0
        ("shoes", "S3"): 0.0,           # seen only at 3 = max rank: no CTR there
        ("shoes", "S5"): 0.0,           # a click, no impression: no expected clicks
    }
    assert counts.beyond_max_rank == 1 and counts.pairs["shoes", "S5"] == [1, 0, 1]


def test_ctr_is_clicks_over_impressions(counts):
    scores = ctr_scores(counts)
    assert scores["red dress", "B"] == 1.0 and scores["red dress", "C"] == 0.5 and scores["shoes", "S5"] == 0.0


def test_srw_round_is_half_up_like_javas_format():
    assert srw_round(0.0625) == 0.063 and srw_round(2 / 3) == 0.667 and srw_round(1.0005) == 1.0  # 1.0005 is below


def test_grades_thresholds_and_min_impressions(counts):
    result = implicit_judgments(counts, "coec", min_impressions=2)
    grades = {(j.query, j.doc): j.grade for j in result.judgments}
    # thresholds 0.5, 1, 2: 1.333 → 2, 1.0 → 2, 0.667 → 1, 0 → 0; S3 and S5 have < 2 impressions.
    assert grades == {("red dress", "B"): 2, ("red dress", "C"): 2, ("red dress", "A"): 0,
                      ("shoes", "S1"): 1, ("shoes", "S2"): 1}
    assert result.skipped["below_min_impressions"] == 2
    assert result.to_json()["position_ctr"] == {"0": 0.75, "1": 0.5, "2": 0.5}
    custom = implicit_judgments(counts, "coec", thresholds=(0.1, 0.7, 1.2), known_docs=lambda d: d != "S2")
    assert {(j.query, j.doc): j.grade for j in custom.judgments}["red dress", "B"] == 3
    assert custom.skipped["unknown_docs"] == 1
