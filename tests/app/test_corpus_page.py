"""Corpus page: upload → preview → map → ingest, errors that change nothing, delete/clear
behind a confirmation, and the ingest step as a plain function."""

import pytest
from conftest import open_page, plain

from retrieval.indexing.readers.options import ParseOptions
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.types import IngestError, RetrievalError
from ui.corpus import actions as corpus

CORPUS = "pages/4_Corpus.py"
NOTES_CSV = (
    b"key,heading,body,stars\n"
    b"n1,Tea,Green tea is steamed or pan-fired soon after picking.,4\n"
    b"n2,Coffee,Coffee beans are roasted seeds of the coffee plant.,5\n"
    b"n3,Cocoa,Cocoa beans are fermented and dried before roasting.,3\n"
)


def snapshot(store: Store) -> dict:
    return {i.name: (i.doc_count, store.version(i.name)) for i in store.list_collections()}


def test_collections_table_lists_stats(app_db):
    at = open_page(CORPUS)
    frame = at.dataframe[0].value
    row = frame[frame["collection"] == app_db.collection].iloc[0]
    assert row["documents"] == app_db.n_docs
    assert row["model"] == "multilingual-e5-small"
    assert row["encoder backend"] == "onnx-int8"  # what computed its vectors (the CPU default)
    assert row["language mix"] == "en 9, zh 8"
    assert row["language"] == "mixed"


def test_upload_preview_map_and_ingest_creates_a_collection(workbench):
    at = open_page(CORPUS, why="en-001")  # a "why not" document of the collection shown before
    at.file_uploader(key="corpus.files").set_value([("notes.csv", NOTES_CSV, "text/csv")]).run()
    preview = next(d.value for d in at.dataframe if "key" in d.value.columns)  # the file's preview
    assert list(preview.columns) == ["key", "heading", "body", "stars"]
    assert list(preview["key"]) == ["n1", "n2", "n3"]
    assert at.selectbox(key="corpus.map_text").options == ["(detect)", "key", "heading", "body", "stars"]
    # before ingest: what "(detect)" picked, and a warning that ids would be generated
    assert any(plain(c.value) == "Will use: notes.csv: title ← 'heading', text ← 'body'" for c in at.caption)
    assert any(plain(w.value).startswith("notes.csv: no id column found") and "'notes-2', 'notes-3'" in plain(w.value)
               for w in at.warning)
    at.selectbox(key="corpus.map_id").set_value("key").run()
    assert any(plain(c.value) == "Will use: notes.csv: id ← 'key', title ← 'heading', text ← 'body'"
               for c in at.caption)
    assert not any("no id column" in w.value for w in at.warning)
    at.selectbox(key="corpus.map_title").set_value("heading")
    at.selectbox(key="corpus.map_text").set_value("body")
    at.text_input(key="corpus.new_name").set_value("notes")
    at.selectbox(key="corpus.model").set_value("all-MiniLM-L6-v2")
    assert at.checkbox(key="corpus.cross_lingual").value  # on by default …
    at.checkbox(key="corpus.cross_lingual").uncheck()  # … off here: one model only
    assert at.selectbox(key="corpus.graph").options == ["auto", "on", "off"]
    assert at.selectbox(key="corpus.graph").value == "auto"  # 3 records: auto is on
    at.button(key="corpus.ingest").click().run()
    assert not at.error, [e.value for e in at.error]
    assert any("Ingested 3 documents" in s.value for s in at.success)
    assert workbench.store.info("notes").graph == ""
    links = at.get("page_link")
    assert [link.proto.label for link in links] == ["Search it now"]
    assert links[0].proto.page == "Search"
    store = workbench.store
    info = store.info("notes")
    assert info.doc_count == 3 and info.model == "all-MiniLM-L6-v2" and info.xl_model == ""
    row = store.documents("notes", ["n2"])["n2"]
    assert row["title"] == "Coffee" and row["metadata"] == {"stars": 5}
    assert at.selectbox(key="view.collection").value == "notes"  # the new collection is selected …
    assert at.session_state["_workbench_view"].why is None  # … without the other one's why-not document
    frame = at.dataframe[0].value
    assert "notes" in list(frame["collection"])

    # adding the same ids again is refused and changes nothing
    before = snapshot(store)
    at.radio(key="corpus.target").set_value("existing collection").run()
    at.selectbox(key="corpus.add_to").set_value("notes")
    at.button(key="corpus.ingest").click().run()
    assert any("already exist" in e.value for e in at.error)
    assert snapshot(store) == before


def test_a_bad_file_shows_an_error_and_changes_nothing(workbench):
    store = workbench.store
    before = snapshot(store)
    at = open_page(CORPUS)
    at.file_uploader(key="corpus.files").set_value([("bad.csv", b"a,b\n1,2\n", "text/csv")]).run()
    at.text_input(key="corpus.new_name").set_value("bad-one")
    at.button(key="corpus.ingest").click().run()
    assert at.error, "a file without a text column is refused"
    assert "text column" in at.error[0].value
    assert not at.exception
    assert snapshot(store) == before and not store.exists("bad-one")


def test_an_unreadable_file_errors_in_its_preview():
    at = open_page(CORPUS)
    at.file_uploader(key="corpus.files").set_value([("empty.jsonl", b"   \n", "application/json")]).run()
    assert any("empty" in e.value for e in at.error)


def test_invalid_name_is_an_error(workbench):
    before = snapshot(workbench.store)
    at = open_page(CORPUS)
    at.file_uploader(key="corpus.files").set_value([("notes.csv", NOTES_CSV, "text/csv")]).run()
    at.text_input(key="corpus.new_name").set_value("x" * 65)
    at.button(key="corpus.ingest").click().run()
    assert any("Collection name is 65 characters long; use 1–64" in e.value for e in at.error)
    assert snapshot(workbench.store) == before


def test_clear_and_delete_need_a_confirmation(workbench):
    store = workbench.store
    corpus.ingest(workbench, [("bye.txt", b"First paragraph.\n\nSecond paragraph.")], ParseOptions(), "to-remove",
                  model="all-MiniLM-L6-v2")
    at = open_page(CORPUS)
    at.selectbox(key="corpus.manage").set_value("to-remove").run()
    at.button(key="corpus.clear").click().run()
    assert any("Really clear 'to-remove'" in plain(w.value) for w in at.warning)
    assert store.info("to-remove").doc_count == 2  # nothing happened yet
    at.button(key="corpus.cancel").click().run()
    assert store.info("to-remove").doc_count == 2
    at.button(key="corpus.clear").click().run()
    at.button(key="corpus.confirm").click().run()
    assert store.info("to-remove").doc_count == 0
    assert any("Cleared 'to-remove'" in plain(s.value) for s in at.success)
    at.selectbox(key="corpus.manage").set_value("to-remove").run()
    at.button(key="corpus.delete").click().run()
    assert store.exists("to-remove")
    at.button(key="corpus.confirm").click().run()
    assert not store.exists("to-remove")
    assert "to-remove" not in at.selectbox(key="view.collection").options


def test_ingest_step_is_a_plain_function(tmp_path):
    store = Store(str(tmp_path))
    workbench = Workbench(store)
    options = corpus.parse_options("key", "heading", "body")
    report = corpus.ingest(workbench, [("notes.csv", NOTES_CSV)], options, "fn-notes", model="all-MiniLM-L6-v2",
                           graph="off")
    assert report.info.doc_count == 3 and not report.added and report.info.graph == "off"
    assert "; entity graph off: the Graph page builds it)." in report.message
    assert not store.has_graph_tables("fn-notes")
    with pytest.raises(IngestError):
        corpus.ingest(workbench, [("notes.csv", NOTES_CSV)], options, "fn-notes", add=True)
    with pytest.raises(RetrievalError, match="already exists"):
        corpus.ingest(workbench, [("notes.csv", NOTES_CSV)], options, "fn-notes")
    with pytest.raises(RetrievalError, match="No collection named"):
        corpus.ingest(workbench, [("notes.csv", NOTES_CSV)], options, "missing", add=True)
    assert store.info("fn-notes").doc_count == 3


def test_versions_and_delete_pickers_start_at_the_sidebars_collection(workbench, app_db):
    corpus.ingest(workbench, [("a.txt", b"An early name.")], ParseOptions(), "a-first", model="all-MiniLM-L6-v2")
    at = open_page(CORPUS, collection=app_db.collection)
    assert at.selectbox(key="corpus.versions").options[0] != app_db.collection  # 'a-first' is listed first …
    assert at.selectbox(key="view.collection").value == app_db.collection
    # … but the pickers start at the collection the sidebar shows, not at the first listed
    assert at.selectbox(key="corpus.versions").value == app_db.collection
    assert at.selectbox(key="corpus.manage").value == app_db.collection
    assert corpus.index_of(["a", "b"], "b") == 1 and corpus.index_of(["a", "b"], None) == 0
    workbench.delete("a-first")


def test_versions_of_a_collection_say_what_changed(app_db):
    from retrieval.store.versions import collection_versions

    at = open_page(CORPUS)
    at.selectbox(key="corpus.versions").set_value(app_db.collection).run()
    assert not at.exception
    frame = next(d.value for d in at.dataframe if "change" in d.value.columns)
    expected = collection_versions(Store(app_db.uri), app_db.collection)
    assert list(frame["version"]) == [v.version for v in expected]
    assert list(frame["documents"]) == [v.documents for v in expected]
    assert list(frame["change"]) == [v.summary for v in expected]
    assert frame["documents"].iloc[0] == app_db.n_docs


def test_an_excel_upload_is_previewed_mapped_and_ingested(workbench):
    import io

    from openpyxl import Workbook

    book = Workbook()
    book.active.append(["sku", "name", "description", "price"])
    book.active.append(["T-1", "Green tea", "Steamed leaves from Japan", 4.5])
    book.active.append(["T-2", "Pu-erh", "Fermented for years in Yunnan", 12])
    data = io.BytesIO()
    book.save(data)
    at = open_page(CORPUS)
    assert any("Excel: .xlsx (its first sheet)" in c.value and "save as “CSV UTF-8”" in c.value for c in at.caption)
    at.file_uploader(key="corpus.files").set_value([("teas.xlsx", data.getvalue(), "application/vnd.ms-excel")]).run()
    preview = next(d.value for d in at.dataframe if "sku" in d.value.columns)
    assert list(preview["sku"]) == ["T-1", "T-2"]
    assert any(plain(c.value) == "Will use: teas.xlsx: id ← 'sku', title ← 'name', text ← 'description'"
               for c in at.caption)
    at.text_input(key="corpus.new_name").set_value("teas-xlsx")
    at.selectbox(key="corpus.model").set_value("all-MiniLM-L6-v2")
    at.checkbox(key="corpus.cross_lingual").uncheck()
    at.button(key="corpus.ingest").click().run()
    assert not at.error, [e.value for e in at.error]
    assert workbench.store.documents("teas-xlsx", ["T-2"])["T-2"]["metadata"] == {"price": 12}


def test_skip_invalid_records_loads_the_rest_and_lists_them(workbench):
    data = b"id,text\nk1,Green tea is steamed\nk2,\nk3,Coffee is roasted\n"
    at = open_page(CORPUS)
    at.file_uploader(key="corpus.files").set_value([("bad.csv", data, "text/csv")]).run()
    at.text_input(key="corpus.new_name").set_value("skipping")
    at.selectbox(key="corpus.model").set_value("all-MiniLM-L6-v2")
    at.checkbox(key="corpus.cross_lingual").uncheck()
    at.button(key="corpus.ingest").click().run()
    assert any("bad.csv: 1 problem(s); nothing was loaded" in plain(e.value) and "row 3 (id 'k2'): text is empty"
               in plain(e.value) for e in at.error), [e.value for e in at.error]
    assert any("Tick “Skip invalid records” above" in plain(c.value) for c in at.caption)
    assert not workbench.exists("skipping")
    at.checkbox(key="corpus.skip_invalid").check()
    at.button(key="corpus.ingest").click().run()
    assert not at.error, [e.value for e in at.error]
    assert any("Ingested 2 documents" in plain(s.value) and "Skipped 1 invalid record(s): bad.csv: row 3 (id 'k2'): "
               "text is empty" in plain(s.value) for s in at.success), [s.value for s in at.success]
    assert workbench.info("skipping").doc_count == 2
