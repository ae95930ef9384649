"""Query sets and graded relevance judgments, kept per collection in LanceDB.

Two auxiliary tables beside each collection (`store.aux_table_name`; kept by `Store.clear`,
dropped with the collection by `Store.delete`):

- `_queries__<collection>`: set_name, query_id, text, position (the order queries were given in);
- `_judgments__<collection>`: set_name, query_id, doc_id, grade.

A query set is a named list of queries (id -> text) with, optionally, graded judgments of
documents for them (qrels: query id -> doc id -> grade). Sets come from uploaded files (parsed by
`qrels.parse_queries` / `qrels.parse_qrels`), from code (`save_query_set`), or grow one rating
at a time from the Search page (`rate`: grades 0 not relevant, 1 related, 2 relevant, 3 perfect).

Every write is one merge-insert commit per table; a call that writes both tables restores the
first to its previous version if the second fails, so a failed call changes nothing. Input is
validated before anything is written: set names follow the collection-name rule, ids are
non-empty single tokens (no whitespace: TREC files split on it), grades are integers. Filters are
built only from validated names through `store.sql_string`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from .store import Store, aux_table_name, counts_as_write, crash_point, sql_string, validate_collection_name
from .types import RetrievalError

RATING_GRADES = (0, 1, 2, 3)  # what `rate` accepts
# Imported files may use TREC's wider scale: −2 spam, −1/0 not relevant … 4 navigational.
MIN_IMPORTED_GRADE, MAX_IMPORTED_GRADE = -2, 4
MAX_ID_CHARS = 200
MAX_QUERY_CHARS = 2000
_ID_RE = re.compile(r"\S+")  # fullmatch: no trailing newline

QUERIES_SCHEMA = pa.schema([
    pa.field("set_name", pa.string(), nullable=False),
    pa.field("query_id", pa.string(), nullable=False),
    pa.field("text", pa.string(), nullable=False),
    pa.field("position", pa.int64(), nullable=False),
])
JUDGMENTS_SCHEMA = pa.schema([
    pa.field("set_name", pa.string(), nullable=False),
    pa.field("query_id", pa.string(), nullable=False),
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("grade", pa.int32(), nullable=False),
])
QUERY_KEY = ["set_name", "query_id"]
JUDGMENT_KEY = ["set_name", "query_id", "doc_id"]


def validate_set_name(name: str) -> str:
    """Set names follow the collection-name rule: 1–64 of a–z, 0–9, '_' and '-', starting with a
    letter or digit."""
    return validate_collection_name(name, what="query set name")


def validate_id(value: str, what: str) -> str:
    """A query or document id: a non-empty string of at most 200 characters without whitespace."""
    if not isinstance(value, str) or not _ID_RE.fullmatch(value) or len(value) > MAX_ID_CHARS:
        raise RetrievalError(
            f"Invalid {what} id {value!r}: use 1–{MAX_ID_CHARS} characters without spaces, tabs or line breaks"
        )
    return value


def validate_query_text(text: str) -> str:
    """Query text, stripped: non-empty, at most 2,000 characters."""
    if not isinstance(text, str) or not text.strip():
        raise RetrievalError("Query text is empty")
    text = text.strip()
    if len(text) > MAX_QUERY_CHARS:
        raise RetrievalError(f"Query text is {len(text)} characters long; the limit is {MAX_QUERY_CHARS}")
    return text


def validate_grade(grade: int, allowed: range | tuple[int, ...] = RATING_GRADES) -> int:
    """An integer grade within `allowed` (bool and float are refused, 2.0 included)."""
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in allowed:
        shown = f"{allowed[0]}–{allowed[-1]}"
        raise RetrievalError(f"Grade must be an integer from {shown}, got {grade!r}")
    return grade


def ui_query_id(text: str, taken: Mapping[str, str] | None = None) -> str:
    """'ui-' + the first 8 hex digits of sha1(text); longer if that id names another text."""
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()
    taken = taken or {}
    for length in range(8, len(digest) + 1):
        candidate = f"ui-{digest[:length]}"
        if taken.get(candidate, text) == text:
            return candidate
    raise RetrievalError("Could not make a query id for this text")  # 2^-160: never in practice


class JudgmentStore:
    """Query sets and judgments of the collections in one `Store` (see the module docstring)."""

    def __init__(self, store: Store):
        self.store = store

    # ---- tables ----------------------------------------------------------------------------
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
        return search.limit(None).to_arrow().to_pylist()

    def _judgment_rows(self, collection: str, set_name: str, query_id: str | None = None) -> list[dict]:
        table = self._open(collection, "judgments")
        if table is None:
            return []
        where = f"set_name = {sql_string(set_name)}"
        if query_id is not None:
            where += f" AND query_id = {sql_string(query_id)}"
        return table.search().where(where).limit(None).to_arrow().to_pylist()

    def _require_set(self, collection: str, set_name: str) -> list[dict]:
        """The set's query rows in their order; a readable error if the set does not exist."""
        validate_set_name(set_name)
        rows = sorted(self._query_rows(collection, set_name), key=lambda r: (r["position"], r["query_id"]))
        if not rows:
            known = ", ".join(self.query_sets(collection)) or "none yet"
            raise RetrievalError(f"No query set named {set_name!r} in {collection!r} (sets: {known})")
        return rows

    # ---- reads -----------------------------------------------------------------------------
    def query_sets(self, collection: str) -> list[str]:
        """The collection's set names, sorted."""
        validate_collection_name(collection)
        return sorted({row["set_name"] for row in self._query_rows(collection)})

    def queries(self, collection: str, set_name: str) -> dict[str, str]:
        """id -> text, in the order the queries were given."""
        return {row["query_id"]: row["text"] for row in self._require_set(collection, set_name)}

    def qrels(self, collection: str, set_name: str) -> dict[str, dict[str, int]]:
        """query id -> doc id -> grade, for the set's judged queries (queries in set order, then
        doc ids sorted)."""
        order = {row["query_id"]: i for i, row in enumerate(self._require_set(collection, set_name))}
        rows = sorted(self._judgment_rows(collection, set_name),
                      key=lambda r: (order.get(r["query_id"], len(order)), r["query_id"], r["doc_id"]))
        out: dict[str, dict[str, int]] = {}
        for row in rows:
            out.setdefault(row["query_id"], {})[row["doc_id"]] = int(row["grade"])
        return out

    def query_id(self, collection: str, set_name: str, query_text: str) -> str | None:
        """The id of the query with exactly this text (surrounding spaces ignored), or None."""
        text = validate_query_text(query_text)
        for query_id, stored in self.queries(collection, set_name).items():
            if stored.strip() == text:
                return query_id
        return None

    def ratings(self, collection: str, set_name: str, query_text: str) -> dict[str, int]:
        """doc id -> grade for the query with this text in the set ({} when it has none)."""
        query_id = self.query_id(collection, set_name, query_text)
        if query_id is None:
            return {}
        return {row["doc_id"]: int(row["grade"]) for row in
                sorted(self._judgment_rows(collection, set_name, query_id), key=lambda r: r["doc_id"])}

    # ---- writes ----------------------------------------------------------------------------
    @counts_as_write
    def save_query_set(
        self,
        collection: str,
        set_name: str,
        queries: Mapping[str, str],
        qrels: Mapping[str, Mapping[str, int]] | None = None,
        replace: bool = True,
    ) -> None:
        """Store a query set. `replace=True`: the set becomes exactly these queries and judgments
        (qrels None: no judgments). `replace=False`: merged into the set — new ids added, texts
        and grades of known ids updated, nothing removed. Judgments must name queries of the set;
        grades are integers from −2 to 4. All validated first; a failure changes nothing."""
        validate_collection_name(collection)
        validate_set_name(set_name)
        if not isinstance(queries, Mapping) or not queries:
            raise RetrievalError(f"Query set {set_name!r} needs at least one query")
        clean_queries = {validate_id(q, "query"): validate_query_text(t) for q, t in queries.items()}
        with self._lock(collection):
            existing = {} if replace else {r["query_id"]: r for r in self._query_rows(collection, set_name)}
            known_ids = set(clean_queries) | set(existing)
            clean_qrels = self._validated_qrels(qrels or {}, known_ids)
            start = max((r["position"] for r in existing.values()), default=-1) + 1
            query_rows = []
            for i, (query_id, text) in enumerate(clean_queries.items()):
                position = existing[query_id]["position"] if query_id in existing else start + i
                query_rows.append({"set_name": set_name, "query_id": query_id, "text": text, "position": position})
            judgment_rows = [{"set_name": set_name, "query_id": q, "doc_id": d, "grade": g}
                             for q, docs in clean_qrels.items() for d, g in docs.items()]
            delete_rest = f"set_name = {sql_string(set_name)}" if replace else None
            self._write_both(collection, query_rows, judgment_rows, delete_rest)

    def import_files(
        self,
        collection: str,
        set_name: str,
        queries_data: bytes,
        queries_filename: str,
        qrels_data: bytes | None = None,
        replace: bool = True,
        qrels_filename: str = "qrels",
    ) -> tuple[int, int]:
        """Upload: parse a queries file (JSONL / TSV / CSV, `qrels.parse_queries`; a query set
        file with its judgments, `qrels.parse_query_set`) and optionally a qrels file (BEIR TSV /
        TREC / CSV, `qrels.parse_qrels`), then `save_query_set`. Returns (queries, judgments)
        stored. Any parse or validation error: nothing changes."""
        queries, qrels = read_query_set_files((queries_filename, queries_data),
                                              None if qrels_data is None else (qrels_filename, qrels_data))
        self.save_query_set(collection, set_name, queries, qrels, replace=replace)
        return len(queries), sum(len(docs) for docs in (qrels or {}).values())

    @counts_as_write
    def rate(self, collection: str, set_name: str, query_text: str, doc_id: str, grade: int) -> str:
        """Grade (0–3) `doc_id` for the query with this text in the set, saved at once. The query
        is found by its text or added with id `ui-<8 hex of sha1(text)>` (the set is created if
        needed); re-rating replaces the grade. Returns the query id."""
        validate_collection_name(collection)
        validate_set_name(set_name)
        text = validate_query_text(query_text)
        validate_id(doc_id, "document")
        validate_grade(grade)
        with self._lock(collection):
            rows = self._query_rows(collection, set_name)
            taken = {r["query_id"]: r["text"] for r in rows}
            query_id = next((q for q, stored in taken.items() if stored.strip() == text), None)
            new_query = []
            if query_id is None:
                query_id = ui_query_id(text, taken)
                position = max((r["position"] for r in rows), default=-1) + 1
                new_query = [{"set_name": set_name, "query_id": query_id, "text": text, "position": position}]
            judgment = [{"set_name": set_name, "query_id": query_id, "doc_id": doc_id, "grade": grade}]
            self._write_both(collection, new_query, judgment, None)
        return query_id

    @counts_as_write
    def unrate(self, collection: str, set_name: str, query_text: str, doc_id: str) -> bool:
        """Remove the grade of `doc_id` for this query (the query stays in the set). Returns
        whether there was one."""
        validate_id(doc_id, "document")
        with self._lock(collection):
            query_id = self.query_id(collection, set_name, query_text)
            table = self._open(collection, "judgments")
            if query_id is None or table is None:
                return False
            where = (f"set_name = {sql_string(set_name)} AND query_id = {sql_string(query_id)} "
                     f"AND doc_id = {sql_string(doc_id)}")
            if not table.search().where(where).limit(1).to_arrow().num_rows:
                return False
            table.delete(where)
            return True

    @counts_as_write
    def delete_query_set(self, collection: str, set_name: str) -> None:
        """Remove a set with its judgments (an unknown set is an error)."""
        with self._lock(collection):
            self._require_set(collection, set_name)
            self._write_both(collection, [], [], f"set_name = {sql_string(set_name)}")

    # ---- export ----------------------------------------------------------------------------
    def export_qrels(self, collection: str, set_name: str, fmt: str = "trec") -> str:
        """The set's judgments as text: 'trec' (`qid 0 docid grade` per line) or 'beir'
        (`query-id<TAB>corpus-id<TAB>score` with that header). `qrels.parse_qrels` reads both."""
        if fmt not in ("trec", "beir"):
            raise RetrievalError(f"Export format must be 'trec' or 'beir', got {fmt!r}")
        qrels = self.qrels(collection, set_name)
        if fmt == "trec":
            lines = [f"{q} 0 {d} {g}" for q, docs in qrels.items() for d, g in docs.items()]
        else:
            lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{g}" for q, docs in qrels.items()
                                                       for d, g in docs.items()]
        return "\n".join(lines) + "\n"

    def export_query_set(self, collection: str, set_name: str) -> str:
        """The set in one file: its queries in order as JSONL, each with its judgments
        (`{"_id": …, "text": …, "judgments": {doc id: grade}}`), which `import_files` reads back
        exactly (`qrels.parse_query_set`) and BEIR tools read as a queries file."""
        import json

        qrels = self.qrels(collection, set_name)
        return "".join(json.dumps({"_id": q, "text": t, "judgments": qrels.get(q, {})}, ensure_ascii=False) + "\n"
                       for q, t in self.queries(collection, set_name).items())

    def export_queries(self, collection: str, set_name: str) -> str:
        """The set's queries as JSONL (`{"_id": …, "text": …}` per line), as BEIR ships them."""
        import json

        return "".join(json.dumps({"_id": q, "text": t}, ensure_ascii=False) + "\n"
                       for q, t in self.queries(collection, set_name).items())

    # ---- internals -------------------------------------------------------------------------
    @staticmethod
    def _validated_qrels(qrels: Mapping[str, Mapping[str, int]], known_ids: set[str]) -> dict[str, dict[str, int]]:
        allowed = range(MIN_IMPORTED_GRADE, MAX_IMPORTED_GRADE + 1)
        clean: dict[str, dict[str, int]] = {}
        unknown = []
        for query_id, docs in qrels.items():
            validate_id(query_id, "query")
            if query_id not in known_ids:
                unknown.append(query_id)
                continue
            for doc_id, grade in docs.items():
                validate_id(doc_id, "document")
                clean.setdefault(query_id, {})[doc_id] = validate_grade(grade, allowed)
        if unknown:
            shown = ", ".join(repr(q) for q in sorted(unknown)[:10])
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            raise RetrievalError(f"Judgments name {len(unknown)} query id(s) that are not in the query set: "
                                 f"{shown}{more}")
        return clean

    def _write_both(self, collection: str, query_rows: list[dict], judgment_rows: list[dict],
                    delete_rest: str | None) -> None:
        """Upsert the rows into both tables (one commit each); with `delete_rest`, rows matching
        it that are not in the new rows are deleted in the same commit. All or nothing across both
        tables (`Store.transaction`), also when the process is killed half-way."""
        # One store transaction: a failure or a killed process rolls both tables back (the
        # caller holds the collection's writer lock, across processes).
        tables = [aux_table_name(collection, "queries"), aux_table_name(collection, "judgments")]
        with self.store.transaction(collection, "ratings", tables):
            queries = self._open(collection, "queries", create=True)
            judgments = self._open(collection, "judgments", create=True)
            if query_rows or delete_rest:
                _merge(queries, QUERY_KEY, pa.Table.from_pylist(query_rows, schema=QUERIES_SCHEMA), delete_rest)
            crash_point("ratings:queries")
            if judgment_rows or delete_rest:
                _merge(judgments, JUDGMENT_KEY, pa.Table.from_pylist(judgment_rows, schema=JUDGMENTS_SCHEMA),
                       delete_rest)


def read_query_set_files(queries_file: tuple[str, bytes], qrels_file: tuple[str, bytes] | None
                         ) -> tuple[dict[str, str], dict[str, dict[str, int]] | None]:
    """Queries and judgments from an upload: a queries file (which may carry its judgments:
    `qrels.parse_query_set`) and an optional qrels file ((file name, bytes) each). Judgments in
    both is an error: which to keep is not ours to guess."""
    from .qrels import parse_query_set

    queries, qrels = parse_query_set(queries_file[1], queries_file[0])
    if qrels_file is not None:
        if qrels is not None:
            raise RetrievalError(f"{queries_file[0]} carries judgments already: upload it without a qrels file, or "
                                 "a queries file without judgments with one")
        qrels = read_qrels_file(qrels_file)
    return queries, qrels


def read_qrels_file(qrels_file: tuple[str, bytes]) -> dict[str, dict[str, int]]:
    """A judgments file ((file name, bytes): TREC, BEIR tsv or CSV, `qrels.parse_qrels`), its
    problems named by the file."""
    from .encoding import decode_bytes
    from .qrels import parse_qrels
    from .types import IngestError

    try:
        return parse_qrels(decode_bytes(qrels_file[1])[0])
    except IngestError as exc:
        raise IngestError(f"{qrels_file[0]}: {exc}") from exc  # str(exc) lists the problems already


def _merge(table, key: list[str], rows: pa.Table, delete_rest: str | None) -> None:
    """One commit: update rows whose key exists, insert the others, and (with `delete_rest`)
    delete the existing rows matching it that the new rows do not have."""
    builder = table.merge_insert(key).when_matched_update_all().when_not_matched_insert_all()
    if delete_rest is not None:
        builder = builder.when_not_matched_by_source_delete(delete_rest)
    builder.execute(rows)


@dataclass
class QuerySet:
    """One query set as read from a `JudgmentStore`: its queries (id -> text) and qrels
    (query id -> doc id -> grade)."""

    name: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]

    @property
    def judged(self) -> list[str]:
        """Query ids with at least one judgment and a text: the ones evaluation scores."""
        return [q for q, docs in self.qrels.items() if docs and q in self.queries]

    def fingerprint(self) -> str:
        data = json.dumps([self.queries, self.qrels], sort_keys=True, ensure_ascii=False)
        return hashlib.sha1(data.encode()).hexdigest()

    def summary(self) -> str:
        n_judgments = sum(len(d) for d in self.qrels.values())
        relevant = sum(1 for d in self.qrels.values() for g in d.values() if g > 0)
        return (f"Query set '{self.name}': {_plural(len(self.queries), 'query', 'queries')}, "
                f"{len(self.judged)} of them judged ({_plural(n_judgments, 'judgment')}, {relevant} relevant).")


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"
