"""The `Store`: collections in embedded LanceDB or object storage — handles and versions
(`state_key`, `table_at`), display name → table name (`resolve`, `new_names`), clear and delete;
its reads (`documents`, `vectors`, `column`, `graph_tables`, `stats`) are its base class's
(`reads.StoredReads`). Writes go through the write path (`retrieval/indexing/`) under the
writer lock and transaction the store provides (the package docstring says the protocol)."""

from __future__ import annotations

import functools
import os
import threading
import unicodedata
import uuid
from collections.abc import Iterable, Iterator, MutableMapping
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import retrieval.store.journal as store_journal
from retrieval import limits
from retrieval.store.allocator import fix_mmap_threshold
from retrieval.store.catalogue import Catalogue, CollectionInfo, info_from_entry
from retrieval.store.locks import WriterLock, counts_as_write, lock_dir
from retrieval.store.names import display_name, hashed, labels, table_name_for
from retrieval.store.reads import StoredReads
from retrieval.store.tables import (
    AUX_KINDS,
    CATALOGUE_TABLE,
    COLLECTION_NAME_RE,
    aux_table_name,
    canonical_uri,
    default_db_uri,
    default_storage_options,
    is_remote,
    now_iso,
    validate_collection_name,
)
from retrieval.types import NameBeingCreated, RetrievalError

os.environ.setdefault("LANCEDB_LOG", "error")

# Appended to a state key's incarnation while a write to the collection is in progress (`state_key`).
WRITING_MARK = "+writing"


def bound_io_threads(uri: str, environ: MutableMapping[str, str] = os.environ) -> None:
    """For a local database, LanceDB's IO threads as `limits.LANCE_LOCAL_IO_THREADS` says
    (the machine's cores, 2 to 8), unless `LANCE_IO_THREADS` is set already: LanceDB reads it
    for the whole process, so the first local `Store` decides, and a later object-storage one
    in the same process gets the same (object storage first: LanceDB's default of 64 stays)."""
    if not is_remote(uri):
        environ.setdefault("LANCE_IO_THREADS", str(limits.LANCE_LOCAL_IO_THREADS))


class Store(StoredReads):
    """Collections and their catalogue in one LanceDB database."""

    def __init__(self, uri: str | None = None, storage_options: dict[str, str] | None = None):
        self.uri = canonical_uri(uri or default_db_uri())  # one spelling, one set of locks
        if not is_remote(self.uri):
            Path(self.uri).mkdir(parents=True, exist_ok=True)
        self.storage_options = storage_options if storage_options is not None else default_storage_options()
        # Interval 0: every read sees the latest committed version, also another process's
        # (on object storage: one small manifest request per read, see docs/scale.md).
        import lancedb  # here, not at import: `python -m retrieval --help` needs no LanceDB

        bound_io_threads(self.uri)
        fix_mmap_threshold(limits.MALLOC_MMAP_THRESHOLD)

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

    def write_connection(self):
        """A LanceDB connection of its own for one write's appends (`indexing.writer`), with small
        caches (`limits.WRITE_CACHE_BYTES`): what a stream of appends loads — a manifest per
        committed batch — is freed with it when the write ends, instead of staying in the
        searches' caches. Same database, options and read consistency as `db`."""
        import lancedb

        session = lancedb.Session(index_cache_size_bytes=limits.WRITE_CACHE_BYTES,
                                  metadata_cache_size_bytes=limits.WRITE_CACHE_BYTES)
        return lancedb.connect(self.uri, read_consistency_interval=timedelta(0),
                               storage_options=self.storage_options, session=session)

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

    @contextmanager
    def lock_if_free(self, name: str) -> Iterator[bool]:
        """Collection `name`'s writer lock for a reader that wants a write's steps apart but must
        not wait for a long write (a streamed add holds the lock until it ends): True with the
        lock held when nobody held it, else False and no lock (the state key is marked meanwhile,
        `state_key`)."""
        lock = self.writer_lock(name)
        if not lock.try_acquire():
            yield False
            return
        try:
            yield True
        finally:
            lock.__exit__(None, None, None)

    def transaction(self, name: str, op: str, tables: Iterable[str]) -> AbstractContextManager[None]:
        """A write of `op` to collection `name` touching `tables` (LanceDB table names), all or
        nothing (store/journal.py). The caller holds `writer_lock(name)`."""
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
        """An open handle (kept per collection: with consistency interval 0 it stays current), on
        the last committed state: a dead writer's journal is recovered first (`recover_abandoned`)."""
        validate_collection_name(name)
        self.recover_abandoned(name)
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
        if self._incarnations.get(name) != state[0].removesuffix(WRITING_MARK):
            raise RetrievalError(f"collection {name!r} was deleted or restored while it was being read: search again")
        handle = self.db.open_table(name)
        handle.checkout(state[1])
        self._read_handles[name] = (state, handle)
        return handle

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
        version = self.table(name).version
        # While a write's journal is there (its writer alive: `table` recovered a dead one's), a
        # mark: what a cache reads mid-write (a batch's rows before its entity links) is never
        # served once the write has ended, also at the version it ended on. Looked for after the
        # version is read: no journal then means the write had not begun (and moves the version
        # before anything else) or has ended (and what is read from now on is its last state).
        writing = WRITING_MARK if store_journal.journal_path(self, name).exists() else ""
        return (self._incarnations[name] + writing, version)

    def recover_abandoned(self, name: str) -> bool:
        """Before a read of collection `name`: if a journal is there and nobody holds the writer
        lock, its writer died, so recover it now (taking the lock recovers) and the read sees the
        last committed state, not the dead write. A live writer's journal (the lock is taken, in
        this or another process) is left alone: never restore over a write that may still commit.
        True when another writer holds the lock (a write in progress). One `stat` when there is no
        journal."""
        if not store_journal.journal_path(self, name).exists():
            return False
        lock = self._lock(name)
        if not lock.try_acquire():
            return True
        lock.__exit__(None, None, None)  # acquiring recovered; a no-op inside this thread's own write
        return False

    def note_write(self) -> None:
        with self._locks_guard:
            self.writes += 1

    # ---- the catalogue and names -----------------------------------------------------------
    def write_info(self, info: CollectionInfo) -> None:
        """Set the collection's catalogue entry (the last step of every write to it)."""
        self.catalogue.write(info)

    def list_collections(self) -> list[CollectionInfo]:
        """Every usable collection's catalogue entry, after recovering dead writers' journals
        (`recover_abandoned`): a killed add, clear or delete is never listed as it left things."""
        for journal in self.lock_dir.glob("*.journal.json"):
            name = journal.name[: -len(".journal.json")]
            if COLLECTION_NAME_RE.fullmatch(name):
                self.recover_abandoned(name)
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
                if not self.recover_abandoned(name):
                    if not self._has_table(name):
                        continue
                elif store_journal.read_journal(self, name).get("op") == "create":
                    continue  # being created by another writer right now
            kept.append(name)
        return kept

    def info(self, name: str) -> CollectionInfo:
        """The collection's catalogue entry, as last committed (`recover_abandoned` first)."""
        validate_collection_name(name)
        self.recover_abandoned(name)
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
        # A name stored before names were NFKC is found by its NFKC form too.
        found = [table for table, display in self.display_names().items()
                 if wanted in (display, unicodedata.normalize("NFKC", display))]
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
        taken = [table for table, display in self.display_names().items()
                 if wanted in (table, display, unicodedata.normalize("NFKC", display))]
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
                info.graph = "off" if info.graph == "off" else ""  # no documents: nothing to build; off stays off
                info.updated = now_iso()
                self.write_info(info)
            return info
