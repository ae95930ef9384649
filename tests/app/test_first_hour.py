"""A newcomer's first hour in AppTest: evaluation caches kept apart from the collections (Home and
Corpus) and deleted in one confirmed step; missing ranks read "—"; an empty or stopword-only query
says why it finds nothing."""

from __future__ import annotations

import pytest
from conftest import APP, TIMEOUT, open_page, plain
from streamlit.testing.v1 import AppTest

from retrieval.ingest import parse_bytes
from retrieval.pipeline import create_collection
from retrieval.sources.bm25 import NO_TERMS
from retrieval.store import Store

CORPUS = "pages/4_Corpus.py"
SEARCH = "pages/1_Search.py"
CACHES = ["eval-nfcorpus-0123456789", "eval-xquad-en-abcdef0123"]
NOTES = b"id,text\nn1,Green tea is steamed soon after picking\nn2,Coffee beans are roasted seeds\n"


@pytest.fixture
def cache_db(tmp_path, monkeypatch):
    """A database of its own: one collection and two evaluation caches (the names `python -m
    retrieval evaluate` gives), so the shared test collection's pages are not changed."""
    db = tmp_path / "db"
    store = Store(str(db))
    corpus = parse_bytes(NOTES, "notes.csv")
    for name in ["notes", *CACHES]:
        create_collection(store, name, corpus)
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    return store


def open_fresh(page: str | None = None) -> AppTest:
    """A new session on the current WORKBENCH_DB, with no link (so no collection is named)."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def cache_expander(at: AppTest):
    found = [e for e in at.expander if e.label.startswith("Evaluation caches")]
    return found[0] if found else None


@pytest.mark.parametrize("page", [None, CORPUS], ids=["home", "corpus"])
def test_evaluation_caches_are_apart_and_deleted_in_one_confirmed_step(cache_db, page):
    at = open_fresh(page)
    listed = list(at.dataframe[0].value["collection"])
    assert listed == ["notes"], "the collections table leaves the caches out"
    expander = cache_expander(at)
    assert expander is not None and expander.label == "Evaluation caches (2)"
    assert list(expander.dataframe[0].value["cache"]) == CACHES
    assert list(expander.dataframe[0].value["documents"]) == [2, 2]
    # the sidebar picker keeps them, last
    assert at.selectbox(key="view.collection").options == ["notes", *CACHES]

    at.button(key="corpus.caches_delete").click().run()
    assert any("Really delete 2 evaluation caches?" in w.value for w in at.warning)
    assert sorted(cache_db.collection_names()) == sorted(["notes", *CACHES]), "nothing deleted before the yes"
    at.button(key="corpus.caches_confirm").click().run()
    assert not at.exception
    assert cache_db.collection_names() == ["notes"]
    assert any(plain(s.value) == "Deleted 2 evaluation caches." for s in at.success)
    assert cache_expander(at) is None
    assert at.selectbox(key="view.collection").options == ["notes"]


def test_cancel_keeps_the_evaluation_caches(cache_db):
    at = open_fresh(CORPUS)
    at.button(key="corpus.caches_delete").click().run()
    at.button(key="corpus.caches_cancel").click().run()
    assert not at.exception and not any("Really delete" in w.value for w in at.warning)
    assert sorted(cache_db.collection_names()) == sorted(["notes", *CACHES])
    # the delete/clear picker and the add-to picker list them last too
    assert at.selectbox(key="corpus.manage").options == ["notes", *CACHES]


def test_missing_ranks_read_a_dash_in_the_results_table():
    at = open_page(SEARCH, q="Panthers defense points")
    table = at.dataframe[0]
    assert table.proto.placeholder == "—"
    frame = table.value
    assert frame["BM25 rank"].dtype == "Int64" and frame["BM25 score"].dtype == "float64"  # still sortable numbers


def test_a_stopword_query_says_bm25_found_no_terms():
    at = open_page(SEARCH, q="the of and")
    warnings = [plain(w.value) for w in at.warning]
    assert "bm25 returned no candidates" in warnings
    assert f"bm25: {NO_TERMS}" in warnings  # "… BM25 found no terms to match"
