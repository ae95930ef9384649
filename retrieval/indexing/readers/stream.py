"""Streaming: a corpus read in batches (the CLI's ingest, `indexing.pipeline.ingest_stream`), with the
one-shot parser's formats, checks and messages (`readers.parse`)."""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from retrieval.indexing.readers.documents import (
    Columns,
    catalogue_documents,
    column_documents,
    column_notes,
    holds_catalogue,
    resolve_columns,
)
from retrieval.indexing.readers.formats import (
    RECORD_READERS,
    SUPPORTED_EXTENSIONS,
    Records,
    add_row,
    json_type,
    require_rows,
)
from retrieval.indexing.readers.options import ColumnMapping, ParseOptions
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.indexing.seen_ids import SeenIds
from retrieval.judging.qrels import json_problem, read_rows
from retrieval.text.encoding import evident_utf8_line, mixed_encodings
from retrieval.text.json_values import parse_json
from retrieval.types import Document, IngestError

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
        seen = SeenIds()  # skip_invalid: ids already yielded (a repeat in a later batch or file is left out)
        for file in self.files:
            for documents in self._documents_of(file):
                if self.options.skip_invalid:
                    before = seen.seen_before([d.id for d in documents])
                    kept = [d for d, read in zip(documents, before, strict=True) if not read]
                    self.skipped += [f"{file.name}: id {d.id!r} was read already"
                                     for d, read in zip(documents, before, strict=True) if read]
                    seen.add([d.id for d in kept])
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
                require_rows(records, file.name)
                build = self._builder(file, records)
            yield build(records)

    def _builder(self, file: _StreamFile, records: Records) -> Callable[[Records], list[Document]]:
        """How the records of `file` become documents, decided from its first batch."""
        found = records.columns()
        prefix = f"{file.name}: " if len(self.files) > 1 else ""
        skipped = self.skipped if self.options.skip_invalid else None
        if self.beir:
            if "_id" not in found or "text" not in found:
                raise IngestError(f"corpus.jsonl: BEIR lines need '_id' and 'text'; keys found: {', '.join(found)}")
            columns = Columns(text="text", id="_id", title="title" if "title" in found else None)
            return lambda batch: column_documents(batch, columns, "corpus", "corpus.jsonl", skipped)
        self.notes.extend(prefix + note for note in records.notes)
        if not records.typed_cells and self.options.mapping == ColumnMapping() and holds_catalogue(records):
            self.notes.append(prefix + "catalogue records ('name' as an {en, zh} object), read as in a one-shot ingest")
            return lambda batch: catalogue_documents(batch, file.name, skipped)
        columns = resolve_columns(found, self.options.mapping, file.name)
        stem = PurePath(file.name).stem
        self.notes.extend(prefix + note for note in column_notes(columns, found, records.unit, stem))
        return lambda batch: column_documents(batch, columns, stem, file.name, skipped)


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
    files, problems, skippable = [], [], True
    for file_path in paths:
        try:
            files.append(_survey(file_path, options))
        except IngestError as err:
            if len(paths) == 1:
                raise
            problems += [f"{file_path.name}: {problem}" for problem in err.problems] or [str(err)]
            skippable = skippable and err.skippable
    if problems:
        raise IngestError(f"{len(paths) - len(files)} of {len(paths)} files could not be parsed", problems,
                          skippable=skippable)
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
    form = RECORD_READERS[extension][1]
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
    The error names the byte offset and line where UTF-8 failed, and a file mixing UTF-8 lines
    with others is refused, as decode_bytes does."""
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
            lines = _nonblank_lines(path, encoding)
        except _Undecodable as err:
            first = first or err
            continue
        if first is not None:  # not UTF-8 as a whole: refused if a line evidently is
            with open(path, "rb") as f:
                utf8_line = evident_utf8_line(raw.rstrip(b"\n") for raw in f)
            if utf8_line is not None:
                raise IngestError(f"{name}: {mixed_encodings(utf8_line, first.line, first.offset, first.byte)}")
        return encoding, lines
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


def _jsonl_batches(file: _StreamFile, size: int) -> Iterator[Records]:
    """A JSONL file's records, `size` lines (records and problems) at a time."""
    batch = Records([], "line", typed_cells=False)
    for number, line in _decoded_lines(file.path, file.encoding or "utf-8"):
        if not line.strip():
            continue
        try:
            item = parse_json(line)
        except json.JSONDecodeError as err:
            batch.problems.append((number, json_problem(err)))
        else:
            if isinstance(item, dict):
                batch.rows.append((number, item))
            else:
                batch.problems.append((number, f"expected an object, got {json_type(item)}"))
        if len(batch.rows) + len(batch.problems) >= size:
            yield batch
            batch = Records([], "line", typed_cells=False)
    if batch.rows or batch.problems:
        yield batch


def _delimited_batches(file: _StreamFile, size: int) -> Iterator[Records]:
    """A CSV or TSV file's records, `size` rows (records and problems) at a time."""
    with _open_text(file.path, file.encoding or "utf-8") as text:
        delimiter, quoting = _delimiting(text, file.path.suffix.lower())
        rows = _named(read_rows(text, delimiter, quoting), file.name)
        header_line, header = next(rows, (1, []))
        columns = [cell.strip() or f"column_{i}" for i, cell in enumerate(header, 1)]
        repeated = sorted({column for column in columns if columns.count(column) > 1})
        if repeated:
            raise IngestError(f"{file.name}: the header (row {header_line}) repeats column(s) {', '.join(repeated)}")
        batch = Records([], "row", typed_cells=True)
        for number, cells in rows:
            add_row(batch, columns, number, cells)
            if len(batch.rows) + len(batch.problems) >= size:
                yield batch
                batch = Records([], "row", typed_cells=True)
        if batch.rows or batch.problems:
            yield batch
