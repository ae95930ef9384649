"""Query sets and judgments in LanceDB auxiliary tables: round trips, ratings, uploads, atomicity."""

import hashlib

import pytest

from retrieval.indexing.pipeline import create_collection
from retrieval.judging import judgment_tables
from retrieval.judging.judgments import JudgmentStore
from retrieval.judging.qrels import parse_qrels
from retrieval.judging.validation import ui_query_id
from retrieval.store import Store, aux_table_name
from retrieval.types import IngestError, RetrievalError

QUERIES = {"q1": "do statins cause breast cancer", "q2": "vitamin d and bone health", "q3": "o'reilly's diet"}
QRELS = {"q1": {"MED-10": 2, "MED-2427": 1}, "q3": {"MED-1": 0}}


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path / "db"))


@pytest.fixture
def judgments(store):
    return JudgmentStore(store)


def test_save_and_read_back_a_query_set(judgments, store):
    assert judgments.query_sets("docs") == []
    judgments.save_query_set("docs", "test", QUERIES, QRELS)
    judgments.save_query_set("docs", "other", {"x": "something else"})
    assert judgments.query_sets("docs") == ["other", "test"]
    assert judgments.queries("docs", "test") == QUERIES  # order kept
    assert list(judgments.queries("docs", "test")) == ["q1", "q2", "q3"]
    assert judgments.qrels("docs", "test") == QRELS
    assert judgments.qrels("docs", "other") == {}
    assert judgments.ratings("docs", "test", "  do statins cause breast cancer ") == {"MED-10": 2, "MED-2427": 1}
    assert judgments.ratings("docs", "test", "vitamin d and bone health") == {}
    # the tables are the collection's auxiliary tables, never listed as collections
    tables = store.table_names()
    assert aux_table_name("docs", "queries") in tables and aux_table_name("docs", "judgments") in tables
    assert store.collection_names() == []


def test_replace_and_merge(judgments):
    judgments.save_query_set("docs", "test", QUERIES, QRELS)
    judgments.save_query_set("docs", "test", {"q9": "new only"}, {"q9": {"d": 3}})
    assert judgments.queries("docs", "test") == {"q9": "new only"}
    assert judgments.qrels("docs", "test") == {"q9": {"d": 3}}
    judgments.save_query_set("docs", "test", {"q1": "first", "q9": "renamed"}, {"q1": {"e": 1}}, replace=False)
    assert judgments.queries("docs", "test") == {"q9": "renamed", "q1": "first"}  # q9 keeps its place
    assert judgments.qrels("docs", "test") == {"q9": {"d": 3}, "q1": {"e": 1}}


def test_rate_adds_the_query_then_replaces_grades(judgments):
    text = "which foods lower cholesterol"
    qid = judgments.rate("docs", "judgments", text, "MED-5", 3)
    assert qid == ui_query_id(text)
    assert qid == "ui-" + hashlib.sha1(text.encode()).hexdigest()[:8]
    assert judgments.query_sets("docs") == ["judgments"]  # created by the first rating
    assert judgments.rate("docs", "judgments", text, "MED-6", 0) == qid
    assert judgments.rate("docs", "judgments", text, "MED-5", 1) == qid  # re-rating replaces
    assert judgments.ratings("docs", "judgments", text) == {"MED-5": 1, "MED-6": 0}
    assert judgments.queries("docs", "judgments") == {qid: text}
    # an existing query is found by its text, keeping its id
    judgments.save_query_set("docs", "test", QUERIES, QRELS)
    assert judgments.rate("docs", "test", "vitamin d and bone health", "MED-7", 2) == "q2"
    assert judgments.qrels("docs", "test")["q2"] == {"MED-7": 2}
    assert judgments.unrate("docs", "test", "vitamin d and bone health", "MED-7") is True
    assert judgments.unrate("docs", "test", "vitamin d and bone health", "MED-7") is False
    assert "q2" not in judgments.qrels("docs", "test") and "q2" in judgments.queries("docs", "test")


def test_bad_input_is_refused_and_nothing_changes(judgments):
    judgments.save_query_set("docs", "test", QUERIES, QRELS)
    for bad_set in ("", "Test", "../x", "a b", "x'; drop", "_hidden"):
        with pytest.raises(RetrievalError, match="Invalid query set name"):
            judgments.save_query_set("docs", bad_set, QUERIES)
    with pytest.raises(RetrievalError, match="Invalid collection name"):
        judgments.query_sets("../etc")
    for grade in (4, -1, 2.0, True, "2"):
        with pytest.raises(RetrievalError, match="Grade must be an integer from 0–3"):
            judgments.rate("docs", "test", "x", "MED-1", grade)
    with pytest.raises(RetrievalError, match="Invalid document id"):
        judgments.rate("docs", "test", "x", "MED 1", 1)
    with pytest.raises(RetrievalError, match="Query text is empty"):
        judgments.rate("docs", "test", "   ", "MED-1", 1)
    with pytest.raises(RetrievalError, match="not in the query set: 'q7'"):
        judgments.save_query_set("docs", "test", {"q1": "x"}, {"q7": {"d": 1}})
    with pytest.raises(RetrievalError, match=r"from −2–4|from -2–4"):
        judgments.save_query_set("docs", "test", {"q1": "x"}, {"q1": {"d": 9}})
    with pytest.raises(RetrievalError, match="at least one query"):
        judgments.save_query_set("docs", "test", {})
    with pytest.raises(RetrievalError, match="No query set named 'nope' in 'docs' \\(sets: test\\)"):
        judgments.queries("docs", "nope")
    with pytest.raises(RetrievalError, match="No query set named"):
        judgments.delete_query_set("docs", "nope")
    assert judgments.queries("docs", "test") == QUERIES and judgments.qrels("docs", "test") == QRELS


def test_quotes_in_values_are_data_not_sql(judgments):
    judgments.save_query_set("docs", "test", QUERIES, QRELS)
    qid = judgments.rate("docs", "test", "o'reilly's diet", "it's-a-doc", 2)
    assert qid == "q3"
    assert judgments.ratings("docs", "test", "o'reilly's diet") == {"MED-1": 0, "it's-a-doc": 2}


def test_upload_uses_the_qrels_parsers_and_a_failed_upload_changes_nothing(judgments):
    queries_jsonl = b'{"_id": "PLAIN-2", "text": "do cholesterol statin drugs cause breast cancer ?"}\n' \
                    b'{"_id": "PLAIN-12", "text": "exploiting autophagy to live longer"}\n'
    qrels_tsv = b"query-id\tcorpus-id\tscore\nPLAIN-2\tMED-2427\t2\nPLAIN-2\tMED-10\t2\nPLAIN-12\tMED-3\t1\n"
    assert judgments.import_files("docs", "nf", queries_jsonl, "queries.jsonl", qrels_tsv) == (2, 3)
    assert judgments.qrels("docs", "nf") == {"PLAIN-2": {"MED-10": 2, "MED-2427": 2}, "PLAIN-12": {"MED-3": 1}}
    # a malformed qrels file: the parser's error, and the stored set is untouched
    with pytest.raises(IngestError, match="malformed qrels"):
        judgments.import_files("docs", "nf", b'{"_id": "X", "text": "y"}\n', "q.jsonl", b"X D1 0 1\nX D2 0 oops\n")
    with pytest.raises(IngestError, match="unsupported query file type"):
        judgments.import_files("docs", "nf", b"X\ty\n", "queries.txt")
    assert judgments.queries("docs", "nf") == {"PLAIN-2": "do cholesterol statin drugs cause breast cancer ?",
                                               "PLAIN-12": "exploiting autophagy to live longer"}
    assert len(judgments.qrels("docs", "nf")["PLAIN-2"]) == 2


def test_exports_round_trip_through_parse_qrels(judgments):
    judgments.save_query_set("docs", "test", QUERIES, QRELS)
    trec = judgments.export_qrels("docs", "test", "trec")
    assert trec == "q1 0 MED-10 2\nq1 0 MED-2427 1\nq3 0 MED-1 0\n"
    beir = judgments.export_qrels("docs", "test", "beir")
    assert beir.splitlines()[0] == "query-id\tcorpus-id\tscore"
    assert parse_qrels(trec) == QRELS and parse_qrels(beir) == QRELS
    assert judgments.export_queries("docs", "test").splitlines()[0] == \
        '{"_id": "q1", "text": "do statins cause breast cancer"}'
    with pytest.raises(RetrievalError, match="'trec' or 'beir'"):
        judgments.export_qrels("docs", "test", "csv")


def test_delete_set_and_collection_lifecycle(judgments, store):
    from retrieval.indexing.readers.parse import parse_bytes

    judgments.save_query_set("docs", "a", QUERIES, QRELS)
    judgments.save_query_set("docs", "b", {"x": "y"}, {"x": {"d": 1}})
    judgments.delete_query_set("docs", "a")
    assert judgments.query_sets("docs") == ["b"] and judgments.qrels("docs", "b") == {"x": {"d": 1}}
    # clear keeps query sets, delete drops them with the collection
    create_collection(store, "docs", parse_bytes(b"id,text\nd,a document about bones\n", "d.csv"))
    store.clear("docs")
    assert judgments.query_sets("docs") == ["b"]
    store.delete("docs")
    assert judgments.query_sets("docs") == []
    assert aux_table_name("docs", "judgments") not in store.table_names()


def test_a_failing_judgments_write_restores_the_queries_table(judgments, monkeypatch):
    judgments.save_query_set("docs", "test", QUERIES, QRELS)
    real_merge = judgment_tables._merge

    def fail_on_judgments(table, key, rows, delete_rest):
        if "doc_id" in key:
            raise OSError("disk full")
        return real_merge(table, key, rows, delete_rest)

    monkeypatch.setattr(judgment_tables, "_merge", fail_on_judgments)
    with pytest.raises(OSError, match="disk full"):
        judgments.save_query_set("docs", "test", {"n1": "replacement"}, {"n1": {"d": 1}})
    with pytest.raises(OSError):
        judgments.rate("docs", "test", "a brand new query", "MED-1", 1)
    monkeypatch.undo()
    assert judgments.queries("docs", "test") == QUERIES
    assert judgments.qrels("docs", "test") == QRELS


# ---- raters -----------------------------------------------------------------------------------
def test_ratings_are_kept_per_rater_and_metrics_read_their_consensus(judgments):
    from retrieval.judging.raters import ADJUDICATED, Rating

    judgments.save_query_set("docs", "s", QUERIES, QRELS)  # the unnamed rater: q1 MED-10 2, MED-2427 1; q3 MED-1 0
    assert judgments.raters("docs", "s") == [""]
    judgments.rate_many("docs", "s", {("q1", "MED-10"): 0, ("q1", "MED-2427"): 1, ("q2", "A"): 3}, rater="ann")
    judgments.rate_many("docs", "s", {("q1", "MED-10"): 0, ("q2", "A"): 2, ("q2", "B"): None}, rater="bo")
    assert judgments.raters("docs", "s") == ["", "ann", "bo"]
    assert Rating("q2", "B", "bo", None) in judgments.ratings_of("docs", "s")  # can't tell, kept
    # MED-10: {2, 0, 0} → majority 0; MED-2427: {1, 1} → 1; q2 A: {3, 2} → mean 2.5 rounded half up → 3;
    # q2 B: only "can't tell" → not judged
    assert judgments.qrels("docs", "s") == {"q1": {"MED-10": 0, "MED-2427": 1}, "q2": {"A": 3}, "q3": {"MED-1": 0}}
    judgments.rate_many("docs", "s", {("q2", "A"): 1}, rater=ADJUDICATED)
    assert judgments.qrels("docs", "s")["q2"] == {"A": 1}  # adjudicated wins
    # one rater's view for the Search page widgets; "can't tell" is not a grade there
    assert judgments.ratings("docs", "s", QUERIES["q2"], rater="bo") == {"A": 2}
    assert judgments.ratings("docs", "s", QUERIES["q1"]) == {"MED-10": 2, "MED-2427": 1}
    # undo of two of bo's ratings, one commit; ann's stay
    assert judgments.unrate_many("docs", "s", [("q2", "A"), ("q2", "B"), ("q3", "none")], rater="bo") == 2
    assert judgments.ratings_of("docs", "s", rater="bo") == [Rating("q1", "MED-10", "bo", 0)]
    assert judgments.ratings("docs", "s", QUERIES["q2"], rater="ann") == {"A": 3}


def test_llm_raters_can_be_left_out_of_the_metrics(judgments):
    judgments.save_query_set("docs", "s", {"q": "a query"})
    judgments.rate_many("docs", "s", {("q", "d1"): 3, ("q", "d2"): 0}, rater="llm:qwen2.5-7b")
    judgments.rate_many("docs", "s", {("q", "d1"): 1}, rater="ann")
    assert judgments.qrels("docs", "s") == {"q": {"d1": 2, "d2": 0}}  # {3, 1}: mean 2
    assert judgments.qrels("docs", "s", with_llm=False) == {"q": {"d1": 1}}


def test_rate_many_refuses_bad_input_and_writes_nothing(judgments, store):
    judgments.save_query_set("docs", "s", {"q": "a query"})
    before = store.db.open_table(aux_table_name("docs", "judgments")).version
    for grades, rater, message in [
        ({("q", "d"): 4}, "ann", "Grade must be an integer from 0–3"),
        ({("nope", "d"): 1}, "ann", "has no query 'nope'"),
        ({("q", "d e"): 1}, "ann", "Invalid document id"),
        ({("q", "d"): 1}, "ann\n", "rater"),
        ({("q", "d"): 1}, "x" * 65, "rater"),
        ({"q": 1}, "ann", r"keyed by \(query id, document id\)"),
    ]:
        with pytest.raises(RetrievalError, match=message):
            judgments.rate_many("docs", "s", grades, rater=rater)
    with pytest.raises(RetrievalError):  # the reserved name is not a rater of the Search page
        judgments.rate("docs", "s", "a query", "d", 1, rater="(adjudicated)")
    assert store.db.open_table(aux_table_name("docs", "judgments")).version == before


def test_save_ratings_imports_several_raters_with_their_queries(judgments):
    from retrieval.judging.raters import Rating

    judgments.save_query_set("docs", "s", {"q1": "first"})
    ratings = [Rating("q1", "a", "ann", 2), Rating("q9", "b", "bo", 1), Rating("q9", "b", "ann", None)]
    assert judgments.save_ratings("docs", "s", ratings, queries={"q9": "ninth"}) == 3
    assert judgments.queries("docs", "s") == {"q1": "first", "q9": "ninth"}
    assert judgments.ratings_of("docs", "s") == [ratings[0], ratings[2], ratings[1]]  # query, doc, rater order
    with pytest.raises(RetrievalError, match="not in query set 's': 'q7'"):
        judgments.save_ratings("docs", "s", [Rating("q7", "a", "ann", 1)])
    judgments.save_ratings("docs", "s", [Rating("q1", "z", "cy", 0)], replace=True)
    assert judgments.ratings_of("docs", "s") == [Rating("q1", "z", "cy", 0)]
    assert list(judgments.queries("docs", "s")) == ["q1", "q9"]  # replace touches ratings only


def test_need_and_guidelines_per_query_survive_a_merge(judgments):
    judgments.save_query_set("docs", "s", QUERIES)
    judgments.set_notes("docs", "s", "q2", " People asking whether vitamin D helps bones. ", "2: says so directly")
    assert judgments.notes("docs", "s")["q2"] == ("People asking whether vitamin D helps bones.", "2: says so directly")
    assert judgments.notes("docs", "s")["q1"] == ("", "")
    judgments.save_query_set("docs", "s", {"q2": "vitamin d and bones"}, replace=False)
    assert judgments.notes("docs", "s")["q2"][1] == "2: says so directly"
    with pytest.raises(RetrievalError, match="has no query 'q8'"):
        judgments.set_notes("docs", "s", "q8", "", "")
    with pytest.raises(RetrievalError, match="at most 4000"):
        judgments.set_notes("docs", "s", "q1", "x" * 4001, "")


def test_tables_written_before_raters_read_as_the_unnamed_rater_and_gain_the_columns(judgments, store):
    import pyarrow as pa

    old_queries = pa.schema([pa.field("set_name", pa.string(), nullable=False),
                             pa.field("query_id", pa.string(), nullable=False),
                             pa.field("text", pa.string(), nullable=False),
                             pa.field("position", pa.int64(), nullable=False)])
    old_judgments = pa.schema([pa.field("set_name", pa.string(), nullable=False),
                               pa.field("query_id", pa.string(), nullable=False),
                               pa.field("doc_id", pa.string(), nullable=False),
                               pa.field("grade", pa.int32(), nullable=False)])
    store.db.create_table(aux_table_name("docs", "queries"), schema=old_queries).add(
        [{"set_name": "s", "query_id": "q1", "text": "old query", "position": 0}])
    store.db.create_table(aux_table_name("docs", "judgments"), schema=old_judgments).add(
        [{"set_name": "s", "query_id": "q1", "doc_id": "d1", "grade": 2}])
    assert judgments.qrels("docs", "s") == {"q1": {"d1": 2}}
    assert judgments.raters("docs", "s") == [""]
    assert judgments.notes("docs", "s") == {"q1": ("", "")}
    judgments.rate("docs", "s", "old query", "d1", 1)  # the unnamed rater re-rates: replaces, as before
    judgments.rate("docs", "s", "old query", "d2", 3, rater="ann")
    assert judgments.qrels("docs", "s") == {"q1": {"d1": 1, "d2": 3}}
    assert "rater" in store.db.open_table(aux_table_name("docs", "judgments")).schema.names
    judgments.set_notes("docs", "s", "q1", "need", "")
    assert judgments.notes("docs", "s") == {"q1": ("need", "")}


def test_judged_queries_are_the_judged_ones_first_n_when_asked(judgments):
    judgments.save_query_set("docs", "s", {"q1": "one", "q2": "two", "q3": "three"},
                             {"q1": {"d1": 1}, "q3": {"d2": 2, "d3": 0}})
    queries, qrels = judgments.judged_queries("docs", "s")
    assert queries == {"q1": "one", "q2": "two", "q3": "three"}
    assert qrels == {"q1": {"d1": 1}, "q3": {"d2": 2, "d3": 0}}  # q2 has no judgment
    assert judgments.judged_queries("docs", "s", max_queries=1)[1] == {"q1": {"d1": 1}}
    judgments.save_query_set("docs", "empty", {"q1": "one"}, {})
    with pytest.raises(RetrievalError, match="Query set 'empty' of 'docs' has no judgments yet"):
        judgments.judged_queries("docs", "empty")
