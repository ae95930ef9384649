"""Collections in embedded LanceDB: one table per collection plus a catalogue table.

Location: `$WORKBENCH_DB` if set (any LanceDB URI: a folder, or object storage such as
`s3://bucket/path`), else `<repo>/data/lancedb`.

Each collection table has one row per document: id, title, text, tokens (the analyser's terms,
space-joined, so they can be shown and indexed), n_tokens, language, vector, metadata (JSON
text), and chunk fields (parent_id, chunk_index, start_line, end_line). A native full-text index
over `tokens` (whitespace tokenizer, LanceDB's own processing off) serves the scale BM25 backend.

Writes are all-or-nothing: input is parsed, validated, tokenised and embedded in memory first;
the table is written in one commit; if anything after that fails the table is restored to its
previous version (or dropped, for a new collection). One writer per collection at a time.
"""

from __future__ import annotations

import json
import os
import re
import functools
import threading
import uuid
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa

from .tokenize import TOKENIZER_NAME, corpus_language, document_language, language_from_mix, tokenize
from .types import Document, IngestError, ParsedCorpus, RetrievalError

os.environ.setdefault("LANCEDB_LOG", "error")

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


def _schema(dim: int) -> pa.Schema:
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


def embedding_text(doc: Document) -> str:
    """What the encoder and BM25 see: title and text together, as BEIR systems index them."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


class Store:
    """Collections and their catalogue in one LanceDB database."""

    def __init__(self, uri: str | None = None):
        self.uri = uri or default_db_uri()
        if "://" not in self.uri:
            Path(self.uri).mkdir(parents=True, exist_ok=True)
        # Interval 0: every read sees the latest committed version, also another process's.
        self.db = lancedb.connect(self.uri, read_consistency_interval=timedelta(0))
        self._locks: dict[str, threading.Lock] = {}
        self._handles: dict[str, Any] = {}
        self._incarnations: dict[str, str] = {}
        self.writes = 0  # how many writes went through this Store (and its judgments/configs)
        self._locks_guard = threading.Lock()

    # ---- catalogue -------------------------------------------------------------------------
    def _lock(self, name: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(name, threading.Lock())

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

    def writer_lock(self, name: str) -> threading.Lock:
        """The lock every write to collection `name` (and its auxiliary tables) holds; a reader
        that must see the collection and its auxiliary tables at one state holds it too."""
        return self._lock(validate_collection_name(name))

    # ---- writes ----------------------------------------------------------------------------
    @counts_as_write
    def create(
        self,
        name: str,
        corpus: ParsedCorpus,
        model: str | None = None,
        description: str = "",
        progress: Progress | None = None,
    ) -> CollectionInfo:
        """Create a collection from parsed documents; the model defaults by corpus language."""
        from .embed import default_model_for, load_encoder

        validate_collection_name(name)
        with self._lock(name):
            if self._has_table(name):
                raise RetrievalError(f"Collection {name!r} already exists: add to it, or delete it first")
            _check_documents(corpus.documents)
            language = corpus_language(embedding_text(d) for d in corpus.documents)
            encoder = load_encoder(model or default_model_for(language))
            data = _build_rows(corpus.documents, encoder, progress)
            graph_rows = _graph_rows(corpus.documents, datetime.now(timezone.utc), progress)
            now = _now()
            info = CollectionInfo(
                name=name, model=encoder.spec.name, dim=encoder.spec.dim, tokenizer=TOKENIZER_NAME,
                language=language, doc_count=len(corpus.documents), created=now, updated=now,
                lancedb_version=lancedb.__version__, description=description,
            )
            table = self.db.create_table(name, data, schema=_schema(encoder.spec.dim))
            try:
                _index_tokens(table)
                self._write_graph_tables(name, graph_rows)
                self._write_info(info)
            except Exception:
                self._restore_aux(name, dict.fromkeys(GRAPH_KINDS))
                self.db.drop_table(name)
                raise
            return info

    @counts_as_write
    def add(self, name: str, corpus: ParsedCorpus, progress: Progress | None = None) -> CollectionInfo:
        """Add documents to an existing collection with its recorded model. All or nothing."""
        from .embed import load_encoder

        with self._lock(name):
            info = self.info(name)
            table = self.db.open_table(name)
            _check_documents(corpus.documents)
            new_ids = [d.id for d in corpus.documents]
            clashes = self._existing_ids(table, new_ids)
            if clashes:
                raise IngestError(
                    f"{len(clashes)} document id(s) already exist in {name!r}; nothing was added",
                    [f"id {i!r} is already in the collection" for i in sorted(clashes)],
                )
            encoder = load_encoder(info.model)
            if encoder.spec.dim != info.dim:
                raise RetrievalError(f"Model {info.model!r} now gives {encoder.spec.dim}-d vectors, "
                                     f"the collection holds {info.dim}-d ones")
            data = _build_rows(corpus.documents, encoder, progress)
            graph_rows = _graph_rows(corpus.documents, datetime.now(timezone.utc), progress)
            graph_before = self._aux_versions(name, GRAPH_KINDS)
            if graph_before["entities"] is None and table.count_rows():
                # Collection ingested before the entity graph existed: index its documents too.
                from .entities import merge_entities

                old = self._graph_rows_of_table(table, datetime.fromisoformat(info.created))
                graph_rows = {"entities": merge_entities(old["entities"], graph_rows["entities"]),
                              "event_entities": old["event_entities"] + graph_rows["event_entities"],
                              "event_times": old["event_times"] + graph_rows["event_times"]}
            before = table.version
            table.add(data)
            try:
                _index_tokens(table)
                self._write_graph_tables(name, graph_rows)
                languages = table.search().select(["language"]).limit(None).to_arrow().column("language")
                info.language = language_from_mix(languages.to_pylist())
                info.doc_count = table.count_rows()
                info.updated = _now()
                self._write_info(info)
            except Exception:
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

    def _graph_rows_of_table(self, table, ingested: datetime) -> dict[str, list[dict]]:
        """Entity rows for the documents already stored in a collection table."""
        stored = table.search().select(["id", "title", "text", "metadata"]).limit(None).to_arrow().to_pylist()
        docs = [Document(id=r["id"], text=r["text"] or "", title=r["title"] or "",
                         metadata=json.loads(r["metadata"] or "{}")) for r in stored]
        return _graph_rows(docs, ingested, None)

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
            info.updated = _now()
            self._write_info(info)
            return info

    # ---- reads -----------------------------------------------------------------------------
    def _existing_ids(self, table, ids: list[str]) -> set[str]:
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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _check_documents(documents: list[Document]) -> None:
    """Last line of defence before a write (parsers report problems with row numbers first)."""
    if not documents:
        raise IngestError("No documents to ingest")
    problems = []
    seen: set[str] = set()
    for doc in documents:
        if not doc.id or not doc.id.strip():
            problems.append("a document has an empty id")
        elif doc.id in seen:
            problems.append(f"id {doc.id!r} appears more than once")
        seen.add(doc.id)
        if not doc.text or not doc.text.strip():
            problems.append(f"document {doc.id!r} has empty text")
    if problems:
        raise IngestError("Documents rejected; nothing was written", problems)


def _build_rows(documents: list[Document], encoder, progress: Progress | None) -> pa.Table:
    """Tokenise and embed in memory: nothing touches the table until this has fully succeeded."""
    total = len(documents)
    texts = [embedding_text(d) for d in documents]
    token_lists = []
    for i, text in enumerate(texts):
        token_lists.append(tokenize(text))
        if progress and (i % 500 == 0 or i == total - 1):
            progress("tokenising", i + 1, total)
    vectors = encoder.encode_passages(
        texts, progress=(lambda done, n: progress("embedding", done, n)) if progress else None
    )
    return pa.table(
        {
            "id": [d.id for d in documents],
            "title": [d.title for d in documents],
            "text": [d.text for d in documents],
            "tokens": [" ".join(t) for t in token_lists],
            "n_tokens": pa.array([len(t) for t in token_lists], pa.int32()),
            "language": [document_language(t) for t in texts],
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(np.asarray(vectors, dtype=np.float32).ravel()), encoder.spec.dim
            ),
            "metadata": [json.dumps(d.metadata, ensure_ascii=False, default=str) for d in documents],
            "parent_id": [d.parent_id for d in documents],
            "chunk_index": pa.array([d.chunk_index for d in documents], pa.int32()),
            "start_line": pa.array([d.start_line for d in documents], pa.int32()),
            "end_line": pa.array([d.end_line for d in documents], pa.int32()),
        },
        schema=_schema(encoder.spec.dim),
    )


def _graph_rows(documents: list[Document], ingested: datetime, progress: Progress | None) -> dict[str, list[dict]]:
    """Entities, event–entity links and event times of `documents`, in memory (entities.py)."""
    from .entities import graph_table_rows

    if progress:
        progress("finding entities", 0, len(documents))
    rows = graph_table_rows(documents, ingested)
    if progress:
        progress("finding entities", len(documents), len(documents))
    return rows


def _index_tokens(table) -> None:
    """(Re)build the native BM25 index over our own tokens, with LanceDB's processing off."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        table.create_fts_index(
            "tokens", use_tantivy=False, replace=True, base_tokenizer="whitespace",
            lower_case=False, stem=False, remove_stop_words=False, ascii_folding=False,
            max_token_length=None,
        )
