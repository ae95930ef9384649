"""The two LanceDB tables a `JudgmentStore` keeps its query sets and judgments in, and the
all-or-nothing write across them.

Two auxiliary tables beside each collection (`store.aux_table_name`; kept by `Store.clear`,
dropped with the collection by `Store.delete`):

- `_queries__<collection>`: set_name, query_id, text, position (the order queries were given in),
  need (the information need behind the query) and guidelines (what counts as relevant for it),
  both written per query for the judging page ('' when none);
- `_judgments__<collection>`: set_name, query_id, doc_id, rater, grade.

Tables written before raters existed get the new columns ('' for all, `ADDED_COLUMNS`) at their
next write, and read as if they had them.

Every write is one merge-insert commit per table; a call that writes both tables restores the
first to its previous version if the second fails, so a failed call changes nothing. Filters are
built only from validated names through `store.sql_string`.
"""

from __future__ import annotations

import pyarrow as pa

from retrieval.store import Store, aux_table_name, crash_point, sql_string

QUERIES_SCHEMA = pa.schema([
    pa.field("set_name", pa.string(), nullable=False),
    pa.field("query_id", pa.string(), nullable=False),
    pa.field("text", pa.string(), nullable=False),
    pa.field("position", pa.int64(), nullable=False),
    pa.field("need", pa.string(), nullable=False),
    pa.field("guidelines", pa.string(), nullable=False),
])
JUDGMENTS_SCHEMA = pa.schema([
    pa.field("set_name", pa.string(), nullable=False),
    pa.field("query_id", pa.string(), nullable=False),
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("grade", pa.int32(), nullable=False),
    pa.field("rater", pa.string(), nullable=False),
])
QUERY_KEY = ["set_name", "query_id"]
JUDGMENT_KEY = ["set_name", "query_id", "doc_id", "rater"]
# Columns added since the tables were first written: name -> SQL default for existing rows.
ADDED_COLUMNS = {"queries": {"need": "CAST('' AS STRING)", "guidelines": "CAST('' AS STRING)"},
                 "judgments": {"rater": "CAST('' AS STRING)"}}


class JudgmentTables:
    """The query and judgment tables of the collections in one `Store`: rows read, rows written
    (see the module docstring). `JudgmentStore` adds what the rows mean."""

    def __init__(self, store: Store):
        self.store = store

    def _open(self, collection: str, kind: str, create: bool = False):
        """The collection's `kind` table; None when it does not exist and `create` is False."""
        schema = QUERIES_SCHEMA if kind == "queries" else JUDGMENTS_SCHEMA
        return self.store.side_table(aux_table_name(collection, kind), schema, create)

    def _lock(self, collection: str):
        # The collection's own writer lock, so a rating cannot re-create a table `delete` drops.
        return self.store.writer_lock(collection)

    def _query_rows(self, collection: str, set_name: str | None = None) -> list[dict]:
        table = self._open(collection, "queries")
        if table is None:
            return []
        search = table.search()
        if set_name is not None:
            search = search.where(f"set_name = {sql_string(set_name)}")
        return _with_added(search.limit(None).to_arrow().to_pylist(), "queries")

    def _judgment_rows(self, collection: str, set_name: str, query_id: str | None = None,
                       rater: str | None = None) -> list[dict]:
        table = self._open(collection, "judgments")
        if table is None:
            return []
        where = f"set_name = {sql_string(set_name)}"
        if query_id is not None:
            where += f" AND query_id = {sql_string(query_id)}"
        if rater is not None and "rater" in table.schema.names:
            where += f" AND rater = {sql_string(rater)}"
        rows = _with_added(table.search().where(where).limit(None).to_arrow().to_pylist(), "judgments")
        return rows if rater is None else [r for r in rows if r["rater"] == rater]

    def _write_both(self, collection: str, query_rows: list[dict], judgment_rows: list[dict],
                    delete_rest: str | None, delete_judgments: str | None = None) -> None:
        """Upsert the rows into both tables (one commit each); with `delete_rest`, rows of either
        table matching it that are not in the new rows are deleted in the same commit
        (`delete_judgments`: the judgments table's only). All or nothing across both tables
        (`Store.transaction`), also when the process is killed half-way."""
        # One store transaction: a failure or a killed process rolls both tables back (the
        # caller holds the collection's writer lock, across processes).
        tables = [aux_table_name(collection, "queries"), aux_table_name(collection, "judgments")]
        delete_judgments = delete_judgments or delete_rest
        with self.store.transaction(collection, "ratings", tables):
            queries = self._open(collection, "queries", create=True)
            judgments = self._open(collection, "judgments", create=True)
            if query_rows or delete_rest:
                _add_missing_columns(queries, "queries")
                _merge(queries, QUERY_KEY, pa.Table.from_pylist(query_rows, schema=QUERIES_SCHEMA), delete_rest)
            crash_point("ratings:queries")
            if judgment_rows or delete_judgments:
                _add_missing_columns(judgments, "judgments")
                _merge(judgments, JUDGMENT_KEY, pa.Table.from_pylist(judgment_rows, schema=JUDGMENTS_SCHEMA),
                       delete_judgments)

    def _delete_judgments(self, collection: str, set_name: str, pairs: list[tuple[str, str]], rater: str) -> None:
        """Delete `rater`'s rows of these pairs in one commit (ids and rater validated already)."""
        tables = [aux_table_name(collection, "judgments")]
        with self.store.transaction(collection, "ratings", tables):
            table = self._open(collection, "judgments")
            _add_missing_columns(table, "judgments")
            keys = " OR ".join(f"(query_id = {sql_string(q)} AND doc_id = {sql_string(d)})" for q, d in pairs)
            table.delete(f"set_name = {sql_string(set_name)} AND rater = {sql_string(rater)} AND ({keys})")


def judgment_row(set_name: str, query_id: str, doc_id: str, rater: str, grade: int) -> dict:
    return {"set_name": set_name, "query_id": query_id, "doc_id": doc_id, "grade": grade, "rater": rater}


def _with_added(rows: list[dict], kind: str) -> list[dict]:
    """Rows of a table written before `ADDED_COLUMNS` existed, read with their defaults ('')."""
    for row in rows:
        for column in ADDED_COLUMNS[kind]:
            row.setdefault(column, "")
    return rows


def _add_missing_columns(table, kind: str) -> None:
    """Give a table written before `ADDED_COLUMNS` existed its new columns (one commit, inside
    the caller's transaction)."""
    missing = {name: sql for name, sql in ADDED_COLUMNS[kind].items() if name not in table.schema.names}
    if missing:
        table.add_columns(missing)


def _merge(table, key: list[str], rows: pa.Table, delete_rest: str | None) -> None:
    """One commit: update rows whose key exists, insert the others, and (with `delete_rest`)
    delete the existing rows matching it that the new rows do not have."""
    builder = table.merge_insert(key).when_matched_update_all().when_not_matched_insert_all()
    if delete_rest is not None:
        builder = builder.when_not_matched_by_source_delete(delete_rest)
    builder.execute(rows)
