"""Streaming ingest (issue 9, item 1): a corpus read, embedded and written in batches, in one
all-or-nothing write. Parsing in batches gives what the one-shot parser gives; a streamed ingest
of sample_data holds the same rows, tokens, vectors and graph rows as a one-shot ingest, and
tokenising ahead in its own thread (overlap.py) stores exactly what one step after the other does; a
problem in a later batch (a duplicate id across batches, an id already stored, a bad line)
leaves the collection exactly as before. Real kills of a CLI ingest: tests/reliability/."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from retrieval.cli import main as cli
from retrieval.indexing import pipeline
from retrieval.indexing.pipeline import create_collection, ingest_stream, stream_language
from retrieval.indexing.readers.options import ParseOptions
from retrieval.indexing.readers.parse import parse_path
from retrieval.indexing.readers.stream import open_stream
from retrieval.indexing.throughput import Throughput, duration
from retrieval.models.embed import MINILM
from retrieval.store import GRAPH_KINDS, Store
from retrieval.types import IngestError

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
XQUAD = SAMPLE / "xquad"


def corpus_lines() -> list[dict]:
    """The bundled XQuAD paragraphs (60 English, then their 60 Chinese translations)."""
    return [json.loads(line) for line in (XQUAD / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]


def write_jsonl(path: Path, items: list, encoding: str = "utf-8") -> Path:
    path.write_bytes("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items).encode(encoding))
    return path


def streamed(path, batch_size: int, options: ParseOptions = ParseOptions()) -> tuple[list, list[int]]:
    stream = open_stream(path, options, batch_size)
    batches = list(stream.batches())
    return [d for b in batches for d in b], [len(b) for b in batches]


# ---- parsing in batches ------------------------------------------------------------------------
@pytest.mark.parametrize("relative", ["xquad", "catalogue/records.json", "three_kingdoms"])
@pytest.mark.parametrize("batch_size", [1, 7, 5000])
def test_sample_data_in_batches_parses_as_in_one_go(relative, batch_size):
    documents, sizes = streamed(SAMPLE / relative, batch_size)
    assert documents == parse_path(SAMPLE / relative).documents
    assert all(size == batch_size for size in sizes[:-1]) and 0 < sizes[-1] <= batch_size
    assert open_stream(SAMPLE / relative).total == len(documents)


def test_csv_tsv_and_jsonl_in_batches_equal_the_one_shot_parse(tmp_path):
    lines = corpus_lines()[55:65]  # English and Chinese
    csv_rows = ["id,title,text,n"] + [f'{r["_id"]},"t {i}","{r["text"]}",{i}' for i, r in enumerate(lines)]
    (tmp_path / "a.csv").write_bytes("\r\n".join(csv_rows).encode("gbk", errors="ignore"))
    (tmp_path / "b.tsv").write_text("key\tbody\n" + "\n".join(f"k{i}\t\"{r['text']}" for i, r in enumerate(lines)),
                                    encoding="utf-8-sig")
    write_jsonl(tmp_path / "c.jsonl", [{"doc_id": f"j{i}", "content": r["text"], "lang": "x"} for i, r in
                                       enumerate(lines)])
    (tmp_path / "notes.bin").write_bytes(b"skipped")
    for name in ("a.csv", "b.tsv", "c.jsonl"):
        one = parse_path(tmp_path / name)
        for size in (1, 3, 100):
            stream = open_stream(tmp_path / name, batch_size=size)
            assert [d for b in stream.batches() for d in b] == one.documents
            assert (stream.total, stream.encoding, stream.format) == (10, one.encoding, one.format)
            assert stream.notes == one.notes  # the column notes, decided from the first batch
    folder = open_stream(tmp_path, batch_size=4)
    documents = [d for b in folder.batches() for d in b]
    assert documents == parse_path(tmp_path).documents
    assert [len(b) for b in folder.batches()] == [4] * 7 + [2]  # batches span files
    assert folder.total == 30 and folder.format == "mixed" and folder.encoding is None
    assert "skipped unsupported files: notes.bin" in folder.notes
    assert "a.csv: gbk, 10 documents" in folder.notes


def test_a_problem_in_a_later_batch_is_named_by_its_line(tmp_path):
    items: list = [{"id": f"d{i}", "text": f"text {i}"} for i in range(12)]
    items[9] = ["not an object"]
    path = write_jsonl(tmp_path / "bad.jsonl", items)
    stream = open_stream(path, batch_size=4)
    batches = stream.batches()
    assert [d.id for d in next(batches)] == ["d0", "d1", "d2", "d3"]
    next(batches)
    with pytest.raises(IngestError) as caught:
        next(batches)
    assert str(caught.value).startswith("bad.jsonl: 1 problem(s); nothing was loaded")
    assert caught.value.problems == ["line 10: expected an object, got an array"]


def test_files_are_surveyed_before_any_batch(tmp_path):
    (tmp_path / "open.csv").write_text('id,text\na,fine\nb,"never closed\nc,x\n', encoding="utf-8")
    with pytest.raises(IngestError, match=r"open\.csv: line 3: a quoted cell opened in this record is never closed"):
        open_stream(tmp_path / "open.csv")
    (tmp_path / "latin.jsonl").write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9 \xff"}\n')
    with pytest.raises(IngestError) as caught:
        open_stream(tmp_path / "latin.jsonl")
    assert str(caught.value) == (
        "latin.jsonl: the file is not UTF-8, GBK or GB18030 text: UTF-8 decoding failed at byte offset 28 "
        "(line 2, byte 0xe9); save it as UTF-8 and try again")
    with pytest.raises(IngestError) as one_shot:
        parse_path(tmp_path / "latin.jsonl")
    assert str(one_shot.value) == str(caught.value)
    (tmp_path / "empty.jsonl").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(IngestError, match=r"^empty\.jsonl: the file is empty$"):
        open_stream(tmp_path / "empty.jsonl")
    with pytest.raises(IngestError, match="batch size must be a whole number"):
        open_stream(tmp_path / "open.csv", batch_size=0)


def test_the_language_is_that_of_every_document_not_the_first_batch():
    stream = open_stream(XQUAD, batch_size=50)  # the first 50 paragraphs are all English
    first = next(stream.batches())
    assert stream_language(open_stream(XQUAD, batch_size=len(first))) == "mixed"
    reports = []
    assert stream_language(stream, lambda *r: reports.append(r)) == "mixed"
    assert reports == [("reading", 50, 120), ("reading", 100, 120), ("reading", 120, 120)]


def test_throughput_text_gives_docs_per_second_and_time_left():
    times = iter([100.0, 102.0, 104.0])
    rate = Throughput(clock=lambda: next(times))
    assert rate.text(0, 1000) == "0 of 1,000 documents"
    assert rate.text(100, 1000) == "100 of 1,000 documents · 50.0 docs/s · about 18 s left"
    assert rate.text(1000, 0) == "1,000 documents · 250 docs/s"  # total unknown: no time left
    assert [duration(s) for s in (37.4, 245, 7620)] == ["37 s", "4 min 05 s", "2 h 07 min"]


# ---- the pipeline: one transaction over every batch ---------------------------------------------
def rows_by_id(store: Store, name: str) -> dict[str, dict]:
    return {r["id"]: r for r in store.table(name).to_arrow().to_pylist()}


def graph(store: Store, name: str) -> dict[str, list]:
    tables = store.graph_tables(name)
    return {kind: sorted(json.dumps(r, sort_keys=True) for r in tables[kind].to_pylist()) for kind in GRAPH_KINDS}


def snapshot(store: Store, name: str):
    if name not in store.collection_names():
        return "absent", sorted(t for t in store.table_names() if t == name or t.endswith(f"__{name}"))
    return store.info(name), store.table(name).to_arrow().sort_by("id").to_pylist(), graph(store, name)


def test_a_streamed_ingest_holds_what_a_one_shot_ingest_holds(tmp_path, monkeypatch):
    store = Store(str(tmp_path / "db"))
    one = create_collection(store, "one", parse_path(XQUAD), model=MINILM)
    reports, tokenised_in = [], []
    tokenise = pipeline.document_records
    monkeypatch.setattr(pipeline, "document_records", lambda *a: (
        tokenised_in.append(threading.current_thread().name), tokenise(*a))[1])
    two = ingest_stream(store, "two", open_stream(XQUAD, batch_size=50), model=MINILM,
                        progress=lambda *r: reports.append(r))
    assert tokenised_in == ["ingest-tokenise"] * 3  # batches tokenised beside the embedding (overlap.py)
    # A stream one step after the other (no overlap) stores exactly what it stores with the overlap:
    # 10 paragraphs (5 English, their 5 Chinese translations) in three batches, not the 120 again.
    small = write_jsonl(tmp_path / "small.jsonl", [{"id": r["_id"], "text": r["text"]} for r in
                                                   corpus_lines()[55:60] + corpus_lines()[115:120]])
    four = ingest_stream(store, "four", open_stream(small, batch_size=4), model=MINILM)
    monkeypatch.setattr(pipeline, "AHEAD", 0)
    tokenised_in.clear()
    three = ingest_stream(store, "three", open_stream(small, batch_size=4), model=MINILM)
    assert tokenised_in == [threading.current_thread().name] * 3
    assert (three.documents, three.truncated) == (four.documents, four.truncated) == (10, 2)
    assert list(rows_by_id(store, "three").items()) == list(rows_by_id(store, "four").items())  # vectors to the bit
    assert graph(store, "three") == graph(store, "four")
    assert ("ingesting", 50, 120) in reports and ("ingesting", 100, 120) in reports
    assert reports[-1] == ("ingesting", 120, 120)
    assert (two.documents, two.truncated, two.window) == (one.documents, one.truncated, one.window) == (120, 13, 256)
    a, b = rows_by_id(store, "one"), rows_by_id(store, "two")
    assert list(a) == list(b)  # same ids in the same storage order
    for doc_id in a:
        va, vb = np.array(a[doc_id].pop("vector")), np.array(b[doc_id].pop("vector"))
        # Same model, same texts; only the padding of the encoder's sub-batches differs.
        assert np.allclose(va, vb, atol=1e-5), doc_id
        assert a[doc_id] == b[doc_id]
    assert graph(store, "one") == graph(store, "two")
    ignore = {"name", "display_name", "created", "updated"}
    assert {k: v for k, v in vars(one.info).items() if k not in ignore} == \
           {k: v for k, v in vars(two.info).items() if k not in ignore}
    assert store.info("two").doc_count == 120 and store.info("two").truncated == 13
    assert len(store.table("two").list_versions()) >= 4  # three batches and the index, one write
    assert store.table("two").search("pro bowl", query_type="fts").limit(1).to_list()  # BM25 index built


@pytest.fixture(scope="module")
def paragraphs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("streams")
    return write_jsonl(folder / "ten.jsonl", [{"id": r["_id"], "text": r["text"]} for r in corpus_lines()[:10]])


def test_an_id_repeated_in_a_later_batch_writes_nothing(tmp_path, paragraphs):
    store = Store(str(tmp_path / "db"))
    items = [json.loads(line) for line in paragraphs.read_text(encoding="utf-8").splitlines()]
    items[7]["id"] = items[1]["id"]  # batch 4 of 2 repeats an id of batch 1
    path = write_jsonl(tmp_path / "dup.jsonl", items)
    with pytest.raises(IngestError) as caught:
        ingest_stream(store, "c", open_stream(path, batch_size=2), model=MINILM)
    assert str(caught.value).startswith("Documents rejected; nothing was written")
    assert caught.value.problems == ["id 'en-002' appears more than once"]
    assert snapshot(store, "c") == ("absent", [])
    assert not list(store.lock_dir.glob("*.journal.json"))
    # An existing collection: exactly as before, also its graph tables.
    ingest_stream(store, "c", open_stream(paragraphs, batch_size=100), model=MINILM)
    before = snapshot(store, "c")
    items = [{"id": f"new-{i}", "text": r["text"]} for i, r in enumerate(corpus_lines()[:6])]
    items[5]["id"] = "new-0"
    with pytest.raises(IngestError, match="Documents rejected"):
        ingest_stream(store, "c", open_stream(write_jsonl(tmp_path / "add.jsonl", items), batch_size=2), add=True)
    assert snapshot(store, "c") == before


def test_an_id_already_stored_refuses_the_whole_add(tmp_path, paragraphs):
    store = Store(str(tmp_path / "db"))
    ingest_stream(store, "c", open_stream(paragraphs, batch_size=4), model=MINILM)
    before = snapshot(store, "c")
    items = [{"id": f"x{i}", "text": f"another paragraph number {i}"} for i in range(6)] + \
            [{"id": "en-003", "text": "a new text under a stored id"}]
    with pytest.raises(IngestError) as caught:
        ingest_stream(store, "c", open_stream(write_jsonl(tmp_path / "x.jsonl", items), batch_size=3), add=True)
    assert str(caught.value).startswith("1 document id(s) already exist in 'c'; nothing was added")
    assert snapshot(store, "c") == before
    added = ingest_stream(store, "c", open_stream(write_jsonl(tmp_path / "y.jsonl", items[:6]), batch_size=4),
                          add=True)
    assert added.info.doc_count == 16 and added.documents == 6
    assert set(rows_by_id(store, "c")) == {f"en-{i:03d}" for i in range(1, 11)} | {f"x{i}" for i in range(6)}
    assert {json.loads(r)["event_id"] for r in graph(store, "c")["event_times"]} == set(rows_by_id(store, "c"))


def test_the_cli_streams_with_a_progress_bar_on_stderr(tmp_path, paragraphs, capsys):
    db = str(tmp_path / "db")
    assert cli.main(["--db", db, "ingest", str(paragraphs), "--collection", "c", "--batch-size", "3",
                     "--model", MINILM]) == 0
    err = capsys.readouterr().err
    assert "found 10 documents (jsonl, encoding utf-8); ingesting in batches of 3" in err
    assert "ingesting: 100%" in err and "10/10" in err and "doc/s" in err
    assert ("collection c: 10 documents, model all-MiniLM-L6-v2 (384-d), cross-lingual vectors "
            "multilingual-e5-small, language en;") in err
    assert Store(db).info("c").doc_count == 10


def test_a_first_load_of_the_models_is_reported_before_it_happens(tmp_path, monkeypatch):
    """A model's first load (and, on a new machine, its int8 export) takes seconds: the bar says
    so first; once loaded, nothing is said."""
    from retrieval.indexing.pipeline import LOADING
    from retrieval.models import embed

    corpus = parse_path(XQUAD)
    corpus.documents = corpus.documents[:3]
    store = Store(str(tmp_path / "db"))
    monkeypatch.setattr(embed, "_encoders", {})  # nothing loaded in this process yet
    reports = []
    create_collection(store, "first", corpus, model=MINILM, cross_lingual=False,
                      progress=lambda *r: reports.append(r))
    assert reports[0] == (LOADING, 0, 0) == ("loading the embedding models", 0, 0)
    assert reports.count((LOADING, 0, 0)) == 1 and embed.is_loaded(MINILM)
    reports.clear()
    create_collection(store, "second", corpus, model=MINILM, cross_lingual=False,
                      progress=lambda *r: reports.append(r))
    assert reports and (LOADING, 0, 0) not in reports
