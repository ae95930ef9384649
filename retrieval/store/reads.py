"""Reads of a collection's rows: documents by id (taken by row id where a search gave them),
vectors, whole columns, the entity graph tables and statistics, as the collection is now or at a
state a search read (`Store.table_at`).

`StoredReads` is a base class of `Store` (database.py): its methods read through the Store's
handles (`table`, `table_at`), catalogue (`info`), table listing (`table_names`) and database
(`db`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from retrieval.store.catalogue import CollectionStats
from retrieval.store.tables import DOCUMENT_COLUMNS, GRAPH_KINDS, XL_COLUMN, aux_table_name, ids_where, vector_matrix
from retrieval.types import Document

log = logging.getLogger(__name__)


BATCH_IDS = 500  # ids per `id IN (…)` filter


class StoredReads:
    """The reads of a `Store` (see the module docstring)."""

    def _read_table(self, name: str, state: tuple[str, int] | None):
        """The live handle (`state` None) or the one at `state` (`table_at`): what a read goes through."""
        return self.table(name) if state is None else self.table_at(name, state)

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


def stored_documents(store: StoredReads, name: str) -> list[Document]:
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
