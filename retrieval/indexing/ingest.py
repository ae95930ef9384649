"""Parse uploaded files, folders and BEIR collections into a `ParsedCorpus` (no storage here).

Formats, by extension:

- `.csv` (comma; `;` when the header has semicolons but no comma) and `.tsv` (tab, no quoting:
  a `"` is an ordinary character) with a header row. Row numbers are the file line a record starts
  on, so the header is row 1 and the first record row 2; rows whose cells are all empty are skipped;
  a CSV quote left open is an error (it would otherwise swallow the rest of the file).
- `.json`: an array of objects, or an object holding exactly one array of objects (otherwise
  name it with `ParseOptions.json_key`). Items are numbered from 1.
- `.jsonl` / `.ndjson`: one object per line, numbered by file line; blank lines skipped.
- `.xlsx` (Excel, openpyxl, read-only: no formula is evaluated, cached values are read): the
  first sheet, its first non-empty row the header; rows numbered as Excel numbers them; empty
  cells dropped, dates as ISO text (a datetime at midnight as a date: Excel stores dates so),
  numbers kept as numbers.
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
  and title are stripped. Every problem is collected and reported, by row, in one IngestError:
  a file with any problem loads nothing. With `ParseOptions.skip_invalid` a record with a problem
  (or repeating an earlier record's id) is left out instead and listed in `ParsedCorpus.skipped`,
  and the rest loads: real collections have a few empty documents.
- Every other column goes to `Document.metadata`: CSV/TSV cells are stripped, empty cells dropped,
  integers and decimals (no leading zeros, so codes like "007" stay strings) become numbers; JSON
  values are kept as they are.

Input is only ever parsed as data (csv, json): nothing is evaluated or unpickled, and no path is
built from file content.
"""

from __future__ import annotations

import codecs
import csv
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from retrieval.judging.qrels import parse_qrels, parse_queries, read_json_lines, read_rows
from retrieval.text.chunking import chunk_markdown, split_paragraphs
from retrieval.text.encoding import decode_bytes
from retrieval.text.records import is_catalogue_record, record_document, record_problems
from retrieval.types import Document, IngestError, ParsedCorpus

# Chinese names too, since Chinese spreadsheets are exported with Chinese headers.
ID_COLUMNS = ("id", "_id", "doc_id", "docid", "uuid", "sku", "product_id", "item_id", "asin", "isbn", "编号")
TITLE_COLUMNS = ("title", "name", "heading", "subject", "标题", "名称", "题目")
TEXT_COLUMNS = (
    "text", "content", "body", "passage", "abstract", "document", "description", "正文", "内容", "文本", "摘要",
    "描述",
)
TEXT_MODES = ("paragraphs", "file")
SUPPORTED_EXTENSIONS = (".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".xlsx", ".txt", ".md", ".markdown")
BINARY_FORMATS = {".xlsx": "xlsx"}  # read from bytes, not decoded as text

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
    skip_invalid: bool = False  # leave out records with problems (listed) instead of loading nothing

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
    if extension in BINARY_FORMATS:
        records, encoding, form = _read_xlsx(data, name), BINARY_FORMATS[extension], BINARY_FORMATS[extension]
    else:
        text, encoding = _decode(data, name)
        if not text.strip():
            raise IngestError(f"{name}: the file is empty")
        if extension in _PROSE_FORMATS:
            documents = _parse_prose(text, name, stem, extension, options)
            return ParsedCorpus(documents, encoding, _PROSE_FORMATS[extension])
        reader, form = _RECORD_READERS[extension]
        records = reader(text, name, options)
    _require_rows(records, name)
    skipped: list[str] | None = [] if options.skip_invalid else None
    if not records.typed_cells and options.mapping == ColumnMapping() and _holds_catalogue(records):
        documents = _catalogue_documents(records, name, skipped)
        note = ("catalogue records ('name' as an {en, zh} object): title = the names, text = descriptions, "
                "tags, domains, organisation and content; each whole record kept as metadata")
        return _with_skipped(ParsedCorpus(documents, encoding, form, records.notes + [note]), skipped, name)
    found = records.columns()
    columns = _resolve_columns(found, options.mapping, name)
    documents = _documents(records, columns, stem, name, skipped)
    notes = records.notes + _column_notes(columns, found, records.unit, stem)
    return _with_skipped(ParsedCorpus(documents, encoding, form, notes), skipped, name)


SKIPPED_SHOWN = 5  # skipped records named in a note (`ParsedCorpus.skipped` has them all)


def _with_skipped(corpus: ParsedCorpus, skipped: list[str] | None, name: str) -> ParsedCorpus:
    """`corpus` with what `skip_invalid` left out, in `skipped` and in a note; no document left
    is still an error (there is nothing to load)."""
    if not skipped:
        return corpus
    if not corpus.documents:
        raise IngestError(f"{name}: every record has a problem; nothing to load", skipped)
    corpus.skipped.extend(skipped)
    corpus.notes.append(skipped_note(skipped))
    return corpus


def skipped_note(skipped: list[str]) -> str:
    """'skipped 2 invalid record(s): corpus.jsonl: line 7: text is empty; …'"""
    shown = "; ".join(skipped[:SKIPPED_SHOWN]) + (f"; … and {len(skipped) - SKIPPED_SHOWN} more"
                                                   if len(skipped) > SKIPPED_SHOWN else "")
    return f"skipped {len(skipped)} invalid record(s): {shown}"


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
    if extension in BINARY_FORMATS:
        records = _read_xlsx(data, name)
    else:
        text, _ = _decode(data, name)
        if not text.strip():
            raise IngestError(f"{name}: the file is empty")
        reader, _ = _RECORD_READERS[extension]
        records = reader(text, name, options)
    _require_rows(records, name)
    return records.columns(), [fields for _, fields in records.rows[:n_rows]]


def detected_columns(columns: list[str], mapping: ColumnMapping = ColumnMapping(), name: str = "the file"
                     ) -> dict[str, str | None]:
    """Which of `columns` would hold the id, title and text under `mapping` (a role left None
    is detected by name, as an ingest does); None: that role has no column (for the id: ids
    are generated from the file name and row number). Raises IngestError as an ingest would."""
    found = _resolve_columns(columns, mapping, name)
    return {"id": found.id, "title": found.title, "text": found.text}


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
    skipped = [entry for _, corpus in parsed for entry in corpus.skipped]
    if options.skip_invalid:  # an id an earlier file has: left out too
        seen: dict[str, str] = {}
        for name, corpus in parsed:
            kept = []
            for document in corpus.documents:
                if document.id in seen:
                    skipped.append(f"{name}: id {document.id!r} is in {seen[document.id]} already")
                else:
                    seen[document.id] = name
                    kept.append(document)
            corpus.documents = kept
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
        skipped=skipped,
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
        return _parse_beir(path, options.skip_invalid)
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


def _add_row(records: _Records, columns: list[str], number: int, cells: list[str]) -> None:
    """A CSV/TSV data row as a record keyed by the header, or a problem when it has more cells
    than the header."""
    if len(cells) > len(columns):
        records.problems.append((number, f"{len(cells)} cells but the header has {len(columns)}"))
    else:
        records.rows.append((number, dict(zip(columns, cells, strict=True))))


def _read_delimited(text: str, name: str, delimiter: str, quoting: int) -> _Records:
    rows = read_rows(text, delimiter, quoting)
    try:
        header_line, header = next(rows, (1, []))
        columns = [cell.strip() or f"column_{i}" for i, cell in enumerate(header, 1)]
        records = _Records([], "row", typed_cells=True)
        for number, cells in rows:
            _add_row(records, columns, number, cells)
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


def _read_xlsx(data: bytes, name: str) -> _Records:
    """The first sheet of an Excel workbook as records (see the module docstring)."""
    import datetime as dt
    import io
    import zipfile

    from openpyxl import load_workbook

    try:
        workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise IngestError(f"{name}: not a readable .xlsx workbook ({exc}); save it again as Excel .xlsx, or as "
                          "CSV UTF-8") from None
    try:
        sheet = workbook.worksheets[0]
        records = _Records([], "row", typed_cells=False)
        header: list[str] | None = None
        for number, values in enumerate(sheet.iter_rows(values_only=True), start=1):
            cells = ["" if v is None else v for v in values]
            if header is None:
                if any(str(c).strip() for c in cells):
                    header = [str(c).strip() or f"column {i}" for i, c in enumerate(cells, start=1)]
                continue
            row = {}
            for column, value in zip(header, cells, strict=False):
                if isinstance(value, str):
                    value = value.strip()
                elif isinstance(value, dt.datetime) and value.time() == dt.time(0):
                    value = value.date().isoformat()  # Excel keeps a date as a datetime at midnight
                elif isinstance(value, (dt.datetime, dt.date, dt.time)):
                    value = value.isoformat()
                if value != "":
                    row[column] = value
            if row:
                records.rows.append((number, row))
        if len(workbook.worksheets) > 1:
            records.notes.append(f"read the first sheet, {sheet.title!r}, of {len(workbook.worksheets)}")
        return records
    finally:
        workbook.close()


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


def _documents(records: _Records, columns: _Columns, stem: str, name: str,
               skipped: list[str] | None = None) -> list[Document]:
    """Build and validate documents; raise one IngestError listing every problem, or with
    `skipped` (a list) leave the problem records out and append each, with its reason, to it."""
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
    return _checked(documents, row_problems, numbers_of, records.unit, name, skipped, "")


def _checked(documents: list[Document], row_problems: list[tuple[int, str]], numbers_of: dict[str, list[int]],
             unit: str, name: str, skipped: list[str] | None, kind: str) -> list[Document]:
    """`documents` when there is no problem; else one IngestError listing them all, or with
    `skipped` the documents without the problem records and the repeats of an id after its
    first record (each listed in `skipped`)."""
    row_problems.sort(key=lambda problem: problem[0])
    repeated = {doc_id: numbers for doc_id, numbers in numbers_of.items() if len(numbers) > 1}
    if skipped is None:
        problems = [f"{unit} {number}: {reason}" for number, reason in row_problems]
        problems += [f"id {doc_id!r} appears in {unit}s {_and_join(numbers)}" for doc_id, numbers in repeated.items()]
        if problems:
            raise IngestError(f"{name}: {len(problems)} problem(s){kind}; nothing was loaded", problems)
        return documents
    skipped += [f"{name}: {unit} {number}: {reason}" for number, reason in row_problems]
    if not repeated:
        return documents
    kept, seen = [], set()
    for document in documents:  # in record order: the first record of an id is kept
        if document.id in seen:
            continue
        seen.add(document.id)
        kept.append(document)
    skipped += [f"{name}: {unit} {number}: id {doc_id!r} repeats {unit} {numbers[0]}"
                for doc_id, numbers in repeated.items() for number in numbers[1:]]
    return kept


def _holds_catalogue(records: _Records) -> bool:
    """JSON/JSONL whose objects are catalogue records (`records.is_catalogue_record`): one is enough,
    so a record lacking the shape is reported rather than read as a different kind of document."""
    return any(is_catalogue_record(fields) for _, fields in records.rows)


def _catalogue_documents(records: _Records, name: str, skipped: list[str] | None = None) -> list[Document]:
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
    return _checked(documents, row_problems, numbers_of, records.unit, name, skipped, " in catalogue records")


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


def _parse_beir(folder: Path, skip_invalid: bool = False) -> ParsedCorpus:
    """A BEIR folder: corpus.jsonl, optional queries.jsonl and qrels/*.tsv (test.tsv preferred).
    `skip_invalid`: corpus lines with a problem are left out (`ParsedCorpus.skipped`); their
    judgments stay, so an evaluation counts them as relevant documents never found."""
    text, encoding = _decode((folder / "corpus.jsonl").read_bytes(), "corpus.jsonl")
    records = _read_jsonl(text, "corpus.jsonl", ParseOptions())
    _require_rows(records, "corpus.jsonl")
    found = records.columns()
    if "_id" not in found or "text" not in found:
        raise IngestError(f"corpus.jsonl: BEIR lines need '_id' and 'text'; keys found: {', '.join(found)}")
    columns = _Columns(text="text", id="_id", title="title" if "title" in found else None)
    skipped: list[str] | None = [] if skip_invalid else None
    corpus = ParsedCorpus(_documents(records, columns, "corpus", "corpus.jsonl", skipped), encoding, "beir")
    corpus.notes.append(f"BEIR folder {folder.name}: {len(corpus.documents)} documents")
    _with_skipped(corpus, skipped, "corpus.jsonl")
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


# ---- streaming: a corpus read in batches (the CLI's ingest, pipeline.ingest_stream) -------------
STREAM_BATCH = 2048  # documents per batch of a streaming ingest
STREAMED_EXTENSIONS = (".csv", ".tsv", ".jsonl", ".ndjson")  # read lazily; other formats are read whole
_LINE_ENCODINGS = ("utf-8", "gbk", "gb18030")  # decode_bytes's order after the byte-order marks


@dataclass
class _StreamFile:
    """One file of a stream, as surveyed when the stream was opened."""

    path: Path
    name: str  # how messages name it
    encoding: str | None
    streamed: bool  # False: read whole by parse_bytes (JSON, text, Markdown, UTF-16)
    count: int  # documents (streamed: records found by the survey; whole: parsed)
    format: str
    notes: list[str] = field(default_factory=list)


@dataclass
class DocumentStream:
    """A corpus read lazily, `batch_size` documents at a time (`batches()`), for the streaming
    ingest: memory holds one batch, not the corpus.

    Opening a stream surveys every file in one cheap pass: its encoding (decode_bytes's order,
    checked on every line), its number of documents (`total`, for progress and ETA: non-blank
    lines of JSONL, records of CSV/TSV, which also finds an unclosed quote before anything is
    written), and for JSON, text and Markdown files (and UTF-16 ones), which are read whole, a
    full parse. The parser's checks and messages apply to every batch, by line or row number;
    what the one-shot parser decides from the whole file is decided from a file's first batch:
    the id, title and text columns (and catalogue records), the BEIR keys. Ids repeated across
    batches or files are refused by the pipeline (`indexing.derive.check_documents` with its set of
    seen ids)."""

    files: list[_StreamFile]
    batch_size: int
    options: ParseOptions
    format: str
    encoding: str | None
    notes: list[str]
    beir: bool = False
    skipped: list[str] = field(default_factory=list)  # skip_invalid: what was left out so far, and why

    @property
    def total(self) -> int:
        """How many documents the stream holds (counted when it was opened)."""
        return sum(f.count for f in self.files)

    def batches(self) -> Iterator[list[Document]]:
        """Lists of `batch_size` documents (the last one shorter), files in order; a batch may
        span files. Raises IngestError, naming the file and line or row, at the first batch
        with a problem."""
        pending: list[Document] = []
        self.skipped.clear()  # a pass over the stream lists what it skips (the pipeline may read it twice)
        seen: set[str] = set()  # skip_invalid: ids already yielded (a repeat in a later batch or file is left out)
        for file in self.files:
            for documents in self._documents_of(file):
                if self.options.skip_invalid:
                    kept = [d for d in documents if d.id not in seen]
                    self.skipped += [f"{file.name}: id {d.id!r} was read already" for d in documents
                                     if d.id in seen]
                    seen.update(d.id for d in kept)
                    documents = kept
                pending.extend(documents)
                while len(pending) >= self.batch_size:
                    yield pending[: self.batch_size]
                    pending = pending[self.batch_size:]
        if pending:
            yield pending

    def _documents_of(self, file: _StreamFile) -> Iterator[list[Document]]:
        if not file.streamed:
            corpus = parse_bytes(file.path.read_bytes(), file.name, self.options)
            self.skipped += corpus.skipped
            yield corpus.documents
            return
        records_of = _jsonl_batches if file.format == "jsonl" else _delimited_batches
        build = None
        for records in records_of(file, self.batch_size):
            if build is None:
                _require_rows(records, file.name)
                build = self._builder(file, records)
            yield build(records)

    def _builder(self, file: _StreamFile, records: _Records) -> Callable[[_Records], list[Document]]:
        """How the records of `file` become documents, decided from its first batch."""
        found = records.columns()
        prefix = f"{file.name}: " if len(self.files) > 1 else ""
        skipped = self.skipped if self.options.skip_invalid else None
        if self.beir:
            if "_id" not in found or "text" not in found:
                raise IngestError(f"corpus.jsonl: BEIR lines need '_id' and 'text'; keys found: {', '.join(found)}")
            columns = _Columns(text="text", id="_id", title="title" if "title" in found else None)
            return lambda batch: _documents(batch, columns, "corpus", "corpus.jsonl", skipped)
        self.notes.extend(prefix + note for note in records.notes)
        if not records.typed_cells and self.options.mapping == ColumnMapping() and _holds_catalogue(records):
            self.notes.append(prefix + "catalogue records ('name' as an {en, zh} object), read as in a one-shot ingest")
            return lambda batch: _catalogue_documents(batch, file.name, skipped)
        columns = _resolve_columns(found, self.options.mapping, file.name)
        stem = PurePath(file.name).stem
        self.notes.extend(prefix + note for note in _column_notes(columns, found, records.unit, stem))
        return lambda batch: _documents(batch, columns, stem, file.name, skipped)


def open_stream(path: str | Path, options: ParseOptions = ParseOptions(),
                batch_size: int = STREAM_BATCH) -> DocumentStream:
    """A file, a BEIR folder (its corpus.jsonl; queries and judgments are not ingested) or a
    folder of supported files (non-recursive, name order, as `parse_path`), as a
    `DocumentStream`. Every file is surveyed now (see `DocumentStream`); the problems of all
    files are reported together, as `parse_files` does."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise IngestError(f"the batch size must be a whole number ≥ 1, got {batch_size!r}")
    path = Path(path)
    notes: list[str] = []
    beir = False
    if path.is_file():
        paths = [path]
    elif not path.is_dir():
        raise IngestError(f"{path}: no such file or folder")
    elif (path / "corpus.jsonl").is_file():
        paths, beir = [path / "corpus.jsonl"], True
        extra = [n for n in ("queries.jsonl", "qrels") if (path / n).exists()]
        if extra:
            notes.append(f"BEIR folder {path.name}: {' and '.join(extra)} not ingested "
                         "(load them on the Evaluate page)")
    else:
        entries = sorted(entry for entry in path.iterdir() if entry.is_file())
        paths = [entry for entry in entries if entry.suffix.lower() in SUPPORTED_EXTENSIONS]
        if not paths:
            raise IngestError(f"{path}: no supported files ({', '.join(SUPPORTED_EXTENSIONS)})")
        skipped = [entry.name for entry in entries if entry not in paths]
        if skipped:
            notes.append(f"skipped unsupported files: {', '.join(skipped)}")
    files, problems = [], []
    for file_path in paths:
        try:
            files.append(_survey(file_path, options))
        except IngestError as err:
            if len(paths) == 1:
                raise
            problems += [f"{file_path.name}: {problem}" for problem in err.problems] or [str(err)]
    if problems:
        raise IngestError(f"{len(paths) - len(files)} of {len(paths)} files could not be parsed", problems)
    if len(files) > 1:
        for file in files:
            notes.append(f"{file.name}: {file.encoding}, {file.count} documents")
            notes.extend(f"{file.name}: {note}" for note in file.notes)
    else:
        notes.extend(files[0].notes)
    if beir:
        notes.append(f"BEIR folder {path.name}: {files[0].count} documents")
    encodings = {f.encoding for f in files}
    formats = {f.format for f in files}
    form = "beir" if beir else formats.pop() if len(formats) == 1 else "mixed"
    return DocumentStream(files, batch_size, options, form, encodings.pop() if len(encodings) == 1 else None,
                          notes, beir)


class _Undecodable(Exception):
    def __init__(self, offset: int, line: int, byte: int):
        super().__init__(offset, line, byte)
        self.offset, self.line, self.byte = offset, line, byte


def _survey(path: Path, options: ParseOptions) -> _StreamFile:
    """Encoding and document count of a file to stream; a full parse of one read whole."""
    name = path.name
    extension = path.suffix.lower()
    if extension not in SUPPORTED_EXTENSIONS:
        raise IngestError(f"{name}: unsupported file type {extension or '(no extension)'!r}; "
                          f"supported: {', '.join(SUPPORTED_EXTENSIONS)}")
    encoding, lines = _line_encoding(path, name) if extension in STREAMED_EXTENSIONS else (None, 0)
    if encoding is None:
        corpus = parse_bytes(path.read_bytes(), name, options)
        return _StreamFile(path, name, corpus.encoding, False, len(corpus.documents), corpus.format, corpus.notes)
    if not lines:
        raise IngestError(f"{name}: the file is empty")
    form = _RECORD_READERS[extension][1]
    if form == "jsonl":
        return _StreamFile(path, name, encoding, True, lines, form)
    with _open_text(path, encoding) as text:
        delimiter, quoting = _delimiting(text, extension)
        records = sum(1 for _ in _named(read_rows(text, delimiter, quoting), name))
    notes = ["read as ';'-separated (the header has no comma)"] if delimiter == ";" else []
    return _StreamFile(path, name, encoding, True, max(records - 1, 0), form, notes)


def _line_encoding(path: Path, name: str) -> tuple[str | None, int]:
    """(encoding, non-blank lines) of a file decoded line by line, in decode_bytes's order: a
    byte-order mark, then strict UTF-8, GBK, GB18030 over every line (none of them has a 0x0A
    byte inside a character, so line by line equals whole); (None, 0) for UTF-16, read whole.
    The error names the byte offset and line where UTF-8 failed, as decode_bytes does."""
    with open(path, "rb") as f:
        head = f.read(3)
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return None, 0
    if head.startswith(codecs.BOM_UTF8):
        try:
            return "utf-8-sig", _nonblank_lines(path, "utf-8-sig")
        except _Undecodable as err:
            raise IngestError(f"{name}: the file starts with a UTF-8-SIG byte-order mark but is not valid "
                              f"UTF-8-SIG (byte offset {err.offset})") from None
    first: _Undecodable | None = None
    for encoding in _LINE_ENCODINGS:
        try:
            return encoding, _nonblank_lines(path, encoding)
        except _Undecodable as err:
            first = first or err
    raise IngestError(
        f"{name}: the file is not UTF-8, GBK or GB18030 text: UTF-8 decoding failed at byte offset "
        f"{first.offset} (line {first.line}, byte 0x{first.byte:02x}); save it as UTF-8 and try again")


def _decoded_lines(path: Path, encoding: str) -> Iterator[tuple[int, str]]:
    """(line number, text without its "\\n") of every line, split on "\\n" only (as the one-shot
    reader splits JSONL), decoded strictly; a byte-order mark is dropped from the first line only."""
    body = "utf-8" if encoding == "utf-8-sig" else encoding
    offset = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            try:
                yield number, raw.decode(encoding if number == 1 else body)
            except UnicodeDecodeError as err:
                raise _Undecodable(offset + err.start, number, raw[err.start]) from None
            offset += len(raw) + 1


def _nonblank_lines(path: Path, encoding: str) -> int:
    return sum(1 for _, line in _decoded_lines(path, encoding) if line.strip())


def _open_text(path: Path, encoding: str):
    return open(path, encoding=encoding, newline="")  # the caller closes it


def _delimiting(text, extension: str) -> tuple[str, int]:
    """(delimiter, quoting) of a CSV or TSV text stream, as the one-shot readers decide them."""
    if extension == ".tsv":
        return "\t", csv.QUOTE_NONE
    head = text.read(1 << 20)
    text.seek(0)
    header = head.lstrip().split("\n", 1)[0]
    return (";" if ";" in header and "," not in header else ","), csv.QUOTE_MINIMAL


def _named(rows: Iterator, name: str) -> Iterator:
    """`rows`, with a reading error prefixed by the file name."""
    try:
        yield from rows
    except IngestError as err:
        raise IngestError(f"{name}: {err}", err.problems) from err


def _jsonl_batches(file: _StreamFile, size: int) -> Iterator[_Records]:
    """A JSONL file's records, `size` lines (records and problems) at a time."""
    batch = _Records([], "line", typed_cells=False)
    for number, line in _decoded_lines(file.path, file.encoding or "utf-8"):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as err:
            batch.problems.append((number, f"invalid JSON ({err.msg}, column {err.colno})"))
        else:
            if isinstance(item, dict):
                batch.rows.append((number, item))
            else:
                batch.problems.append((number, f"expected an object, got {_json_type(item)}"))
        if len(batch.rows) + len(batch.problems) >= size:
            yield batch
            batch = _Records([], "line", typed_cells=False)
    if batch.rows or batch.problems:
        yield batch


def _delimited_batches(file: _StreamFile, size: int) -> Iterator[_Records]:
    """A CSV or TSV file's records, `size` rows (records and problems) at a time."""
    with _open_text(file.path, file.encoding or "utf-8") as text:
        delimiter, quoting = _delimiting(text, file.path.suffix.lower())
        rows = _named(read_rows(text, delimiter, quoting), file.name)
        header_line, header = next(rows, (1, []))
        columns = [cell.strip() or f"column_{i}" for i, cell in enumerate(header, 1)]
        repeated = sorted({column for column in columns if columns.count(column) > 1})
        if repeated:
            raise IngestError(f"{file.name}: the header (row {header_line}) repeats column(s) {', '.join(repeated)}")
        batch = _Records([], "row", typed_cells=True)
        for number, cells in rows:
            _add_row(batch, columns, number, cells)
            if len(batch.rows) + len(batch.problems) >= size:
                yield batch
                batch = _Records([], "row", typed_cells=True)
        if batch.rows or batch.problems:
            yield batch
