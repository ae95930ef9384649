"""The log readers: UBI events and queries, CSV/TSV click logs; bad lines counted and named."""

from pathlib import Path

import pytest

from retrieval.judging.implicit.counts import ClickCounts
from retrieval.judging.implicit.logs import ClickEvent, read_logs
from retrieval.types import RetrievalError

DATA = Path(__file__).resolve().parents[2] / "data" / "implicit"


def test_ubi_events_with_queries_file():
    events, report = read_logs(DATA / "ubi_events.ndjson", DATA / "ubi_queries.ndjson")
    events = list(events)
    assert events[0] == ClickEvent("q1", "red dress", "A", 0, "impression")
    assert events[-1] == ClickEvent("q4", "shoes", "S2", 0, "click")  # its own user_query
    assert len(events) == 19 and report.events == 19 and report.other_actions == 1
    assert report.to_json()["bad_lines"] == {
        "not JSON": {"count": 1, "lines": ["ubi_events.ndjson:10"]},
        "no event_attributes.object.object_id": {"count": 1, "lines": ["ubi_events.ndjson:19"]}}


def test_events_without_query_text_are_named():
    events, report = read_logs(DATA / "ubi_events.ndjson")
    assert sum(1 for _ in events) == 3  # only q4's events carry user_query
    # 16 events and the line without an object id (its query text is checked first)
    assert report.bad["no user_query (none in the event, query_id not in the queries file)"] == 17


def test_tsv_click_log_rows_sessions_and_bad_rows():
    events, report = read_logs(click_csv=DATA / "clicks.tsv")
    events = list(events)
    assert events[:3] == [ClickEvent("clicks.tsv#1", "red dress", "A", 0, "impression"),
                          ClickEvent("clicks.tsv#1", "red dress", "B", 1, "impression"),
                          ClickEvent("clicks.tsv#1", "red dress", "B", 1, "click")]
    assert events[3].session == "clicks.tsv#2"  # position 0 again: a new search
    assert report.named == {"clicked is not 1/0, true/false or yes/no": ["clicks.tsv:5"], "no doc": ["clicks.tsv:7"]}
    counts = ClickCounts().add_all(events)
    assert counts.sessions == 3 and counts.pairs["red dress", "B"] == [2, 2, 0]


def test_a_log_without_the_needed_columns_is_refused(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("query,doc,clicked\nx,y,1\n", encoding="utf-8")
    with pytest.raises(RetrievalError, match="no position column"):
        list(read_logs(click_csv=path)[0])
    with pytest.raises(RetrievalError, match="--events"):
        read_logs()


def test_sessions_fold_cascade_counts():
    events = [ClickEvent("s", "q", d, p, "impression") for p, d in enumerate("abcd")]
    events += [ClickEvent("s", "q", "b", 1, "click"), ClickEvent("t", "q", "a", 0, "impression"),
               ClickEvent("t", "q", "b", 1, "impression")]
    counts = ClickCounts(window=1).add_all(events)  # window 1: s is folded when t starts
    # s: last click at 1, so a and b examined, c and d not; t: no click, both examined.
    assert counts.cascade == {("q", "a"): [2, 0, 0], ("q", "b"): [2, 1, 1], ("q", "c"): [0, 0, 0],
                              ("q", "d"): [0, 0, 0]}
    assert counts.serp["q", "b", 1] == [2, 1] and counts.examined_at == {0: 2, 1: 2}
