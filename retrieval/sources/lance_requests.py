"""LanceDB searches as plain `lancedb.query.Query` objects, run on LanceDB's own event loop: all
the searches of one query (BM25 and vector) in one round trip, read straight into Arrow.

LanceDB's sync query builders pay per search for what a search here never needs: `Table.search`
reads the table's schema to infer the vector column, `to_arrow` reads it again twice for blob
columns, the full-text builder lists the indexes (a legacy-index check), and every step and
every result batch is one more hop into LanceDB's background event loop. A `LanceRequest` is the
`Query` those builders would make (the same fields, so the same plan and rows:
tests/sources/test_lance_requests.py), executed through the table's async handle — the very call
the sync `Table._execute_query` makes — so two searches cost one hop and run side by side
(docs/experiments/peers.md has the figures).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from lancedb.background_loop import LOOP
from lancedb.query import FullTextSearchQuery, Query

from ..types import Hit


@dataclass(frozen=True)
class LanceRequest:
    """One search of one table: the `Query` to run on `table` (a sync LanceDB table handle) and
    `read(rows)`, the source's hits from the Arrow rows it returns."""

    table: Any
    query: Query
    read: Callable[[pa.Table], list[Hit]]

    def run(self) -> list[Hit]:
        """This request alone, its hits (an error is raised)."""
        rows = start_requests([self]).result()[0]
        if isinstance(rows, BaseException):
            raise rows
        return self.read(rows)


def fts_query(text: str, column: str, depth: int, filter: str | None = None) -> Query:
    """`table.search(text, query_type="fts", fts_columns=column).where(filter, prefilter=True)
    .limit(depth).select(["id"]).with_row_id(True)` as its `Query`: the `depth` best BM25 rows
    of the native full-text index on `column`, with `id`, `_score` and `_rowid`."""
    return Query(columns=["id"], filter=filter, postfilter=False, limit=depth, with_row_id=True,
                 full_text_query=FullTextSearchQuery(query=text, columns=[column]))


def vector_query(vector: Sequence[float], column: str, depth: int, nprobes: int | None = None,
                 refine_factor: int | None = None, filter: str | None = None) -> Query:
    """`table.search(vector, vector_column_name=column).distance_type("cosine")
    .where(filter, prefilter=True).nprobes(nprobes).refine_factor(refine_factor).limit(depth)
    .select(["id"]).with_row_id(True)` as its `Query` (nprobes and refine None: an exact scan's
    query, as without an index): rows with `id`, `_distance` (cosine distance) and `_rowid`. The
    vector is sent as float32 values, as the builder sends it."""
    return Query(vector=np.asarray(vector, dtype=np.float32).tolist(), vector_column=column, distance_type="cosine",
                 columns=["id"], filter=filter, postfilter=False, limit=depth, with_row_id=True,
                 minimum_nprobes=nprobes, maximum_nprobes=nprobes, refine_factor=refine_factor)


async def _arrow(request: LanceRequest) -> pa.Table:
    # `LanceTable._execute_query` runs exactly this on the loop, then reads each batch in a hop of its own.
    reader = await request.table._table._execute_query(request.query)
    return pa.Table.from_batches(await reader.read_all(), schema=reader.schema)


def start_requests(requests: Sequence[LanceRequest]) -> Future:
    """Start `requests` together on LanceDB's event loop; the future's result is, per request,
    its Arrow rows or the exception it raised. Never call `.result()` from that loop's thread."""

    async def together() -> list[pa.Table | BaseException]:
        return await asyncio.gather(*(_arrow(r) for r in requests), return_exceptions=True)

    return asyncio.run_coroutine_threadsafe(together(), LOOP.loop)
