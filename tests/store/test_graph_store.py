"""The entity graph tables written at ingest (retrieval/store/database.py): all or nothing, dropped by
clear and delete, counts merged by add. Real LanceDB, real models."""

import pytest

from retrieval.indexing.pipeline import add_documents, create_collection
from retrieval.store import GRAPH_KINDS, Store, aux_table_name
from retrieval.text.chunking import chunk_markdown
from retrieval.types import Document, IngestError, ParsedCorpus

DOC = """## 官渡
公元200年，曹操在官渡击败袁绍。

## 赤壁
公元208年，曹操在赤壁败给周瑜。
"""


def snapshot(store, name):
    tables = store.graph_tables(name)
    return None if tables is None else {k: sorted(map(str, t.to_pylist())) for k, t in tables.items()}

@pytest.fixture
def store(tmp_path):
    store = Store(str(tmp_path))
    create_collection(store, "hist", ParsedCorpus(chunk_markdown(DOC, "hist")))
    return store

def test_create_writes_three_tables(store):
    tables = store.graph_tables("hist")
    entities = {r["id"]: r for r in tables["entities"].to_pylist()}
    assert entities["person:曹操"] == {"id": "person:曹操", "type": "person", "name": "曹操",
                                       "normalized_name": "曹操", "event_count": 2}
    assert entities["time:200年"]["name"] == "公元200年"
    links = {(r["event_id"], r["entity_id"]) for r in tables["event_entities"].to_pylist()}
    assert ("hist#1", "person:周瑜") in links and ("hist#0", "person:周瑜") not in links
    assert [r["date_source"] for r in tables["event_times"].to_pylist()] == ["ingest", "ingest"]

def test_add_merges_counts_and_appends_links(store):
    add_documents(store, "hist", ParsedCorpus([Document("extra", "曹操在许昌休整。", metadata={"date": "2020-01-02"})]))
    tables = store.graph_tables("hist")
    entities = {r["id"]: r for r in tables["entities"].to_pylist()}
    assert entities["person:曹操"]["event_count"] == 3 and entities["person:袁绍"]["event_count"] == 1
    times = {r["event_id"]: (r["date"], r["date_source"]) for r in tables["event_times"].to_pylist()}
    assert times["extra"] == ("2020-01-02", "metadata:date")

def test_failed_add_leaves_collection_and_tables_unchanged(store, monkeypatch):
    before, version = snapshot(store, "hist"), store.version("hist")
    # rejected before any write (an id clash)
    with pytest.raises(IngestError):
        add_documents(store, "hist", ParsedCorpus([Document("hist#0", "曹操又来了。")]))
    assert snapshot(store, "hist") == before
    # failing after the tables were written: everything is restored
    def fail(info):
        raise RuntimeError("catalogue write failed")

    monkeypatch.setattr(store, "write_info", fail)
    with pytest.raises(RuntimeError):
        add_documents(store, "hist", ParsedCorpus([Document("new", "孙权在建业称帝。")]))
    assert snapshot(store, "hist") == before
    assert store.column("hist", ["id"]).column("id").to_pylist() == ["hist#0", "hist#1"]
    assert store.version("hist") > version  # restored by a new version, as LanceDB does

def test_failed_create_leaves_no_tables(tmp_path, monkeypatch):
    store = Store(str(tmp_path))
    monkeypatch.setattr(store, "write_info", lambda info: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError):
        create_collection(store, "gone", ParsedCorpus(chunk_markdown(DOC, "gone")))
    assert store.table_names() == [] or set(store.table_names()) <= {"_catalogue"}

def test_clear_and_delete_drop_the_graph_tables(store):
    names = {aux_table_name("hist", k) for k in GRAPH_KINDS}
    assert names <= set(store.table_names())
    store.clear("hist")
    assert not names & set(store.table_names()) and store.graph_tables("hist") is None
    add_documents(store, "hist", ParsedCorpus([Document("again", "周瑜在巴丘病逝。")]))
    assert {r["event_id"] for r in store.graph_tables("hist")["event_entities"].to_pylist()} == {"again"}
    store.delete("hist")
    assert not names & set(store.table_names())

def test_add_to_a_collection_from_before_the_graph_indexes_old_documents(store):
    for kind in GRAPH_KINDS:
        store.db.drop_table(aux_table_name("hist", kind))
    add_documents(store, "hist", ParsedCorpus([Document("extra", "曹操在许昌休整。")]))
    tables = store.graph_tables("hist")
    entities = {r["id"]: r for r in tables["entities"].to_pylist()}
    assert entities["person:曹操"]["event_count"] == 3
    assert {r["event_id"] for r in tables["event_times"].to_pylist()} == {"hist#0", "hist#1", "extra"}
