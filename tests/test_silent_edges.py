"""Edges that used to be silent: an empty query, a query BM25 cannot index, a small ingest's rate,
documents longer than the encoder's token window."""

from __future__ import annotations

import pytest

from retrieval.cli.common import ingest_rate
from retrieval.cli.main import main
from retrieval.indexing.pipeline import add_documents, create_collection, truncation_note
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.models.embed import MINILM, load_encoder
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.sources.base import run_source
from retrieval.sources.bm25 import NO_TERMS, RankBM25Source
from retrieval.store import Store
from retrieval.text.tokenize import tokenize

ANIMALS = (b"id,text\ncow,The cow gives milk on the farm\nowl,An owl hunts mice at night\n"
           b"dog,A dog guards the farm and the house\n")


@pytest.fixture(scope="module")
def workbench(tmp_path_factory):
    wb = Workbench(Store(str(tmp_path_factory.mktemp("lancedb"))))
    create_collection(wb.store, "animals", parse_bytes(ANIMALS, "animals.csv"))
    return wb


def test_a_source_that_returns_nothing_says_why():
    source = RankBM25Source(["a", "b"], [tokenize("milk farm"), tokenize("owl night")])
    assert run_source(source, "", 10).notes == ("no query text",)
    assert run_source(source, "   ", 10).notes == ("no query text",)
    assert tokenize("the of and is") == []
    assert run_source(source, "the of and is", 10).notes == (NO_TERMS,)
    assert run_source(source, "?!", 10).notes == (NO_TERMS,)
    # terms that match nothing: no reason is invented; hits: no note
    assert run_source(source, "zebra", 10).notes == ()
    found = run_source(source, "milk", 10)
    assert [h.doc_id for h in found.hits] == ["a"] and found.notes == ()


def test_the_search_notes_name_the_reason(workbench):
    empty = workbench.search("animals", "", SearchConfig())
    assert empty.outcome.n_candidates == 0
    assert {"bm25: no query text", "dense: no query text"} <= set(empty.outcome.notes)
    from ui.search.results import removed_summary

    assert removed_summary(empty.candidates, empty.outcome, 0) == \
        "0 candidates (BM25 0, vector 0): no query text · top-K removed 0 · 0 shown"
    stopwords = workbench.search("animals", "the of and", SearchConfig())
    assert f"bm25: {NO_TERMS}" in stopwords.outcome.notes
    assert "bm25 returned no candidates" in stopwords.outcome.notes
    assert stopwords.outcome.n_candidates == 3  # the vectors still rank every animal
    assert "BM25 found no terms" in NO_TERMS


def test_ingest_rate_is_readable_for_small_and_fast_ingests():
    # by hand: 3 / 9.8 = 0.306…, 120 / 3.2 = 37.5, 3395 / 12 = 282.9…
    assert ingest_rate(3, 9.8) == "3 documents in 9.8 s, 0.3 docs/s"
    assert ingest_rate(120, 3.2) == "120 documents in 3.2 s, 37.5 docs/s"
    assert ingest_rate(3395, 12.0) == "3395 documents in 12.0 s, 283 docs/s"
    assert ingest_rate(1, 0.5) == "1 document in 0.5 s, 2.0 docs/s"
    assert ingest_rate(5, 0.002) == "5 documents in under 10 ms"


def test_the_cli_says_why_an_empty_query_finds_nothing(tmp_path, capsys):
    (tmp_path / "animals.csv").write_bytes(ANIMALS)
    db = str(tmp_path / "db")
    assert main(["--db", db, "ingest", str(tmp_path / "animals.csv"), "--collection", "animals"]) == 0
    log = capsys.readouterr().err
    assert "; 3 documents in " in log and " 0 docs/s" not in log
    assert main(["--db", db, "search", "animals", ""]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("0 candidates (no query text); removed:")
    assert "note: bm25: no query text" in out.err
    assert main(["--db", db, "search", "animals", "the of"]) == 0
    out = capsys.readouterr()
    assert f"note: bm25: {NO_TERMS}" in out.err and out.out.startswith("3 candidates; removed:")


# MiniLM's window is 256 tokens, [CLS] and [SEP] included, and "word" is one token: n words are
# n + 2 tokens, so 254 words just fit and 255 do not.
def words(n: int) -> bytes:
    return " ".join(["word"] * n).encode()


LONG_CSV = (b"id,text\nshort,A short note\nfits," + words(254) + b"\nover," + words(255) + b"\nhuge,"
            + words(3000) + b"\n")
TRUNCATED_NOTE = ("2 of 4 documents are longer than the encoder's 256-token window and were embedded from their "
                  "first 256 tokens; BM25 indexes all of their text")


def test_the_encoder_counts_what_it_truncates_at_the_window_edge():
    encoder = load_encoder(MINILM)
    assert encoder.spec.max_seq_length == 256
    texts = [words(254).decode(), words(255).decode(), words(3000).decode(), "short"]
    assert encoder.count_truncated(texts) == 2
    assert encoder.count_truncated(texts, batch_size=1) == 2  # batches add up
    assert encoder.count_truncated([]) == 0


def test_truncation_notes_read_right():
    assert truncation_note(2, 4, 256) == TRUNCATED_NOTE
    assert truncation_note(1, 120, 512) == ("1 of 120 documents is longer than the encoder's 512-token window and "
                                            "was embedded from its first 512 tokens; BM25 indexes all of its text")
    assert truncation_note(1, 1, None) == ("1 of 1 document is longer than the encoder's token window and was "
                                           "embedded from its first tokens; BM25 indexes all of its text")
    assert truncation_note(0, 4, 256) == "" and truncation_note(None, 4, 256) == ""


def test_the_pipeline_counts_truncated_documents_and_bm25_keeps_all_their_tokens(tmp_path):
    store = Store(str(tmp_path))
    result = create_collection(store, "long", parse_bytes(LONG_CSV, "long.csv"), model=MINILM)
    assert (result.documents, result.truncated, result.window) == (4, 2, 256)
    assert result.note == TRUNCATED_NOTE
    assert store.info("long").truncated == 2
    rows = store.documents("long", ["fits", "over", "huge"])
    assert [rows[i]["tokens"].count("word") for i in ("fits", "over", "huge")] == [254, 255, 3000]
    # an add counts its own documents and adds them to the collection's count
    added = add_documents(store, "long", parse_bytes(b"id,text\nmore," + words(300) + b"\nsmall,tiny\n", "m.csv"))
    assert (added.documents, added.truncated) == (2, 1)
    assert added.note.startswith("1 of 2 documents is longer than the encoder's 256-token window")
    assert (added.info.truncated, added.info.doc_count) == (3, 6)
    assert Workbench(store).truncation_note(store.info("long")) == (
        "3 of 6 documents are longer than the encoder's 256-token window and were embedded from their first 256 "
        "tokens; BM25 indexes all of their text")
    # a search for the word finds the document BM25 indexed in full, beyond the window
    found = Workbench(store).search("long", "word", SearchConfig())
    assert {h.doc_id for h in found.candidates.sources["bm25"].hits} == {"fits", "over", "huge", "more"}


def test_the_cli_says_how_many_documents_were_truncated(tmp_path, capsys):
    (tmp_path / "long.csv").write_bytes(LONG_CSV)
    db = str(tmp_path / "db")
    assert main(["--db", db, "ingest", str(tmp_path / "long.csv"), "--collection", "long", "--model", MINILM]) == 0
    assert f"note: {TRUNCATED_NOTE}\n" in capsys.readouterr().err
    assert main(["--db", db, "collections", "stats", "long"]) == 0
    out = capsys.readouterr()
    assert f"note: {TRUNCATED_NOTE}\n" in out.err
    assert '"truncated": 2' in out.out
    assert main(["--db", db, "collections"]) == 0
    assert capsys.readouterr().out.split("\t")[:4] == ["long", "long", "4 docs", "2 truncated"]
    # a corpus that fits says nothing about truncation
    (tmp_path / "animals.csv").write_bytes(ANIMALS)
    assert main(["--db", db, "ingest", str(tmp_path / "animals.csv"), "--collection", "animals"]) == 0
    assert "longer than the encoder" not in capsys.readouterr().err
