"""Parse uploaded files, folders and BEIR collections into a `ParsedCorpus` (no storage here).

Formats, by extension:

- `.csv` (comma; `;` when the header has semicolons but no comma) and `.tsv` (tab, no quoting:
  a `"` is an ordinary character) with a header row. Row numbers are the file line a record starts
  on, so the header is row 1 and the first record row 2; rows whose cells are all empty are skipped;
  a CSV quote left open is an error (it would otherwise swallow the rest of the file).
- `.json`: an array of objects, or an object holding exactly one array of objects (otherwise
  name it with `ParseOptions.json_key`). Items are numbered from 1.
- `.jsonl` / `.ndjson`: one object per line, numbered by file line; blank lines skipped.
- `.txt`: `text_mode="paragraphs"`: one document per blank-line-separated paragraph, id
  f"{stem}-p{n}" (n from 1; chunk_index n-1, parent_id stem, start_line/end_line set);
  `text_mode="file"`: one document for the whole file, id = stem. The title is the stem.
- `.md` / `.markdown`: `chunking.chunk_markdown` with source id = stem (ids f"{stem}#{i}").
- a BEIR folder (`parse_path`): corpus.jsonl (`_id`, `title`, `text`), queries.jsonl, qrels/*.tsv.

Catalogue records (JSON and JSONL, columns detected): when an object's `name` is an {en, zh}
object the file is read as data-source records (`records.py`): id = the record's `id`, title =
its names, text = descriptions, tags, domains, organisation and content; the whole record is the
metadata (the keyword source scores its fields). Each record's problems are reported by item or
line number, and a file with any problem loads nothing.

Rules for records (table, JSON and JSONL formats):

- Columns are found by `ColumnMapping`, or case-insensitively among `ID_COLUMNS`,
  `TITLE_COLUMNS`, `TEXT_COLUMNS` (earlier names win). A text column is required.
- Without an id column, ids are f"{stem}-{n}", n the record's row/line/item number above, so an
  id points at its place in the file and stays the same when the same file is parsed again.
- Ids are str()-ed and stripped and must be non-empty and unique; text must be non-empty; text
  and title are stripped. Every problem is collected and reported, by row, in one IngestError.
- Every other column goes to `Document.metadata`: CSV/TSV cells are stripped, empty cells dropped,
  integers and decimals (no leading zeros, so codes like "007" stay strings) become numbers; JSON
  values are kept as they are.

Input is only ever parsed as data (csv, json): nothing is evaluated or unpickled, and no path is
built from file content.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from .chunking import chunk_markdown, split_paragraphs
from .encoding import decode_bytes
from .qrels import parse_qrels, parse_queries, read_json_lines, read_rows
from .records import is_catalogue_record, record_document, record_problems
from .types import Document, IngestError, ParsedCorpus

# Chinese names too, since Chinese spreadsheets are exported with Chinese headers.
ID_COLUMNS = ("id", "_id", "doc_id", "docid", "uuid", "编号")
TITLE_COLUMNS = ("title", "name", "heading", "subject", "标题", "名称", "题目")
TEXT_COLUMNS = (
    "text", "content", "body", "passage", "abstract", "document", "正文", "内容", "文本", "摘要",
)
TEXT_MODES = ("paragraphs", "file")
SUPPORTED_EXTENSIONS = (".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".txt", ".md", ".markdown")

_PROSE_FORMATS = {".txt": "text", ".md": "markdown", ".markdown": "markdown"}
_INTEGER = re.compile(r"[+-]?(?:0|[1-9][0-9]*)")
_DECIMAL = re.compile(
    r"[+-]?(?:0|[1-9][0-9]*)?\.[0-9]+(?:[eE][+-]?[0-9]+)?"  # 1.5, .5, 1.5e3
    r"|[+-]?(?:0|[1-9][0-9]*)[eE][+-]?[0-9]+"  # 1e3
)


@dataclass(frozen=True)
class ColumnMapping:
    """Which input column holds the id, title and text; None: detect it (see module doc)."""

    id: str | None = None
    title: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class ParseOptions:
    """How to read input. Frozen, so it can be a default argument and part of a cache key."""

    mapping: ColumnMapping = ColumnMapping()
    text_mode: str = "paragraphs"  # .txt only: "paragraphs" or "file"
    markdown_max_chars: int = 1500
    json_key: str | None = None  # .json only: the key of the array of documents

    def __post_init__(self) -> None:
        problems = []
        if self.text_mode not in TEXT_MODES:
            problems.append(f"text_mode must be one of {TEXT_MODES}, got {self.text_mode!r}")
        if self.markdown_max_chars < 1:
            problems.append(f"markdown_max_chars must be ≥ 1, got {self.markdown_max_chars}")
        if problems:
            raise IngestError("Invalid parse options", problems)


@dataclass
class _Records:
    """Records read from a table, JSON or JSONL file, before columns are assigned."""

    rows: list[tuple[int, dict[str, Any]]]  # (row/line/item number, fields)
    unit: str  # what the numbers count, for messages: "row", "line" or "item"
    typed_cells: bool  # CSV/TSV: cells are strings to strip and to read numbers from
    problems: list[tuple[int, str]] = field(default_factory=list)  # (number, reason) found while reading
    notes: list[str] = field(default_factory=list)

    def columns(self) -> list[str]:
        """Every field name, in first-seen order."""
        return list(dict.fromkeys(key for _, fields in self.rows for key in fields))


def parse_bytes(data: bytes, filename: str, options: ParseOptions = ParseOptions()) -> ParsedCorpus:
    """Parse one file's bytes, the format chosen by the extension of `filename` (see module doc)."""
    name = PurePath(filename).name
    extension = PurePath(name).suffix.lower()
    stem = PurePath(name).stem
    if extension not in SUPPORTED_EXTENSIONS:
        raise IngestError(
            f"{name}: unsupported file type {extension or '(no extension)'!r}; "
            f"supported: {', '.join(SUPPORTED_EXTENSIONS)}"
        )
    text, encoding = _decode(data, name)
    if not text.strip():
        raise IngestError(f"{name}: the file is empty")
    if extension in _PROSE_FORMATS:
        documents = _parse_prose(text, name, stem, extension, options)
        return ParsedCorpus(documents, encoding, _PROSE_FORMATS[extension])
    reader, form = _RECORD_READERS[extension]
    records = reader(text, name, options)
    _require_rows(records, name)
    if not records.typed_cells and options.mapping == ColumnMapping() and _holds_catalogue(records):
        documents = _catalogue_documents(records, name)
        note = ("catalogue records ('name' as an {en, zh} object): title = the names, text = descriptions, "
                "tags, domains, organisation and content; each whole record kept as metadata")
        return ParsedCorpus(documents, encoding, form, records.notes + [note])
    found = records.columns()
    columns = _resolve_columns(found, options.mapping, name)
    documents = _documents(records, columns, stem, name)
    notes = records.notes + _column_notes(columns, found, records.unit, stem)
    return ParsedCorpus(documents, encoding, form, notes)


def preview(data: bytes, filename: str, options: ParseOptions = ParseOptions(),
            n_rows: int = 5) -> tuple[list[str], list[dict[str, Any]]]:
    """Column names and the first `n_rows` records of a file, before any column is mapped.

    For the column-mapping step of an upload. Text and Markdown files have no columns: their
    preview is the documents they would become (id, title, text).
    """
    name = PurePath(filename).name
    extension = PurePath(name).suffix.lower()
    if extension not in SUPPORTED_EXTENSIONS or extension in _PROSE_FORMATS:
        corpus = parse_bytes(data, filename, options)
        rows = [{"id": d.id, "title": d.title, "text": d.text} for d in corpus.documents[:n_rows]]
        return ["id", "title", "text"], rows
    text, _ = _decode(data, name)
    if not text.strip():
        raise IngestError(f"{name}: the file is empty")
    reader, _ = _RECORD_READERS[extension]
    records = reader(text, name, options)
    _require_rows(records, name)
    return records.columns(), [fields for _, fields in records.rows[:n_rows]]


def parse_files(files: list[tuple[str, bytes]], options: ParseOptions = ParseOptions()) -> ParsedCorpus:
    """Parse several files (name, bytes) into one corpus; ids must be unique across files.

    `encoding` is the files' common encoding (None when they differ) and `format` their common
    format ("mixed" when they differ); notes give each file's encoding and document count.
    """
    if not files:
        raise IngestError("no files to parse")
    parsed: list[tuple[str, ParsedCorpus]] = []
    problems = []
    for filename, data in files:
        try:
            parsed.append((PurePath(filename).name, parse_bytes(data, filename, options)))
        except IngestError as err:
            name = PurePath(filename).name
            problems += [f"{name}: {problem}" for problem in err.problems] or [str(err)]
    if problems:
        raise IngestError(f"{len(files) - len(parsed)} of {len(files)} files could not be parsed", problems)
    files_of: dict[str, list[str]] = {}
    for name, corpus in parsed:
        for document in corpus.documents:
            files_of.setdefault(document.id, []).append(name)
    clashes = [
        f"id {doc_id!r} appears in {' and '.join(names)}" for doc_id, names in files_of.items() if len(names) > 1
    ]
    if clashes:
        raise IngestError("ids must be unique across files: rename a file or change its ids", clashes)
    encodings = {corpus.encoding for _, corpus in parsed}
    formats = {corpus.format for _, corpus in parsed}
    notes = []
    for name, corpus in parsed:
        notes.append(f"{name}: {corpus.encoding}, {len(corpus.documents)} documents")
        notes += [f"{name}: {note}" for note in corpus.notes]
    return ParsedCorpus(
        documents=[document for _, corpus in parsed for document in corpus.documents],
        encoding=encodings.pop() if len(encodings) == 1 else None,
        format=formats.pop() if len(formats) == 1 else "mixed",
        notes=notes,
    )


def parse_path(path: str | Path, options: ParseOptions = ParseOptions()) -> ParsedCorpus:
    """Parse a file, a BEIR folder (one holding corpus.jsonl) or a folder of supported files.

    A plain folder is read non-recursively, its supported files in name order; other files are
    skipped and named in the notes. `options` do not apply to a BEIR folder, whose layout is fixed.
    """
    path = Path(path)
    if path.is_file():
        return parse_bytes(path.read_bytes(), path.name, options)
    if not path.is_dir():
        raise IngestError(f"{path}: no such file or folder")
    if (path / "corpus.jsonl").is_file():
        return _parse_beir(path)
    entries = sorted(entry for entry in path.iterdir() if entry.is_file())
    supported = [entry for entry in entries if entry.suffix.lower() in SUPPORTED_EXTENSIONS]
    if not supported:
        raise IngestError(f"{path}: no supported files ({', '.join(SUPPORTED_EXTENSIONS)})")
    corpus = parse_files([(entry.name, entry.read_bytes()) for entry in supported], options)
    skipped = [entry.name for entry in entries if entry not in supported]
    if skipped:
        corpus.notes.append(f"skipped unsupported files: {', '.join(skipped)}")
    return corpus


def _decode(data: bytes, name: str) -> tuple[str, str]:
    try:
        return decode_bytes(data)
    except IngestError as err:
        raise IngestError(f"{name}: {err}") from err


def _parse_prose(text: str, name: str, stem: str, extension: str, options: ParseOptions) -> list[Document]:
    if extension != ".txt":
        documents = chunk_markdown(text, stem, options.markdown_max_chars)
    elif options.text_mode == "file":
        documents = [Document(id=stem, text=text.strip(), title=stem)] if text.strip() else []
    else:
        documents = [
            Document(
                id=f"{stem}-p{n}",
                text=paragraph,
                title=stem,
                parent_id=stem,
                chunk_index=n - 1,
                start_line=start,
                end_line=end,
            )
            for n, (paragraph, start, end) in enumerate(split_paragraphs(text), 1)
        ]
    if not documents:
        raise IngestError(f"{name}: no text found")
    return documents


def _read_delimited(text: str, name: str, delimiter: str, quoting: int) -> _Records:
    rows = read_rows(text, delimiter, quoting)
    try:
        header_line, header = next(rows, (1, []))
        columns = [cell.strip() or f"column_{i}" for i, cell in enumerate(header, 1)]
        records = _Records([], "row", typed_cells=True)
        for number, cells in rows:
            if len(cells) > len(columns):
                records.problems.append((number, f"{len(cells)} cells but the header has {len(columns)}"))
            else:
                records.rows.append((number, dict(zip(columns, cells, strict=True))))
    except IngestError as err:
        raise IngestError(f"{name}: {err}") from err
    repeated = sorted({column for column in columns if columns.count(column) > 1})
    if repeated:
        raise IngestError(f"{name}: the header (row {header_line}) repeats column(s) {', '.join(repeated)}")
    return records


def _read_csv(text: str, name: str, options: ParseOptions) -> _Records:
    header = text.lstrip().split("\n", 1)[0]
    # Excel in locales with a decimal comma writes ";"-separated "CSV".
    delimiter = ";" if ";" in header and "," not in header else ","
    records = _read_delimited(text, name, delimiter, csv.QUOTE_MINIMAL)
    if delimiter == ";":
        records.notes.append("read as ';'-separated (the header has no comma)")
    return records


def _read_tsv(text: str, name: str, options: ParseOptions) -> _Records:
    # TSV exports do not quote: a cell starting with '"' must not swallow the following lines.
    return _read_delimited(text, name, "\t", csv.QUOTE_NONE)


def _read_json(text: str, name: str, options: ParseOptions) -> _Records:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise IngestError(f"{name}: invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from err
    items, notes = _json_items(data, name, options.json_key)
    records = _Records([], "item", typed_cells=False, notes=notes)
    for number, item in enumerate(items, 1):
        if isinstance(item, dict):
            records.rows.append((number, item))
        else:
            records.problems.append((number, f"expected an object, got {_json_type(item)}"))
    return records


def _json_items(data: Any, name: str, json_key: str | None) -> tuple[list[Any], list[str]]:
    """The array of documents in parsed JSON, and a note saying where it was found."""
    if isinstance(data, list):
        return data, [f"json_key {json_key!r} ignored: the file is an array"] if json_key else []
    if not isinstance(data, dict):
        raise IngestError(f"{name}: expected an array of objects, got {_json_type(data)}")
    keys = ", ".join(map(repr, data)) or "none"
    if json_key is not None:
        if json_key not in data:
            raise IngestError(f"{name}: key {json_key!r} not found; top-level keys: {keys}")
        if not isinstance(data[json_key], list):
            raise IngestError(f"{name}: {json_key!r} holds {_json_type(data[json_key])}, not an array of objects")
        return data[json_key], [f"documents read from key {json_key!r}"]
    arrays = [key for key, value in data.items() if _is_object_array(value)]
    if len(arrays) > 1:
        raise IngestError(
            f"{name}: several keys hold arrays of objects ({', '.join(map(repr, arrays))}); "
            f"set json_key to the one holding the documents"
        )
    if not arrays:
        raise IngestError(f"{name}: expected an array of objects or an object holding one; top-level keys: {keys}")
    return data[arrays[0]], [f"documents read from key {arrays[0]!r}"]


def _is_object_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _read_jsonl(text: str, name: str, options: ParseOptions) -> _Records:
    records = _Records([], "line", typed_cells=False)
    for number, item, problem in read_json_lines(text):
        if problem:
            records.problems.append((number, problem))
        elif isinstance(item, dict):
            records.rows.append((number, item))
        else:
            records.problems.append((number, f"expected an object, got {_json_type(item)}"))
    return records


_RECORD_READERS: dict[str, tuple[Callable[[str, str, ParseOptions], _Records], str]] = {
    ".csv": (_read_csv, "csv"),
    ".tsv": (_read_tsv, "tsv"),
    ".json": (_read_json, "json"),
    ".jsonl": (_read_jsonl, "jsonl"),
    ".ndjson": (_read_jsonl, "jsonl"),
}


@dataclass(frozen=True)
class _Columns:
    text: str
    id: str | None
    title: str | None


def _resolve_columns(columns: list[str], mapping: ColumnMapping, name: str) -> _Columns:
    """Apply the mapping, detecting unset roles; the text column is resolved first and required."""
    available = f"available columns: {', '.join(map(repr, columns)) or 'none'}"
    text = _column(columns, mapping.text, TEXT_COLUMNS, set(), "text", name, available)
    if text is None:
        raise IngestError(
            f"{name}: no text column (looked for {', '.join(TEXT_COLUMNS)}); choose one. {available}"
        )
    id_ = _column(columns, mapping.id, ID_COLUMNS, {text}, "id", name, available)
    title = _column(columns, mapping.title, TITLE_COLUMNS, {text, id_}, "title", name, available)
    return _Columns(text, id_, title)


def _column(
    columns: list[str], chosen: str | None, candidates: tuple[str, ...], taken: set[str | None],
    role: str, name: str, available: str,
) -> str | None:
    if chosen is not None:
        if chosen not in columns:
            raise IngestError(f"{name}: {role} column {chosen!r} not found; {available}")
        return chosen
    by_lower: dict[str, str] = {}
    for column in columns:
        if column not in taken:
            by_lower.setdefault(column.lower(), column)
    return next((by_lower[c] for c in candidates if c in by_lower), None)


def _documents(records: _Records, columns: _Columns, stem: str, name: str) -> list[Document]:
    """Build and validate documents; raise one IngestError listing every problem."""
    row_problems = list(records.problems)
    documents = []
    numbers_of: dict[str, list[int]] = {}
    roles = {columns.text, columns.id, columns.title}
    for number, fields in records.rows:
        doc_id = _as_text(fields.get(columns.id)) if columns.id else f"{stem}-{number}"
        text = _as_text(fields.get(columns.text))
        title = _as_text(fields.get(columns.title)) if columns.title else ""
        found = [
            (number, f"{role} is {'not a string or number' if value is None else 'empty'}")
            for role, value, required in (("id", doc_id, True), ("text", text, True), ("title", title, False))
            if value is None or (required and not value)
        ]
        if found:
            row_problems += found
            continue
        numbers_of.setdefault(doc_id, []).append(number)
        metadata = {key: value for key, value in fields.items() if key not in roles}
        if records.typed_cells:
            metadata = {key: _cell_value(value) for key, value in metadata.items() if value.strip()}
        documents.append(Document(id=doc_id, text=text, title=title, metadata=metadata))
    row_problems.sort(key=lambda problem: problem[0])
    problems = [f"{records.unit} {number}: {reason}" for number, reason in row_problems]
    problems += [
        f"id {doc_id!r} appears in {records.unit}s {_and_join(numbers)}"
        for doc_id, numbers in numbers_of.items()
        if len(numbers) > 1
    ]
    if problems:
        raise IngestError(f"{name}: {len(problems)} problem(s); nothing was loaded", problems)
    return documents


def _holds_catalogue(records: _Records) -> bool:
    """JSON/JSONL whose objects are catalogue records (`records.is_catalogue_record`): one is enough,
    so a record lacking the shape is reported rather than read as a different kind of document."""
    return any(is_catalogue_record(fields) for _, fields in records.rows)


def _catalogue_documents(records: _Records, name: str) -> list[Document]:
    """Catalogue records as Documents (`records.record_document`); one IngestError lists every
    problem of every record, and duplicate ids, by item or line number."""
    row_problems = list(records.problems)
    documents = []
    numbers_of: dict[str, list[int]] = {}
    for number, fields in records.rows:
        found = record_problems(fields)
        if found:
            row_problems += [(number, problem) for problem in found]
            continue
        document = record_document(fields)
        numbers_of.setdefault(document.id, []).append(number)
        documents.append(document)
    row_problems.sort(key=lambda problem: problem[0])
    problems = [f"{records.unit} {number}: {reason}" for number, reason in row_problems]
    problems += [f"id {doc_id!r} appears in {records.unit}s {_and_join(numbers)}"
                 for doc_id, numbers in numbers_of.items() if len(numbers) > 1]
    if problems:
        raise IngestError(f"{name}: {len(problems)} problem(s) in catalogue records; nothing was loaded", problems)
    return documents


def _require_rows(records: _Records, name: str) -> None:
    """Reject input with no record, listing why lines were unreadable (if they were)."""
    if not records.rows:
        problems = [f"{records.unit} {number}: {reason}" for number, reason in records.problems]
        raise IngestError(f"{name}: no documents found", problems)


def _as_text(value: Any) -> str | None:
    """A stripped string for a scalar (None reads as ""); None for an object or array."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return None
    return str(value).strip()


def _cell_value(cell: str) -> str | int | float:
    cell = cell.strip()
    # Integers beyond 64 bits (long codes) stay strings: columnar stores cannot hold them.
    if _INTEGER.fullmatch(cell) and -(2**63) <= int(cell) < 2**63:
        return int(cell)
    if _DECIMAL.fullmatch(cell):
        return float(cell)
    return cell


def _and_join(numbers: list[int]) -> str:
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _column_notes(columns: _Columns, found: list[str], unit: str, stem: str) -> list[str]:
    metadata = [c for c in found if c not in {columns.text, columns.id, columns.title}]
    notes = [
        f"text column {columns.text!r}",
        f"title column {columns.title!r}" if columns.title else "no title column",
        f"id column {columns.id!r}" if columns.id else f"no id column: ids are '{stem}-<{unit} number>'",
    ]
    if metadata:
        notes.append(f"metadata columns: {', '.join(metadata)}")
    return notes


def _parse_beir(folder: Path) -> ParsedCorpus:
    """A BEIR folder: corpus.jsonl, optional queries.jsonl and qrels/*.tsv (test.tsv preferred)."""
    text, encoding = _decode((folder / "corpus.jsonl").read_bytes(), "corpus.jsonl")
    records = _read_jsonl(text, "corpus.jsonl", ParseOptions())
    _require_rows(records, "corpus.jsonl")
    found = records.columns()
    if "_id" not in found or "text" not in found:
        raise IngestError(f"corpus.jsonl: BEIR lines need '_id' and 'text'; keys found: {', '.join(found)}")
    columns = _Columns(text="text", id="_id", title="title" if "title" in found else None)
    corpus = ParsedCorpus(_documents(records, columns, "corpus", "corpus.jsonl"), encoding, "beir")
    corpus.notes.append(f"BEIR folder {folder.name}: {len(corpus.documents)} documents")
    if (folder / "queries.jsonl").is_file():
        corpus.queries = parse_queries((folder / "queries.jsonl").read_bytes(), "queries.jsonl")
        corpus.notes.append(f"{len(corpus.queries)} queries from queries.jsonl")
    qrels_files = sorted((folder / "qrels").glob("*.tsv"))
    if qrels_files:
        chosen = next((f for f in qrels_files if f.name == "test.tsv"), qrels_files[0])
        text, _ = _decode(chosen.read_bytes(), f"qrels/{chosen.name}")
        try:
            corpus.qrels = parse_qrels(text)
        except IngestError as err:
            summary = f"{len(err.problems)} malformed line(s)" if err.problems else str(err)
            raise IngestError(f"qrels/{chosen.name}: {summary}", err.problems) from err
        others = [f.name for f in qrels_files if f != chosen]
        also = f" (also present: {', '.join(others)})" if others else ""
        corpus.notes.append(f"judgments for {len(corpus.qrels)} queries from qrels/{chosen.name}{also}")
    return corpus
