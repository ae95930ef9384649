"""Parse uploaded files, folders and BEIR collections into a `ParsedCorpus` (no storage here): the
one-shot parse, a whole file in memory. Each format is read as `readers.formats` says and its
records become documents as `readers.documents` says; a corpus too large for memory is read in
batches instead (`readers.stream`).

A BEIR folder (`parse_path`): corpus.jsonl (`_id`, `title`, `text`), queries.jsonl, qrels/*.tsv.
"""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Any

from retrieval.indexing.readers.documents import (
    Columns,
    catalogue_documents,
    column_documents,
    column_notes,
    holds_catalogue,
    resolve_columns,
)
from retrieval.indexing.readers.formats import (
    BINARY_FORMATS,
    PROSE_FORMATS,
    RECORD_READERS,
    SUPPORTED_EXTENSIONS,
    decode,
    parse_prose,
    read_jsonl,
    read_xlsx,
    require_rows,
)
from retrieval.indexing.readers.options import ColumnMapping, ParseOptions
from retrieval.judging.qrels import parse_qrels, parse_queries
from retrieval.types import IngestError, ParsedCorpus


def parse_bytes(data: bytes, filename: str, options: ParseOptions = ParseOptions()) -> ParsedCorpus:
    """Parse one file's bytes, the format chosen by the extension of `filename` (see `readers.formats`)."""
    name = PurePath(filename).name
    extension = PurePath(name).suffix.lower()
    stem = PurePath(name).stem
    if extension not in SUPPORTED_EXTENSIONS:
        raise IngestError(
            f"{name}: unsupported file type {extension or '(no extension)'!r}; "
            f"supported: {', '.join(SUPPORTED_EXTENSIONS)}"
        )
    if extension in BINARY_FORMATS:
        records, encoding, form = read_xlsx(data, name), BINARY_FORMATS[extension], BINARY_FORMATS[extension]
    else:
        text, encoding = decode(data, name)
        if not text.strip():
            raise IngestError(f"{name}: the file is empty")
        if extension in PROSE_FORMATS:
            documents = parse_prose(text, name, stem, extension, options)
            return ParsedCorpus(documents, encoding, PROSE_FORMATS[extension])
        reader, form = RECORD_READERS[extension]
        records = reader(text, name, options)
    require_rows(records, name)
    skipped: list[str] | None = [] if options.skip_invalid else None
    if not records.typed_cells and options.mapping == ColumnMapping() and holds_catalogue(records):
        documents = catalogue_documents(records, name, skipped)
        note = ("catalogue records ('name' as an {en, zh} object): title = the names, text = descriptions, "
                "tags, domains, organisation and content; each whole record kept as metadata")
        return _with_skipped(ParsedCorpus(documents, encoding, form, records.notes + [note]), skipped, name)
    found = records.columns()
    columns = resolve_columns(found, options.mapping, name)
    documents = column_documents(records, columns, stem, name, skipped)
    notes = records.notes + column_notes(columns, found, records.unit, stem)
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


PREVIEW_PROBLEM = "(problem)"  # a preview row's column saying why the record cannot be read


def preview(data: bytes, filename: str, options: ParseOptions = ParseOptions(),
            n_rows: int = 5) -> tuple[list[str], list[dict[str, Any]]]:
    """Column names and the first `n_rows` records of a file, before any column is mapped.

    For the column-mapping step of an upload. Text and Markdown files have no columns: their
    preview is the documents they would become (id, title, text). A record that cannot be read
    (a bad JSONL line, a row with too many cells) is a row of its own in its place, its
    `PREVIEW_PROBLEM` saying what is wrong, rather than a gap the user cannot see.
    """
    name = PurePath(filename).name
    extension = PurePath(name).suffix.lower()
    if extension not in SUPPORTED_EXTENSIONS or extension in PROSE_FORMATS:
        corpus = parse_bytes(data, filename, options)
        rows = [{"id": d.id, "title": d.title, "text": d.text} for d in corpus.documents[:n_rows]]
        return ["id", "title", "text"], rows
    if extension in BINARY_FORMATS:
        records = read_xlsx(data, name)
    else:
        text, _ = decode(data, name)
        if not text.strip():
            raise IngestError(f"{name}: the file is empty")
        reader, _ = RECORD_READERS[extension]
        records = reader(text, name, options)
    require_rows(records, name)
    unreadable = [(number, {PREVIEW_PROBLEM: f"{records.unit} {number}: {reason}"})
                  for number, reason in records.problems]
    entries = sorted(records.rows + unreadable, key=lambda entry: entry[0])
    return records.columns(), [fields for _, fields in entries[:n_rows]]


def parse_files(files: list[tuple[str, bytes]], options: ParseOptions = ParseOptions()) -> ParsedCorpus:
    """Parse several files (name, bytes) into one corpus; ids must be unique across files.

    `encoding` is the files' common encoding (None when they differ) and `format` their common
    format ("mixed" when they differ); notes give each file's encoding and document count.
    """
    if not files:
        raise IngestError("no files to parse")
    parsed: list[tuple[str, ParsedCorpus]] = []
    problems, skippable = [], True
    for filename, data in files:
        try:
            parsed.append((PurePath(filename).name, parse_bytes(data, filename, options)))
        except IngestError as err:
            if len(files) == 1:  # its own message names the file and the rows ("1 of 1 files" says less)
                raise
            name = PurePath(filename).name
            problems += [f"{name}: {problem}" for problem in err.problems] or [str(err)]
            skippable = skippable and err.skippable
    if problems:
        raise IngestError(f"{len(files) - len(parsed)} of {len(files)} files could not be parsed", problems,
                          skippable=skippable)
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


def _parse_beir(folder: Path, skip_invalid: bool = False) -> ParsedCorpus:
    """A BEIR folder: corpus.jsonl, optional queries.jsonl and qrels/*.tsv (test.tsv preferred).
    `skip_invalid`: corpus lines with a problem are left out (`ParsedCorpus.skipped`); their
    judgments stay, so an evaluation counts them as relevant documents never found."""
    text, encoding = decode((folder / "corpus.jsonl").read_bytes(), "corpus.jsonl")
    records = read_jsonl(text, "corpus.jsonl", ParseOptions())
    require_rows(records, "corpus.jsonl")
    found = records.columns()
    if "_id" not in found or "text" not in found:
        raise IngestError(f"corpus.jsonl: BEIR lines need '_id' and 'text'; keys found: {', '.join(found)}")
    columns = Columns(text="text", id="_id", title="title" if "title" in found else None)
    skipped: list[str] | None = [] if skip_invalid else None
    corpus = ParsedCorpus(column_documents(records, columns, "corpus", "corpus.jsonl", skipped), encoding, "beir")
    corpus.notes.append(f"BEIR folder {folder.name}: {len(corpus.documents)} documents")
    _with_skipped(corpus, skipped, "corpus.jsonl")
    if (folder / "queries.jsonl").is_file():
        corpus.queries = parse_queries((folder / "queries.jsonl").read_bytes(), "queries.jsonl")
        corpus.notes.append(f"{len(corpus.queries)} queries from queries.jsonl")
    qrels_files = sorted((folder / "qrels").glob("*.tsv"))
    if qrels_files:
        chosen = next((f for f in qrels_files if f.name == "test.tsv"), qrels_files[0])
        text, _ = decode(chosen.read_bytes(), f"qrels/{chosen.name}")
        try:
            corpus.qrels = parse_qrels(text)
        except IngestError as err:
            summary = f"{len(err.problems)} malformed line(s)" if err.problems else str(err)
            raise IngestError(f"qrels/{chosen.name}: {summary}", err.problems) from err
        others = [f.name for f in qrels_files if f != chosen]
        also = f" (also present: {', '.join(others)})" if others else ""
        corpus.notes.append(f"judgments for {len(corpus.qrels)} queries from qrels/{chosen.name}{also}")
    return corpus
