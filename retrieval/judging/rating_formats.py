"""Ratings of several raters in the files they travel in: a ratings CSV and Quepid's, read and
written. A rating is one rater's grade of one document for one query (`raters.Rating`).

Ratings, one rater's grade per line (`parse_ratings_csv` / `format_ratings_csv`): CSV with a
header naming the columns query, doc, grade and, optionally, rater, in any order and any case
(also query_id, doc_id, rating). An empty grade, "?" or "can't tell" is the rater's "can't tell"
(grade None). `format_ratings_csv` writes `query,doc,grade,rater`, read back exactly; a cell a
spreadsheet would run as a formula gets a leading quote, removed on reading (`text/csv_cells.py`).

Quepid's ratings CSV (`parse_quepid_csv` / `format_quepid_csv`): the header `query,docid,rating`,
then one line per rated document, keyed by the query's TEXT; a query without ratings is a line
`text,,`. Quepid writes it (Api::V1::Export::RatingsController, "basic" format: a space before a
text starting with - = + @, against formula injection; here before every such cell, tab and CR
too; no line feed after the last line) and
reads it back (RatingsImporter: cells stripped, a line without a document or a rating only adds
the query; ratings may be written 1.0). Sources: github.com/o19s/quepid,
app/controllers/api/v1/export/ratings_controller.rb, app/services/ratings_importer.rb,
app/assets/javascripts/services/importRatingsSvc.js. Quepid keeps one rating per query and
document, so several raters are exported as their consensus (`raters.consensus`).

Every problem of a file is reported by its line, in one IngestError.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping

from retrieval.judging.qrels import normalize_header, read_grade, read_rows
from retrieval.judging.raters import Rating, consensus, validate_rater
from retrieval.judging.validation import ui_query_id, validate_query_text
from retrieval.text.csv_cells import csv_text, restore_cell
from retrieval.types import IngestError, RetrievalError

RATING_COLUMNS = {"query": ("query", "query_id"), "doc": ("doc", "doc_id"), "grade": ("grade", "rating"),
                  "rater": ("rater",)}
QUEPID_COLUMNS = {"query": ("query", "query_text"), "doc": ("docid", "doc_id"), "grade": ("rating",),
                  "rater": ("rater",)}
CANT_TELL_CELLS = ("", "?", "can't tell", "can’t tell", "cant tell")  # compared lower-cased
CANT_TELL_WRITTEN = "can't tell"
QUEPID_RATER = "quepid"
QUEPID_SAFE_PREFIX = " "  # Quepid writes a space before a cell starting - = + @ (formula injection)
_WHITESPACE = re.compile(r"\s")


def parse_ratings_csv(text: str, default_rater: str = "imported") -> list[Rating]:
    """Ratings from CSV (query, doc, grade, rater; see the module doc), in file order. Without a
    rater column, or where its cell is empty, the rater is `default_rater`; other names must be
    valid (`raters.validate_rater`, `(adjudicated)` allowed). A line repeating a query, document
    and rater is dropped when its grade agrees and reported when it does not; every problem is
    reported by line, in one IngestError."""
    records = read_rows(text.lstrip("\ufeff"), ",")
    columns = _rating_header(records, RATING_COLUMNS, "query, doc and grade (rater optional)")
    ratings: list[Rating] = []
    problems: list[str] = []
    first_seen: dict[tuple[str, str, str], tuple[int, int | None]] = {}
    for number, cells in records:
        row = _rating_cells(number, cells, columns, problems)
        if row is None:
            continue
        query_id, doc_id, raw_grade, raw_rater = row
        graded, grade = _rating_grade(number, raw_grade, problems)
        rater = _rating_rater(number, raw_rater, default_rater, problems)
        if not _valid_ids(number, query_id, doc_id, problems) or not graded or rater is None:
            continue
        if _repeated(number, (query_id, doc_id, rater), grade, first_seen, problems):
            continue
        ratings.append(Rating(query_id, doc_id, rater, grade))
    if problems:
        raise IngestError(f"{len(problems)} problem(s) in the ratings", problems)
    if not ratings:
        raise IngestError("the ratings file has a header but no ratings")
    return ratings


def format_ratings_csv(ratings: Iterable[Rating]) -> str:
    """`query,doc,grade,rater` CSV of `ratings`, in their order; "can't tell" written as such.
    `parse_ratings_csv` reads it back to the same list (an unnamed rater '' with `default_rater=''`)."""
    rows = ([r.query_id, r.doc_id, CANT_TELL_WRITTEN if r.grade is None else r.grade, r.rater] for r in ratings)
    return csv_text([["query", "doc", "grade", "rater"], *rows])


def parse_quepid_csv(text: str, query_ids: Mapping[str, str] | None = None, rater: str = QUEPID_RATER
                     ) -> tuple[dict[str, str], list[Rating]]:
    """Queries (id -> text, in file order) and ratings from Quepid's ratings CSV (module doc).
    `query_ids`: query text -> id of queries known already; other texts get `ui-<sha1>` ids
    (`ui_query_id`). The rater is `rater` unless the file has a rater column. A line
    with a document and no rating is skipped, as Quepid does; problems are reported by line."""

    records = read_rows(text.lstrip("\ufeff"), ",")
    columns = _rating_header(records, QUEPID_COLUMNS, "query, docid and rating (Quepid's query,docid,rating)")
    known = dict(query_ids or {})
    taken = {query_id: query_text for query_text, query_id in known.items()}
    queries: dict[str, str] = {}
    ratings: list[Rating] = []
    problems: list[str] = []
    first_seen: dict[tuple[str, str, str], tuple[int, int | None]] = {}
    for number, cells in records:
        # Quepid's own export pads a query-only line to three cells; a shorter line is read padded too.
        query_text, doc_id, raw_grade, raw_rater = (cells[i].strip() if i is not None and i < len(cells) else ""
                                                    for i in columns)
        try:
            query_text = validate_query_text(query_text)
        except RetrievalError as err:
            problems.append(f"line {number}: {err}")
            continue
        if query_text not in known:
            known[query_text] = ui_query_id(query_text, taken)
            taken[known[query_text]] = query_text
        query_id = known[query_text]
        queries.setdefault(query_id, query_text)
        if not doc_id and raw_grade:
            problems.append(f"line {number}: rating {raw_grade!r} without a document id")
        if not doc_id or not raw_grade:
            continue
        grade = read_grade(raw_grade)
        name = _rating_rater(number, raw_rater, rater, problems)
        if grade is None:
            problems.append(f"line {number}: rating {raw_grade!r} is not an integer")
        if not _valid_ids(number, query_id, doc_id, problems) or grade is None or name is None:
            continue
        if not _repeated(number, (query_text, doc_id, name), grade, first_seen, problems):
            ratings.append(Rating(query_id, doc_id, name, grade))
    if problems:
        raise IngestError(f"{len(problems)} problem(s) in the Quepid ratings", problems)
    if not queries:
        raise IngestError("the Quepid ratings file has a header but no queries")
    return queries, ratings


def format_quepid_csv(queries: Mapping[str, str], ratings: Iterable[Rating]) -> str:
    """Quepid's ratings CSV (module doc) of `queries` (id -> text, in their order) and `ratings`:
    per query its documents in first-rated order, each with the raters' consensus grade
    (`raters.consensus`; a document without one is left out), and `text,,` for a query without
    ratings. `parse_quepid_csv` reads it back to the same queries and, for one rater, the same
    ratings (given in query order). Raises RetrievalError for a rating of a query not in `queries`."""
    units: dict[str, dict[str, dict[str, int | None]]] = {}
    for r in ratings:
        if r.query_id not in queries:
            raise RetrievalError(f"No text for query id {r.query_id!r}: Quepid keys ratings by query text")
        units.setdefault(r.query_id, {}).setdefault(r.doc_id, {})[r.rater] = r.grade
    lines: list[list] = [["query", "docid", "rating"]]
    for query_id, query_text in queries.items():
        graded = {d: consensus(grades) for d, grades in units.get(query_id, {}).items()}
        rows = [[query_text, doc_id, grade] for doc_id, grade in graded.items() if grade is not None]
        lines.extend(rows or [[query_text, "", ""]])
    # Quepid's rule against formulas: a space before the cell (its importer strips cells).
    return csv_text(lines, prefix=QUEPID_SAFE_PREFIX)[:-1]  # as Quepid writes it: no line feed after the last line


def _rating_header(records: Iterator[tuple[int, list[str]]], names: Mapping[str, tuple[str, ...]], needed: str
                   ) -> tuple[int | None, int | None, int | None, int | None]:
    """Indexes of the query, doc, grade and rater (None: absent) columns named by the first record."""
    number, header = next(records, (0, []))
    if not header:
        raise IngestError("the ratings file is empty")
    found = [normalize_header(cell) for cell in header]
    columns = tuple(next((found.index(alias) for alias in aliases if alias in found), None)
                    for aliases in names.values())
    if None in columns[:3]:
        raise IngestError(f"line {number}: the header needs the columns {needed}; found: {', '.join(header)}")
    return columns  # type: ignore[return-value]


def _rating_cells(number: int, cells: list[str], columns: tuple[int | None, ...], problems: list[str]
                  ) -> tuple[str, str, str, str] | None:
    needed = max(i for i in columns if i is not None) + 1
    if len(cells) < needed:
        problems.append(f"line {number}: expected {needed} fields, got {len(cells)}")
        return None
    query_id, doc_id, grade, rater = (restore_cell(cells[i].strip()) if i is not None else "" for i in columns)
    return query_id, doc_id, grade, rater


def _rating_grade(number: int, raw: str, problems: list[str]) -> tuple[bool, int | None]:
    """(True, the grade or None for "can't tell"), or (False, None) and a problem."""
    if raw.lower() in CANT_TELL_CELLS:
        return True, None
    grade = read_grade(raw)
    if grade is None:
        problems.append(f"line {number}: grade {raw!r} is not an integer (nor empty, '?' or \"can't tell\")")
    return grade is not None, grade


def _rating_rater(number: int, raw: str, default: str, problems: list[str]) -> str | None:
    if not raw:
        return default
    try:
        return validate_rater(raw, allow_reserved=True)
    except RetrievalError as err:
        problems.append(f"line {number}: {err}")
        return None


def _valid_ids(number: int, query_id: str, doc_id: str, problems: list[str]) -> bool:
    """Non-empty ids without whitespace (TREC files split on it); a problem otherwise."""
    if not query_id or not doc_id:
        problems.append(f"line {number}: empty query or document id")
        return False
    spaced = [f"{what} id {value!r}" for what, value in (("query", query_id), ("document", doc_id))
              if _WHITESPACE.search(value)]
    if spaced:
        problems.append(f"line {number}: {' and '.join(spaced)} must not contain whitespace")
    return not spaced


def _repeated(number: int, key: tuple[str, str, str], grade: int | None,
              first_seen: dict[tuple[str, str, str], tuple[int, int | None]], problems: list[str]) -> bool:
    """Whether `key` (query, document, rater) was rated on an earlier line; a problem when the
    grades differ."""
    if key not in first_seen:
        first_seen[key] = (number, grade)
        return False
    line, earlier = first_seen[key]
    if earlier != grade:
        shown = ["can't tell" if g is None else str(g) for g in (grade, earlier)]
        problems.append(f"line {number}: query {key[0]!r}, document {key[1]!r}, rater {key[2]!r} graded "
                        f"{shown[0]} here but {shown[1]} on line {line}")
    return True
