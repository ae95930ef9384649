"""A write's own LanceDB connection (`Store.write_connection`): a streamed ingest commits a version
per batch, and what those commits load goes with the connection when the write ends, instead of
staying in the caches the searches read through."""

from __future__ import annotations

import gc
import weakref
from datetime import UTC, datetime

import lancedb
import pyarrow as pa
from model_free import FixedEncoder, new_info

from retrieval import limits
from retrieval.indexing.derive import document_rows, graph_rows
from retrieval.indexing.writer import Batch, write_batches
from retrieval.store import Store
from retrieval.types import Document


def test_it_opens_the_same_database_with_small_caches_of_its_own(tmp_path, monkeypatch):
    store = Store(str(tmp_path / "db"))
    sessions: list[tuple[lancedb.Session, dict]] = []
    new_session = lancedb.Session

    def recorded(**sizes):
        session = new_session(**sizes)
        sessions.append((session, sizes))
        return session

    monkeypatch.setattr(lancedb, "Session", recorded)
    connection = store.write_connection()
    ((session, sizes),) = sessions  # LanceDB's connection does not show its session: recorded here
    assert sizes == {"index_cache_size_bytes": 16 << 20, "metadata_cache_size_bytes": 16 << 20}
    table = connection.create_table("t", pa.table({"x": [1, 2]}))
    for value in range(3, 13):  # ten commits
        table.add(pa.table({"x": [value]}))
    assert "t" in store.table_names()
    assert sorted(store.db.open_table("t").to_arrow().column("x").to_pylist()) == list(range(1, 13))
    assert 0 < session.size_bytes <= 2 * limits.WRITE_CACHE_BYTES  # the commits went through it


def batch(start: int, count: int) -> Batch:
    docs = [Document(f"d{i}", f"document {i} about the river near the castle", metadata={"n": i})
            for i in range(start, start + count)]
    return Batch(document_rows(docs, FixedEncoder()), graph_rows(docs, datetime.now(UTC)))


def test_a_write_appends_through_it_and_drops_it_at_the_end(tmp_path, monkeypatch):
    store = Store(str(tmp_path / "db"))
    opened: list[weakref.ref] = []
    open_connection = Store.write_connection

    def recorded(self):
        connection = open_connection(self)
        opened.append(weakref.ref(connection))
        return connection

    monkeypatch.setattr(Store, "write_connection", recorded)
    info = new_info("c")
    # Three batches, each committed while the write's connection is alive.
    alive_during: list[bool] = []

    def batches():
        for start in (0, 4, 8):
            yield batch(start, 4)
            alive_during.append(opened[-1]() is not None)

    info = write_batches(store, info, True, batches())
    gc.collect()
    assert len(opened) == 1  # one connection for the whole write
    assert alive_during == [True, True, True]
    assert opened[0]() is None  # gone with its caches once the write ended
    assert info.doc_count == 12
    assert sorted(store.table("c").to_arrow().column("id").to_pylist()) == sorted(f"d{i}" for i in range(12))
    # An add opens a connection of its own too, and drops it as well.
    info = write_batches(store, store.info("c"), False, [batch(12, 2)])
    gc.collect()
    assert len(opened) == 2 and opened[1]() is None
    assert info.doc_count == 14
