"""Edges that used to be silent: an empty query, a query BM25 cannot index, a small ingest's rate."""

from __future__ import annotations

import pytest

from retrieval.cli import ingest_rate, main
from retrieval.config import SearchConfig
from retrieval.ingest import parse_bytes
from retrieval.pipeline import create_collection
from retrieval.sources.base import run_source
from retrieval.sources.bm25 import NO_TERMS, RankBM25Source
from retrieval.store import Store
from retrieval.tokenize import tokenize
from retrieval.workbench import Workbench

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
    from ui.results import removed_summary

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
