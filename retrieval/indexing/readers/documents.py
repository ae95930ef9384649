"""Records → documents: which columns hold the id, title and text, the checks every record passes,
and catalogue records.

Catalogue records (JSON and JSONL, columns detected): when an object's `name` is an {en, zh}
object the file is read as data-source records (`text.records`): id = the record's `id`, title =
its names, text = descriptions, tags, domains, organisation and content; the whole record is the
metadata (the keyword source scores its fields). Each record's problems are reported by item or
line number, and a file with any problem loads nothing.

Rules for records (table, JSON and JSONL formats):

- Columns are found by `ColumnMapping`, or case-insensitively among `ID_COLUMNS`,
  `TITLE_COLUMNS`, `TEXT_COLUMNS` (earlier names win). A text column is required.
- Without an id column, ids are f"{stem}-{n}", n the record's row/line/item number above, so an
  id points at its place in the file and stays the same when the same file is parsed again.
- Ids are str()-ed and stripped and must be non-empty and unique; text and title are stripped,
  and a record needs a text or a title (a title alone is a document, as in classic collections
  where half the documents are a title only: title + text is what is indexed, as BEIR systems
  do). Every problem is collected and reported, by row, in one IngestError: a file with any
  problem loads nothing. With `ParseOptions.skip_invalid` a record with a problem
  (or repeating an earlier record's id) is left out instead and listed in `ParsedCorpus.skipped`,
  and the rest loads: real collections have a few empty documents.
- Every other column goes to `Document.metadata`: CSV/TSV cells are stripped, empty cells dropped,
  integers and decimals (no leading zeros, so codes like "007" stay strings) become numbers; JSON
  values are kept as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from retrieval.indexing.readers.formats import Records
from retrieval.indexing.readers.options import ColumnMapping
from retrieval.text.records import is_catalogue_record, record_document, record_problems
from retrieval.types import Document, IngestError

# Chinese names too, since Chinese spreadsheets are exported with Chinese headers.
ID_COLUMNS = ("id", "_id", "doc_id", "docid", "uuid", "sku", "product_id", "item_id", "asin", "isbn", "编号")
TITLE_COLUMNS = ("title", "name", "heading", "subject", "标题", "名称", "题目")
TEXT_COLUMNS = (
    "text", "content", "body", "passage", "abstract", "document", "description", "正文", "内容", "文本", "摘要",
    "描述",
)
_INTEGER = re.compile(r"[+-]?(?:0|[1-9][0-9]*)")
_DECIMAL = re.compile(
    r"[+-]?(?:0|[1-9][0-9]*)?\.[0-9]+(?:[eE][+-]?[0-9]+)?"  # 1.5, .5, 1.5e3
    r"|[+-]?(?:0|[1-9][0-9]*)[eE][+-]?[0-9]+"  # 1e3
)


def detected_columns(columns: list[str], mapping: ColumnMapping = ColumnMapping(), name: str = "the file"
                     ) -> dict[str, str | None]:
    """Which of `columns` would hold the id, title and text under `mapping` (a role left None
    is detected by name, as an ingest does); None: that role has no column (for the id: ids
    are generated from the file name and row number). Raises IngestError as an ingest would."""
    found = resolve_columns(columns, mapping, name)
    return {"id": found.id, "title": found.title, "text": found.text}


@dataclass(frozen=True)
class Columns:
    text: str
    id: str | None
    title: str | None


def resolve_columns(columns: list[str], mapping: ColumnMapping, name: str) -> Columns:
    """Apply the mapping, detecting unset roles; the text column is resolved first and required."""
    available = f"available columns: {', '.join(map(repr, columns)) or 'none'}"
    text = _column(columns, mapping.text, TEXT_COLUMNS, set(), "text", name, available)
    if text is None:
        raise IngestError(
            f"{name}: no text column (looked for {', '.join(TEXT_COLUMNS)}); choose one. {available}"
        )
    id_ = _column(columns, mapping.id, ID_COLUMNS, {text}, "id", name, available)
    title = _column(columns, mapping.title, TITLE_COLUMNS, {text, id_}, "title", name, available)
    return Columns(text, id_, title)


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


def column_documents(records: Records, columns: Columns, stem: str, name: str,
               skipped: list[str] | None = None) -> list[Document]:
    """Build and validate documents; raise one IngestError listing every problem, or with
    `skipped` (a list) leave the problem records out and append each, with its reason, to it."""
    row_problems = list(records.problems)
    documents = []
    numbers_of: dict[str, list[int]] = {}
    ids_of: dict[int, str] = {}
    roles = {columns.text, columns.id, columns.title}
    for number, fields in records.rows:
        doc_id = _as_text(fields.get(columns.id)) if columns.id else f"{stem}-{number}"
        text = _as_text(fields.get(columns.text))
        title = _as_text(fields.get(columns.title)) if columns.title else ""
        found = [(number, f"{role} is not a string or number")
                 for role, value in (("id", doc_id), ("text", text), ("title", title)) if value is None]
        if doc_id == "":
            found.append((number, "id is empty"))
        if text == "" and title == "":  # a title alone is a document (BEIR indexes title + text)
            found.append((number, "title and text are empty" if columns.title else "text is empty"))
        if found:
            row_problems += found
            if columns.id and doc_id:  # the problem row named by its id too ("row 3 (id 'k2'): …")
                ids_of[number] = doc_id
            continue
        numbers_of.setdefault(doc_id, []).append(number)
        metadata = {key: value for key, value in fields.items() if key not in roles}
        if records.typed_cells:
            metadata = {key: _cell_value(value) for key, value in metadata.items() if value.strip()}
        documents.append(Document(id=doc_id, text=text, title=title, metadata=metadata))
    return _checked(documents, row_problems, numbers_of, records.unit, name, skipped, "", ids_of)


def _checked(documents: list[Document], row_problems: list[tuple[int, str]], numbers_of: dict[str, list[int]],
             unit: str, name: str, skipped: list[str] | None, kind: str,
             ids_of: dict[int, str] | None = None) -> list[Document]:
    """`documents` when there is no problem; else one IngestError listing them all, or with
    `skipped` the documents without the problem records and the repeats of an id after its
    first record (each listed in `skipped`). `ids_of`: a problem record's id by its number."""
    row_problems.sort(key=lambda problem: problem[0])
    ids_of = ids_of or {}
    row_problems = [(f"{number} (id {ids_of[number]!r})" if number in ids_of else number, reason)
                    for number, reason in row_problems]
    repeated = {doc_id: numbers for doc_id, numbers in numbers_of.items() if len(numbers) > 1}
    if skipped is None:
        problems = [f"{unit} {number}: {reason}" for number, reason in row_problems]
        problems += [f"id {doc_id!r} appears in {unit}s {_and_join(numbers)}" for doc_id, numbers in repeated.items()]
        if problems:
            raise IngestError(f"{name}: {len(problems)} problem(s){kind}; nothing was loaded", problems,
                              skippable=True)
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


def holds_catalogue(records: Records) -> bool:
    """JSON/JSONL whose objects are catalogue records (`records.is_catalogue_record`): one is enough,
    so a record lacking the shape is reported rather than read as a different kind of document."""
    return any(is_catalogue_record(fields) for _, fields in records.rows)


def catalogue_documents(records: Records, name: str, skipped: list[str] | None = None) -> list[Document]:
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


def column_notes(columns: Columns, found: list[str], unit: str, stem: str) -> list[str]:
    metadata = [c for c in found if c not in {columns.text, columns.id, columns.title}]
    notes = [
        f"text column {columns.text!r}",
        f"title column {columns.title!r}" if columns.title else "no title column",
        f"id column {columns.id!r}" if columns.id else f"no id column: ids are '{stem}-<{unit} number>'",
    ]
    if metadata:
        notes.append(f"metadata columns: {', '.join(metadata)}")
    return notes
