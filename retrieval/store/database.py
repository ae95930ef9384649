"""The `Store`: collections in embedded LanceDB or object storage — handles and versions
(`state_key`, `table_at`), display name → table name (`resolve`, `new_names`), clear and delete,
and reads (`documents`, `vectors`, `column`, `graph_tables`, `stats`). Writes go through the write
path (`retrieval/indexing/`) under the writer lock and transaction the store provides (the package
docstring says the protocol)."""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa

import retrieval.store.journal as store_journal
from retrieval.store.catalogue import Catalogue, CollectionInfo, CollectionStats, info_from_entry
from retrieval.store.locks import WriterLock, counts_as_write, lock_dir
from retrieval.store.names import display_name, hashed, labels, table_name_for
from retrieval.store.tables import (
    AUX_KINDS,
    CATALOGUE_TABLE,
    COLLECTION_NAME_RE,
    DOCUMENT_COLUMNS,
    GRAPH_KINDS,
    XL_COLUMN,
    aux_table_name,
    canonical_uri,
    default_db_uri,
    default_storage_options,
    ids_where,
    is_remote,
    now_iso,
    validate_collection_name,
    vector_matrix,
)
from retrieval.types import Document, NameBeingCreated, RetrievalError

os.environ.setdefault("LANCEDB_LOG", "error")
log = logging.getLogger(__name__)


BATCH_IDS = 500  # ids per `id IN (…)` filter


class Store:
    """Collections and their catalogue in one LanceDB database."""

    def __init__(self, uri: str | None = None, storage_options: dict[str, str] | None = None):
        self.uri = canonical_uri(uri or default_db_uri())  # one spelling, one set of locks
        if not is_remote(self.uri):
            Path(self.uri).mkdir(parents=True, exist_ok=True)
        self.storage_options = storage_options if storage_options is not None else default_storage_options()
        # Interval 0: every read sees the latest committed version, also another process's
        # (on object storage: one small manifest request per read, see docs/scale.md).
        self.db = lancedb.connect(self.uri, read_consistency_interval=timedelta(0),
                                  storage_options=self.storage_options)
        self.lock_dir = lock_dir(self.uri)
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        self._locks: dict[str, WriterLock] = {}
        self._handles: dict[str, Any] = {}
        self._incarnations: dict[str, str] = {}
        self._read_handles: dict[str, tuple[tuple[str, int], Any]] = {}  # name -> (state, handle): `table_at`
        self.writes = 0  # how many writes went through this Store (and its judgments/configs)
        self._locks_guard = threading.Lock()
        self.catalogue = Catalogue(self.db, self._lock(CATALOGUE_TABLE), self.table_names)

    # ---- tables, locks and versions --------------------------------------------------------
    def _lock(self, name: str) -> WriterLock:
        """The writer lock of `name`: a validated collection name (which recovers the collection
        from a journal when taken), or an internal table's name (`_catalogue`, `_configs`)."""
        with self._locks_guard:
            lock = self._locks.get(name)
            if lock is None:
                recover = None if name.startswith("_") else functools.partial(store_journal.recover, self, name)
                lock = self._locks[name] = WriterLock(self.lock_dir / f"{name}.lock", recover)
            return lock

    def writer_lock(self, name: str) -> WriterLock:
        """The lock every write to collection `name` (and its auxiliary tables) holds, across
        threads and processes; a reader that must see the collection and its auxiliary tables at
        one state holds it too. Taking it first recovers the collection from a dead writer's
        journal."""
        return self._lock(validate_collection_name(name))

    def transaction(self, name: str, op: str, tables: Iterable[str]) -> AbstractContextManager[None]:
        """A write of `op` to collection `name` touching `tables` (LanceDB table names), all or
        nothing (store_journal.py). The caller holds `writer_lock(name)`."""
        return store_journal.transaction(self, name, op, tables)

    def table_names(self) -> list[str]:
        """Every LanceDB table of the database (collections, auxiliary tables, the catalogue)."""
        names: list[str] = []
        token = None
        while True:
            response = self.db.list_tables(page_token=token)
            names.extend(response.tables)
            token = response.page_token
            if not token:
                return names

    def _has_table(self, name: str) -> bool:
        return name in self.table_names()

    def side_table(self, name: str, schema, create: bool = False):
        """A table beside the collections (saved configs, snapshots, a collection's query sets):
        opened; when missing, None, or with `create` made empty with `schema`."""
        if self._has_table(name):
            return self.db.open_table(name)
        if not create:
            return None
        return self.db.create_table(name, schema=schema, exist_ok=True)

    def has_table(self, name: str) -> bool:
        """Whether the collection's table exists (also before its catalogue entry does)."""
        return self._has_table(validate_collection_name(name))

    def table(self, name: str):
        """An open handle (kept per collection: with consistency interval 0 it stays current)."""
        validate_collection_name(name)
        handle = self._handles.get(name)
        if handle is None:
            if not self._has_table(name):
                self.info(name)  # raises the readable "no collection named …" error
            handle = self._handles[name] = self.db.open_table(name)
            self._incarnations[name] = self.recorded_incarnation(name) or uuid.uuid4().hex
        return handle

    def _incarnation_path(self, name: str) -> Path:
        return self.lock_dir / f"{name}.incarnation"

    def new_incarnation(self, name: str) -> None:
        """A new id for collection `name`, which is being created (the caller holds its writer
        lock), beside its lock: every process's `state_key` of the name changes with it, also
        where LanceDB restarts the version numbers and reaches the same count again."""
        path = self._incarnation_path(name)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_text(uuid.uuid4().hex, encoding="ascii")
        os.replace(partial, path)

    def recorded_incarnation(self, name: str) -> str | None:
        """The id `new_incarnation` gave the name (None for a collection created before ids were
        recorded: its handle gets a process-local id, as before)."""
        try:
            return self._incarnation_path(name).read_text(encoding="ascii") or None
        except OSError:
            return None

    def forget_handle(self, name: str) -> None:
        """Drop the kept handle (its table was dropped or restored): the next `table` opens anew."""
        self._handles.pop(name, None)
        self._read_handles.pop(name, None)

    def table_at(self, name: str, state: tuple[str, int]):
        """A read-only handle on the collection as it is at `state` (a `state_key`): checked out
        at that table version, so every search through it reads that version whatever is written
        meanwhile — the version the caches keyed by `state` describe, and the one a LanceDB row
        id of its results refers to (`sources.lance_requests.RowIdMap`). A checked-out handle also
        skips the live handle's look for a newer version on every query (~1–3 ms a search at 1M
        documents, docs/experiments/peers.md). The latest one is kept per collection."""
        kept = self._read_handles.get(name)
        if kept is not None and kept[0] == state:
            return kept[1]
        self.table(name)
        if self._incarnations.get(name) != state[0]:
            raise RetrievalError(f"collection {name!r} was deleted or restored while it was being read: search again")
        handle = self.db.open_table(name)
        handle.checkout(state[1])
        self._read_handles[name] = (state, handle)
        return handle

    def _read_table(self, name: str, state: tuple[str, int] | None):
        """The live handle (`state` None) or the one at `state` (`table_at`): what a read goes through."""
        return self.table(name) if state is None else self.table_at(name, state)

    def version(self, name: str) -> int:
        """The collection's LanceDB table version: bumps on every write."""
        return self.table(name).version

    def state_key(self, name: str) -> tuple[str, int]:
        """What caches of a collection's data key on: the table version, and an id given to the
        handle when it is opened. LanceDB restarts version numbers when a table is dropped and
        created again, so the version alone would let a deleted and re-ingested collection of
        the same name hit the old collection's caches; `delete` drops the handle, so a re-created
        collection gets a new id, and a collection created again by another process has a new
        recorded id (`new_incarnation`), read here (~25 µs: a small local file)."""
        recorded = self.recorded_incarnation(validate_collection_name(name))
        if recorded is not None and name in self._handles and recorded != self._incarnations.get(name):
            self.forget_handle(name)  # created again elsewhere since this process opened it
        table = self.table(name)
        return (self._incarnations[name], table.version)

    def note_write(self) -> None:
        with self._locks_guard:
            self.writes += 1

    # ---- the catalogue and names -----------------------------------------------------------
    def write_info(self, info: CollectionInfo) -> None:
        """Set the collection's catalogue entry (the last step of every write to it)."""
        self.catalogue.write(info)

    def list_collections(self) -> list[CollectionInfo]:
        rows = self.catalogue.entries()
        existing = {n for n in self.table_names() if not n.startswith("_")}
        return sorted((info_from_entry(r) for r in rows if r["name"] in existing), key=lambda i: i.name)

    def collection_names(self) -> list[str]:
        """Collection names from the table listing (~1 ms, vs ~10 ms for the catalogue scan of
        `list_collections`): cheap enough for a picker redrawn on every slider move. A collection
        with a journal is recovered first when nobody writes to it, and left out while it is
        being created."""
        names = sorted(n for n in self.table_names() if not n.startswith("_"))
        journals = {p.name[: -len(".journal.json")] for p in self.lock_dir.glob("*.journal.json")}
        if not journals & set(names):
            return names
        kept = []
        for name in names:
            if name in journals:
                lock = self._lock(name)
                if lock.try_acquire():  # recovers on acquiring
                    lock.__exit__(None, None, None)
                    if not self._has_table(name):
                        continue
                elif store_journal.read_journal(self, name).get("op") == "create":
                    continue  # being created by another writer right now
            kept.append(name)
        return kept

    def info(self, name: str) -> CollectionInfo:
        validate_collection_name(name)
        entry = self.catalogue.entry(name)
        if entry is None or not self._has_table(name):
            raise RetrievalError(f"No collection named {name!r} (collections: {self._known()})")
        return info_from_entry(entry)

    def _known(self) -> str:
        """The collections' labels, for an error message."""
        return ", ".join(labels(self.display_names()).values()) or "none yet"

    def display_names(self) -> dict[str, str]:
        """Table name → display name of every listed collection (`collection_names` order)."""
        names = self.collection_names()
        displays = self.catalogue.display_names() if names else {}
        return {n: displays.get(n, n) for n in names}

    def resolve(self, name: str) -> str:
        """The table name of the collection a user named by its table name or its display name
        (stripped, NFC, as `names.display_name` reads it). An unknown name, or a display name
        two collections share, is a clear error."""
        if isinstance(name, str) and COLLECTION_NAME_RE.fullmatch(name.strip()) and self._has_table(name.strip()):
            return name.strip()
        wanted = display_name(name)
        found = [table for table, display in self.display_names().items() if display == wanted]
        if len(found) > 1:
            raise RetrievalError(f"{len(found)} collections are named {wanted!r} (tables {', '.join(found)}): "
                                 "give the table name")
        if not found:
            raise RetrievalError(f"No collection named {wanted!r} (collections: {self._known()})")
        return found[0]

    def new_names(self, name: str) -> tuple[str, str]:
        """(table name, display name) for a new collection the user named `name`: see
        `names.table_name_for`. A name already taken — a table of that name, or a collection
        with that display name — is a clear "already exists" error."""
        wanted = display_name(name)
        taken = [table for table, display in self.display_names().items() if wanted in (table, display)]
        if taken or (COLLECTION_NAME_RE.fullmatch(wanted) and self._has_table(wanted)):
            raise RetrievalError(f"Collection {wanted!r} already exists: add to it, or delete it first")
        return table_name_for(wanted, set(self.table_names())), wanted

    @contextmanager
    def claim_display_name(self, label: str) -> Iterator[None]:
        """Held by a create from its start to its commit. Two creates of one display name get
        different table names ('my-docs', then 'my-docs-2' once the first has a table), hence
        different collection locks, and the first's catalogue entry is written last: without this
        both could commit. The second is told at once rather than made to wait for the ingest."""
        lock = self._lock("_display-" + hashed(label))
        if not lock.try_acquire():
            raise NameBeingCreated(f"A collection named {label!r} is being created by another writer right now: "
                                   "wait for it to finish, or choose another name")
        try:
            yield
        finally:
            lock.__exit__(None, None, None)

    def check_new(self, info: CollectionInfo) -> None:
        """Under the writer lock, before a create: the table name and the display name are free
        (two processes creating one name: the second is told, not handed a raw LanceDB error)."""
        if self._has_table(info.name) or any(d == info.label for t, d in self.display_names().items()
                                             if t != info.name):
            raise RetrievalError(f"Collection {info.label!r} already exists: add to it, or delete it first")

    def exists(self, name: str) -> bool:
        try:
            self.info(name)
            return True
        except RetrievalError:
            return False

    # ---- clear and delete (adds and creates: retrieval/indexing/) --------------------------
    @counts_as_write
    def delete(self, name: str) -> None:
        """Drop the collection, its auxiliary tables and its catalogue entry. Works on any half
        state (a table without catalogue entry, an entry without table, stray auxiliary tables)."""
        with self.writer_lock(name):
            parts = [name, *(aux_table_name(name, kind) for kind in AUX_KINDS)]
            if self.catalogue.entry(name) is None and not set(parts) & set(self.table_names()):
                self.info(name)  # raises the readable "no collection named …" error
            with self.transaction(name, "delete", []):
                store_journal.drop_all(self, name)

    @counts_as_write
    def clear(self, name: str) -> CollectionInfo:
        """Remove every document but keep the collection, its model and its history."""
        with self.writer_lock(name):
            info = self.info(name)
            with self.transaction(name, "clear", []):
                store_journal.clear_tables(self, name)
                info.doc_count = 0
                info.truncated = 0
                info.graph = ""  # no documents: nothing to build
                info.updated = now_iso()
                self.write_info(info)
            return info

    # ---- reads -----------------------------------------------------------------------------
    def existing_ids(self, name: str, ids: list[str]) -> set[str]:
        """Which of `ids` the collection already holds."""
        table = self.table(name)
        found: set[str] = set()
        for chunk in _chunks(ids):
            rows = table.search().where(ids_where(chunk)).select(["id"]).limit(None).to_arrow()
            found.update(rows.column("id").to_pylist())
        return found

    def documents(self, name: str, ids: Iterable[str], row_ids: Mapping[str, int] | None = None,
                  state: tuple[str, int] | None = None) -> dict[str, dict[str, Any]]:
        """Rows (without vectors) for the given ids, metadata parsed from JSON: as the collection
        is now, or at `state` (`table_at`, the version a search read; no look for a newer version
        first: 4.9 ms instead of 6.2 for the 10 rows a search shows at 1M documents).

        `row_ids` (id -> LanceDB row id, as a search of the table returned them) lets those rows
        be taken by row id, without looking the ids up: the 10 rows a search shows at 1M
        documents took 9.0 ms so, 13.7 ms by id (docs/experiments/scale.md). A taken row counts
        only when it carries one of the ids asked for (a write may have moved rows since the
        search); the ids not found so are looked up by id."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        table = self._read_table(name, state)
        out: dict[str, dict[str, Any]] = {}
        by_row = [row_ids[i] for i in ids if row_ids and row_ids.get(i) is not None]
        if by_row:
            wanted = set(ids)
            try:
                taken = table.take_row_ids(by_row).select(DOCUMENT_COLUMNS).to_arrow().to_pylist()
            except Exception:  # row ids of files a compaction removed: every id is looked up below
                log.info("rows of %s not taken by row id; looking them up by id", name, exc_info=True)
                taken = []
            for row in taken:  # a row whose id was asked for is that document's row, wherever it now is
                if row["id"] in wanted and row["id"] not in out:
                    out[row["id"]] = _document_row(row)
            ids = [i for i in ids if i not in out]
        for chunk in _chunks(ids):
            rows = table.search().where(ids_where(chunk)).select(DOCUMENT_COLUMNS).limit(None).to_arrow().to_pylist()
            for row in rows:
                out[row["id"]] = _document_row(row)
        return out

    def vectors(self, name: str, ids: Iterable[str], column: str = "vector") -> dict[str, np.ndarray]:
        """The float32 vectors of `column` ('vector' or XL_COLUMN) for the given ids, by id."""
        if column not in ("vector", XL_COLUMN):
            raise ValueError(f"not a vector column: {column!r}")
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        rows = self.table(name).search().where(ids_where(ids)).select(["id", column]).limit(len(ids)).to_arrow()
        return dict(zip(rows.column("id").to_pylist(), vector_matrix(rows, column), strict=True))

    def column(self, name: str, columns: list[str], state: tuple[str, int] | None = None) -> pa.Table:
        """Whole columns of a collection (e.g. id and tokens to build BM25), in storage order: as
        it is now, or at `state` (`table_at`)."""
        table = self._read_table(name, state)
        return table.search().select(columns).limit(None).to_arrow()

    def has_graph_tables(self, name: str) -> bool:
        """False for a collection ingested before the entity graph tables existed."""
        existing = set(self.table_names())
        return all(aux_table_name(name, kind) in existing for kind in GRAPH_KINDS)

    def graph_tables(self, name: str) -> dict[str, pa.Table] | None:
        """The collection's entity graph tables (None when it was ingested before they existed)."""
        self.info(name)
        existing = set(self.table_names())
        names = {kind: aux_table_name(name, kind) for kind in GRAPH_KINDS}
        if not all(n in existing for n in names.values()):
            return None
        return {kind: self.db.open_table(n).to_arrow() for kind, n in names.items()}

    def stats(self, name: str) -> CollectionStats:
        info = self.info(name)
        table = self.table(name)
        rows = table.search().select(["n_tokens", "text", "language", "parent_id", "metadata"]).limit(None).to_arrow()
        n = rows.num_rows
        n_tokens = rows.column("n_tokens").to_numpy(zero_copy_only=False) if n else np.array([])
        texts = rows.column("text").to_pylist()
        languages = rows.column("language").to_pylist()
        fields: set[str] = set()
        for meta in rows.column("metadata").to_pylist():
            fields.update(json.loads(meta or "{}"))
        return CollectionStats(
            info=info,
            version=table.version,
            doc_count=n,
            avg_tokens=float(n_tokens.mean()) if n else 0.0,
            avg_chars=float(np.mean([len(t) for t in texts])) if n else 0.0,
            language_mix={lang: languages.count(lang) for lang in ("en", "zh")},
            chunked_docs=sum(1 for p in rows.column("parent_id").to_pylist() if p),
            metadata_fields=sorted(fields),
        )


def stored_documents(store: Store, name: str) -> list[Document]:
    """The collection's documents as stored (id, title, text, metadata), in storage order."""
    stored = store.column(name, ["id", "title", "text", "metadata"]).to_pylist()
    return [Document(id=r["id"], text=r["text"] or "", title=r["title"] or "",
                     metadata=json.loads(r["metadata"] or "{}")) for r in stored]


def _chunks(ids: list[str]) -> Iterator[list[str]]:
    """`ids` in runs of `BATCH_IDS` (one filter each)."""
    for start in range(0, len(ids), BATCH_IDS):
        yield ids[start:start + BATCH_IDS]


def _document_row(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row as readers get it: metadata parsed from JSON, no title as "" (stored as null)."""
    row["metadata"] = json.loads(row["metadata"] or "{}")
    row["title"] = row["title"] or ""
    return row
