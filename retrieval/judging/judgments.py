"""Query sets and graded relevance judgments, kept per collection in LanceDB.

Two auxiliary tables beside each collection (`store.aux_table_name`; kept by `Store.clear`,
dropped with the collection by `Store.delete`):

- `_queries__<collection>`: set_name, query_id, text, position (the order queries were given in),
  need (the information need behind the query) and guidelines (what counts as relevant for it),
  both written per query for the judging page ('' when none);
- `_judgments__<collection>`: set_name, query_id, doc_id, rater, grade.

Judgments are kept per rater (a name, no login; `raters.validate_rater`). Imported judgments and
ratings given without a name belong to the unnamed rater `UNNAMED` (''), so a set with one rater
behaves as a set of plain qrels: re-rating replaces the grade. A rater's "can't tell" is stored as
the grade `CANT_TELL` (the pair is not asked of that rater again) and never counted. What the
metrics read (`qrels`) is the consensus of the raters per (query, document), `raters.consensus`:
the adjudicated grade, else the majority grade, else the mean rounded half up; LLM raters
(`llm:<model>`) can be left out. Tables written before raters existed get the new columns (''
for all) at their next write, and read as if they had them.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from retrieval.judging.qrels import MAX_QUERY_CHARS, ui_query_id, validate_query_text  # noqa: F401 (re-exported)
from retrieval.judging.raters import Rating, consensus_qrels, is_llm_rater, validate_rater
from retrieval.store import (
    Store,
    aux_table_name,
    counts_as_write,
    crash_point,
    sql_string,
    validate_collection_name,
)
from retrieval.types import RetrievalError

RATING_GRADES = (0, 1, 2, 3)  # what `rate` accepts
# Imported files may use TREC's wider scale: −2 spam, −1/0 not relevant … 4 navigational.
MIN_IMPORTED_GRADE, MAX_IMPORTED_GRADE = -2, 4
MAX_ID_CHARS = 200
_ID_RE = re.compile(r"\S+")  # fullmatch: no trailing newline

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
UNNAMED = ""  # the rater of imported judgments and of ratings given without a name
CANT_TELL = -99  # a rater's "can't tell", stored as a grade outside every scale; never counted
MAX_NOTE_CHARS = 4000  # need and guidelines of one query
STATE_WAIT_S = 10.0  # how long a snapshot waits for a write to the collection (`judged_state`)


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


def validate_grade(grade: int, allowed: range | tuple[int, ...] = RATING_GRADES) -> int:
    """An integer grade within `allowed` (bool and float are refused, 2.0 included)."""
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in allowed:
        shown = f"{allowed[0]}–{allowed[-1]}"
        raise RetrievalError(f"Grade must be an integer from {shown}, got {grade!r}")
    return grade


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

    def notes(self, collection: str, set_name: str) -> dict[str, tuple[str, str]]:
        """id -> (information need, guidelines) of the set's queries, in order ('' when none)."""
        return {row["query_id"]: (row["need"], row["guidelines"]) for row in self._require_set(collection, set_name)}

    def ratings_of(self, collection: str, set_name: str, rater: str | None = None) -> list[Rating]:
        """Every rater's ratings of the set (or one rater's), queries in set order, then doc id
        and rater; a "can't tell" has grade None."""
        order = {row["query_id"]: i for i, row in enumerate(self._require_set(collection, set_name))}
        rows = sorted(self._judgment_rows(collection, set_name, rater=rater),
                      key=lambda r: (order.get(r["query_id"], len(order)), r["query_id"], r["doc_id"], r["rater"]))
        return [Rating(r["query_id"], r["doc_id"], r["rater"], None if r["grade"] == CANT_TELL else int(r["grade"]))
                for r in rows]

    def raters(self, collection: str, set_name: str) -> list[str]:
        """The names of the set's raters, sorted ('' is the unnamed rater)."""
        return sorted({r.rater for r in self.ratings_of(collection, set_name)})

    def qrels(self, collection: str, set_name: str, with_llm: bool = True) -> dict[str, dict[str, int]]:
        """query id -> doc id -> grade, for the set's judged queries (queries in set order, then
        doc ids sorted): per (query, document) the raters' consensus (`raters.consensus`); with
        `with_llm` False, LLM raters are left out."""
        exclude = () if with_llm else tuple(r for r in self.raters(collection, set_name) if is_llm_rater(r))
        return consensus_qrels(self.ratings_of(collection, set_name), exclude_raters=exclude)

    def judged_state(self, collection: str, set_name: str, wait: float = STATE_WAIT_S
                     ) -> tuple[dict[str, str], dict[str, dict[str, int]], int]:
        """The set's queries and judgments and the collection's table version, of one committed
        state: read under the collection's writer lock (a query-set write commits its queries
        before its judgments, and an add's batches before its end), so a snapshot never keeps a
        half-written or rolled-back state. Waits up to `wait` seconds for a write in progress (a
        rating: milliseconds), else says so: an ingest may hold the lock for an hour."""
        lock = self.store.writer_lock(collection)
        if not lock.try_acquire(timeout=wait):
            raise RetrievalError(f"A write to {collection!r} is in progress (an ingest, a clear …): take the snapshot "
                                 "when it has finished")
        try:
            return (self.queries(collection, set_name), self.qrels(collection, set_name),
                    self.store.version(collection))
        finally:
            lock.__exit__(None, None, None)

    def query_id(self, collection: str, set_name: str, query_text: str) -> str | None:
        """The id of the query with exactly this text (surrounding spaces ignored), or None."""
        text = validate_query_text(query_text)
        for query_id, stored in self.queries(collection, set_name).items():
            if stored.strip() == text:
                return query_id
        return None

    def ratings(self, collection: str, set_name: str, query_text: str, rater: str = UNNAMED) -> dict[str, int]:
        """doc id -> grade that `rater` gave for the query with this text in the set ({} when
        none; "can't tell" left out)."""
        query_id = self.query_id(collection, set_name, query_text)
        if query_id is None:
            return {}
        return {row["doc_id"]: int(row["grade"]) for row in
                sorted(self._judgment_rows(collection, set_name, query_id, rater=rater), key=lambda r: r["doc_id"])
                if row["grade"] != CANT_TELL}

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
        (qrels None: no judgments; every rater's ratings go). `replace=False`: merged into the set
        — new ids added, texts and grades of known ids updated, nothing removed. The judgments are
        the unnamed rater's. Judgments must name queries of the set; grades are integers from −2
        to 4. A known query keeps its need and guidelines. All validated first; a failure changes
        nothing."""
        validate_collection_name(collection)
        validate_set_name(set_name)
        if not isinstance(queries, Mapping) or not queries:
            raise RetrievalError(f"Query set {set_name!r} needs at least one query")
        clean_queries = {validate_id(q, "query"): validate_query_text(t) for q, t in queries.items()}
        with self._lock(collection):
            existing = {r["query_id"]: r for r in self._query_rows(collection, set_name)}
            known_ids = set(clean_queries) | (set() if replace else set(existing))
            clean_qrels = self._validated_qrels(qrels or {}, known_ids)
            start = 0 if replace else max((r["position"] for r in existing.values()), default=-1) + 1
            query_rows = []
            for i, (query_id, text) in enumerate(clean_queries.items()):
                old = existing.get(query_id, {})
                position = start + i if replace or not old else old["position"]
                query_rows.append({"set_name": set_name, "query_id": query_id, "text": text, "position": position,
                                   "need": old.get("need", ""), "guidelines": old.get("guidelines", "")})
            judgment_rows = [_judgment_row(set_name, q, d, UNNAMED, g)
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
    def rate(self, collection: str, set_name: str, query_text: str, doc_id: str, grade: int,
             rater: str = UNNAMED) -> str:
        """`rater`'s grade (0–3) of `doc_id` for the query with this text in the set, saved at
        once. The query is found by its text or added with id `ui-<8 hex of sha1(text)>` (the set
        is created if needed); re-rating replaces that rater's grade. Returns the query id."""
        validate_collection_name(collection)
        validate_set_name(set_name)
        text = validate_query_text(query_text)
        validate_id(doc_id, "document")
        validate_grade(grade)
        rater = _valid_rater(rater)
        with self._lock(collection):
            rows = self._query_rows(collection, set_name)
            taken = {r["query_id"]: r["text"] for r in rows}
            query_id = next((q for q, stored in taken.items() if stored.strip() == text), None)
            new_query = []
            if query_id is None:
                query_id = ui_query_id(text, taken)
                position = max((r["position"] for r in rows), default=-1) + 1
                new_query = [{"set_name": set_name, "query_id": query_id, "text": text, "position": position,
                              "need": "", "guidelines": ""}]
            self._write_both(collection, new_query, [_judgment_row(set_name, query_id, doc_id, rater, grade)], None)
        return query_id

    @counts_as_write
    def rate_many(self, collection: str, set_name: str, grades: Mapping[tuple[str, str], int | None],
                  rater: str = UNNAMED) -> int:
        """`rater`'s grades (0–3, or None for "can't tell") of (query id, doc id) pairs of the
        set's queries, in one commit; re-rating replaces that rater's grade. `rater` may be
        `raters.ADJUDICATED` (the resolution of a disagreement). Returns how many were saved."""
        validate_collection_name(collection)
        validate_set_name(set_name)
        rater = _valid_rater(rater, allow_reserved=True)
        rows = []
        for key, grade in grades.items():
            if not isinstance(key, tuple) or len(key) != 2:
                raise RetrievalError(f"Ratings are keyed by (query id, document id), got {key!r}")
            query_id, doc_id = validate_id(key[0], "query"), validate_id(key[1], "document")
            rows.append(_judgment_row(set_name, query_id, doc_id, rater,
                                      CANT_TELL if grade is None else validate_grade(grade)))
        if not rows:
            return 0
        with self._lock(collection):
            known = {r["query_id"] for r in self._require_set(collection, set_name)}
            unknown = sorted({r["query_id"] for r in rows} - known)
            if unknown:
                raise RetrievalError(f"Query set {set_name!r} has no query {unknown[0]!r}"
                                     + (f" (and {len(unknown) - 1} more unknown)" if len(unknown) > 1 else ""))
            self._write_both(collection, [], rows, None)
        return len(rows)

    @counts_as_write
    def unrate_many(self, collection: str, set_name: str, pairs, rater: str = UNNAMED) -> int:
        """Remove `rater`'s ratings of these (query id, doc id) pairs, in one commit (undo).
        Returns how many there were."""
        validate_set_name(set_name)
        rater = _valid_rater(rater, allow_reserved=True)
        pairs = {(validate_id(q, "query"), validate_id(d, "document")) for q, d in pairs}
        with self._lock(collection):
            table = self._open(collection, "judgments")
            if table is None or not pairs:
                return 0
            present = [r for r in self._judgment_rows(collection, set_name, rater=rater)
                       if (r["query_id"], r["doc_id"]) in pairs]
            if present:
                self._delete_judgments(collection, set_name, [(r["query_id"], r["doc_id"]) for r in present], rater)
            return len(present)

    @counts_as_write
    def unrate(self, collection: str, set_name: str, query_text: str, doc_id: str, rater: str = UNNAMED) -> bool:
        """Remove `rater`'s grade of `doc_id` for this query (the query stays in the set).
        Returns whether there was one."""
        validate_id(doc_id, "document")
        rater = _valid_rater(rater)
        with self._lock(collection):
            query_id = self.query_id(collection, set_name, query_text)
            if query_id is None or not self._judgment_rows(collection, set_name, query_id, rater=rater):
                return False
            if not any(r["doc_id"] == doc_id for r in self._judgment_rows(collection, set_name, query_id, rater=rater)):
                return False
            self._delete_judgments(collection, set_name, [(query_id, doc_id)], rater)
            return True

    @counts_as_write
    def save_ratings(self, collection: str, set_name: str, ratings: Sequence[Rating],
                     queries: Mapping[str, str] | None = None, replace: bool = False) -> int:
        """Import several raters' ratings (a ratings CSV, a Quepid file). `queries` (id -> text)
        are added to the set (created if needed) or update the texts of known ids; every rating
        must name a query of the set. `replace`: the set's ratings become exactly these (the
        queries stay). One commit per table; a failure changes nothing. Returns the ratings saved."""
        validate_collection_name(collection)
        validate_set_name(set_name)
        clean_queries = {validate_id(q, "query"): validate_query_text(t) for q, t in (queries or {}).items()}
        rows = [_judgment_row(set_name, validate_id(r.query_id, "query"), validate_id(r.doc_id, "document"),
                              _valid_rater(r.rater, allow_reserved=True),
                              CANT_TELL if r.grade is None else
                              validate_grade(r.grade, range(MIN_IMPORTED_GRADE, MAX_IMPORTED_GRADE + 1)))
                for r in ratings]
        with self._lock(collection):
            existing = {r["query_id"]: r for r in self._query_rows(collection, set_name)}
            unknown = sorted({r["query_id"] for r in rows} - set(existing) - set(clean_queries))
            if unknown:
                raise RetrievalError(f"The ratings name {len(unknown)} query id(s) that are not in query set "
                                     f"{set_name!r}: {', '.join(map(repr, unknown[:10]))}")
            start = max((r["position"] for r in existing.values()), default=-1) + 1
            query_rows, added = [], 0
            for query_id, text in clean_queries.items():
                old = existing.get(query_id)
                if old is None:
                    position, added = start + added, added + 1
                query_rows.append({"set_name": set_name, "query_id": query_id, "text": text,
                                   "position": old["position"] if old else position,
                                   "need": (old or {}).get("need", ""),
                                   "guidelines": (old or {}).get("guidelines", "")})
            self._write_both(collection, query_rows, rows, None,
                             delete_judgments=f"set_name = {sql_string(set_name)}" if replace else None)
        return len(rows)

    @counts_as_write
    def set_notes(self, collection: str, set_name: str, query_id: str, need: str, guidelines: str) -> None:
        """Write a query's information need and guidelines (for the judging page; '' clears)."""
        for text, what in ((need, "information need"), (guidelines, "guidelines")):
            if not isinstance(text, str) or len(text) > MAX_NOTE_CHARS:
                raise RetrievalError(f"The {what} must be text of at most {MAX_NOTE_CHARS} characters")
        validate_id(query_id, "query")
        with self._lock(collection):
            row = next((r for r in self._require_set(collection, set_name) if r["query_id"] == query_id), None)
            if row is None:
                raise RetrievalError(f"Query set {set_name!r} has no query {query_id!r}")
            self._write_both(collection, [{**row, "need": need.strip(), "guidelines": guidelines.strip()}], [], None)

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


def _judgment_row(set_name: str, query_id: str, doc_id: str, rater: str, grade: int) -> dict:
    return {"set_name": set_name, "query_id": query_id, "doc_id": doc_id, "grade": grade, "rater": rater}


def _valid_rater(name: str, allow_reserved: bool = False) -> str:
    """A rater name (`raters.validate_rater`), or '' for the unnamed rater."""
    return UNNAMED if name == UNNAMED else validate_rater(name, allow_reserved=allow_reserved)


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


def read_query_set_files(queries_file: tuple[str, bytes], qrels_file: tuple[str, bytes] | None
                         ) -> tuple[dict[str, str], dict[str, dict[str, int]] | None]:
    """Queries and judgments from an upload: a queries file (which may carry its judgments:
    `qrels.parse_query_set`) and an optional qrels file ((file name, bytes) each). Judgments in
    both is an error: which to keep is not ours to guess."""
    from retrieval.judging.qrels import parse_query_set

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
    from retrieval.judging.qrels import parse_qrels
    from retrieval.text.encoding import decode_bytes
    from retrieval.types import IngestError

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
