"""The catalogue: one row per collection in the `_catalogue` table (`CollectionInfo`: model,
dimension, tokenizer, language, document count, truncated documents, times, LanceDB version,
display name, graph state, cross-lingual vectors, encoder backend), and the migration of older catalogues.

A catalogue written before a column existed is read with the column's default
(`info_from_entry`) and gains the column on its next write (`Catalogue.migrate`, one LanceDB
commit, under the catalogue lock).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass

import pyarrow as pa

from retrieval.store.locks import WriterLock
from retrieval.store.tables import CATALOGUE_TABLE, add_missing_columns, sql_string

log = logging.getLogger(__name__)


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
    # `indexing.graph.build_graph` (a large ingest skips entity extraction); "off": the collection's
    # graph setting chosen at upload (`indexing.graph.graph_setting`): no ingest extracts entities,
    # built only when the user asks (then ""). Null in older catalogues: "".
    graph: str = ""
    # The second, cross-lingual vector column (`vector_xl`): its model and dimension, "" / 0 when
    # the collection has none (`indexing.plan.wants_cross_lingual`). The dense source searches it
    # for a query in the other language. Null in older catalogues: none.
    xl_model: str = ""
    xl_dim: int = 0
    # What computed the stored vectors: the encoder backend of the writes (`embed.backend_for`,
    # e.g. "onnx-int8" or "torch"), two joined by "+" once writes used different ones
    # (`indexing.plan.vectors_backend`); "" not recorded (ingested before it was, i.e. on torch
    # unless $WORKBENCH_ENCODER_BACKEND said otherwise). Null in older catalogues: "".
    encoder_backend: str = ""

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


_INT_FIELDS = ("dim", "doc_count", "truncated", "xl_dim")
CATALOGUE_SCHEMA = pa.schema([pa.field(f, pa.int64() if f in _INT_FIELDS else pa.string())
                              for f in CollectionInfo.__dataclass_fields__])
# How a column added after a catalogue was written is filled for its existing rows (SQL over the
# row): the display name is the table name; anything else is unknown (null).
CATALOGUE_MIGRATIONS = {"display_name": "name"}


def info_from_entry(entry: dict) -> CollectionInfo:
    """A catalogue row as a CollectionInfo; columns a catalogue predates (or nulls) read as their
    defaults: display name = table name, truncated = None (not counted), no cross-lingual vectors."""
    known = {k: v for k, v in entry.items() if k in CollectionInfo.__dataclass_fields__}
    known["display_name"] = known.get("display_name") or known["name"]
    known["truncated"] = known.get("truncated")
    known["graph"] = known.get("graph") or ""
    known["xl_model"] = known.get("xl_model") or ""
    known["xl_dim"] = known.get("xl_dim") or 0
    known["encoder_backend"] = known.get("encoder_backend") or ""
    return CollectionInfo(**known)


class Catalogue:
    """The `_catalogue` table of one database: entries read without a lock, written (one
    `merge_insert` commit per entry) under the catalogue's own lock."""

    def __init__(self, db, lock: WriterLock, table_names: Callable[[], list[str]]):
        self.db, self.lock, self._list_tables = db, lock, table_names
        self._display_cache: tuple[int, dict[str, str]] | None = None  # (catalogue version, names)

    def exists(self) -> bool:
        return CATALOGUE_TABLE in self._list_tables()

    def table(self):
        if self.exists():
            return self.db.open_table(CATALOGUE_TABLE)
        return self.db.create_table(CATALOGUE_TABLE, schema=CATALOGUE_SCHEMA, exist_ok=True)

    def entry(self, name: str) -> dict | None:
        """Collection `name`'s row, None when it has none."""
        if not self.exists():
            return None
        rows = self.table().search().where(f"name = {sql_string(name)}").limit(1).to_arrow().to_pylist()
        return rows[0] if rows else None

    def entries(self) -> list[dict]:
        """Every row (also of collections whose table is gone)."""
        return self.table().search().limit(None).to_arrow().to_pylist() if self.exists() else []

    def put(self, name: str, entry: dict | None) -> None:
        """Set (or with None remove) collection `name`'s entry in one commit. A catalogue written
        before a column existed gets it first (`migrate`), under the same lock."""
        with self.lock:
            cat = self.migrate(self.table())
            if entry is None:
                cat.delete(f"name = {sql_string(name)}")
                return
            (cat.merge_insert("name").when_matched_update_all().when_not_matched_insert_all()
             .execute(pa.Table.from_pylist([entry], schema=CATALOGUE_SCHEMA)))

    def write(self, info: CollectionInfo) -> None:
        self.put(info.name, asdict(info))

    @staticmethod
    def migrate(cat):
        """Add the columns of `CATALOGUE_SCHEMA` that `cat` lacks, in one commit (LanceDB's
        `add_columns`: the new version has them all or none), filled by `CATALOGUE_MIGRATIONS`
        or null. The caller holds the catalogue lock."""
        added = add_missing_columns(cat, CATALOGUE_SCHEMA, CATALOGUE_MIGRATIONS)
        if added:
            log.info("catalogue: added column(s) %s", ", ".join(added))
        return cat

    def display_names(self) -> dict[str, str]:
        """Table name → display name of every entry. The two columns are read once per
        catalogue version (a picker redraws often)."""
        if not self.exists():
            return {}
        cat = self.db.open_table(CATALOGUE_TABLE)
        cached = self._display_cache
        if cached is None or cached[0] != cat.version:
            columns = [c for c in ("name", "display_name") if c in cat.schema.names]
            rows = cat.search().select(columns).limit(None).to_arrow().to_pylist()
            cached = self._display_cache = (cat.version, {r["name"]: r.get("display_name") or r["name"] for r in rows})
        return cached[1]
