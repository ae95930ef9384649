"""Home: the description, the page links, the collections; the first-run sample ingest."""

import json

from conftest import APP, TIMEOUT, open_page
from streamlit.testing.v1 import AppTest

from retrieval.store import Store


def test_home_describes_the_tool_and_lists_collections(app_db):
    at = open_page()
    assert at.title[0].value.endswith("Search relevance workbench")
    assert "BM25" in at.markdown[0].value and "vector" in at.markdown[0].value
    assert [link.proto.page for link in at.get("page_link")] == [
        "Search", "Compare", "Distributions", "Corpus", "Evaluate", "Graph"]
    assert app_db.collection in list(at.dataframe[0].value["collection"])
    assert at.selectbox(key="view.collection").value == app_db.collection
    assert at.selectbox(key="view.collection").help
    assert at.query_params["collection"] == app_db.collection


def test_first_run_ingests_the_bundled_sample(tmp_path, monkeypatch):
    sample = tmp_path / "sample"
    (sample / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": "", "text": text} for i, text in enumerate(
        ["The Panthers defense gave up just 308 points.", "Denver won the Super Bowl.", "Tea is a drink."])]
    (sample / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    (sample / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "Panthers points"}))
    (sample / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td0\t1\n")
    db = tmp_path / "empty-db"
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    monkeypatch.setenv("WORKBENCH_SAMPLE", str(sample))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    assert not at.exception and not at.error
    store = Store(str(db))
    assert store.info("sample-xquad").doc_count == 3
    assert at.selectbox(key="view.collection").value == "sample-xquad"
    assert any("sample-xquad" in t.value for t in at.toast)
    # a second session finds it there and does nothing more
    version = store.version("sample-xquad")
    at2 = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    assert store.version("sample-xquad") == version and not at2.toast
