"""Keyed side tables: small tables of JSON and plain values beside the collections (saved configs,
snapshots, learned ranker models, the LLM judge's settings), one row per key.

A side table's name starts with '_', so it is never listed as a collection. It is made on its
first write (empty, with its schema) and brought up to its schema before every write
(`tables.add_missing_columns`: a table written before a column existed gains it, null in the
old rows). Every write is one LanceDB commit under the table's own writer lock
(`KeyedTable.lock`, re-entrant: a caller holds it around a check and the write the check decides,
e.g. "refuse a name already taken"), and reads see the latest commit, also another process's
(the store reads with consistency interval 0). Before the first write every read finds nothing.

A table LanceDB cannot read (a data file or manifest missing or cut) makes every read a
RetrievalError naming it and how to recover, not a traceback. What the rows mean (validation,
their JSON form, ids) is the owner's; so is counting the write
(`counts_as_write` on the owner's method: one count per write the user asked for).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import pyarrow as pa

from retrieval.store.locks import WriterLock
from retrieval.store.tables import add_missing_columns, sql_string
from retrieval.types import RetrievalError


def readable(read):
    """Decorator for a read of a `KeyedTable`: LanceDB's errors of a damaged table as one
    RetrievalError naming the table and how to recover."""
    @functools.wraps(read)
    def wrapper(self, *args, **kwargs):
        try:
            return read(self, *args, **kwargs)
        except (RuntimeError, OSError, pa.ArrowException) as exc:
            detail = (str(exc).splitlines() or [type(exc).__name__])[0]
            detail = detail if len(detail) <= 160 else detail[:160] + "…"
            raise RetrievalError(f"The table {self.name} cannot be read ({detail}): restore the database folder "
                                 f"from a backup, or delete its {self.name}.lance folder to start it again empty"
                                 ) from None
    return wrapper


class KeyedTable:
    """The side table `name` of `store` (see the module docstring): columns `schema`, one row per
    value of the string column `key`."""

    def __init__(self, store, name: str, schema: pa.Schema, key: str):
        if not name.startswith("_"):
            raise ValueError(f"a side table's name starts with '_', got {name!r}")
        if key not in schema.names:
            raise ValueError(f"key {key!r} is not a column of {name!r}")
        self.store = store
        self.name = name
        self.schema = schema
        self.key = key

    def lock(self) -> WriterLock:
        """The table's writer lock, across threads and processes (`store._lock`)."""
        return self.store._lock(self.name)

    def _table(self, create: bool = False):
        return self.store.side_table(self.name, self.schema, create)

    def _writable(self):
        """The table for a write, made when missing and brought up to the schema. The caller holds
        `lock`."""
        table = self._table(create=True)
        add_missing_columns(table, self.schema)  # a table written before a column existed
        return table

    def _is(self, key: str) -> str:
        return f"{self.key} = {sql_string(key)}"

    # ---- reads ---------------------------------------------------------------------------------
    @readable
    def rows(self, where: str | None = None, columns: list[str] | None = None) -> list[dict]:
        """The rows (matching the LanceDB filter `where`), with `columns` or all, in storage order."""
        table = self._table()
        if table is None:
            return []
        query = table.search()
        if where:
            query = query.where(where)
        if columns:
            query = query.select(columns)
        return query.limit(None).to_arrow().to_pylist()

    @readable
    def get(self, key: str, columns: list[str] | None = None) -> dict | None:
        """The row of `key` (with `columns` or all), or None."""
        table = self._table()
        if table is None:
            return None
        query = table.search().where(self._is(key))
        if columns:
            query = query.select(columns)
        rows = query.limit(1).to_arrow().to_pylist()
        return rows[0] if rows else None

    def has(self, key: str) -> bool:
        return self.get(key, [self.key]) is not None

    @readable
    def keys(self) -> list[str]:
        """Every key, in storage order."""
        table = self._table()
        if table is None:
            return []
        return table.search().select([self.key]).limit(None).to_arrow().column(self.key).to_pylist()

    # ---- writes: one commit each, under `lock` -------------------------------------------------
    def put(self, row: Mapping) -> None:
        """Write `row`: a merge-insert keyed on `key` (it replaces the row of its key, if any)."""
        with self.lock():
            (self._writable().merge_insert(self.key).when_matched_update_all().when_not_matched_insert_all()
             .execute(pa.Table.from_pylist([dict(row)], schema=self.schema)))

    def add(self, row: Mapping) -> None:
        """Append `row` (an add, not a merge): for a key the caller, holding `lock`, found free."""
        with self.lock():
            self._writable().add(pa.Table.from_pylist([dict(row)], schema=self.schema))

    def rename(self, key: str, new_key: str) -> None:
        """Give the row of `key` the key `new_key` (free: the caller checked, holding `lock`)."""
        with self.lock():
            table = self._table()
            if table is not None:
                table.update(where=self._is(key), values={self.key: new_key})

    def delete(self, key: str) -> None:
        """Remove the row of `key` (none: nothing happens)."""
        with self.lock():
            table = self._table()
            if table is not None:
                table.delete(self._is(key))
