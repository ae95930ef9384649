"""Collections in embedded LanceDB: one table per collection plus a catalogue table.

Location: `$WORKBENCH_DB` if set (any LanceDB URI: a folder, or object storage such as
`s3://bucket/path`), else `<repo>/data/lancedb`. Object storage takes LanceDB's `storage_options`
(the `Store` argument, else `$WORKBENCH_STORAGE_OPTIONS` as JSON, else LanceDB reads `AWS_*`
variables); the store works there unchanged (tests/test_object_storage.py, docs/scale.md).

Each collection table has one row per document: id, title, text, tokens (the analyser's terms,
space-joined, so they can be shown and indexed), n_tokens, language, vector, metadata (JSON
text), and chunk fields (parent_id, chunk_index, start_line, end_line). A native full-text index
over `tokens` (whitespace tokenizer, LanceDB's own processing off) serves the scale BM25 backend.

The store owns collections, their tables, the catalogue and versions, and nothing else: rows
arrive ready (tokenised, embedded, entities extracted) from the ingest pipeline (`pipeline.py`).

Writer protocol (docs/reliability.md). Every write to a collection (create, add, clear, delete,
ratings) holds the collection's writer lock: a thread lock plus an OS file lock
(`<db>/_workbench_locks/<name>.lock`, or for object storage a local folder per URI, `lock_dir`;
flock: released by the OS when the holder dies, so a killed writer never leaves it taken), so one
writer at a time across threads *and* processes of one machine; the
catalogue and the saved configs have locks of their own, always taken after a collection's.
Under the lock a write first records a journal (`<name>.journal.json`: the operation and the
version of every table it will touch, and the catalogue entry before it), then writes, then
removes the journal. If the write fails, or the process is killed, the journal stays; the next
holder of the lock (any write, any process) rolls it back: tables restored to their recorded
versions or dropped if they did not exist, the catalogue entry put back; a clear or delete is
finished instead (dropping cannot be undone). Restoring is safe because nobody else can have
committed to those tables while the lock was held. A conflicting commit is never "fixed" by
restoring an older version over someone else's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
from filelock import FileLock, Timeout

from .names import TABLE_NAME_RE, display_name, labels, table_name_for
from .tokenize import language_from_mix
from .types import IngestError, RetrievalError

os.environ.setdefault("LANCEDB_LOG", "error")
log = logging.getLogger(__name__)

REPO_DIR = Path(__file__).resolve().parent.parent
CATALOGUE_TABLE = "_catalogue"
LOCK_DIR_NAME = "_workbench_locks"  # not a LanceDB table (no .lance suffix): never listed
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
COLLECTION_NAME_RE = TABLE_NAME_RE  # fullmatch: no trailing newline

Progress = Callable[[str, int, int], None]  # (stage, done, total)


class GraphOutdated(RetrievalError):
    """The collection changed while its entity graph was built from it (`Store.write_graph`)."""


def default_db_uri() -> str:
    return os.environ.get("WORKBENCH_DB") or str(REPO_DIR / "data" / "lancedb")


def is_remote(uri: str) -> bool:
    """Whether `uri` is a URL (object storage: `s3://…`, `gs://…`, `az://…`), not a local folder."""
    return "://" in uri


def default_storage_options() -> dict[str, str] | None:
    """LanceDB's `storage_options` for object storage from `$WORKBENCH_STORAGE_OPTIONS` (a JSON
    object of strings, e.g. `{"aws_endpoint": "http://127.0.0.1:9000", "allow_http": "true"}`),
    else None: LanceDB then reads the usual `AWS_*` variables (AWS_ENDPOINT, AWS_REGION,
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ALLOW_HTTP) and the AWS credential chain."""
    raw = os.environ.get("WORKBENCH_STORAGE_OPTIONS")
    if not raw:
        return None
    try:
        options = json.loads(raw)
    except ValueError as exc:
        raise RetrievalError(f"WORKBENCH_STORAGE_OPTIONS is not JSON: {exc}") from None
    if not isinstance(options, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in options.items()):
        raise RetrievalError("WORKBENCH_STORAGE_OPTIONS must be a JSON object of strings, "
                             'e.g. {"aws_endpoint": "http://127.0.0.1:9000", "allow_http": "true"}')
    return options


def crash_point(step: str) -> None:
    """Where the reliability tests kill a writer: with `WORKBENCH_PAUSE_AT=<step>` the process
    writes `<step>` to `$WORKBENCH_PAUSE_FILE` and waits there to be killed (`kill -9`). A no-op
    otherwise (one environment lookup)."""
    if os.environ.get("WORKBENCH_PAUSE_AT") == step:
        Path(os.environ["WORKBENCH_PAUSE_FILE"]).write_text(step, encoding="utf-8")
        while True:
            threading.Event().wait(60)


def lock_dir(uri: str) -> Path:
    """Where the writer locks and journals of database `uri` live: inside a local database; for
    object storage (`s3://…`) in a local folder (`$WORKBENCH_LOCK_DIR`, else data/locks), one per
    URI, so they coordinate the processes of this machine only (see docs/reliability.md)."""
    if not is_remote(uri):
        return Path(uri) / LOCK_DIR_NAME
    base = Path(os.environ.get("WORKBENCH_LOCK_DIR") or REPO_DIR / "data" / "locks")
    return base / hashlib.sha1(uri.rstrip("/").encode()).hexdigest()[:16]


class WriterLock:
    """Exclusive across threads (a re-entrant thread lock) and processes (an OS file lock taken by
    the outermost entry). `on_acquire` runs when the file lock has just been taken (recovery)."""

    def __init__(self, path: Path, on_acquire: Callable[[], None] | None = None):
        self._thread = threading.RLock()
        self._file = FileLock(str(path), thread_local=False)
        self._depth = 0
        self._on_acquire = on_acquire

    def __enter__(self) -> WriterLock:
        self._thread.acquire()
        try:
            self._enter(timeout=-1)
        except BaseException:
            self._thread.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._file.release()
        self._thread.release()

    def _enter(self, timeout: float) -> None:
        """With the thread lock held: the outermost entry takes the file lock (waiting up to
        `timeout`, -1 for ever) and runs `on_acquire`."""
        if self._depth == 0:
            self._file.acquire(timeout=timeout)
            try:
                if self._on_acquire is not None:
                    self._on_acquire()
            except BaseException:
                self._file.release()
                raise
        self._depth += 1

    def try_acquire(self) -> bool:
        """Take the lock only if nobody holds it (no waiting); True when taken (then `__exit__`)."""
        if not self._thread.acquire(blocking=False):
            return False
        try:
            self._enter(timeout=0)
        except Timeout:  # another process holds it
            self._thread.release()
            return False
        except BaseException:
            self._thread.release()
            raise
        return True


def validate_collection_name(name: str, what: str = "collection name") -> str:
    """Names are 1–64 characters of a–z, 0–9, '_' and '-', starting with a letter or digit.

    They become (parts of) LanceDB table names, so nothing else (no dots, slashes or spaces) is
    allowed. `what` names the kind of name in the error (query sets follow the same rule).
    """
    if not isinstance(name, str) or not COLLECTION_NAME_RE.fullmatch(name):
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
    # What the user named it, in any script (names.py); the table name when they are one and
    # the same. Catalogues written before this column read it as the table name.
    display_name: str = ""
    # How many of its documents were longer than the encoder's token window at ingest (embedded
    # from their first tokens; BM25 indexes all of them). None: not counted (ingested before the
    # count existed).
    truncated: int | None = None
    # The entity graph tables: "" current (written by every ingest below `limits.GRAPH_INLINE_MAX`
    # documents, or built); "pending": missing or missing the latest documents, to be built by
    # `graph_build.build_graph` (a large ingest skips entity extraction). Null in older catalogues: "".
    graph: str = ""
    # The second, cross-lingual vector column (`vector_xl`): its model and dimension, "" / 0 when
    # the collection has none (`pipeline.wants_cross_lingual`). The dense source searches it for
    # a query in the other language. Null in older catalogues: none.
    xl_model: str = ""
    xl_dim: int = 0

    def __post_init__(self) -> None:
        if not self.display_name:
            self.display_name = self.name

    @property
    def label(self) -> str:
        """The display name (what front ends show)."""
        return self.display_name or self.name


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


XL_COLUMN = "vector_xl"  # the cross-lingual vectors (CollectionInfo.xl_model)


def collection_schema(dim: int, xl_dim: int = 0) -> pa.Schema:
    """The columns of a collection table whose vectors have `dim` dimensions; with `xl_dim` > 0
    also the cross-lingual vectors (`vector_xl`, `xl_dim` dimensions), after `vector`."""
    xl = [pa.field(XL_COLUMN, pa.list_(pa.float32(), xl_dim))] if xl_dim else []
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("title", pa.string()),
            pa.field("text", pa.string()),
            pa.field("tokens", pa.string()),
            pa.field("n_tokens", pa.int32()),
            pa.field("language", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            *xl,
            pa.field("metadata", pa.string()),
            pa.field("parent_id", pa.string()),
            pa.field("chunk_index", pa.int32()),
            pa.field("start_line", pa.int32()),
            pa.field("end_line", pa.int32()),
        ]
    )


_INT_FIELDS = ("dim", "doc_count", "truncated", "xl_dim")
_CATALOGUE_SCHEMA = pa.schema([pa.field(f, pa.int64() if f in _INT_FIELDS else pa.string())
                               for f in CollectionInfo.__dataclass_fields__])
# How a column added after a catalogue was written is filled for its existing rows (SQL over the
# row): the display name is the table name; anything else is unknown (null).
_CATALOGUE_MIGRATIONS = {"display_name": "name"}


def info_from_entry(entry: dict) -> CollectionInfo:
    """A catalogue row as a CollectionInfo; columns a catalogue predates (or nulls) read as their
    defaults: display name = table name, truncated = None (not counted), no cross-lingual vectors."""
    known = {k: v for k, v in entry.items() if k in CollectionInfo.__dataclass_fields__}
    known["display_name"] = known.get("display_name") or known["name"]
    known["truncated"] = known.get("truncated")
    known["graph"] = known.get("graph") or ""
    known["xl_model"] = known.get("xl_model") or ""
    known["xl_dim"] = known.get("xl_dim") or 0
    return CollectionInfo(**known)

DOCUMENT_COLUMNS = ["id", "title", "text", "tokens", "metadata", "parent_id", "chunk_index",
                    "start_line", "end_line", "language"]


class Store:
    """Collections and their catalogue in one LanceDB database."""

    def __init__(self, uri: str | None = None, storage_options: dict[str, str] | None = None):
        self.uri = uri or default_db_uri()
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
        self.writes = 0  # how many writes went through this Store (and its judgments/configs)
        self._display_cache: tuple[int, dict[str, str]] | None = None  # (catalogue version, names)
        self._locks_guard = threading.Lock()

    # ---- catalogue -------------------------------------------------------------------------
    def _lock(self, name: str) -> WriterLock:
        """The writer lock of `name`: a validated collection name (which recovers the collection
        from a journal when taken), or an internal table's name (`_catalogue`, `_configs`)."""
        with self._locks_guard:
            lock = self._locks.get(name)
            if lock is None:
                recover = None if name.startswith("_") else functools.partial(self._recover, name)
                lock = self._locks[name] = WriterLock(self.lock_dir / f"{name}.lock", recover)
            return lock

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
        self._put_entry(info.name, asdict(info))

    def _put_entry(self, name: str, entry: dict | None) -> None:
        """Set (or with None remove) collection `name`'s catalogue entry in one commit. A catalogue
        written before a column existed gets it first (`_migrate_catalogue`), under the same lock."""
        with self._lock(CATALOGUE_TABLE):
            cat = self._migrate_catalogue(self._catalogue())
            if entry is None:
                cat.delete(f"name = {sql_string(name)}")
                return
            (cat.merge_insert("name").when_matched_update_all().when_not_matched_insert_all()
             .execute(pa.Table.from_pylist([entry], schema=_CATALOGUE_SCHEMA)))

    @staticmethod
    def _migrate_catalogue(cat):
        """Add the columns of `_CATALOGUE_SCHEMA` that `cat` lacks, in one commit (LanceDB's
        `add_columns`: the new version has them all or none), filled by `_CATALOGUE_MIGRATIONS`
        or null. The caller holds the catalogue lock."""
        present = set(cat.schema.names)
        missing = [f for f in _CATALOGUE_SCHEMA if f.name not in present]
        if missing:
            sql_type = {pa.int64(): "BIGINT", pa.string(): "STRING"}
            cat.add_columns({f.name: _CATALOGUE_MIGRATIONS.get(f.name, f"CAST(NULL AS {sql_type[f.type]})")
                             for f in missing})
            log.info("catalogue: added column(s) %s", ", ".join(f.name for f in missing))
        return cat

    def _entry(self, name: str) -> dict | None:
        if not self._has_table(CATALOGUE_TABLE):
            return None
        rows = (self._catalogue().search().where(f"name = {sql_string(name)}").limit(1)
                .to_arrow().to_pylist())
        return rows[0] if rows else None

    def list_collections(self) -> list[CollectionInfo]:
        if not self._has_table(CATALOGUE_TABLE):
            return []
        rows = self._catalogue().search().limit(None).to_arrow().to_pylist()
        existing = {n for n in self._table_names() if not n.startswith("_")}
        return sorted((info_from_entry(r) for r in rows if r["name"] in existing), key=lambda i: i.name)

    def collection_names(self) -> list[str]:
        """Collection names from the table listing (~1 ms, vs ~10 ms for the catalogue scan of
        `list_collections`): cheap enough for a picker redrawn on every slider move. A collection
        with a journal is recovered first when nobody writes to it, and left out while it is
        being created."""
        names = sorted(n for n in self._table_names() if not n.startswith("_"))
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
                elif self._journal(name).get("op") == "create":
                    continue  # being created by another writer right now
            kept.append(name)
        return kept

    def info(self, name: str) -> CollectionInfo:
        validate_collection_name(name)
        entry = self._entry(name)
        if entry is None or not self._has_table(name):
            raise RetrievalError(f"No collection named {name!r} (collections: {self._known()})")
        return info_from_entry(entry)

    def _known(self) -> str:
        """The collections' labels, for an error message."""
        return ", ".join(labels(self.display_names()).values()) or "none yet"

    def display_names(self) -> dict[str, str]:
        """Table name → display name of every listed collection (`collection_names` order). The
        catalogue's two columns are read once per catalogue version (a picker redraws often)."""
        names = self.collection_names()
        if not names or not self._has_table(CATALOGUE_TABLE):
            return {n: n for n in names}
        cat = self.db.open_table(CATALOGUE_TABLE)
        cached = self._display_cache
        if cached is None or cached[0] != cat.version:
            columns = [c for c in ("name", "display_name") if c in cat.schema.names]
            rows = cat.search().select(columns).limit(None).to_arrow().to_pylist()
            cached = self._display_cache = (cat.version, {r["name"]: r.get("display_name") or r["name"] for r in rows})
        return {n: cached[1].get(n, n) for n in names}

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
        return table_name_for(wanted, set(self._table_names())), wanted

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

    def writer_lock(self, name: str) -> WriterLock:
        """The lock every write to collection `name` (and its auxiliary tables) holds, across
        threads and processes; a reader that must see the collection and its auxiliary tables at
        one state holds it too. Taking it first recovers the collection from a dead writer's
        journal."""
        return self._lock(validate_collection_name(name))

    # ---- journal and recovery (see the module docstring) ----------------------------------
    def _journal_path(self, name: str) -> Path:
        return self.lock_dir / f"{name}.journal.json"

    def _journal(self, name: str) -> dict:
        try:
            return json.loads(self._journal_path(name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}

    def _table_versions(self, names: Iterable[str]) -> dict[str, int | None]:
        existing = set(self._table_names())
        return {t: (self.db.open_table(t).version if t in existing else None) for t in names}

    @contextmanager
    def transaction(self, name: str, op: str, tables: Iterable[str]) -> Iterator[None]:
        """Run a write of `op` to collection `name` touching `tables` (LanceDB table names) all
        or nothing. The caller holds `writer_lock(name)`."""
        journal = {"op": op, "pid": os.getpid(), "tables": self._table_versions(tables),
                   "catalogue": self._entry(name)}
        path = self._journal_path(name)
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(journal), encoding="utf-8")
        os.replace(partial, path)  # atomic: a journal is whole or absent
        crash_point(f"{op}:journal")
        try:
            yield
        except BaseException:
            try:
                self._roll_back(name, journal)
            except Exception:  # the journal stays: the next holder of the lock tries again
                log.exception("rolling back %s of %s failed; the next writer will retry", op, name)
                raise
            path.unlink(missing_ok=True)
            raise
        path.unlink(missing_ok=True)

    def _recover(self, name: str) -> None:
        """A journal found on taking the lock belongs to a writer that died: undo (or finish) it."""
        journal = self._journal(name)
        if not journal:
            return
        log.warning("recovering collection %s: a %s by process %s did not finish", name, journal.get("op"),
                    journal.get("pid"))
        self._roll_back(name, journal)
        self._journal_path(name).unlink(missing_ok=True)
        self.note_write()

    def _roll_back(self, name: str, journal: dict) -> None:
        self._handles.pop(name, None)
        if journal["op"] == "delete":
            self._drop_all(name)
            return
        if journal["op"] == "clear":
            self._clear_tables(name)
            entry = journal.get("catalogue")
            if entry is not None:
                self._put_entry(name, {**entry, "doc_count": 0, "truncated": 0, "graph": ""})
            return
        existing = set(self._table_names())
        for table_name, version in journal["tables"].items():
            if version is None:
                if table_name in existing:
                    self.db.drop_table(table_name)
            elif table_name in existing:
                table = self.db.open_table(table_name)
                if table.version != version:
                    table.restore(version)
        self._put_entry(name, journal.get("catalogue"))

    def has_table(self, name: str) -> bool:
        """Whether the collection's table exists (also before its catalogue entry does)."""
        return self._has_table(validate_collection_name(name))

    # ---- writes ----------------------------------------------------------------------------
    def _graph_table_names(self, name: str) -> list[str]:
        return [aux_table_name(name, kind) for kind in GRAPH_KINDS]

    @counts_as_write
    def write_collection(self, info: CollectionInfo, rows: pa.Table,
                         graph_rows: dict[str, list[dict]] | None) -> CollectionInfo:
        """Create collection `info.name` from prepared rows (`collection_schema(info.dim,
        info.xl_dim)`) and its entity graph rows, with its native BM25 index and catalogue entry.
        All or nothing. `graph_rows` None: no graph tables (a large ingest; `info.graph` is then "pending")."""
        name = validate_collection_name(info.name)
        with self.writer_lock(name):
            if self._has_table(name) or any(d == info.label for t, d in self.display_names().items() if t != name):
                raise RetrievalError(f"Collection {info.label!r} already exists: add to it, or delete it first")
            with self.transaction(name, "create", [name, *self._graph_table_names(name)]):
                table = self.db.create_table(name, rows, schema=collection_schema(info.dim, info.xl_dim))
                crash_point("create:table")
                _index_tokens(table)
                crash_point("create:index")
                if graph_rows is not None:
                    self._write_graph_tables(name, graph_rows)
                crash_point("create:graph")
                self._write_info(info)
                crash_point("create:catalogue")
            return info

    @counts_as_write
    def append(self, name: str, rows: pa.Table, graph_rows: dict[str, list[dict]] | None,
               legacy_graph_rows: Callable[[], dict[str, list[dict]]] | None = None, truncated: int = 0,
               stored_truncated: Callable[[], int] | None = None) -> CollectionInfo:
        """Append prepared rows and their entity graph rows to an existing collection; update its
        catalogue entry (document count, language mix, truncated count, time). All or nothing.
        Ids already in the collection are refused (checked under the lock, so two writers cannot
        both add one id). `legacy_graph_rows()` gives the graph rows of the documents already
        stored, for a collection ingested before the entity graph tables existed;
        `stored_truncated()` counts its stored documents longer than the encoder's window, for a
        collection ingested before that count existed. `truncated`: how many of `rows` were."""
        with self.writer_lock(name):
            info = self.info(name)
            clashes = self.existing_ids(name, rows.column("id").to_pylist())
            if clashes:
                raise IngestError(
                    f"{len(clashes)} document id(s) already exist in {name!r}; nothing was added",
                    [f"id {i!r} is already in the collection" for i in sorted(clashes)],
                )
            table = self.db.open_table(name)
            before = info.truncated if info.truncated is not None else (
                stored_truncated() if stored_truncated is not None else None)  # the stored rows only
            if graph_rows is None:
                info.graph = "pending"
            elif legacy_graph_rows is not None and not self.has_graph_tables(name) and table.count_rows():
                from .entities import merge_entities

                old = legacy_graph_rows()
                graph_rows = {"entities": merge_entities(old["entities"], graph_rows["entities"]),
                              "event_entities": old["event_entities"] + graph_rows["event_entities"],
                              "event_times": old["event_times"] + graph_rows["event_times"]}
            with self.transaction(name, "add", [name, *self._graph_table_names(name)]):
                table.add(rows)
                crash_point("add:rows")
                _index_tokens(table)
                crash_point("add:index")
                if graph_rows is not None:
                    self._write_graph_tables(name, graph_rows)
                crash_point("add:graph")
                languages = table.search().select(["language"]).limit(None).to_arrow().column("language")
                info.language = language_from_mix(languages.to_pylist())
                info.doc_count = table.count_rows()
                info.truncated = None if before is None else before + truncated
                info.updated = now_iso()
                self._write_info(info)
                crash_point("add:catalogue")
            return info

    @contextmanager
    def streaming_write(self, info: CollectionInfo, create: bool,
                        legacy_graph_rows: Callable[[], dict[str, list[dict]]] | None = None,
                        stored_truncated: Callable[[], int] | None = None,
                        graph: bool = True) -> Iterator[BatchWriter]:
        """One write of many batches (the streaming ingest): create collection `info.name` or add
        to it, all or nothing. Holds the collection's writer lock for the whole block (other
        writers to it wait) and runs in ONE transaction: the journal records every touched
        table's version before the first batch, so a failure or a kill anywhere, between or
        inside batches, rolls the whole ingest back (docs/reliability.md). Yields a
        `BatchWriter`; `append(rows, graph_rows, truncated)` writes a batch, and when the block
        ends without error the BM25 index, the entities table and the catalogue entry are
        written (steps `stream:index`, `stream:graph`, `stream:catalogue`). `legacy_graph_rows`
        and `stored_truncated` are `append`'s. `graph` False: no graph rows are written (`append`
        takes None) and the catalogue entry marks the graph pending."""
        name = validate_collection_name(info.name)
        try:
            with self._streaming_write(name, info, create, legacy_graph_rows, stored_truncated, graph) as writer:
                yield writer
        finally:
            self.note_write()

    @contextmanager
    def _streaming_write(self, name, info, create, legacy_graph_rows, stored_truncated,
                         graph) -> Iterator[BatchWriter]:
        with self.writer_lock(name):
            if create:
                if self._has_table(name) or any(d == info.label for t, d in self.display_names().items()
                                                if t != name):
                    raise RetrievalError(f"Collection {info.label!r} already exists: add to it, or delete it first")
            else:
                info = self.info(name)
            with self.transaction(name, "create" if create else "add", [name, *self._graph_table_names(name)]):
                writer = BatchWriter(self, info, create, graph)
                if not create:
                    writer.start(legacy_graph_rows if graph else None, stored_truncated)
                yield writer
                writer.finish()

    # ---- entity graph tables (see entities.py) ----------------------------------------------
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
    def write_graph(self, name: str, version: int, tables: dict[str, pa.Table]) -> CollectionInfo:
        """Replace the collection's entity graph tables with `tables` (built from its documents at
        table version `version`, `graph_build.build_graph`) and mark them current, in one
        transaction (op "graph": a failure or a kill leaves the tables and the catalogue entry as
        before). The collection's table gets an empty commit (a delete of no rows), so its state
        key changes and every cache of it, in any process, re-reads it with its graph. A
        `GraphOutdated` error, and nothing written, when the collection changed since `version`."""
        with self.writer_lock(name):
            info = self.info(name)
            table = self.db.open_table(name)
            if table.version != version:
                raise GraphOutdated(f"{name!r} changed while its entity graph was built (version {version} → "
                                    f"{table.version})")
            with self.transaction(name, "graph", [name, *self._graph_table_names(name)]):
                existing = set(self._table_names())
                for kind in GRAPH_KINDS:
                    table_name = aux_table_name(name, kind)
                    if table_name in existing:
                        self.db.open_table(table_name).add(tables[kind], mode="overwrite")
                    else:
                        self.db.create_table(table_name, tables[kind], schema=tables[kind].schema)
                    crash_point(f"graph:{kind}")
                table.delete("false")  # a new version of the collection: caches key on it
                info.graph = ""
                info.updated = now_iso()
                self._write_info(info)
                crash_point("graph:catalogue")
            return info

    @counts_as_write
    def compact(self, name: str) -> None:
        """Merge the collection's small data files into large ones (LanceDB `optimize`: the rows
        and every index stay valid; versions older than LanceDB's default 7 days are pruned, the
        versions a running write or a reader may still use are not). LanceDB merges only files
        the same indexes cover, so call it after the indexes are built. A streaming ingest writes
        one file per batch: 489 at 1M documents, and an IVF_PQ search re-scoring 1,000 vectors
        across them took 64 ms, 23 ms after compacting into one (27 s; docs/experiments/scale.md).
        Bumps the collection version."""
        with self.writer_lock(name):
            self.table(name).optimize()

    @counts_as_write
    def build_vector_index(self, name: str, index_type: str | None = None, num_partitions: int | None = None,
                           column: str = "vector") -> None:
        """An approximate vector index for large collections (`limits.ANN_INDEX` unless
        `index_type` says otherwise; exact search is fine below `limits.SCALE_DOCS`).

        The dense source then asks LanceDB to re-score its shortlist with full vectors
        (`refine_factor`), so reported similarities stay exact. Bumps the collection version.
        """
        from . import limits

        index_type = index_type or limits.ANN_INDEX
        with self.writer_lock(name):
            table = self.table(name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                table.create_index(metric="cosine", index_type=index_type, num_partitions=num_partitions,
                                   vector_column_name=column, replace=True)

    @counts_as_write
    def build_id_index(self, name: str) -> None:
        """A BTREE index on `id` for a large collection: reading 100 candidates' rows by id
        (`documents`) at 1M documents took 681 ms without it and 160 ms with it (built in 0.7 s;
        docs/experiments/scale.md). Bumps the collection version."""
        with self.writer_lock(name), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            self.table(name).create_scalar_index("id", index_type="BTREE", replace=True)

    @counts_as_write
    def delete(self, name: str) -> None:
        """Drop the collection, its auxiliary tables and its catalogue entry. Works on any half
        state (a table without catalogue entry, an entry without table, stray auxiliary tables)."""
        with self.writer_lock(name):
            parts = [name, *(aux_table_name(name, kind) for kind in AUX_KINDS)]
            if self._entry(name) is None and not set(parts) & set(self._table_names()):
                self.info(name)  # raises the readable "no collection named …" error
            with self.transaction(name, "delete", []):
                self._drop_all(name)

    def _drop_all(self, name: str) -> None:
        """Drop every table of the collection and its catalogue entry (idempotent)."""
        self._handles.pop(name, None)
        existing = set(self._table_names())
        for table_name in [aux_table_name(name, kind) for kind in AUX_KINDS] + [name]:
            if table_name in existing:
                self.db.drop_table(table_name)
                crash_point(f"delete:{'table' if table_name == name else 'aux'}")
        self._put_entry(name, None)

    def _clear_tables(self, name: str) -> None:
        """Delete every document and drop the per-document auxiliary tables (idempotent)."""
        existing = set(self._table_names())
        if name in existing:
            self.db.open_table(name).delete("true")
        crash_point("clear:rows")
        for kind, per_document in AUX_KINDS.items():
            table_name = aux_table_name(name, kind)
            if per_document and table_name in existing:
                self.db.drop_table(table_name)

    @counts_as_write
    def clear(self, name: str) -> CollectionInfo:
        """Remove every document but keep the collection, its model and its history."""
        with self.writer_lock(name):
            info = self.info(name)
            with self.transaction(name, "clear", []):
                self._clear_tables(name)
                info.doc_count = 0
                info.truncated = 0
                info.graph = ""  # no documents: nothing to build
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

    def documents(self, name: str, ids: Iterable[str], row_ids: Mapping[str, int] | None = None
                  ) -> dict[str, dict[str, Any]]:
        """Rows (without vectors) for the given ids, metadata parsed from JSON.

        `row_ids` (id -> LanceDB row id, as a search of the table returned them) lets those rows
        be taken by row id, without looking the ids up: the 10 rows a search shows at 1M
        documents took 9.0 ms so, 13.7 ms by id (docs/experiments/scale.md). A taken row counts
        only when it carries one of the ids asked for (a write may have moved rows since the
        search); the ids not found so are looked up by id."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        table = self.table(name)
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
                    row["metadata"] = json.loads(row["metadata"] or "{}")
                    out[row["id"]] = row
            ids = [i for i in ids if i not in out]
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            where = "id IN (" + ", ".join(sql_string(i) for i in chunk) + ")"
            rows = table.search().where(where).select(DOCUMENT_COLUMNS).limit(None).to_arrow().to_pylist()
            for row in rows:
                row["metadata"] = json.loads(row["metadata"] or "{}")
                out[row["id"]] = row
        return out

    def vectors(self, name: str, ids: Iterable[str], column: str = "vector") -> dict[str, np.ndarray]:
        """The float32 vectors of `column` ('vector' or XL_COLUMN) for the given ids, by id."""
        if column not in ("vector", XL_COLUMN):
            raise ValueError(f"not a vector column: {column!r}")
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        where = "id IN (" + ", ".join(sql_string(i) for i in ids) + ")"
        rows = self.table(name).search().where(where).select(["id", column]).limit(len(ids)).to_arrow()
        return dict(zip(rows.column("id").to_pylist(), vector_matrix(rows, column), strict=True))

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


class BatchWriter:
    """The batches of one `Store.streaming_write` (the caller holds the lock and the transaction)."""

    def __init__(self, store: Store, info: CollectionInfo, create: bool, graph: bool = True):
        self.store, self.info, self.create, self.graph = store, info, create, graph
        self.batches = 0  # batches written
        self.truncated = 0  # of the rows written
        self._table = None if create else store.db.open_table(info.name)
        self._entities: dict[str, dict] = {}  # entity id -> row, counts over every batch (small next to texts)
        self._before: int | None = 0 if create else info.truncated

    def start(self, legacy_graph_rows, stored_truncated) -> None:
        """An add: count the stored documents' truncation, index a pre-graph collection's
        stored documents (`Store.append`'s legacy cases), before the first batch."""
        if self._before is None and stored_truncated is not None:
            self._before = stored_truncated()
        name = self.info.name
        if legacy_graph_rows is not None and not self.store.has_graph_tables(name) and self._table.count_rows():
            self._graph(legacy_graph_rows())

    def append(self, rows: pa.Table, graph_rows: dict[str, list[dict]] | None, truncated: int = 0) -> None:
        """Write one batch: its rows (ids already in the collection are refused) and its links and
        times (None when the graph is deferred); its entity counts are merged in memory and
        written by `finish`."""
        name, info = self.info.name, self.info
        if self._table is None:
            self._table = self.store.db.create_table(name, rows, schema=collection_schema(info.dim, info.xl_dim))
        else:
            clashes = self.store.existing_ids(name, rows.column("id").to_pylist()) if not self.create else ()
            if clashes:
                raise IngestError(
                    f"{len(clashes)} document id(s) already exist in {name!r}; nothing was added",
                    [f"id {i!r} is already in the collection" for i in sorted(clashes)],
                )
            self._table.add(rows)
        if graph_rows is not None:
            self._graph(graph_rows)
        self.truncated += truncated
        self.batches += 1
        crash_point(f"stream:batch-{self.batches}")

    def _graph(self, rows: dict[str, list[dict]]) -> None:
        from .entities import graph_schemas

        schemas = graph_schemas()
        existing = set(self.store._table_names())
        for kind in ("event_entities", "event_times"):
            table_name = aux_table_name(self.info.name, kind)
            data = pa.Table.from_pylist(rows[kind], schema=schemas[kind])
            if table_name not in existing:
                self.store.db.create_table(table_name, data, schema=schemas[kind])
            elif data.num_rows:
                self.store.db.open_table(table_name).add(data)
        for row in rows["entities"]:
            known = self._entities.get(row["id"])
            if known is None:
                self._entities[row["id"]] = dict(row)
            else:
                known["event_count"] += row["event_count"]

    def finish(self) -> None:
        """After the last batch: the BM25 index, the entities table, the catalogue entry."""
        from .entities import graph_schemas, merge_entities

        if not self.batches:
            raise IngestError("No documents to ingest")
        table, name, store = self._table, self.info.name, self.store
        _index_tokens(table)
        crash_point("stream:index")
        schema = graph_schemas()["entities"]
        entities_table = aux_table_name(name, "entities")
        if not self.graph:
            self.info.graph = "pending"
        elif entities_table in set(store._table_names()):
            handle = store.db.open_table(entities_table)
            merged = merge_entities(handle.to_arrow().to_pylist(), self._entities.values())
            handle.add(pa.Table.from_pylist(merged, schema=schema), mode="overwrite")
        else:
            merged = merge_entities([], self._entities.values())
            store.db.create_table(entities_table, pa.Table.from_pylist(merged, schema=schema), schema=schema)
        crash_point("stream:graph")
        info = self.info
        languages = table.search().select(["language"]).limit(None).to_arrow().column("language")
        info.language = language_from_mix(languages.to_pylist())
        info.doc_count = table.count_rows()
        info.truncated = None if self._before is None else self._before + self.truncated
        info.updated = now_iso()
        store._write_info(info)
        crash_point("stream:catalogue")


def vector_matrix(rows: pa.Table, column: str) -> np.ndarray:
    """A vector column of `rows` as a new (writable) n × dim float32 matrix, in row order."""
    flat = rows.column(column).combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.array(flat, dtype=np.float32).reshape(rows.num_rows, -1)


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
