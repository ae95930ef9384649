"""A newcomer's first hour in AppTest: evaluation caches kept apart from the collections (Home and
Corpus) and deleted in one confirmed step; missing ranks read "—"; an empty or stopword-only query
says why it finds nothing; a collection named in Chinese; documents longer than the encoder's
window counted at ingest and in the Corpus stats."""

from __future__ import annotations

import pytest
from conftest import APP, TIMEOUT, open_page, plain
from streamlit.testing.v1 import AppTest

from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_bytes
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


# ---- a collection named in any script ----------------------------------------------------------
TEA = "id,text\nt1,龙井茶产于浙江杭州西湖，是著名的绿茶。\nt2,普洱茶产于云南，是一种发酵茶。\n".encode()
CHINESE_TABLE = "c-bcbf6ef0"  # "c-" + sha1("中文集合")[:8] (tests/store/test_names.py)


@pytest.fixture
def empty_db(tmp_path, monkeypatch):
    db = tmp_path / "db"
    store = Store(str(db))
    create_collection(store, "notes", parse_bytes(NOTES, "notes.csv"), model="all-MiniLM-L6-v2")
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    return store


def ingest_on_the_corpus_page(at: AppTest, name: str, data: bytes, file_name: str) -> AppTest:
    at.file_uploader(key="corpus.files").set_value([(file_name, data, "text/csv")]).run()
    at.text_input(key="corpus.new_name").set_value(name)
    at.selectbox(key="corpus.model").set_value("all-MiniLM-L6-v2")
    at.button(key="corpus.ingest").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def test_a_collection_named_in_chinese_is_created_and_shown_by_its_name(empty_db):
    at = ingest_on_the_corpus_page(open_fresh(CORPUS), "中文集合", TEA, "tea.csv")
    assert [plain(s.value) for s in at.success] == [
        "Ingested 2 documents: collection '中文集合' now holds 2 (all-MiniLM-L6-v2, language zh; "
        "cross-lingual vectors multilingual-e5-small)."]
    assert empty_db.info(CHINESE_TABLE).display_name == "中文集合"
    picker = at.selectbox(key="view.collection")
    assert picker.value == CHINESE_TABLE  # the new collection is selected, by its table name
    assert picker.options == ["notes", "中文集合"]  # and shown by its display name
    frame = at.dataframe[0].value
    assert list(zip(frame["collection"], frame["table"], strict=True)) == [("notes", "notes"),
                                                                           ("中文集合", CHINESE_TABLE)]
    assert at.selectbox(key="corpus.manage").options == ["notes", "中文集合"]
    # Home lists it by name; a link may name it by its display name
    home = open_fresh()
    assert list(home.dataframe[0].value["collection"]) == ["notes", "中文集合"]
    linked = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    linked.query_params["collection"] = "中文集合"
    linked.run()
    assert not linked.exception and linked.selectbox(key="view.collection").value == CHINESE_TABLE
    # the same name again is refused and nothing changes
    at.text_input(key="corpus.new_name").set_value(" 中文集合 ")
    at.button(key="corpus.ingest").click().run()
    assert [plain(e.value) for e in at.error] == ["Collection '中文集合' already exists: add to it, or delete it first"]
    assert empty_db.collection_names() == [CHINESE_TABLE, "notes"]


def test_a_display_name_with_markdown_is_shown_literally(empty_db):
    name = "**Bold** [x](https://evil.example)"
    at = ingest_on_the_corpus_page(open_fresh(CORPUS), name, TEA, "tea.csv")
    message = at.success[0].value
    assert "](https://" not in message and "\\*\\*Bold" in message  # escaped Markdown
    assert plain(message).startswith(f"Ingested 2 documents: collection '{name}' now holds 2")
    assert empty_db.info("bold-x-https-evil-example").display_name == name


# ---- documents longer than the encoder's window -------------------------------------------------
def words(n: int) -> bytes:
    return " ".join(["word"] * n).encode()


# MiniLM: n words are n + 2 tokens; 254 fit in its 256-token window, 255 and 3000 do not.
LONG_CSV = (b"id,text\nshort,A short note\nfits," + words(254) + b"\nover," + words(255) + b"\nhuge,"
            + words(3000) + b"\n")
TRUNCATED = ("2 of 4 documents are longer than the encoder's 256-token window and were embedded from their "
             "first 256 tokens; BM25 indexes all of their text")


def test_truncated_documents_are_counted_at_ingest_and_in_the_corpus_stats(empty_db):
    at = ingest_on_the_corpus_page(open_fresh(CORPUS), "long-docs", LONG_CSV, "long.csv")
    assert [plain(s.value) for s in at.success] == [
        f"Ingested 4 documents: collection 'long-docs' now holds 4 (all-MiniLM-L6-v2, language en; "
        f"cross-lingual vectors multilingual-e5-small). {TRUNCATED}."]
    frame = at.dataframe[0].value
    assert dict(zip(frame["table"], frame["truncated"], strict=True)) == {"long-docs": 2, "notes": 0}
    assert [plain(c.value) for c in at.caption if "token window" in c.value] == [f"long-docs: {TRUNCATED}"]
    # adding one more long document adds to the count
    at.radio(key="corpus.target").set_value("existing collection").run()
    at.selectbox(key="corpus.add_to").set_value("long-docs")
    at.file_uploader(key="corpus.files").set_value([("more.csv", b"id,text\nmore," + words(400) + b"\n",
                                                     "text/csv")]).run()
    at.button(key="corpus.ingest").click().run()
    assert not at.error, [e.value for e in at.error]
    assert [plain(s.value) for s in at.success] == [
        "Added 1 documents: collection 'long-docs' now holds 5 (all-MiniLM-L6-v2, language en; cross-lingual vectors "
        "multilingual-e5-small). 1 of 1 document "
        "is longer than the encoder's 256-token window and was embedded from its first 256 tokens; BM25 indexes "
        "all of its text."]
    assert [plain(c.value) for c in at.caption if "token window" in c.value] == [
        "long-docs: 3 of 5 documents are longer than the encoder's 256-token window and were embedded from their "
        "first 256 tokens; BM25 indexes all of their text"]


def test_an_emptied_collection_says_it_has_no_documents(cache_db):
    """After a clear, Search says what to do, not "dense failed … cannot reshape"."""
    cache_db.clear("notes")
    at = open_fresh(SEARCH)
    at.sidebar.selectbox(key="view.collection").set_value("notes").run()
    at.text_input(key="view.query").set_value("green tea").run()
    errors = [e.value for e in at.error]
    assert any("'notes' has no documents — add some on the Corpus page" in plain(e) for e in errors), errors
    assert not any("reshape" in e or "failed" in e for e in errors)


def test_the_empty_query_hint_names_queries_of_the_current_collection(cache_db):
    """Not the sample's questions: the collection's own query set, else its first titles."""
    create_collection(cache_db, "teas", parse_bytes(b"id,title,text\nt1,Green tea from Japan,Steamed leaves\n"
                                                    b"t2,Pu-erh,Fermented for years\n", "teas.csv"))
    at = open_fresh(SEARCH)
    at.sidebar.selectbox(key="view.collection").set_value("teas").run()
    hints = [plain(i.value) for i in at.info if i.value.startswith("Type a query")]
    assert hints == ["Type a query above to see results. For this collection, try “Green tea from Japan” or "
                     "“Pu-erh”."]
    from retrieval.judging.judgments import JudgmentStore

    JudgmentStore(cache_db).save_query_set("teas", "mine", {"q1": "which tea is fermented"})
    at = open_fresh(SEARCH)
    at.sidebar.selectbox(key="view.collection").set_value("teas").run()
    assert any(plain(i.value) == "Type a query above to see results. For this collection, try “which tea is "
                                 "fermented”." for i in at.info)
