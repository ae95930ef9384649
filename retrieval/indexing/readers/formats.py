"""The readers, one per file format: a file's bytes as `Records` (table, JSON, JSONL, Excel) before
columns are assigned (`readers.documents`), or as documents (text, Markdown).

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

Input is only ever parsed as data (csv, json): nothing is evaluated or unpickled, and no path is
built from file content.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from retrieval import limits
from retrieval.indexing.readers.options import ParseOptions
from retrieval.judging.qrels import json_problem, read_json_lines, read_rows
from retrieval.text.chunking import chunk_markdown, split_paragraphs
from retrieval.text.encoding import decode_bytes
from retrieval.text.json_values import parse_json
from retrieval.types import Document, IngestError

SUPPORTED_EXTENSIONS = (".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".xlsx", ".txt", ".md", ".markdown")
BINARY_FORMATS = {".xlsx": "xlsx"}  # read from bytes, not decoded as text

PROSE_FORMATS = {".txt": "text", ".md": "markdown", ".markdown": "markdown"}


@dataclass
class Records:
    """Records read from a table, JSON or JSONL file, before columns are assigned."""

    rows: list[tuple[int, dict[str, Any]]]  # (row/line/item number, fields)
    unit: str  # what the numbers count, for messages: "row", "line" or "item"
    typed_cells: bool  # CSV/TSV: cells are strings to strip and to read numbers from
    problems: list[tuple[int, str]] = field(default_factory=list)  # (number, reason) found while reading
    notes: list[str] = field(default_factory=list)

    def columns(self) -> list[str]:
        """Every field name, in first-seen order."""
        return list(dict.fromkeys(key for _, fields in self.rows for key in fields))


def require_rows(records: Records, name: str) -> None:
    """Reject input with no record, listing why lines were unreadable (if they were)."""
    if not records.rows:
        problems = [f"{records.unit} {number}: {reason}" for number, reason in records.problems]
        raise IngestError(f"{name}: no documents found", problems)


def decode(data: bytes, name: str) -> tuple[str, str]:
    try:
        return decode_bytes(data)
    except IngestError as err:
        raise IngestError(f"{name}: {err}") from err


def parse_prose(text: str, name: str, stem: str, extension: str, options: ParseOptions) -> list[Document]:
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


def add_row(records: Records, columns: list[str], number: int, cells: list[str]) -> None:
    """A CSV/TSV data row as a record keyed by the header, or a problem when it has more cells
    than the header."""
    if len(cells) > len(columns):
        records.problems.append((number, f"{len(cells)} cells but the header has {len(columns)}"))
    else:
        records.rows.append((number, dict(zip(columns, cells, strict=True))))


def _read_delimited(text: str, name: str, delimiter: str, quoting: int) -> Records:
    rows = read_rows(text, delimiter, quoting)
    try:
        header_line, header = next(rows, (1, []))
        columns = [cell.strip() or f"column_{i}" for i, cell in enumerate(header, 1)]
        records = Records([], "row", typed_cells=True)
        for number, cells in rows:
            add_row(records, columns, number, cells)
    except IngestError as err:
        raise IngestError(f"{name}: {err}") from err
    repeated = sorted({column for column in columns if columns.count(column) > 1})
    if repeated:
        raise IngestError(f"{name}: the header (row {header_line}) repeats column(s) {', '.join(repeated)}")
    return records


def _read_csv(text: str, name: str, options: ParseOptions) -> Records:
    header = text.lstrip().split("\n", 1)[0]
    # Excel in locales with a decimal comma writes ";"-separated "CSV".
    delimiter = ";" if ";" in header and "," not in header else ","
    records = _read_delimited(text, name, delimiter, csv.QUOTE_MINIMAL)
    if delimiter == ";":
        records.notes.append("read as ';'-separated (the header has no comma)")
    return records


def _read_tsv(text: str, name: str, options: ParseOptions) -> Records:
    # TSV exports do not quote: a cell starting with '"' must not swallow the following lines.
    return _read_delimited(text, name, "\t", csv.QUOTE_NONE)


def _read_json(text: str, name: str, options: ParseOptions) -> Records:
    try:
        data = parse_json(text)
    except json.JSONDecodeError as err:
        raise IngestError(f"{name}: {json_problem(err, line=True)}") from err
    items, notes = _json_items(data, name, options.json_key)
    records = Records([], "item", typed_cells=False, notes=notes)
    for number, item in enumerate(items, 1):
        if isinstance(item, dict):
            records.rows.append((number, item))
        else:
            records.problems.append((number, f"expected an object, got {json_type(item)}"))
    return records


def _json_items(data: Any, name: str, json_key: str | None) -> tuple[list[Any], list[str]]:
    """The array of documents in parsed JSON, and a note saying where it was found."""
    if isinstance(data, list):
        return data, [f"json_key {json_key!r} ignored: the file is an array"] if json_key else []
    if not isinstance(data, dict):
        raise IngestError(f"{name}: expected an array of objects, got {json_type(data)}")
    keys = ", ".join(map(repr, data)) or "none"
    if json_key is not None:
        if json_key not in data:
            raise IngestError(f"{name}: key {json_key!r} not found; top-level keys: {keys}")
        if not isinstance(data[json_key], list):
            raise IngestError(f"{name}: {json_key!r} holds {json_type(data[json_key])}, not an array of objects")
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


def json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def read_jsonl(text: str, name: str, options: ParseOptions) -> Records:
    records = Records([], "line", typed_cells=False)
    for number, item, problem in read_json_lines(text):
        if problem:
            records.problems.append((number, problem))
        elif isinstance(item, dict):
            records.rows.append((number, item))
        else:
            records.problems.append((number, f"expected an object, got {json_type(item)}"))
    return records


def read_xlsx(data: bytes, name: str) -> Records:
    """The first sheet of an Excel workbook as records (see the module docstring), within the
    bounds of `limits` (XLSX_*): what it unzips to, checked before reading; the cells walked and
    the text read, counted while reading; each cell's length."""
    import io
    import zipfile

    from openpyxl import load_workbook

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            check_unzipped_size(sum(member.file_size for member in archive.infolist()), name)
        workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise IngestError(f"{name}: not a readable .xlsx workbook ({exc}); save it again as Excel .xlsx, or as "
                          "CSV UTF-8") from None
    try:
        sheet = workbook.worksheets[0]
        # The declared dimension (`A1:XFD1048576` in a 4.7 KB file) would pad every row to its
        # width and every missing row up to its height: read the cells that are there.
        sheet.reset_dimensions()
        records = _sheet_records(sheet.iter_rows(values_only=True), name)
        if len(workbook.worksheets) > 1:
            records.notes.append(f"read the first sheet, {sheet.title!r}, of {len(workbook.worksheets)}")
        return records
    finally:
        workbook.close()


def check_unzipped_size(size: int, name: str) -> None:
    """IngestError when a workbook unzips to more than `limits.XLSX_MAX_UNCOMPRESSED_MB`."""
    if size > limits.XLSX_MAX_UNCOMPRESSED_MB * limits.MB:
        raise IngestError(f"{name}: the workbook expands to {size / limits.MB:.1f} MB when unzipped; the workbench "
                          f"reads workbooks of at most {limits.XLSX_MAX_UNCOMPRESSED_MB} MB unzipped "
                          "(WORKBENCH_XLSX_MAX_UNCOMPRESSED_MB)")


def _sheet_records(sheet_rows: Iterable[tuple], name: str) -> Records:
    """A sheet's rows (values, as openpyxl yields them) as records: the first non-empty row is the
    header, empty cells and trailing empty columns dropped, dates as ISO text; the cells walked,
    the text read and each cell's length bounded (`limits`)."""
    import datetime as dt

    records = Records([], "row", typed_cells=False)
    header: list[str] | None = None
    walked = characters = 0
    for number, values in enumerate(sheet_rows, start=1):
        walked += max(len(values), 1)
        if walked > limits.XLSX_MAX_CELLS:
            raise IngestError(f"{name}: the first sheet spans more than {limits.XLSX_MAX_CELLS:,} cells (rows × "
                              f"columns, row {number}); the workbench reads at most that many "
                              "(WORKBENCH_XLSX_MAX_CELLS): delete the empty rows and columns, or save it as CSV")
        if not values:  # a missing row (openpyxl yields one per row number skipped)
            continue
        cells = list(values)
        while cells and cells[-1] in (None, ""):
            cells.pop()
        if header is None:
            if any(str(c).strip() for c in cells if c is not None):
                header = [("" if c is None else str(c).strip()) or f"column {i}" for i, c in enumerate(cells, 1)]
            continue
        row = {}
        for column, value in zip(header, cells, strict=False):
            if isinstance(value, str):
                if len(value) > limits.XLSX_CELL_CHARS:
                    raise IngestError(f"{name}: row {number}, column {column!r} holds {len(value):,} characters; an "
                                      f"Excel cell holds at most {limits.XLSX_CELL_CHARS:,}")
                characters += len(value)
                if characters > limits.XLSX_MAX_UNCOMPRESSED_MB * limits.MB:
                    raise IngestError(f"{name}: the first sheet holds more than {limits.XLSX_MAX_UNCOMPRESSED_MB} MB "
                                      f"of text (row {number}); the workbench reads at most that much "
                                      "(WORKBENCH_XLSX_MAX_UNCOMPRESSED_MB)")
                value = value.strip()
            elif isinstance(value, dt.datetime) and value.time() == dt.time(0):
                value = value.date().isoformat()  # Excel keeps a date as a datetime at midnight
            elif isinstance(value, (dt.datetime, dt.date, dt.time)):
                value = value.isoformat()
            if value is not None and value != "":
                row[column] = value
        if row:
            records.rows.append((number, row))
    return records


RECORD_READERS: dict[str, tuple[Callable[[str, str, ParseOptions], Records], str]] = {
    ".csv": (_read_csv, "csv"),
    ".tsv": (_read_tsv, "tsv"),
    ".json": (_read_json, "json"),
    ".jsonl": (read_jsonl, "jsonl"),
    ".ndjson": (read_jsonl, "jsonl"),
}
