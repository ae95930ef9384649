"""Relevance judgments (qrels) and query sets in the formats evaluation data ships in, read and
written.

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
`format_qrels` writes TREC (`qid 0 docid grade`) or BEIR (with its header).

Queries (`parse_queries`), chosen by file extension:

- `.jsonl` / `.ndjson`: one object per line, id under `_id` or `id` (also `query_id`, `qid`),
  text under `text` or `query` (also `question`); other keys ignored;
- `.tsv`: `id<TAB>text` per line (the text is everything after the first tab), with an optional
  header such as `query-id<TAB>text` or `id<TAB>query`;
- `.csv`: a header with an id column and a text column (same names as JSONL).

`format_queries` writes them as BEIR does (JSONL, `_id` and `text`).

A query set in one file (`parse_query_set`, what `format_query_set` writes): JSONL as above with
each query's judgments under `judgments`, `{doc id: grade}` (`{}`: not judged yet), so the file is
also a BEIR queries file. An upload (`read_query_set_files`) is such a file, or a queries file and
a qrels file.

Ratings of several raters have their own formats (`rating_formats`).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import PurePath
from typing import Any, NamedTuple, TextIO

from retrieval.text.encoding import decode_bytes
from retrieval.text.json_values import parse_json
from retrieval.types import IngestError, RetrievalError

QUERY_COLUMNS = ("query_id", "qid", "queryid", "query", "topic", "topic_id")
DOC_COLUMNS = ("corpus_id", "doc_id", "docid", "docno", "doc", "document_id", "document", "passage_id", "pid")
GRADE_COLUMNS = ("score", "relevance", "rel", "grade", "label", "judgment", "judgement")
QUERY_ID_KEYS = ("_id", "id", "query_id", "qid")
QUERY_TEXT_KEYS = ("text", "query", "question")
QUERY_EXTENSIONS = (".jsonl", ".ndjson", ".tsv", ".csv")

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


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
    if read_grade(fields[-1]) is None:
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
            value = read_grade(str(grade)) if isinstance(grade, (int, float)) and not isinstance(grade, bool) else None
            if value is None or not str(doc_id).strip():
                problems.append(f"line {number}: judgment {doc_id!r}: {grade!r} is not a document id with an "
                                "integer grade")
                continue
            qrels.setdefault(query_id, {})[str(doc_id).strip()] = value
    if problems:
        raise IngestError(f"{PurePath(filename).name}: {len(problems)} problem(s) in the judgments", problems)
    return queries, qrels if found else None


# json's messages that end in "at", their position cut off by `.msg` ("Unterminated string starting
# at, column 42" was what a user read), in words.
_JSON_MESSAGES = {
    "Unterminated string starting at": 'a string starts here and is never closed (a missing ")',
    "Invalid control character at": r"a tab or line break inside a string (write it as \t or \n)",
}


def json_problem(err: json.JSONDecodeError, line: bool = False) -> str:
    """'invalid JSON at column 42: a string starts here and is never closed (a missing ")' (with
    `line`: 'at line 3, column 42'): where the parser stopped, and why in words."""
    message = _JSON_MESSAGES.get(err.msg, err.msg.removesuffix(" at"))
    where = f"line {err.lineno}, column {err.colno}" if line else f"column {err.colno}"
    return f"invalid JSON at {where}: {message}"


def read_json_lines(text: str) -> Iterator[tuple[int, Any, str | None]]:
    """Each non-blank JSONL line as (line number, parsed value, None), or (number, None, problem).

    Splits on "\n" only: JSON strings may hold U+2028 and friends, which splitlines() breaks on.
    """
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            yield number, parse_json(line), None
        except json.JSONDecodeError as err:
            yield number, None, json_problem(err)


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


def read_grade(value: str) -> int | None:
    """The integer in a cell ("2.0" read as 2), or None."""
    try:
        return int(value)
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if number.is_integer() else None


def normalize_header(name: str) -> str:
    """A header cell as matched against column names: stripped, lower-cased, "-" and " " as "_"."""
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def _header_columns(fields: list[str]) -> tuple[int, int, int] | None:
    """Indexes of the query, document and grade columns named by a header, or None."""
    names = [normalize_header(field) for field in fields]
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
        grade = read_grade(raw_grade)
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
    names = [normalize_header(field) for field in fields]
    return len(names) >= 2 and names[0] in QUERY_ID_KEYS and names[1] in QUERY_TEXT_KEYS


def _csv_queries(text: str, name: str) -> tuple[list[QueryRow], list[str]]:
    records = read_rows(text, ",")
    _, header = next(records, (0, []))
    names = [normalize_header(field) for field in header]
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


def read_query_set_files(queries_file: tuple[str, bytes], qrels_file: tuple[str, bytes] | None
                         ) -> tuple[dict[str, str], dict[str, dict[str, int]] | None]:
    """Queries and judgments from an upload: a queries file (which may carry its judgments:
    `parse_query_set`) and an optional qrels file ((file name, bytes) each). Judgments in
    both is an error: which to keep is not ours to guess."""
    queries, qrels = parse_query_set(queries_file[1], queries_file[0])
    if qrels_file is not None:
        if qrels is not None:
            raise RetrievalError(f"{queries_file[0]} carries judgments already: upload it without a qrels file, or "
                                 "a queries file without judgments with one")
        qrels = read_qrels_file(qrels_file)
    return queries, qrels


def read_qrels_file(qrels_file: tuple[str, bytes]) -> dict[str, dict[str, int]]:
    """A judgments file ((file name, bytes): TREC, BEIR tsv or CSV, `parse_qrels`), its
    problems named by the file."""
    try:
        return parse_qrels(decode_bytes(qrels_file[1])[0])
    except IngestError as exc:
        raise IngestError(f"{qrels_file[0]}: {exc}") from exc  # str(exc) lists the problems already


def format_qrels(qrels: Mapping[str, Mapping[str, int]], fmt: str = "trec") -> str:
    """Judgments as text: 'trec' (`qid 0 docid grade` per line) or 'beir'
    (`query-id<TAB>corpus-id<TAB>score` with that header). `parse_qrels` reads both."""
    if fmt not in ("trec", "beir"):
        raise RetrievalError(f"Export format must be 'trec' or 'beir', got {fmt!r}")
    if fmt == "trec":
        lines = [f"{q} 0 {d} {g}" for q, docs in qrels.items() for d, g in docs.items()]
    else:
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{g}" for q, docs in qrels.items()
                                                   for d, g in docs.items()]
    return "\n".join(lines) + "\n"


def format_query_set(queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]]) -> str:
    """A query set in one file: its queries in order as JSONL, each with its judgments
    (`{"_id": …, "text": …, "judgments": {doc id: grade}}`), which `parse_query_set` reads back
    exactly and BEIR tools read as a queries file."""
    return "".join(json.dumps({"_id": q, "text": t, "judgments": qrels.get(q, {})}, ensure_ascii=False) + "\n"
                   for q, t in queries.items())


def format_queries(queries: Mapping[str, str]) -> str:
    """Queries as JSONL (`{"_id": …, "text": …}` per line), as BEIR ships them."""
    return "".join(json.dumps({"_id": q, "text": t}, ensure_ascii=False) + "\n" for q, t in queries.items())
