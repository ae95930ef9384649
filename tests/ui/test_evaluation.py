"""The Evaluate page's plain steps (ui/evaluate/sets.py, ui/evaluate/sweep.py, ui/evaluate/common.py) on a
real JudgmentStore: uploads in every format, all-or-nothing failures, and the sweep's cache key."""

import pytest

from retrieval.judging.judgments import JudgmentStore
from retrieval.search.config import SearchConfig
from retrieval.store import Store
from retrieval.types import IngestError, RetrievalError
from ui.evaluate.common import config_label
from ui.evaluate.sets import upload_query_set
from ui.evaluate.sweep import sweep_base_key

QUERIES_TSV = ("q.tsv", b"query-id\ttext\nq1\tHow many points?\nq2\tWho won the game?\n")
QUERIES_JSONL = ("q.jsonl", b'{"_id": "q1", "text": "How many points?"}\n{"_id": "q2", "text": "Who won the game?"}\n')
QUERIES_CSV = ("q.csv", b"id,query\nq1,How many points?\nq2,Who won the game?\n")
EXPECTED_QUERIES = {"q1": "How many points?", "q2": "Who won the game?"}


@pytest.fixture
def judgments(tmp_path):
    return JudgmentStore(Store(str(tmp_path / "db")))


@pytest.mark.parametrize("queries_file", [QUERIES_TSV, QUERIES_JSONL, QUERIES_CSV], ids=lambda f: f[0])
@pytest.mark.parametrize("qrels_file", [
    ("j.qrels", b"q1 0 d1 2\nq2 0 d2 1\nq2 0 d3 0\n"),                                 # TREC
    ("j.tsv", b"query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t1\nq2\td3\t0\n"),         # BEIR
    ("j.csv", b"query_id,doc_id,relevance\nq1,d1,2\nq2,d2,1\nq2,d3,0\n"),                # CSV, graded
], ids=lambda f: f[0])
def test_every_upload_format_is_stored(judgments, queries_file, qrels_file):
    saved = upload_query_set(judgments, "docs", "mine", queries_file, qrels_file, [], replace=False)
    assert saved.queries == EXPECTED_QUERIES and saved.judged == ["q1", "q2"]
    assert judgments.queries("docs", "mine") == EXPECTED_QUERIES
    assert judgments.qrels("docs", "mine") == {"q1": {"d1": 2}, "q2": {"d2": 1, "d3": 0}}
    assert saved.summary() == "Query set 'mine': 2 queries, 2 of them judged (3 judgments, 2 relevant)."


def test_failures_change_nothing(judgments):
    upload_query_set(judgments, "docs", "mine", QUERIES_TSV, ("j.qrels", b"q1 0 d1 1\n"), [], replace=False)
    before = judgments.queries("docs", "mine"), judgments.qrels("docs", "mine")
    with pytest.raises(IngestError, match=r"bad\.qrels: 1 malformed qrels line\(s\)\n  - line 2: grade 'x'"):
        upload_query_set(judgments, "docs", "mine", QUERIES_TSV, ("bad.qrels", b"q1 0 d1 1\nq2 0 d2 x\n"),
                         ["mine"], replace=True)
    with pytest.raises(RetrievalError, match="not in the query set: 'q9'"):
        upload_query_set(judgments, "docs", "mine", QUERIES_TSV, ("j.qrels", b"q9 0 d1 1\n"), ["mine"], replace=True)
    with pytest.raises(RetrievalError, match="exists: tick 'Replace'"):
        upload_query_set(judgments, "docs", "mine", QUERIES_TSV, None, ["mine"], replace=False)
    with pytest.raises(RetrievalError, match="There is no query set 'other' to add these judgments to"):
        upload_query_set(judgments, "docs", "other", None, ("j.qrels", b"q1 0 d1 1\n"), ["mine"], replace=False)
    with pytest.raises(RetrievalError, match="Upload a queries file"):
        upload_query_set(judgments, "docs", "other", None, None, ["mine"], replace=False)
    with pytest.raises(RetrievalError, match="not in the query set: 'q9'"):  # judgments alone, unknown query
        upload_query_set(judgments, "docs", "mine", None, ("j.qrels", b"q9 0 d1 1\n"), ["mine"], replace=False)
    with pytest.raises(RetrievalError, match="carries judgments already"):
        upload_query_set(judgments, "docs", "mine", ("s.jsonl", b'{"_id": "q1", "text": "t", "judgments": {}}\n'),
                         ("j.qrels", b"q1 0 d1 1\n"), ["mine"], replace=True)
    with pytest.raises(IngestError, match=r"line 1: judgment 'd1': 'two' is not a document id with an integer grade"):
        upload_query_set(judgments, "docs", "mine", ("s.jsonl", b'{"_id": "q1", "text": "t", "judgments": '
                                                                b'{"d1": "two"}}\n'), None, ["mine"], replace=True)
    with pytest.raises(RetrievalError, match="Invalid query set name"):
        upload_query_set(judgments, "docs", "Bad Name", QUERIES_TSV, None, ["mine"], replace=False)
    assert (judgments.queries("docs", "mine"), judgments.qrels("docs", "mine")) == before
    assert judgments.query_sets("docs") == ["mine"]


def test_sweep_key_ignores_what_the_grid_varies():
    base = SearchConfig()
    assert sweep_base_key(base) == sweep_base_key(SearchConfig(fusion="weighted", weights={"dense": 1.0}, rrf_k=5.0,
                                                               normalization="l2", combination="harmonic"))
    assert sweep_base_key(base) != sweep_base_key(SearchConfig(depth=50))
    assert config_label(base) == "weighted sum (l2, arithmetic), BM25 0.4, vector 0.6, depth 100"
    assert config_label(SearchConfig(fusion="rrf", weights={"bm25": 0.5, "dense": 0.5})) == \
        "RRF k=60, BM25 0.5, vector 0.5, depth 100"
    minmax = SearchConfig(fusion="weighted", normalization="minmax", weights={"bm25": 0.2, "dense": 0.8})
    assert config_label(minmax) == \
        "weighted sum (minmax, arithmetic), BM25 0.2, vector 0.8, depth 100"


def test_a_query_set_travels_in_one_file(judgments):
    """Exported with its texts and grades in one JSONL file, uploaded elsewhere: the same queries in
    the same order and the same judgments (an unjudged query stays unjudged), byte for byte."""
    queries = {"q2": "Who won the game?", "q1": "How many points? 多少分", "q3": "Not judged yet"}
    qrels = {"q2": {"d2": 1, "d3": 0}, "q1": {"d1": 2, "d9": -1}}
    judgments.save_query_set("docs", "mine", queries, qrels)
    exported = judgments.export_query_set("docs", "mine")
    assert exported.splitlines()[0] == '{"_id": "q2", "text": "Who won the game?", "judgments": {"d2": 1, "d3": 0}}'
    saved = upload_query_set(judgments, "other", "moved", ("mine.jsonl", exported.encode("utf-8")), None, [],
                             replace=False)
    assert list(judgments.queries("other", "moved").items()) == list(queries.items())
    assert judgments.qrels("other", "moved") == qrels and saved.judged == ["q2", "q1"]
    assert judgments.export_query_set("other", "moved") == exported
    # judgments alone are added to the existing set: q3 gets its first, q1's d1 is re-graded, nothing removed
    upload_query_set(judgments, "other", "moved", None, ("more.qrels", b"q3 0 d4 3\nq1 0 d1 1\n"), ["moved"],
                     replace=False)
    assert judgments.qrels("other", "moved") == {"q2": {"d2": 1, "d3": 0}, "q1": {"d1": 1, "d9": -1}, "q3": {"d4": 3}}


def test_the_progress_bar_says_its_start_then_each_report_and_is_emptied(monkeypatch):
    """Nothing to compile before a first run (the metrics are numpy): the bar reads its start,
    then each report, and is emptied at the end."""
    import ui.progress as progress

    texts = []

    class Bar:
        def progress(self, value, text=""):
            texts.append(text)

        def empty(self):
            texts.append("(emptied)")

    monkeypatch.setattr(progress.st, "progress", lambda value, text="": Bar().progress(value, text) or Bar())
    with progress.progress_bar("Evaluating…", "query {done} of {total}") as report:
        report(1, 2)
    assert texts == ["Evaluating…", "query 1 of 2", "(emptied)"]
