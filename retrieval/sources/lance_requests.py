"""LanceDB searches as plain `lancedb.query.Query` objects, run on LanceDB's own event loop: all
the searches of one query (BM25 and vector) side by side, read straight into Arrow.

LanceDB's sync query builders pay per search for what a search here never needs: `Table.search`
reads the table's schema to infer the vector column, `to_arrow` reads it again twice for blob
columns, the full-text builder lists the indexes (a legacy-index check), and every step and
every result batch is one more hop into LanceDB's background event loop. A `LanceRequest` is the
`Query` those builders would make (the same fields, so the same plan and rows:
tests/sources/test_lance_requests.py), executed through the table's async handle — the very call
the sync `Table._execute_query` makes — so a search costs one hop and two run side by side
(docs/experiments/peers.md has the figures).

A search asks LanceDB for row ids and scores only, not for `id`: selecting a column makes LanceDB
take it for every hit after the search (~3.5 ms for the vector search's 100 hits and ~5.5 ms for
the full-text search's at 1M documents), while a `RowIdMap` of the table version searched names
the documents of 100 row ids in microseconds. Until that map is read (in the background, once per
collection state), a request selects `id` as before: the same hits either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from retrieval.types import Hit

if TYPE_CHECKING:
    from lancedb.query import Query

# LanceDB is imported by the functions that build or run a request, not with this module: the
# source registry imports it, and `python -m retrieval --help` has no use for LanceDB (seconds).

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LanceRequest:
    """One search of one table: the `Query` to run on `table` (a sync LanceDB table handle) and
    `read(rows)`, the source's hits from the Arrow rows it returns."""

    table: Any
    query: Query
    read: Callable[[pa.Table], list[Hit]]

    def run(self) -> list[Hit]:
        """This request alone, its hits (an error is raised)."""
        return self.read(start_request(self).result())


def fts_query(text: str, column: str, depth: int, filter: str | None = None, with_ids: bool = True) -> Query:
    """`table.search(text, query_type="fts", fts_columns=column).where(filter, prefilter=True)
    .limit(depth).select(["id"]).with_row_id(True)` as its `Query`: the `depth` best BM25 rows
    of the native full-text index on `column`, with `id`, `_score` and `_rowid` (`with_ids`
    False: `_score` and `_rowid` only, the same rows)."""
    from lancedb.query import FullTextSearchQuery, Query

    return Query(columns=["id"] if with_ids else ["_score"], filter=filter, postfilter=False, limit=depth,
                 with_row_id=True, full_text_query=FullTextSearchQuery(query=text, columns=[column]))


def vector_query(vector: Sequence[float], column: str, depth: int, nprobes: int | None = None,
                 refine_factor: int | None = None, filter: str | None = None, with_ids: bool = True) -> Query:
    """`table.search(vector, vector_column_name=column).distance_type("cosine")
    .where(filter, prefilter=True).nprobes(nprobes).refine_factor(refine_factor).limit(depth)
    .select(["id"]).with_row_id(True)` as its `Query` (nprobes and refine None: an exact scan's
    query, as without an index): rows with `id`, `_distance` (cosine distance) and `_rowid`
    (`with_ids` False: `_distance` and `_rowid` only, the same rows). The vector is sent as
    float32 values, as the builder sends it."""
    from lancedb.query import Query

    return Query(vector=np.asarray(vector, dtype=np.float32).tolist(), vector_column=column, distance_type="cosine",
                 columns=["id"] if with_ids else ["_distance"], filter=filter, postfilter=False, limit=depth,
                 with_row_id=True, minimum_nprobes=nprobes, maximum_nprobes=nprobes, refine_factor=refine_factor)


class RowIdMap:
    """The document id of every row of one table version, by LanceDB row id (`_rowid`), read
    once — a scan of `id` with row ids, 0.47 s and 19 MB of Arrow at 1M documents — on LanceDB's
    event loop in the background, started when the map is made. `table` must be a handle
    checked out at that version (`Store.table_at`): a row id names a row of the version it came
    from (a restore can give a later fragment an earlier one's number)."""

    def __init__(self, table: Any):
        from lancedb.background_loop import LOOP

        self.table = table
        self._read: Future = asyncio.run_coroutine_threadsafe(self._scan(table), LOOP.loop)

    @staticmethod
    async def _scan(table: Any) -> tuple[np.ndarray, np.ndarray | None, pa.Array]:
        from lancedb.query import Query

        reader = await table._table._execute_query(Query(columns=["id"], with_row_id=True))
        rows = pa.Table.from_batches(await reader.read_all(), schema=reader.schema)
        row_ids = rows.column("_rowid").to_numpy()
        ids = rows.column("id").combine_chunks()
        if len(row_ids) > 1 and not bool((np.diff(row_ids.astype(np.int64)) > 0).all()):
            order = np.argsort(row_ids, kind="stable")  # a scan reads fragments in order: sorted already
            return row_ids[order], order, ids
        return row_ids, None, ids

    def ready(self) -> bool:
        """Whether the map is read (a failed read never is: requests then keep selecting `id`)."""
        return self._read.done() and self._read.exception() is None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the read (a benchmark's warm-up); whether the map is ready."""
        with contextlib.suppress(Exception):
            self._read.result(timeout)
        return self.ready()

    def ids(self, row_ids: pa.Array) -> list[str]:
        """The document ids of `row_ids` (rows of this version), in order: from the map, or, before
        it is read (or for a row id it does not hold, which a row of this version cannot be),
        taken from the table."""
        wanted = row_ids.to_numpy(zero_copy_only=False)
        if not len(wanted):
            return []
        if self.ready():
            sorted_row_ids, order, ids = self._read.result()
            at = np.minimum(np.searchsorted(sorted_row_ids, wanted), max(len(sorted_row_ids) - 1, 0))
            if len(sorted_row_ids) and bool((sorted_row_ids[at] == wanted).all()):
                return ids.take(pa.array(at if order is None else order[at])).to_pylist()
            log.warning("row ids missing from the row-id map of a table version: their ids are taken instead")
        wanted_list = wanted.tolist()
        taken = self.table.take_row_ids(wanted_list).select(["id"]).with_row_id().to_arrow()
        by_row = dict(zip(taken.column("_rowid").to_pylist(), taken.column("id").to_pylist(), strict=True))
        missing = [r for r in wanted_list if r not in by_row]
        if missing:
            raise RuntimeError(f"{len(missing)} row ids of a search are not rows of the table version searched")
        return [by_row[r] for r in wanted_list]


def ready_map(row_id_map: Callable[[], RowIdMap] | None) -> RowIdMap | None:
    """The source's row-id map once it is read, else None (its requests then select `id`)."""
    named = row_id_map() if row_id_map is not None else None
    return named if named is not None and named.ready() else None


def hit_ids(rows: pa.Table, row_id_map: RowIdMap | None) -> list[str]:
    """The document ids of a request's rows: its `id` column, or its row ids through the map."""
    if "id" in rows.column_names or row_id_map is None:
        return rows.column("id").to_pylist()
    return row_id_map.ids(rows.column("_rowid").combine_chunks())


async def _arrow(request: LanceRequest) -> pa.Table:
    # `LanceTable._execute_query` runs exactly this on the loop, then reads each batch in a hop of its own.
    reader = await request.table._table._execute_query(request.query)
    return pa.Table.from_batches(await reader.read_all(), schema=reader.schema)


def start_request(request: LanceRequest) -> Future:
    """Start `request` on LanceDB's event loop; the future's result is its Arrow rows (or the
    exception it raised). Several started one after another run side by side. Never call
    `.result()` from that loop's thread."""
    from lancedb.background_loop import LOOP

    return asyncio.run_coroutine_threadsafe(_arrow(request), LOOP.loop)
