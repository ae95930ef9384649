import pytest

from retrieval.judging.qrels import parse_qrels, parse_queries
from retrieval.types import IngestError


def test_beir_tsv_with_header_keeps_grades():
    text = "query-id\tcorpus-id\tscore\nq1\tMED-10\t2\nq1\tMED-11\t1\nq2\tMED-10\t0\n"
    assert parse_qrels(text) == {"q1": {"MED-10": 2, "MED-11": 1}, "q2": {"MED-10": 0}}


def test_trec_qrels_ignore_the_iteration_column():
    text = "301 0 FBIS3-10082 1\n301  0  FBIS3-10169 -1\n\n302\t0\tFT921-1 2\n"
    assert parse_qrels(text) == {"301": {"FBIS3-10082": 1, "FBIS3-10169": -1}, "302": {"FT921-1": 2}}


def test_three_columns_without_header():
    assert parse_qrels("q1 d1 1\nq1 d2 3") == {"q1": {"d1": 1, "d2": 3}}


def test_csv_header_in_any_order_extra_columns_ignored():
    text = "Relevance,Doc_ID,note,Query_ID\n2,d7,\"a, b\",q1\n1.0,d8,,q1\n"
    assert parse_qrels(text) == {"q1": {"d7": 2, "d8": 1}}


def test_malformed_lines_are_all_reported_by_number():
    text = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\nq2\td1\thigh\n\nq1\td1\t2\nq3\t\t1\n"
    with pytest.raises(IngestError) as caught:
        parse_qrels(text)
    assert caught.value.problems == [
        "line 3: expected 3 fields, got 2",
        "line 4: grade 'high' is not an integer",
        "line 6: query 'q1', document 'd1' judged 2 here but 1 on line 2",
        "line 7: empty query or document id",
    ]


def test_trec_lines_must_all_have_four_fields():
    with pytest.raises(IngestError) as caught:
        parse_qrels("q1 0 d1 1\nq1 d2 1\n")
    assert caught.value.problems == ["line 2: expected 4 fields, got 3"]


def test_unknown_header_is_rejected():
    with pytest.raises(IngestError, match="line 1: the header 'a,b,c' does not name"):
        parse_qrels("a,b,c\nq1,d1,1\n")


def test_empty_qrels_are_rejected():
    with pytest.raises(IngestError, match="empty"):
        parse_qrels("\n  \n")
    with pytest.raises(IngestError, match="no judgments"):
        parse_qrels("query-id\tcorpus-id\tscore\n")


def test_queries_jsonl_accepts_id_and_text_key_variants():
    data = b'{"_id": "q1", "text": "what is bm25", "metadata": {}}\n\n{"id": 2, "query": " rrf "}\n'
    assert parse_queries(data, "queries.jsonl") == {"q1": "what is bm25", "2": "rrf"}


def test_queries_tsv_with_and_without_header():
    data = "q1\t检索\tmore\nq2\t排序\n".encode("gbk")
    assert parse_queries(data, "q.tsv") == {"q1": "检索\tmore", "q2": "排序"}
    assert parse_queries(b"query-id\ttext\nq1\thello\n", "q.tsv") == {"q1": "hello"}


def test_queries_csv_finds_its_columns():
    data = b'lang,query,qid\nen,"hybrid, search",7\nzh,,8\n'
    with pytest.raises(IngestError) as caught:
        parse_queries(data, "queries.csv")
    assert caught.value.problems == ["line 3: query text is empty"]
    assert parse_queries(data[: data.index(b"zh")], "queries.csv") == {"7": "hybrid, search"}


def test_query_problems_are_collected():
    data = b'{"_id": "q1", "text": "a"}\nnot json\n{"text": "b"}\n{"_id": "q1", "text": "c"}\n'
    with pytest.raises(IngestError) as caught:
        parse_queries(data, "queries.jsonl")
    assert caught.value.problems == [
        "line 2: invalid JSON at column 1: Expecting value",
        "line 3: no id (expected one of _id, id, query_id, qid)",
        "query id 'q1' appears on lines 1, 4",
    ]


def test_queries_csv_without_usable_header():
    with pytest.raises(IngestError, match="needs an id column"):
        parse_queries(b"a,b\n1,2\n", "q.csv")


def test_unsupported_query_file_type():
    with pytest.raises(IngestError, match=r"q\.xml: unsupported query file type"):
        parse_queries(b"<q/>", "q.xml")
