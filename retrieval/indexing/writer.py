"""The one write of documents: batches of prepared rows appended to a collection under its writer
lock, in ONE transaction (docs/reliability.md), then its full-text index, entity table and
catalogue entry. Also the deferred entity graph's write (`write_graph`).

    open_write(store, info, create)   lock; names or collection checked; journal (every touched
      └ CollectionWriter.append(batch)   table's version) → rows, entity links and times;
                                        ids already stored refused      crash point {op}:batch-<n>
      └ finish()                      full-text index                   {op}:index
                                      entities table (counts merged)    {op}:graph
                                      catalogue entry                   {op}:catalogue

A problem in batch n rolls batches 1…n back at once; a kill anywhere is rolled back by the next
holder of the lock, so the collection is exactly as before (`op` is "create" or "add").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import pyarrow as pa

from retrieval.indexing.indexes import index_texts
from retrieval.indexing.plan import vectors_backend
from retrieval.store import (
    GRAPH_KINDS,
    CollectionInfo,
    Store,
    aux_table_name,
    collection_schema,
    counts_as_write,
    crash_point,
    now_iso,
    validate_collection_name,
)
from retrieval.store.tables import graph_table_names
from retrieval.text.entity_tables import graph_schemas, merge_entities
from retrieval.text.tokenize import language_from_mix
from retrieval.types import IngestError, RetrievalError

GraphRows = dict[str, list[dict]]  # auxiliary table kind -> rows (entity_tables.graph_table_rows)


class GraphOutdated(RetrievalError):
    """The collection changed while its entity graph was built from it (`write_graph`)."""


@dataclass
class Batch:
    """One batch, derived and ready to write: its collection rows, its entity graph rows (None when
    the graph is deferred) and how many of its documents the encoder truncated."""

    rows: pa.Table
    graph: GraphRows | None
    truncated: int = 0


def clash_error(name: str, clashes: set[str]) -> IngestError:
    """Ids already in the collection: the add is refused as a whole."""
    return IngestError(f"{len(clashes)} document id(s) already exist in {name!r}; nothing was added",
                       [f"id {i!r} is already in the collection" for i in sorted(clashes)])


class CollectionWriter:
    """The batches of one `open_write` (which holds the lock and the transaction)."""

    def __init__(self, store: Store, info: CollectionInfo, create: bool, graph: bool = True,
                 backends: Sequence[str] = ()):
        self.store, self.info, self.create, self.graph = store, info, create, graph
        self.backends = tuple(backends)  # the encoder backends of this write's vectors (() not told)
        self.op = "create" if create else "add"
        self.batches = 0  # batches written
        self.truncated = 0  # of the rows written
        # The write's own connection (`Store.write_connection`): the manifests its appends load
        # are freed with it at the end, not kept in the searches' caches.
        self._db = store.write_connection()
        self._table = None if create else self._db.open_table(info.name)
        self._entities: dict[str, dict] = {}  # entity id -> row, counts over every batch (small next to texts)
        self._before: int | None = 0 if create else info.truncated

    def start(self, legacy_graph_rows: Callable[[], GraphRows] | None,
              stored_truncated: Callable[[], int] | None) -> None:
        """An add, before the first batch: count the stored documents' truncation
        (`stored_truncated`, for a collection ingested before that count existed) and index the
        stored documents of a collection ingested before the entity graph tables existed
        (`legacy_graph_rows`)."""
        if self._before is None and stored_truncated is not None:
            self._before = stored_truncated()
        name = self.info.name
        if legacy_graph_rows is not None and not self.store.has_graph_tables(name) and self._table.count_rows():
            move_version(self._table)
            self._graph(legacy_graph_rows())

    def append(self, batch: Batch) -> None:
        """Write one batch: its rows (ids already in the collection are refused) and its links and
        times; its entity counts are merged in memory and written by `finish`."""
        name, info = self.info.name, self.info
        if self._table is None:
            self._table = self._db.create_table(name, batch.rows, schema=collection_schema(info.dim, info.xl_dim))
        else:
            clashes = self.store.existing_ids(name, batch.rows.column("id").to_pylist()) if not self.create else ()
            if clashes:
                raise clash_error(name, set(clashes))
            self._table.add(batch.rows)
        if batch.graph is not None:
            self._graph(batch.graph)
        self.truncated += batch.truncated
        self.batches += 1
        crash_point(f"{self.op}:batch-{self.batches}")

    def _graph(self, rows: GraphRows) -> None:
        schemas = graph_schemas()
        existing = set(self.store.table_names())
        for kind in ("event_entities", "event_times"):
            table_name = aux_table_name(self.info.name, kind)
            data = pa.Table.from_pylist(rows[kind], schema=schemas[kind])
            if table_name not in existing:
                self._db.create_table(table_name, data, schema=schemas[kind])
            elif data.num_rows:
                self._db.open_table(table_name).add(data)
        for row in rows["entities"]:
            known = self._entities.get(row["id"])
            if known is None:
                self._entities[row["id"]] = dict(row)
            else:
                known["event_count"] += row["event_count"]

    def finish(self) -> None:
        """After the last batch: the full-text index, the entities table, the catalogue entry."""
        if not self.batches:
            raise IngestError("No documents to ingest")
        table, name, store = self._table, self.info.name, self.store
        index_texts(table)
        crash_point(f"{self.op}:index")
        schema = graph_schemas()["entities"]
        entities_table = aux_table_name(name, "entities")
        if not self.graph:
            self.info.graph = self.info.graph if self.info.graph == "off" else "pending"  # off: until asked
        elif entities_table in set(store.table_names()):
            handle = self._db.open_table(entities_table)
            merged = merge_entities(handle.to_arrow().to_pylist(), self._entities.values())
            handle.add(pa.Table.from_pylist(merged, schema=schema), mode="overwrite")
        else:
            merged = merge_entities([], self._entities.values())
            self._db.create_table(entities_table, pa.Table.from_pylist(merged, schema=schema), schema=schema)
        crash_point(f"{self.op}:graph")
        info = self.info
        languages = table.search().select(["language"]).limit(None).to_arrow().column("language")
        # A chunk at a time: 1M labels as one list of str took 70 MB.
        info.language = language_from_mix(value for chunk in languages.chunks for value in chunk.to_pylist())
        info.doc_count = table.count_rows()
        info.truncated = None if self._before is None else self._before + self.truncated
        if self.backends:
            info.encoder_backend = vectors_backend(info.encoder_backend, self.backends, new=self.create)
        info.updated = now_iso()
        store.write_info(info)
        crash_point(f"{self.op}:catalogue")
        self._table = self._db = None  # the write connection and its caches go with the write


# What an add's batches were derived from (vector columns, their models and sizes) and which
# collection it was (deleted and created again under the same name: another `created`).
_DERIVED_FROM = ("created", "model", "dim", "xl_model", "xl_dim")


def same_collection(prepared: CollectionInfo, current: CollectionInfo) -> CollectionInfo:
    """`current` (the entry read under the lock) when the batches prepared from `prepared` (read
    before it) still fit it, else an error and nothing written: another process deleted the
    collection and created it again, maybe with another model, while they were prepared."""
    changed = [f for f in _DERIVED_FROM if getattr(prepared, f) != getattr(current, f)]
    if changed:
        raise RetrievalError(f"Collection {current.name!r} was deleted and created again ({', '.join(changed)} "
                             "changed) while these documents were prepared; nothing was added: add them again")
    return current


@contextmanager
def open_write(store: Store, info: CollectionInfo, create: bool,
               legacy_graph_rows: Callable[[], GraphRows] | None = None,
               stored_truncated: Callable[[], int] | None = None,
               graph: bool = True, backends: Sequence[str] = ()) -> Iterator[CollectionWriter]:
    """One write of one or many batches: create collection `info.name` or add to it, all or
    nothing. Holds the collection's writer lock for the whole block (other writers to it wait)
    and runs in ONE transaction: the journal records every touched table's version before the
    first batch, so a failure or a kill anywhere, between or inside batches, rolls the whole write
    back. Yields a `CollectionWriter`; `append(batch)` writes a batch, and when the block ends
    without error `finish` writes the full-text index, the entities table and the catalogue
    entry. Under the lock a create checks again that its names are free, an add re-reads the
    collection's entry. `legacy_graph_rows` and `stored_truncated`: `CollectionWriter.start`'s.
    `graph` False: no graph rows are written (batches carry None) and the catalogue entry marks
    the graph pending. `backends`: the encoder backends that computed the batches' vectors, added
    to the entry's `encoder_backend` (`plan.vectors_backend`)."""
    name = validate_collection_name(info.name)
    try:
        with store.claim_display_name(info.label) if create else nullcontext(), store.writer_lock(name):
            if create:
                store.check_new(info)
                store.new_incarnation(name)
            else:
                info = same_collection(info, store.info(name))
            with store.transaction(name, "create" if create else "add", [name, *graph_table_names(name)]):
                writer = CollectionWriter(store, info, create, graph, backends)
                if not create:
                    writer.start(legacy_graph_rows if graph else None, stored_truncated)
                yield writer
                writer.finish()
    finally:
        store.note_write()


def write_batches(store: Store, info: CollectionInfo, create: bool, batches: Iterable[Batch]) -> CollectionInfo:
    """Batches prepared by the caller written as one `open_write` (a create of `info`, or an add
    to collection `info.name`): for writers that derive their rows themselves (the reliability
    tests' model-free writers, benchmarks timing the write alone). The ingests go through
    `pipeline.write_documents`."""
    with open_write(store, info, create) as writer:
        for batch in batches:
            writer.append(batch)
    return writer.info


def move_version(table) -> None:
    """An empty commit (a delete of no rows): a new version of the collection's table, so its state
    key changes. A write that touches its other tables (the entity graph's) calls it first, as
    every write moves the collection's version before anything else (docs/reliability.md): a
    cache keyed by the state before the write (read while it runs, when `sources.graph.load_index`
    does not wait for it) is then never current again, also when the write is rolled back (a
    restore is a new version too)."""
    table.delete("false")


@counts_as_write
def write_graph(store: Store, name: str, version: int, tables: dict[str, pa.Table],
                created: str | None = None, incarnation: str | None = None) -> CollectionInfo:
    """Replace the collection's entity graph tables with `tables` (built from its documents at
    table version `version`, `indexing.graph.build_graph`) and mark them current, in one
    transaction (op "graph": a failure or a kill leaves the tables and the catalogue entry as
    before). The collection's table gets an empty commit (a delete of no rows), so its state
    key changes and every cache of it, in any process, re-reads it with its graph. A
    `GraphOutdated` error, and nothing written, when the collection changed since `version`, or
    is another one since (`created` or the recorded `incarnation` differs: deleted and created
    again, where LanceDB's version numbers start again and may reach `version`)."""
    with store.writer_lock(name):
        info = store.info(name)
        table = store.db.open_table(name)
        if (table.version != version or (created is not None and info.created != created)
                or (incarnation is not None and store.recorded_incarnation(name) != incarnation)):
            raise GraphOutdated(f"{name!r} changed while its entity graph was built (version {version} → "
                                f"{table.version}, created {created} → {info.created})")
        with store.transaction(name, "graph", [name, *graph_table_names(name)]):
            move_version(table)
            existing = set(store.table_names())
            for kind in GRAPH_KINDS:
                table_name = aux_table_name(name, kind)
                if table_name in existing:
                    store.db.open_table(table_name).add(tables[kind], mode="overwrite")
                else:
                    store.db.create_table(table_name, tables[kind], schema=tables[kind].schema)
                crash_point(f"graph:{kind}")
            info.graph = ""
            info.updated = now_iso()
            store.write_info(info)
            crash_point("graph:catalogue")
        return info
