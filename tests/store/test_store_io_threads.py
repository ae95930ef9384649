"""LanceDB's IO threads for a local database (`store.database.bound_io_threads`): each keeps its
read-ahead in memory while an index is built, so a local database gets as many as the cores."""

from __future__ import annotations

import os

from retrieval import limits
from retrieval.store import Store
from retrieval.store.database import bound_io_threads


def test_a_local_database_gets_the_cores_and_a_set_value_or_object_storage_is_left_alone():
    assert min(8, max(2, os.cpu_count() or 2)) == limits.LANCE_LOCAL_IO_THREADS
    environ: dict[str, str] = {}
    bound_io_threads("s3://bucket/db", environ)
    assert environ == {}  # LanceDB's default for object storage (64) stays
    bound_io_threads("/data/lancedb", environ)
    assert environ == {"LANCE_IO_THREADS": str(limits.LANCE_LOCAL_IO_THREADS)}
    chosen = {"LANCE_IO_THREADS": "16"}
    bound_io_threads("/data/lancedb", chosen)
    assert chosen == {"LANCE_IO_THREADS": "16"}  # the user's value wins


def test_the_first_local_store_sets_it_for_the_process(tmp_path, monkeypatch):
    monkeypatch.delenv("LANCE_IO_THREADS", raising=False)
    Store(str(tmp_path / "db"))
    assert os.environ["LANCE_IO_THREADS"] == str(limits.LANCE_LOCAL_IO_THREADS)
