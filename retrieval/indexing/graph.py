"""The entity graph of a large collection, built after its ingest (issue 9: entity extraction never
blocks a large ingest).

An ingest that leaves a collection with at least `limits.GRAPH_INLINE_MAX` documents skips entity
extraction and marks the collection's graph "pending" (`CollectionInfo.graph`); below it every
ingest writes the graph tables as always (`graph_inline`). A collection created with the graph
setting "off" (`graph_setting`: chosen at upload, "auto" picks it for large flat corpora) skips
extraction at every ingest and records "off" until the user builds it. `build_graph` then reads the stored
documents in batches from one pinned table version (no lock: ingests and searches go on), extracts
their entities batch by batch (`entity_tables.graph_table_rows`, entity counts merged as the streaming
ingest merges them), and writes the three graph tables in ONE transaction under the collection's
writer lock (`indexing.writer.write_graph`): a failure or a kill leaves the collection as before. If the
collection changed meanwhile it starts again from the new version.

Dates: a document whose metadata has no date is dated by its ingest, as at an inline ingest; a
document whose date is in the existing (out-of-date) tables keeps it; one that was never indexed
is dated by the collection's last write (`CollectionInfo.updated`).
"""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa

from retrieval import limits
from retrieval.indexing.writer import GraphOutdated, write_graph
from retrieval.store import CollectionInfo, Progress, Store
from retrieval.text.entity_tables import graph_schemas, graph_table_rows, merge_entities
from retrieval.types import Document, RetrievalError

GRAPH_SETTINGS = ("auto", "on", "off")  # a new collection's entity graph, chosen at upload (`graph_setting`)
OFF = "off"  # `CollectionInfo.graph` of a collection whose graph is built only when the user asks
STAGE = "finding entities"
BATCH_SIZE = 2_000
ATTEMPTS = 3  # builds started again when the collection changed while one ran


def graph_inline(documents_after: int, info: CollectionInfo | None = None) -> bool:
    """Whether an ingest leaving the collection with `documents_after` documents writes its graph
    tables itself: below `limits.GRAPH_INLINE_MAX`, and unless its graph is already pending (the
    new rows alone would make incomplete tables current) or off (`graph_setting`)."""
    if info is not None and info.graph in ("pending", OFF):
        return False
    return documents_after < limits.GRAPH_INLINE_MAX


def graph_setting(setting: str, documents: int, chunked: bool) -> str:
    """A new collection's entity graph setting, "on" or "off", from the one asked for at upload
    (`GRAPH_SETTINGS`): "on" extracts entities at ingest (inline below `limits.GRAPH_INLINE_MAX`
    documents, else pending and built after the ingest), "off" extracts none: the catalogue
    records the graph "off" and it is built only when the user asks (the Graph page's button,
    `collections graph NAME`: the same `build_graph`). "auto": "off" for a flat corpus (no
    document is a chunk of a file, `chunked` False: CSV, JSONL, BEIR records) of at least
    `limits.GRAPH_AUTO_FLAT_MAX` documents, else "on" (Markdown, text, PDF chunks and small corpora)."""
    if setting not in GRAPH_SETTINGS:
        raise RetrievalError(f"Unknown entity graph setting {setting!r}; choose one of {', '.join(GRAPH_SETTINGS)}")
    if setting != "auto":
        return setting
    return OFF if not chunked and documents >= limits.GRAPH_AUTO_FLAT_MAX else "on"


def build_graph(store: Store, name: str, progress: Progress | None = None,
                batch_size: int = BATCH_SIZE) -> CollectionInfo:
    """Build collection `name`'s entity graph tables from its stored documents and mark them
    current (module doc). `progress("finding entities", done, total)` after every batch."""
    for attempt in range(ATTEMPTS):
        try:
            return _build_once(store, name, progress, batch_size)
        except GraphOutdated:
            if attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _build_once(store: Store, name: str, progress: Progress | None, batch_size: int) -> CollectionInfo:
    info, incarnation = store.info(name), store.recorded_incarnation(name)
    table = store.db.open_table(name)
    version = table.version
    table.checkout(version)  # this handle reads one version, whatever is written meanwhile
    total = table.count_rows()
    kept = _kept_dates(store, name)
    ingested = datetime.fromisoformat(info.updated)
    if progress:
        progress(STAGE, 0, total)
    entities: dict[str, dict] = {}
    links: list[pa.Table] = []
    times: list[pa.Table] = []
    schemas = graph_schemas()
    done = 0
    reader = table.search().select(["id", "title", "text", "metadata"]).limit(None).to_batches(batch_size)
    for batch in reader:
        documents = [Document(id=r["id"], text=r["text"] or "", title=r["title"] or "",
                              metadata=json.loads(r["metadata"] or "{}")) for r in batch.to_pylist()]
        rows = graph_table_rows(documents, ingested)
        for row in rows["event_times"]:
            if row["date_source"] == "ingest" and row["event_id"] in kept:
                row["date"] = kept[row["event_id"]]
        links.append(pa.Table.from_pylist(rows["event_entities"], schema=schemas["event_entities"]))
        times.append(pa.Table.from_pylist(rows["event_times"], schema=schemas["event_times"]))
        for row in rows["entities"]:
            known = entities.get(row["id"])
            if known is None:
                entities[row["id"]] = dict(row)
            else:
                known["event_count"] += row["event_count"]
        done += len(documents)
        if progress:
            progress(STAGE, done, total)
    tables = {
        "entities": pa.Table.from_pylist(merge_entities([], entities.values()), schema=schemas["entities"]),
        "event_entities": _concat(links, schemas["event_entities"]),
        "event_times": _concat(times, schemas["event_times"]),
    }
    return write_graph(store, name, version, tables, created=info.created, incarnation=incarnation)


def _concat(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables(parts).combine_chunks() if parts else schema.empty_table()


def _kept_dates(store: Store, name: str) -> dict[str, str]:
    """Ingest dates of the documents the existing (out-of-date) tables hold: id -> ISO date."""
    tables = store.graph_tables(name)
    if tables is None:
        return {}
    times = tables["event_times"]
    return {i: d for i, d, s in zip(times.column("event_id").to_pylist(), times.column("date").to_pylist(),
                                    times.column("date_source").to_pylist(), strict=True) if s == "ingest"}
