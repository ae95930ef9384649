"""Real collections have bad rows: by default a file with any problem loads nothing; with
`skip_invalid` (CLI --skip-invalid, the Corpus page's checkbox, evaluate) the rest loads and what
was left out is listed; judged documents that were skipped stay in the judgments as misses."""

import json

import pytest

from retrieval.cli import main as cli
from retrieval.indexing.derive import check_documents
from retrieval.indexing.readers.options import ParseOptions
from retrieval.indexing.readers.parse import parse_bytes, parse_files, parse_path
from retrieval.store import Store
from retrieval.text.passages import embedding_text
from retrieval.types import Document, IngestError

CSV = b"id,text\na,Green tea\nb,\nc,Coffee beans\na,Again\n,No id\n"


def test_bad_rows_load_nothing_by_default_and_are_skipped_on_request():
    with pytest.raises(IngestError, match=r"notes\.csv: 3 problem\(s\); nothing was loaded"):
        parse_bytes(CSV, "notes.csv")
    corpus = parse_bytes(CSV, "notes.csv", ParseOptions(skip_invalid=True))
    assert [(d.id, d.text) for d in corpus.documents] == [("a", "Green tea"), ("c", "Coffee beans")]
    assert corpus.skipped == ["notes.csv: row 3 (id 'b'): text is empty", "notes.csv: row 6: id is empty",
                              "notes.csv: row 5: id 'a' repeats row 2"]
    assert corpus.notes[-1] == ("skipped 3 invalid record(s): notes.csv: row 3 (id 'b'): text is empty; notes.csv: "
                                "row 6: id is empty; notes.csv: row 5: id 'a' repeats row 2")
    both = parse_files([("notes.csv", CSV), ("more.csv", b"id,text\nc,Tea again\nd,Fine\n")],
                       ParseOptions(skip_invalid=True))
    assert [d.id for d in both.documents] == ["a", "c", "d"]
    assert both.skipped[-1] == "more.csv: id 'c' is in notes.csv already"
    with pytest.raises(IngestError, match="every record has a problem; nothing to load"):
        parse_bytes(b"id,text\na,\n", "empty.csv", ParseOptions(skip_invalid=True))


@pytest.fixture
def beir(tmp_path):
    """A BEIR folder whose corpus has two empty documents, one of them the only relevant one of q2."""
    folder = tmp_path / "bad-beir"
    (folder / "qrels").mkdir(parents=True)
    docs = [("d1", "Cats hunt mice at night"), ("d2", ""), ("d3", "Bees make honey"), ("d4", "   ")]
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in docs))
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "who hunts mice"}\n'
                                          '{"_id": "q2", "text": "empty one"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return folder


def test_evaluate_skips_bad_documents_and_counts_them_as_misses(beir, tmp_path, capsys):
    with pytest.raises(IngestError, match=r"corpus\.jsonl: 2 problem\(s\); nothing was loaded"):
        parse_path(beir)
    db = str(tmp_path / "db")
    assert cli.main(["--db", db, "evaluate", str(beir)]) == 2
    err = capsys.readouterr().err
    assert "corpus.jsonl: 2 problem(s); nothing was loaded" in err
    assert "add --skip-invalid to leave out the records with a problem (each is listed) and load the rest" in err
    assert cli.main(["--db", db, "evaluate", str(beir), "--skip-invalid", "--json"]) == 0
    out = capsys.readouterr()
    assert ("skipped 2 invalid record(s): corpus.jsonl: line 2 (id 'd2'): text is empty; corpus.jsonl: line 4 "
            "(id 'd4'): text is empty" in out.err)
    report = json.loads(out.out)
    assert report["skipped"] == 2  # on stdout too, for a script
    assert report["skipped_records"] == ["corpus.jsonl: line 2 (id 'd2'): text is empty",
                                         "corpus.jsonl: line 4 (id 'd4'): text is empty"]
    (cache,) = Store(db).list_collections()
    assert cache.xl_model == "multilingual-e5-small"  # by default an English set gets E5 vectors too
    # q1 finds d1 first; q2's only relevant document was skipped: never found, recall 0 — not dropped
    assert report["n_queries"] == 2
    for system in ("bm25", "dense", "hybrid"):
        assert report["metrics"][system]["recall@100"] == 0.5 and report["metrics"][system]["ndcg@10"] == 0.5


def test_the_cli_ingest_skips_and_says_what(tmp_path, capsys):
    path = tmp_path / "notes.jsonl"
    path.write_text('{"id": "a", "text": "Green tea"}\nnot json\n{"id": "b", "text": ""}\n{"id": "c", "text": "Hi"}\n')
    db = str(tmp_path / "db")
    assert cli.main(["--db", db, "ingest", str(path), "--collection", "notes"]) == 2
    err = capsys.readouterr().err
    assert "nothing was loaded" in err and "add --skip-invalid" in err
    assert cli.main(["--db", db, "ingest", str(path), "--collection", "notes", "--skip-invalid"]) == 0
    err = capsys.readouterr().err
    assert "note: skipped 2 invalid record(s): notes.jsonl: line 2: invalid JSON" in err
    assert "notes.jsonl: line 3 (id 'b'): text is empty" in err
    assert Store(db).info("notes").doc_count == 2


def test_a_title_alone_is_a_document_only_neither_is_invalid(tmp_path, capsys):
    """Classic collections hold many documents that are a title and no body: they load, are
    indexed as their title (title + text, as BEIR systems do), and are found; a record with
    neither a title nor a text is the only empty one."""
    data = b"id,title,text\na,Green tea,\nb,,\nc,,Coffee beans\nd,Tea,leaves\n"
    with pytest.raises(IngestError, match=r"1 problem\(s\)") as caught:
        parse_bytes(data, "titles.csv")
    assert caught.value.problems == ["row 3 (id 'b'): title and text are empty"]
    corpus = parse_bytes(data, "titles.csv", ParseOptions(skip_invalid=True))
    assert [(d.id, d.title, d.text) for d in corpus.documents] == [
        ("a", "Green tea", ""), ("c", "", "Coffee beans"), ("d", "Tea", "leaves")]
    assert [embedding_text(d) for d in corpus.documents] == ["Green tea", "Coffee beans", "Tea\nleaves"]
    assert check_documents(corpus.documents) == corpus.documents
    with pytest.raises(IngestError) as caught:
        check_documents([Document(id="x", text=" ", title="")])
    assert caught.value.problems == ["document 'x' has neither a title nor a text"]

    folder = tmp_path / "titles-beir"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": "d1", "title": "Cats hunt mice at night", "text": ""},
            {"_id": "d2", "title": "Bees make honey", "text": ""}, {"_id": "d3", "text": "Owls fly"}]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "which bees make honey"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    assert [d.id for d in parse_path(folder).documents] == ["d1", "d2", "d3"]
    db = str(tmp_path / "db")
    assert cli.main(["--db", db, "evaluate", str(folder), "--no-cross-lingual", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["metrics"]["bm25"]["ndcg@10"] == 1.0  # found by its title alone
    assert report["skipped"] == 0 and report["skipped_records"] == []
    (cache,) = Store(db).list_collections()
    assert cache.xl_model == ""  # --no-cross-lingual: the collection's model only
