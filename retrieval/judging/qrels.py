"""Read relevance judgments (qrels) and query sets in the formats evaluation data ships in.

Qrels (`parse_qrels`), the format detected from the first non-blank line:

- a table with a header naming a query, a document and a grade column, separated by tabs or
  commas. BEIR: `query-id<TAB>corpus-id<TAB>score`; CSV: e.g. `query_id,doc_id,relevance`.
  Names are matched case-insensitively, "-" and " " read as "_" (see `QUERY_COLUMNS`,
  `DOC_COLUMNS`, `GRADE_COLUMNS`); other columns are ignored;
- TREC: `qid iter docid rel`, whitespace-separated, no header; `iter` is ignored;
- three columns, no header: `qid docid rel` (a BEIR file without its header).

A first line whose last field is not an integer is taken as a header. Grades are integers ("2.0"
is read as 2), kept as given: graded, 0 and negative judgments (TREC's "judged non-relevant")
included. Every malformed line is reported, by its 1-based line number, in one IngestError.

Queries (`parse_queries`), chosen by file extension:

- `.jsonl` / `.ndjson`: one object per line, id under `_id` or `id` (also `query_id`, `qid`),
  text under `text` or `query` (also `question`); other keys ignored;
- `.tsv`: `id<TAB>text` per line (the text is everything after the first tab), with an optional
  header such as `query-id<TAB>text` or `id<TAB>query`;
- `.csv`: a header with an id column and a text column (same names as JSONL).

A query set in one file (`parse_query_set`, what `JudgmentStore.export_query_set` writes): JSONL
as above with each query's judgments under `judgments`, `{doc id: grade}` (`{}`: not judged yet),
so the file is also a BEIR queries file.

Ratings, one rater's grade per line (`parse_ratings_csv` / `format_ratings_csv`): CSV with a
header naming the columns query, doc, grade and, optionally, rater, in any order and any case
(also query_id, doc_id, rating). An empty grade, "?" or "can't tell" is the rater's "can't tell"
(grade None). `format_ratings_csv` writes `query,doc,grade,rater`, read back exactly.

Quepid's ratings CSV (`parse_quepid_csv` / `format_quepid_csv`): the header `query,docid,rating`,
then one line per rated document, keyed by the query's TEXT; a query without ratings is a line
`text,,`. Quepid writes it (Api::V1::Export::RatingsController, "basic" format: a space before a
text starting with - = + @, against formula injection; no line feed after the last line) and
reads it back (RatingsImporter: cells stripped, a line without a document or a rating only adds
the query; ratings may be written 1.0). Sources: github.com/o19s/quepid,
app/controllers/api/v1/export/ratings_controller.rb, app/services/ratings_importer.rb,
app/assets/javascripts/services/importRatingsSvc.js. Quepid keeps one rating per query and
document, so several raters are exported as their consensus (`raters.consensus`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import PurePath
from typing import Any, NamedTuple, TextIO

from retrieval.judging.raters import Rating, consensus, validate_rater
from retrieval.text.encoding import decode_bytes
from retrieval.types import IngestError, RetrievalError

QUERY_COLUMNS = ("query_id", "qid", "queryid", "query", "topic", "topic_id")
DOC_COLUMNS = ("corpus_id", "doc_id", "docid", "docno", "doc", "document_id", "document", "passage_id", "pid")
GRADE_COLUMNS = ("score", "relevance", "rel", "grade", "label", "judgment", "judgement")
QUERY_ID_KEYS = ("_id", "id", "query_id", "qid")
QUERY_TEXT_KEYS = ("text", "query", "question")
QUERY_EXTENSIONS = (".jsonl", ".ndjson", ".tsv", ".csv")
RATING_COLUMNS = {"query": ("query", "query_id"), "doc": ("doc", "doc_id"), "grade": ("grade", "rating"),
                  "rater": ("rater",)}
QUEPID_COLUMNS = {"query": ("query", "query_text"), "doc": ("docid", "doc_id"), "grade": ("rating",),
                  "rater": ("rater",)}
CANT_TELL_CELLS = ("", "?", "can't tell", "can’t tell", "cant tell")  # compared lower-cased
CANT_TELL_WRITTEN = "can't tell"
QUEPID_RATER = "quepid"
QUEPID_UNSAFE_STARTS = ("-", "=", "+", "@")  # Quepid writes a space before these (formula injection)

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WHITESPACE = re.compile(r"\s")
MAX_QUERY_CHARS = 2000


def validate_query_text(text: str) -> str:
    """Query text, stripped: non-empty, at most 2,000 characters."""
    if not isinstance(text, str) or not text.strip():
        raise RetrievalError("Query text is empty")
    text = text.strip()
    if len(text) > MAX_QUERY_CHARS:
        raise RetrievalError(f"Query text is {len(text)} characters long; the limit is {MAX_QUERY_CHARS}")
    return text


def ui_query_id(text: str, taken: Mapping[str, str] | None = None) -> str:
    """'ui-' + the first 8 hex digits of sha1(text); longer if that id names another text."""
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()
    taken = taken or {}
    for length in range(8, len(digest) + 1):
        candidate = f"ui-{digest[:length]}"
        if taken.get(candidate, text) == text:
            return candidate
    raise RetrievalError("Could not make a query id for this text")  # 2^-160: never in practice

def parse_qrels(text: str) -> dict[str, dict[str, int]]:
    """Parse qrels text (BEIR TSV, TREC or CSV; see module doc) into query id -> doc id -> grade."""
    lines = [(n, line) for n, line in enumerate(_LINE_BREAK.split(text.lstrip("\ufeff")), 1) if line.strip()]
    if not lines:
        raise IngestError("the qrels file is empty")
    layout = _layout(*lines[0])
    return _collect_judgments(lines[1:] if layout.header else lines, layout)


class _Layout(NamedTuple):
    header: bool
    delimiter: str | None  # None: any run of whitespace
    columns: tuple[int, int, int]  # indexes of the query, document and grade fields
    width: int | None  # the exact field count of a headerless format


def _layout(number: int, first: str) -> _Layout:
    """The layout of a qrels file, from its first non-blank line (line `number`)."""
    delimiter = "\t" if "\t" in first else "," if "," in first else None
    fields = _split(first, delimiter)
    if _grade(fields[-1]) is None:
        columns = _header_columns(fields)
        if columns is None:
            raise IngestError(
                f"line {number}: the header {first.strip()!r} does not name a query, a document "
                f"and a grade column; use e.g. 'query-id<TAB>corpus-id<TAB>score' or TREC 'qid iter docid rel'"
            )
        return _Layout(True, delimiter, columns, None)
    if delimiter == "\t":
        delimiter = None  # headerless lines: any whitespace, as TREC tools write them
    width = len(_split(first, delimiter))
    if width not in (3, 4):
        raise IngestError(
            f"line {number}: expected 4 fields (TREC: qid iter docid rel) or 3 (qid docid rel), got {width}"
        )
    return _Layout(False, delimiter, (0, 1, 2) if width == 3 else (0, 2, 3), width)


def parse_queries(data: bytes, filename: str) -> dict[str, str]:
    """Parse a query file (JSONL, TSV or CSV, by extension; see module doc) into id -> text."""
    name = PurePath(filename).name
    extension = PurePath(name).suffix.lower()
    if extension not in QUERY_EXTENSIONS:
        raise IngestError(f"{name}: unsupported query file type; use one of {', '.join(QUERY_EXTENSIONS)}")
    try:
        text, _ = decode_bytes(data)
    except IngestError as err:
        raise IngestError(f"{name}: {err}") from err
    if extension == ".tsv":
        rows, problems = _tsv_queries(text)
    elif extension == ".csv":
        rows, problems = _csv_queries(text, name)
    else:
        rows, problems = _jsonl_queries(text)
    queries = _collect_queries(rows, problems)
    if problems:
        raise IngestError(f"{name}: {len(problems)} problem(s) in the queries", problems)
    if not queries:
        raise IngestError(f"{name}: no queries found")
    return queries


def parse_query_set(data: bytes, filename: str) -> tuple[dict[str, str], dict[str, dict[str, int]] | None]:
    """A queries file (`parse_queries`) and, when its JSONL lines carry `judgments`, the
    judgments it holds (query id -> doc id -> grade); None when no line has any. Problems are
    reported by line, in one IngestError."""
    queries = parse_queries(data, filename)
    if PurePath(filename).suffix.lower() not in (".jsonl", ".ndjson"):
        return queries, None
    qrels: dict[str, dict[str, int]] = {}
    problems: list[str] = []
    found = False
    for number, item, _ in read_json_lines(decode_bytes(data)[0]):
        if not isinstance(item, dict) or "judgments" not in item:
            continue
        found = True
        judged = item["judgments"]
        query_id = str(next(item[key] for key in QUERY_ID_KEYS if key in item)).strip()
        if not isinstance(judged, dict):
            problems.append(f"line {number}: judgments must be an object {{document id: grade}}")
            continue
        for doc_id, grade in judged.items():
            value = _grade(str(grade)) if isinstance(grade, (int, float)) and not isinstance(grade, bool) else None
            if value is None or not str(doc_id).strip():
                problems.append(f"line {number}: judgment {doc_id!r}: {grade!r} is not a document id with an "
                                "integer grade")
                continue
            qrels.setdefault(query_id, {})[str(doc_id).strip()] = value
    if problems:
        raise IngestError(f"{PurePath(filename).name}: {len(problems)} problem(s) in the judgments", problems)
    return queries, qrels if found else None


def read_json_lines(text: str) -> Iterator[tuple[int, Any, str | None]]:
    """Each non-blank JSONL line as (line number, parsed value, None), or (number, None, problem).

    Splits on "\n" only: JSON strings may hold U+2028 and friends, which splitlines() breaks on.
    """
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line), None
        except json.JSONDecodeError as err:
            yield number, None, f"invalid JSON ({err.msg}, column {err.colno})"


def read_rows(text: str | TextIO, delimiter: str, quoting: int = csv.QUOTE_MINIMAL) -> Iterator[tuple[int, list[str]]]:
    """Yield (line number the record starts on, fields) for each non-empty record of delimited text
    (a string, or a text stream opened with `newline=""`, read lazily).

    Line numbers are 1-based, so a header is line 1 and a quoted multi-line cell keeps the next
    record's number exact. Raises IngestError naming the line on malformed input.
    """
    lines = io.StringIO(text, newline="") if isinstance(text, str) else text
    # strict: an unclosed quote is an error, not a cell silently holding the rest of the file.
    reader = csv.reader(lines, delimiter=delimiter, quoting=quoting, strict=True)
    start = 1
    try:
        for fields in reader:
            if any(field.strip() for field in fields):
                yield start, fields
            start = reader.line_num + 1
    except csv.Error as err:
        reason = "a quoted cell opened in this record is never closed" if "end of data" in str(err) else err
        raise IngestError(f"line {start}: {reason}") from err


def _split(line: str, delimiter: str | None) -> list[str]:
    if delimiter == ",":
        return [field.strip() for field in next(csv.reader([line]))]
    if delimiter == "\t":
        return [field.strip() for field in line.split("\t")]
    return line.split()


def _grade(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if number.is_integer() else None


def _normalize(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def _header_columns(fields: list[str]) -> tuple[int, int, int] | None:
    """Indexes of the query, document and grade columns named by a header, or None."""
    names = [_normalize(field) for field in fields]
    found = []
    for aliases in (QUERY_COLUMNS, DOC_COLUMNS, GRADE_COLUMNS):
        index = next((names.index(alias) for alias in aliases if alias in names), None)
        if index is None:
            return None
        found.append(index)
    return found[0], found[1], found[2]


def _collect_judgments(rows: list[tuple[int, str]], layout: _Layout) -> dict[str, dict[str, int]]:
    """Judgments from the data lines (number, line); every malformed line reported at once."""
    qrels: dict[str, dict[str, int]] = {}
    first_seen: dict[tuple[str, str], int] = {}
    problems = []
    needed = layout.width or max(layout.columns) + 1
    for number, line in rows:
        fields = _split(line, layout.delimiter)
        if len(fields) < needed or (layout.width is not None and len(fields) > needed):
            problems.append(f"line {number}: expected {needed} fields, got {len(fields)}")
            continue
        query, doc, raw_grade = (fields[i] for i in layout.columns)
        grade = _grade(raw_grade)
        if not query or not doc:
            problems.append(f"line {number}: empty query or document id")
        elif grade is None:
            problems.append(f"line {number}: grade {raw_grade!r} is not an integer")
        elif qrels.get(query, {}).get(doc, grade) != grade:
            problems.append(
                f"line {number}: query {query!r}, document {doc!r} judged {grade} here "
                f"but {qrels[query][doc]} on line {first_seen[query, doc]}"
            )
        else:
            qrels.setdefault(query, {})[doc] = grade
            first_seen.setdefault((query, doc), number)
    if problems:
        raise IngestError(f"{len(problems)} malformed qrels line(s)", problems)
    if not qrels:
        raise IngestError("the qrels file has a header but no judgments")
    return qrels


QueryRow = tuple[int, object, object]  # line number, raw id, raw text


def _jsonl_queries(text: str) -> tuple[list[QueryRow], list[str]]:
    rows: list[QueryRow] = []
    problems = []
    for number, item, problem in read_json_lines(text):
        if problem:
            problems.append(f"line {number}: {problem}")
            continue
        if not isinstance(item, dict):
            problems.append(f"line {number}: expected a JSON object")
            continue
        id_key = next((key for key in QUERY_ID_KEYS if key in item), None)
        text_key = next((key for key in QUERY_TEXT_KEYS if key in item), None)
        if id_key is None:
            problems.append(f"line {number}: no id (expected one of {', '.join(QUERY_ID_KEYS)})")
            continue
        rows.append((number, item[id_key], item.get(text_key) if text_key else None))
    return rows, problems


def _tsv_queries(text: str) -> tuple[list[QueryRow], list[str]]:
    rows: list[QueryRow] = []
    problems = []
    lines = [(n, line) for n, line in enumerate(_LINE_BREAK.split(text), 1) if line.strip()]
    if lines and _is_query_header(lines[0][1].split("\t")):
        lines = lines[1:]
    for number, line in lines:
        query_id, tab, query_text = line.partition("\t")
        if not tab:
            problems.append(f"line {number}: expected id<TAB>text")
            continue
        rows.append((number, query_id, query_text))
    return rows, problems


def _is_query_header(fields: list[str]) -> bool:
    names = [_normalize(field) for field in fields]
    return len(names) >= 2 and names[0] in QUERY_ID_KEYS and names[1] in QUERY_TEXT_KEYS


def _csv_queries(text: str, name: str) -> tuple[list[QueryRow], list[str]]:
    records = read_rows(text, ",")
    _, header = next(records, (0, []))
    names = [_normalize(field) for field in header]
    id_index = next((names.index(key) for key in QUERY_ID_KEYS if key in names), None)
    text_index = next((names.index(key) for key in QUERY_TEXT_KEYS if key in names), None)
    if id_index is None or text_index is None:
        raise IngestError(
            f"{name}: the header needs an id column ({', '.join(QUERY_ID_KEYS)}) and a text column "
            f"({', '.join(QUERY_TEXT_KEYS)}); found: {', '.join(header) or 'nothing'}"
        )
    rows: list[QueryRow] = []
    for number, fields in records:
        cells = fields + [""] * (len(header) - len(fields))
        rows.append((number, cells[id_index], cells[text_index]))
    return rows, []


def _collect_queries(rows: list[QueryRow], problems: list[str]) -> dict[str, str]:
    """id -> text from raw rows; appends to `problems` (ids are str()-ed and stripped)."""
    queries: dict[str, str] = {}
    lines_of: dict[str, list[int]] = {}
    for number, raw_id, raw_text in rows:
        query_id = str(raw_id).strip() if raw_id is not None else ""
        query_text = raw_text.strip() if isinstance(raw_text, str) else ""
        if not query_id:
            problems.append(f"line {number}: query id is empty")
        elif not query_text:
            problems.append(f"line {number}: query text is empty")
        else:
            lines_of.setdefault(query_id, []).append(number)
            queries.setdefault(query_id, query_text)
    for query_id, numbers in lines_of.items():
        if len(numbers) > 1:
            problems.append(f"query id {query_id!r} appears on lines {', '.join(map(str, numbers))}")
    return queries


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
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["query", "doc", "grade", "rater"])
    for r in ratings:
        writer.writerow([r.query_id, r.doc_id, CANT_TELL_WRITTEN if r.grade is None else r.grade, r.rater])
    return out.getvalue()


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
        grade = _grade(raw_grade)
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
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["query", "docid", "rating"])
    for query_id, query_text in queries.items():
        shown = f" {query_text}" if query_text.startswith(QUEPID_UNSAFE_STARTS) else query_text
        graded = {d: consensus(grades) for d, grades in units.get(query_id, {}).items()}
        rows = [[shown, doc_id, grade] for doc_id, grade in graded.items() if grade is not None]
        writer.writerows(rows or [[shown, "", ""]])
    return out.getvalue()[:-1]  # as Quepid writes it: no line feed after the last line


def _rating_header(records: Iterator[tuple[int, list[str]]], names: Mapping[str, tuple[str, ...]], needed: str
                   ) -> tuple[int | None, int | None, int | None, int | None]:
    """Indexes of the query, doc, grade and rater (None: absent) columns named by the first record."""
    number, header = next(records, (0, []))
    if not header:
        raise IngestError("the ratings file is empty")
    found = [_normalize(cell) for cell in header]
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
    query_id, doc_id, grade, rater = (cells[i].strip() if i is not None else "" for i in columns)
    return query_id, doc_id, grade, rater


def _rating_grade(number: int, raw: str, problems: list[str]) -> tuple[bool, int | None]:
    """(True, the grade or None for "can't tell"), or (False, None) and a problem."""
    if raw.lower() in CANT_TELL_CELLS:
        return True, None
    grade = _grade(raw)
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
