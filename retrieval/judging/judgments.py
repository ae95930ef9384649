"""Query sets and graded relevance judgments, kept per collection in LanceDB (`JudgmentStore`).

The rows live in two auxiliary tables beside each collection, one of queries and one of judgments
(`judgment_tables`: their columns, and the all-or-nothing write across both).

Judgments are kept per rater (a name, no login; `raters.validate_rater`). Imported judgments and
ratings given without a name belong to the unnamed rater `UNNAMED` (''), so a set with one rater
behaves as a set of plain qrels: re-rating replaces the grade. A rater's "can't tell" is stored as
the grade `CANT_TELL` (the pair is not asked of that rater again) and never counted. What the
metrics read (`qrels`) is the consensus of the raters per (query, document), `raters.consensus`:
the adjudicated grade, else the majority grade, else the mean rounded half up; LLM raters
(`llm:<model>`) can be left out.

A query set is a named list of queries (id -> text) with, optionally, graded judgments of
documents for them (qrels: query id -> doc id -> grade). Sets come from uploaded files (parsed by
`qrels.parse_queries` / `qrels.parse_qrels`), from code (`save_query_set`), or grow one rating
at a time from the Search page (`rate`: grades 0 not relevant, 1 related, 2 relevant, 3 perfect).
Several raters' ratings come from a ratings file (`rating_formats`, then `save_ratings`).

A failed call changes nothing. Input is validated before anything is written (`validation`: set
names, ids, query texts, grades).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval.judging.judgment_tables import JudgmentTables, judgment_row
from retrieval.judging.qrels import format_qrels, format_queries, format_query_set, read_query_set_files
from retrieval.judging.query_set import CONSENSUS, QuerySet  # noqa: F401 - QuerySet: its public name here
from retrieval.judging.raters import Rating, consensus_qrels, is_implicit_rater, is_llm_rater, validate_rater
from retrieval.judging.validation import (
    MAX_IMPORTED_GRADE,
    MIN_IMPORTED_GRADE,
    ui_query_id,
    validate_grade,
    validate_id,
    validate_qrels,
    validate_query_text,
    validate_set_name,
)
from retrieval.store import counts_as_write, sql_string, validate_collection_name
from retrieval.types import RetrievalError

UNNAMED = ""  # the rater of imported judgments and of ratings given without a name
CANT_TELL = -99  # a rater's "can't tell", stored as a grade outside every scale; never counted
MAX_NOTE_CHARS = 4000  # need and guidelines of one query
STATE_WAIT_S = 10.0  # how long a snapshot waits for a write to the collection (`judged_state`)


class JudgmentStore(JudgmentTables):
    """Query sets and judgments of the collections in one `Store` (see the module docstring)."""

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

    def qrels(self, collection: str, set_name: str, with_llm: bool = True,
              source: str | None = None) -> dict[str, dict[str, int]]:
        """query id -> doc id -> grade, for the set's judged queries (queries in set order, then
        doc ids sorted): per (query, document) the raters' consensus (`raters.consensus`); with
        `with_llm` False, LLM raters are left out. Implicit lists (`implicit:<model>`, a click
        model's grades) are never in the consensus: `source` names one judgment source to read
        alone instead (a rater name, e.g. "implicit:pbm"; None or `CONSENSUS`: the consensus)."""
        if source not in (None, CONSENSUS):
            rater = _valid_rater(source)
            if rater not in self.raters(collection, set_name):
                raise RetrievalError(f"Query set {set_name!r} has no judgments from {source!r} (sources: "
                                     f"{', '.join(map(repr, self.sources(collection, set_name)))})")
            return consensus_qrels(self.ratings_of(collection, set_name, rater=rater))
        raters = self.raters(collection, set_name)
        exclude = tuple(r for r in raters if is_implicit_rater(r) or (not with_llm and is_llm_rater(r)))
        return consensus_qrels(self.ratings_of(collection, set_name), exclude_raters=exclude)

    def sources(self, collection: str, set_name: str) -> list[str]:
        """The judgment sources one can evaluate with: `CONSENSUS` (the raters'), then each
        implicit list of the set."""
        return [CONSENSUS] + [r for r in self.raters(collection, set_name) if is_implicit_rater(r)]

    def judged_queries(self, collection: str, set_name: str, max_queries: int | None = None,
                       source: str | None = None) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        """What an evaluation of the set judges (`evaluate --queryset`, the MCP tuning tools): its
        queries and the judgments (`qrels`' `source`) of its judged queries, the first
        `max_queries` of them when given."""
        queries = self.queries(collection, set_name)
        qrels = {q: d for q, d in self.qrels(collection, set_name, source=source).items() if d}
        if not qrels:
            raise RetrievalError(f"Query set {set_name!r} of {collection!r} has no judgments yet")
        if max_queries:
            qrels = dict(list(qrels.items())[:max_queries])
        return queries, qrels

    def judged_state(self, collection: str, set_name: str, wait: float = STATE_WAIT_S, source: str | None = None
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
            return (self.queries(collection, set_name), self.qrels(collection, set_name, source=source),
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
            clean_qrels = validate_qrels(qrels or {}, known_ids)
            start = 0 if replace else max((r["position"] for r in existing.values()), default=-1) + 1
            query_rows = []
            for i, (query_id, text) in enumerate(clean_queries.items()):
                old = existing.get(query_id, {})
                position = start + i if replace or not old else old["position"]
                query_rows.append({"set_name": set_name, "query_id": query_id, "text": text, "position": position,
                                   "need": old.get("need", ""), "guidelines": old.get("guidelines", "")})
            judgment_rows = [judgment_row(set_name, q, d, UNNAMED, g)
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
            self._write_both(collection, new_query, [judgment_row(set_name, query_id, doc_id, rater, grade)], None)
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
            rows.append(judgment_row(set_name, query_id, doc_id, rater,
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
                     queries: Mapping[str, str] | None = None, replace: bool = False,
                     replace_rater: str | None = None) -> int:
        """Import several raters' ratings (a ratings CSV, a Quepid file). `queries` (id -> text)
        are added to the set (created if needed) or update the texts of known ids; every rating
        must name a query of the set. `replace`: the set's ratings become exactly these (the
        queries stay); `replace_rater`: that rater's ratings become exactly these (an implicit list
        re-made from a longer log). One commit per table; a failure changes nothing. Returns the
        ratings saved."""
        validate_collection_name(collection)
        validate_set_name(set_name)
        clean_queries = {validate_id(q, "query"): validate_query_text(t) for q, t in (queries or {}).items()}
        rows = [judgment_row(set_name, validate_id(r.query_id, "query"), validate_id(r.doc_id, "document"),
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
            delete = f"set_name = {sql_string(set_name)}" if replace else None
            if replace_rater is not None and not replace:
                delete = f"set_name = {sql_string(set_name)} AND rater = {sql_string(_valid_rater(replace_rater))}"
            self._write_both(collection, query_rows, rows, None, delete_judgments=delete)
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
        """The set's judgments as text: 'trec' or 'beir' (`qrels.format_qrels`), which
        `qrels.parse_qrels` reads."""
        return format_qrels(self.qrels(collection, set_name), fmt)

    def export_query_set(self, collection: str, set_name: str) -> str:
        """The set in one file: its queries in order as JSONL, each with its judgments
        (`qrels.format_query_set`), which `import_files` reads back exactly and BEIR tools read as
        a queries file."""
        qrels = self.qrels(collection, set_name)
        return format_query_set(self.queries(collection, set_name), qrels)

    def export_queries(self, collection: str, set_name: str) -> str:
        """The set's queries as JSONL (`{"_id": …, "text": …}` per line), as BEIR ships them."""
        return format_queries(self.queries(collection, set_name))


def _valid_rater(name: str, allow_reserved: bool = False) -> str:
    """A rater name (`raters.validate_rater`), or '' for the unnamed rater."""
    return UNNAMED if name == UNNAMED else validate_rater(name, allow_reserved=allow_reserved)
