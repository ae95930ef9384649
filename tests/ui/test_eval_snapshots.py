"""The Snapshots tab's figures and helpers as pure functions: the cause waterfall lands on B, the
trend's bars are the bootstrap intervals, a click pairs a snapshot with the one before."""

import pandas as pd
import pytest

from retrieval.evaluation.paired import bootstrap_ci
from retrieval.evaluation.snapshots import Snapshot
from retrieval.search.config import SearchConfig
from ui.evaluate.charts import causes_waterfall, snapshot_trend
from ui.evaluate.snapshots import pair_before, trend_points

DIFF = {"metric": "ndcg@10", "a": {"name": "<b>old</b>", "value": 0.5, "ci95": [0.4, 0.6]},
        "b": {"name": "new", "value": 0.56, "ci95": [0.45, 0.66]}, "delta": 0.06,
        "causes": {"judgments": -0.02, "config+corpus": 0.08}}


def snap(name: str, query_set: str, values: list[float]) -> Snapshot:
    return Snapshot(name=name, collection="c", created=name, table_version=1, doc_count=3, config=SearchConfig(),
                    query_set=query_set, queries={}, qrels={}, judgments_key="k", run={},
                    per_query={f"q{i}": {"ndcg@10": v} for i, v in enumerate(values)})


def test_the_waterfall_steps_from_a_through_each_cause_to_b():
    trace = causes_waterfall(DIFF).data[0]
    assert list(trace.x) == ["&lt;b&gt;old&lt;/b&gt;", "judgments", "config+corpus", "new"]  # user text escaped
    assert list(trace.measure) == ["absolute", "relative", "relative", "total"]
    assert list(trace.y[:3]) == [0.5, -0.02, 0.08]
    assert sum(trace.y[:3]) == pytest.approx(DIFF["b"]["value"])  # the total plotly draws is B's value
    # the axis spans the levels (0.48 … 0.56), not from 0, where a small change is a sliver
    assert tuple(causes_waterfall(DIFF).layout.yaxis.range) == (pytest.approx(0.48 - 0.08), pytest.approx(0.58))


def test_the_trend_is_the_query_sets_snapshots_with_their_intervals():
    kept = [snap("s1", "default", [0.2, 0.6]), snap("other", "beir:x", [1.0]), snap("s2", "default", [0.5, 0.5, 0.8])]
    points = trend_points(kept, "default", "ndcg@10")
    assert [p["name"] for p in points] == ["s1", "s2"]
    assert [p["value"] for p in points] == [pytest.approx(0.4), pytest.approx(0.6)]
    assert points[1]["ci95"] == bootstrap_ci([0.5, 0.5, 0.8])
    trace = snapshot_trend(points).data[0]
    assert list(trace.y) == [p["value"] for p in points]
    assert list(trace.error_y.array) == [pytest.approx(p["ci95"][1] - p["value"]) for p in points]
    assert list(trace.error_y.arrayminus) == [pytest.approx(p["value"] - p["ci95"][0]) for p in points]


def test_a_click_pairs_a_snapshot_with_the_one_before():
    assert pair_before(["s1", "s2", "s3"], "s3") == ("s2", "s3")
    assert pair_before(["s1", "s2", "s3"], "s1") is None  # nothing before the first


def test_a_querys_lists_side_by_side_with_rank_changes():
    from ui.evaluate.snapshots import side_by_side

    a = Snapshot(name="a", collection="c", created="1", table_version=1, doc_count=4, config=SearchConfig(),
                 query_set="s", queries={"q": "x"}, qrels={"q": {"d2": 2}}, judgments_key="k",
                 run={"q": [("d1", 0.9), ("d2", 0.5), ("d3", 0.1)]}, per_query={})
    b = Snapshot(name="b", collection="c", created="2", table_version=1, doc_count=4, config=SearchConfig(),
                 query_set="s", queries={"q": "x"}, qrels={"q": {"d2": 2, "d4": 1}}, judgments_key="k2",
                 run={"q": [("d2", 0.8), ("d4", 0.7), ("d1", 0.2)]}, per_query={})
    left, right = side_by_side(a, b, "q")
    grades = lambda frame: [None if g is pd.NA else int(g) for g in frame["grade"]]  # noqa: E731
    assert list(left["document"]) == ["d1", "d2", "d3"] and list(left["rank"]) == [1, 2, 3]
    assert grades(left) == [None, 2, None] and "change" not in left
    assert list(right["change"]) == ["▲1", "new", "▼2"]  # d1 fell from 1 to 3, d2 rose from 2 to 1
    assert grades(right) == [2, 1, None]  # B's own judgments
