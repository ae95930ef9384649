"""The graph source during a write: a streamed add holds the collection's writer lock until it
ends, and the graph index is read meanwhile without waiting for it (`sources.graph.load_index`);
what it reads then is keyed by a marked state (`Store.state_key`), never served after the write."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from model_free import FixedEncoder, new_info

from retrieval.indexing.derive import document_rows, graph_rows
from retrieval.indexing.writer import Batch, open_write, write_batches
from retrieval.sources.graph import load_index
from retrieval.store import Store
from retrieval.store.database import WRITING_MARK
from retrieval.types import Document

TEXTS = ["200年，曹操在官渡击败袁绍。", "208年，曹操在赤壁败给周瑜。",
         "210年，周瑜在巴丘病逝。", "234年，诸葛亮在渭南病逝。"]


def batch(ids: range) -> Batch:
    docs = [Document(f"d{i}", TEXTS[i % len(TEXTS)]) for i in ids]
    return Batch(document_rows(docs, FixedEncoder()), graph_rows(docs, datetime.now(UTC)))


def people(index, doc_id: str) -> set:
    return set(index.entities[doc_id].get("person", ()))


def test_a_graph_read_does_not_wait_for_a_write_and_is_not_served_after_it(tmp_path):
    store = Store(str(tmp_path / "db"))
    info = new_info("g", "zh")
    write_batches(store, info, True, [batch(range(2))])
    before = store.state_key("g")
    assert not before[0].endswith(WRITING_MARK)
    assert people(load_index(store, "g"), "d1") == {"曹操", "周瑜"}

    appended, release, failed = threading.Event(), threading.Event(), []

    def add() -> None:  # a streamed add: the lock held between its batches
        try:
            with open_write(store, store.info("g"), False) as writer:
                writer.append(batch(range(2, 4)))
                appended.set()
                release.wait(60)
        except BaseException as exc:  # reported by the asserts below
            failed.append(exc)
            appended.set()

    writer_thread = threading.Thread(target=add)
    writer_thread.start()
    try:
        assert appended.wait(60) and not failed
        during = store.state_key("g")
        assert during == (before[0] + WRITING_MARK, during[1]) and during[1] > before[1]
        assert store.table_at("g", during).count_rows() == 4  # a marked state reads as any other

        read: list = []
        reader = threading.Thread(target=lambda: read.append(load_index(store, "g")))
        reader.start()
        reader.join(30)
        assert read, "the graph index waited for the write"
        (mid,) = read
        # The batch's rows and entity links are committed; the entities table is written when the
        # write ends, so a new document's link to an entity the collection had (周瑜) is found,
        # one to a new entity (诸葛亮) is not yet.
        assert sorted(mid.ids) == ["d0", "d1", "d2", "d3"]
        assert people(mid, "d1") == {"曹操", "周瑜"} and people(mid, "d2") == {"周瑜"}
        assert people(mid, "d3") == set()
    finally:
        release.set()
        writer_thread.join(60)
    assert not failed
    after = store.state_key("g")
    assert after[0] == before[0] and after != during  # the mid-write index's key is not current
    index = load_index(store, "g")
    assert people(index, "d2") == {"周瑜"} and people(index, "d3") == {"诸葛亮"}


def test_an_add_to_a_collection_without_graph_tables_moves_its_version_before_writing_them(tmp_path, monkeypatch):
    """Ingested before the entity tables existed: an add first writes them for the stored
    documents (`CollectionWriter.start`), after moving the collection's version, so a state key
    read before the add is never current again once a graph table has changed."""
    from retrieval.indexing import writer as writer_module

    store = Store(str(tmp_path / "db"))
    info = new_info("old", "zh")
    write_batches(store, info, True, [batch(range(2))])
    for kind in ("entities", "event_entities", "event_times"):
        store.db.drop_table(f"_{kind}__old")
    before = store.state_key("old")
    seen: list[int] = []
    write_graph_rows = writer_module.CollectionWriter._graph

    def recorded(self, rows):
        seen.append(store.db.open_table("old").version)
        return write_graph_rows(self, rows)

    monkeypatch.setattr(writer_module.CollectionWriter, "_graph", recorded)
    stored = [Document(f"d{i}", TEXTS[i]) for i in range(2)]
    with open_write(store, store.info("old"), False,
                    legacy_graph_rows=lambda: graph_rows(stored, datetime.now(UTC))) as writer:
        writer.append(batch(range(2, 4)))
    assert len(seen) == 2 and seen[0] > before[1]  # the stored documents' graph rows, then the batch's
    index = load_index(store, "old")
    assert index.from_tables and people(index, "d1") == {"曹操", "周瑜"} and people(index, "d3") == {"诸葛亮"}
