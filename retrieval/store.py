"""Collections in embedded LanceDB: one table per collection plus a catalogue table.

Location: `$WORKBENCH_DB` if set (any LanceDB URI: a folder, or object storage such as
`s3://bucket/path`), else `<repo>/data/lancedb`.

Each collection table has one row per document: id, title, text, tokens (the analyser's terms,
space-joined, so they can be shown and indexed), n_tokens, language, vector, metadata (JSON
text), and chunk fields (parent_id, chunk_index, start_line, end_line). A native full-text index
over `tokens` (whitespace tokenizer, LanceDB's own processing off) serves the scale BM25 backend.

The store owns collections, their tables, the catalogue and versions, and nothing else: rows
arrive ready (tokenised, embedded, entities extracted) from the ingest pipeline (`pipeline.py`).
Writes are all-or-nothing: the table is written in one commit; if anything after that fails the
table is restored to its previous version (or dropped, for a new collection). One writer per
collection at a time (`writer_lock`, re-entrant so the pipeline can hold it around a whole ingest).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import threading
import uuid
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa

from .tokenize import language_from_mix
from .types import RetrievalError

os.environ.setdefault("LANCEDB_LOG", "error")
log = logging.getLogger(__name__)

REPO_DIR = Path(__file__).resolve().parent.parent
CATALOGUE_TABLE = "_catalogue"
# Tables that belong to a collection sit beside it as `_<kind>__<collection>` (a collection name
# never starts with '_', so they are never listed as collections). Kind -> whether the table
# holds per-document data (dropped by `clear` too) or data about the collection (kept by `clear`).
AUX_KINDS: dict[str, bool] = {
    "queries": False,  # query sets (judgments.py): kept by clear, dropped by delete
    "judgments": False,  # graded judgments of those query sets (judgments.py)
    # The entity graph (entities.py, sources/graph.py), written at every ingest:
    "entities": True,  # typed entities: id, type, name, normalized_name, event_count
    "event_entities": True,  # chunk (event) id -> entity id
    "event_times": True,  # each chunk's date for the time decay, and where it came from
}
GRAPH_KINDS = ("entities", "event_entities", "event_times")
COLLECTION_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def default_db_uri() -> str:
    return os.environ.get("WORKBENCH_DB") or str(REPO_DIR / "data" / "lancedb")


def validate_collection_name(name: str, what: str = "collection name") -> str:
    """Names are 1–64 characters of a–z, 0–9, '_' and '-', starting with a letter or digit.

    They become (parts of) LanceDB table names, so nothing else (no dots, slashes or spaces) is
    allowed. `what` names the kind of name in the error (query sets follow the same rule).
    """
    if not isinstance(name, str) or not COLLECTION_NAME_RE.match(name):
        raise RetrievalError(
            f"Invalid {what} {name!r}: use 1–64 characters from a–z, 0–9, '_' and '-', "
            "starting with a letter or digit"
        )
    return name


def aux_table_name(collection: str, kind: str) -> str:
    """The name of a collection's auxiliary table of `kind` (a key of `AUX_KINDS`)."""
    if kind not in AUX_KINDS:
        raise ValueError(f"unknown auxiliary table kind {kind!r}")
    return f"_{kind}__{validate_collection_name(collection)}"


def counts_as_write(method):
    """Decorator for a method of an object with a `store` (or of the Store itself) that writes:
    afterwards, even when it failed half-way and restored, `Store.writes` has grown, so readers
    that memoise what they read (the Evaluate page) know to read again."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        finally:
            getattr(self, "store", self).note_write()
    return wrapper


def sql_string(value: str) -> str:
    """A SQL string literal for LanceDB filters: single quotes doubled."""
    return "'" + value.replace("'", "''") + "'"


@dataclass
class CollectionInfo:
    name: str
    model: str
    dim: int
    tokenizer: str
    language: str
    doc_count: int
    created: str
    updated: str
    lancedb_version: str
    description: str = ""


@dataclass
class CollectionStats:
    info: CollectionInfo
    version: int
    doc_count: int
    avg_tokens: float
    avg_chars: float
    language_mix: dict[str, int]
    chunked_docs: int
    metadata_fields: list[str]


def collection_schema(dim: int) -> pa.Schema:
    """The columns of a collection table whose vectors have `dim` dimensions."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("title", pa.string()),
            pa.field("text", pa.string()),
            pa.field("tokens", pa.string()),
            pa.field("n_tokens", pa.int32()),
            pa.field("language", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            pa.field("metadata", pa.string()),
            pa.field("parent_id", pa.string()),
            pa.field("chunk_index", pa.int32()),
            pa.field("start_line", pa.int32()),
            pa.field("end_line", pa.int32()),
        ]
    )


_CATALOGUE_SCHEMA = pa.schema([pa.field(f, pa.int64() if f in ("dim", "doc_count") else pa.string())
                               for f in CollectionInfo.__dataclass_fields__])

DOCUMENT_COLUMNS = ["id", "title", "text", "tokens", "metadata", "parent_id", "chunk_index",
                    "start_line", "end_line", "language"]


class Store:
    """Collections and their catalogue in one LanceDB database."""

    def __init__(self, uri: str | None = None):
        self.uri = uri or default_db_uri()
        if "://" not in self.uri:
            Path(self.uri).mkdir(parents=True, exist_ok=True)
        # Interval 0: every read sees the latest committed version, also another process's.
        self.db = lancedb.connect(self.uri, read_consistency_interval=timedelta(0))
        self._locks: dict[str, threading.RLock] = {}
        self._handles: dict[str, Any] = {}
        self._incarnations: dict[str, str] = {}
        self.writes = 0  # how many writes went through this Store (and its judgments/configs)
        self._locks_guard = threading.Lock()

    # ---- catalogue -------------------------------------------------------------------------
    def _lock(self, name: str) -> threading.RLock:
        with self._locks_guard:
            return self._locks.setdefault(name, threading.RLock())

    def _table_names(self) -> list[str]:
        names: list[str] = []
        token = None
        while True:
            response = self.db.list_tables(page_token=token)
            names.extend(response.tables)
            token = response.page_token
            if not token:
                return names

    def _has_table(self, name: str) -> bool:
        return name in self._table_names()

    def _catalogue(self):
        if self._has_table(CATALOGUE_TABLE):
            return self.db.open_table(CATALOGUE_TABLE)
        return self.db.create_table(CATALOGUE_TABLE, schema=_CATALOGUE_SCHEMA, exist_ok=True)

    def _write_info(self, info: CollectionInfo) -> None:
        cat = self._catalogue()
        cat.delete(f"name = {sql_string(info.name)}")
        cat.add(pa.Table.from_pylist([asdict(info)], schema=_CATALOGUE_SCHEMA))

    def list_collections(self) -> list[CollectionInfo]:
        if not self._has_table(CATALOGUE_TABLE):
            return []
        rows = self._catalogue().search().limit(None).to_arrow().to_pylist()
        existing = {n for n in self._table_names() if not n.startswith("_")}
        return sorted((CollectionInfo(**r) for r in rows if r["name"] in existing), key=lambda i: i.name)

    def collection_names(self) -> list[str]:
        """Collection names from the table listing alone (~1 ms, vs ~10 ms for the catalogue scan
        of `list_collections`): cheap enough for a picker redrawn on every slider move."""
        return sorted(n for n in self._table_names() if not n.startswith("_"))

    def info(self, name: str) -> CollectionInfo:
        validate_collection_name(name)
        rows = (self._catalogue().search().where(f"name = {sql_string(name)}").limit(1)
                .to_arrow().to_pylist()) if self._has_table(CATALOGUE_TABLE) else []
        if not rows or not self._has_table(name):
            known = ", ".join(i.name for i in self.list_collections()) or "none yet"
            raise RetrievalError(f"No collection named {name!r} (collections: {known})")
        return CollectionInfo(**rows[0])

    def exists(self, name: str) -> bool:
        try:
            self.info(name)
            return True
        except RetrievalError:
            return False

    def table(self, name: str):
        """An open handle (kept per collection: with consistency interval 0 it stays current)."""
        validate_collection_name(name)
        handle = self._handles.get(name)
        if handle is None:
            if not self._has_table(name):
                self.info(name)  # raises the readable "no collection named …" error
            handle = self._handles[name] = self.db.open_table(name)
            self._incarnations[name] = uuid.uuid4().hex
        return handle

    def version(self, name: str) -> int:
        """The collection's LanceDB table version: bumps on every write."""
        return self.table(name).version

    def state_key(self, name: str) -> tuple[str, int]:
        """What caches of a collection's data key on: the table version, and an id given to the
        handle when it is opened. LanceDB restarts version numbers when a table is dropped and
        created again, so the version alone would let a deleted and re-ingested collection of
        the same name hit the old collection's caches; `delete` drops the handle, so a re-created
        collection gets a new id."""
        table = self.table(name)
        return (self._incarnations[name], table.version)

    def note_write(self) -> None:
        with self._locks_guard:
            self.writes += 1

    def writer_lock(self, name: str) -> threading.RLock:
        """The lock every write to collection `name` (and its auxiliary tables) holds; a reader
        that must see the collection and its auxiliary tables at one state holds it too."""
        return self._lock(validate_collection_name(name))

    def has_table(self, name: str) -> bool:
        """Whether the collection's table exists (also before its catalogue entry does)."""
        return self._has_table(validate_collection_name(name))

    # ---- writes ----------------------------------------------------------------------------
    @counts_as_write
    def write_collection(self, info: CollectionInfo, rows: pa.Table,
                         graph_rows: dict[str, list[dict]]) -> CollectionInfo:
        """Create collection `info.name` from prepared rows (`collection_schema(info.dim)`) and its
        entity graph rows, with its native BM25 index and catalogue entry. All or nothing."""
        name = validate_collection_name(info.name)
        with self._lock(name):
            if self._has_table(name):
                raise RetrievalError(f"Collection {name!r} already exists: add to it, or delete it first")
            table = self.db.create_table(name, rows, schema=collection_schema(info.dim))
            try:
                _index_tokens(table)
                self._write_graph_tables(name, graph_rows)
                self._write_info(info)
            except Exception:
                log.warning("creating %s failed after its table was written: dropping it", name, exc_info=True)
                self._restore_aux(name, dict.fromkeys(GRAPH_KINDS))
                self.db.drop_table(name)
                raise
            return info

    @counts_as_write
    def append(self, name: str, rows: pa.Table, graph_rows: dict[str, list[dict]]) -> CollectionInfo:
        """Append prepared rows and their entity graph rows to an existing collection; update its
        catalogue entry (document count, language mix, time). All or nothing."""
        with self._lock(name):
            info = self.info(name)
            table = self.db.open_table(name)
            graph_before = self._aux_versions(name, GRAPH_KINDS)
            before = table.version
            table.add(rows)
            try:
                _index_tokens(table)
                self._write_graph_tables(name, graph_rows)
                languages = table.search().select(["language"]).limit(None).to_arrow().column("language")
                info.language = language_from_mix(languages.to_pylist())
                info.doc_count = table.count_rows()
                info.updated = now_iso()
                self._write_info(info)
            except Exception:
                log.warning("adding to %s failed after the append: restoring version %s", name, before,
                            exc_info=True)
                table.restore(before)
                self._restore_aux(name, graph_before)
                raise
            return info

    # ---- entity graph tables (see entities.py) ----------------------------------------------
    def _aux_versions(self, name: str, kinds) -> dict[str, int | None]:
        """Current version of each auxiliary table of `kinds` (None: the table does not exist)."""
        existing = set(self._table_names())
        return {kind: (self.db.open_table(aux_table_name(name, kind)).version
                       if aux_table_name(name, kind) in existing else None) for kind in kinds}

    def _restore_aux(self, name: str, versions: dict[str, int | None]) -> None:
        """Put auxiliary tables back as `_aux_versions` found them: restore, or drop new ones."""
        existing = set(self._table_names())
        for kind, version in versions.items():
            table_name = aux_table_name(name, kind)
            if table_name not in existing:
                continue
            if version is None:
                self.db.drop_table(table_name)
            else:
                table = self.db.open_table(table_name)
                if table.version != version:
                    table.restore(version)

    def _write_graph_tables(self, name: str, rows: dict[str, list[dict]]) -> None:
        """Append links and times, merge entity counts (rewrites the small entities table)."""
        from .entities import graph_schemas, merge_entities

        schemas = graph_schemas()
        existing = set(self._table_names())
        for kind in GRAPH_KINDS:
            table_name, schema = aux_table_name(name, kind), schemas[kind]
            if table_name not in existing:
                self.db.create_table(table_name, pa.Table.from_pylist(rows[kind], schema=schema), schema=schema)
                continue
            table = self.db.open_table(table_name)
            if kind == "entities":
                merged = merge_entities(table.to_arrow().to_pylist(), rows[kind])
                table.add(pa.Table.from_pylist(merged, schema=schema), mode="overwrite")
            elif rows[kind]:
                table.add(pa.Table.from_pylist(rows[kind], schema=schema))

    def has_graph_tables(self, name: str) -> bool:
        """False for a collection ingested before the entity graph tables existed."""
        existing = set(self._table_names())
        return all(aux_table_name(name, kind) in existing for kind in GRAPH_KINDS)

    def graph_tables(self, name: str) -> dict[str, pa.Table] | None:
        """The collection's entity graph tables (None when it was ingested before they existed)."""
        self.info(name)
        existing = set(self._table_names())
        names = {kind: aux_table_name(name, kind) for kind in GRAPH_KINDS}
        if not all(n in existing for n in names.values()):
            return None
        return {kind: self.db.open_table(n).to_arrow() for kind, n in names.items()}

    @counts_as_write
    def build_vector_index(self, name: str, index_type: str = "IVF_PQ", num_partitions: int | None = None) -> None:
        """An approximate vector index for large collections (exact search is fine below ~100k).

        The dense source then asks LanceDB to re-score its shortlist with full vectors
        (`refine_factor`), so reported similarities stay exact. Bumps the collection version.
        """
        with self._lock(name):
            table = self.table(name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                table.create_index(metric="cosine", index_type=index_type, num_partitions=num_partitions,
                                   vector_column_name="vector", replace=True)

    @counts_as_write
    def delete(self, name: str) -> None:
        """Drop the collection, its auxiliary tables and its catalogue entry."""
        with self._lock(name):
            self.info(name)
            self._handles.pop(name, None)
            self._drop_aux(name, every=True)
            self.db.drop_table(name)
            self._catalogue().delete(f"name = {sql_string(name)}")

    def _drop_aux(self, name: str, every: bool) -> None:
        existing = set(self._table_names())
        for kind, per_document in AUX_KINDS.items():
            table_name = aux_table_name(name, kind)
            if (every or per_document) and table_name in existing:
                self._handles.pop(table_name, None)
                self.db.drop_table(table_name)

    @counts_as_write
    def clear(self, name: str) -> CollectionInfo:
        """Remove every document but keep the collection, its model and its history."""
        with self._lock(name):
            info = self.info(name)
            table = self.db.open_table(name)
            table.delete("true")
            self._drop_aux(name, every=False)
            info.doc_count = 0
            info.updated = now_iso()
            self._write_info(info)
            return info

    # ---- reads -----------------------------------------------------------------------------
    def existing_ids(self, name: str, ids: list[str]) -> set[str]:
        """Which of `ids` the collection already holds."""
        table = self.table(name)
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            where = "id IN (" + ", ".join(sql_string(i) for i in chunk) + ")"
            rows = table.search().where(where).select(["id"]).limit(None).to_arrow()
            found.update(rows.column("id").to_pylist())
        return found

    def documents(self, name: str, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Rows (without vectors) for the given ids, metadata parsed from JSON."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        table = self.table(name)
        out: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            where = "id IN (" + ", ".join(sql_string(i) for i in chunk) + ")"
            rows = table.search().where(where).select(DOCUMENT_COLUMNS).limit(None).to_arrow().to_pylist()
            for row in rows:
                row["metadata"] = json.loads(row["metadata"] or "{}")
                out[row["id"]] = row
        return out

    def column(self, name: str, columns: list[str]) -> pa.Table:
        """Whole columns of a collection (e.g. id and tokens to build BM25), in storage order."""
        return self.table(name).search().select(columns).limit(None).to_arrow()

    def stats(self, name: str) -> CollectionStats:
        info = self.info(name)
        table = self.db.open_table(name)
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


def now_iso() -> str:
    """Now, UTC, to the second: the catalogue's time format."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _index_tokens(table) -> None:
    """(Re)build the native BM25 index over our own tokens, with LanceDB's processing off."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        table.create_fts_index(
            "tokens", use_tantivy=False, replace=True, base_tokenizer="whitespace",
            lower_case=False, stem=False, remove_stop_words=False, ascii_folding=False,
            max_token_length=None,
        )
