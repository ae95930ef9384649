"""The Corpus page's steps as plain functions (no Streamlit): preview uploads, ingest them, and
the collections table. The page only collects widget values and draws what these return.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import pandas as pd

from retrieval import limits
from retrieval.cache import LRU
from retrieval.indexing.readers.documents import ID_COLUMNS, detected_columns
from retrieval.indexing.readers.options import ColumnMapping, ParseOptions
from retrieval.indexing.readers.parse import parse_files, preview, skipped_note
from retrieval.indexing.throughput import Throughput
from retrieval.models.embed import E5, MINILM
from retrieval.search.workbench import Workbench
from retrieval.store import CollectionInfo, Progress, display_name
from retrieval.types import ParsedCorpus, RetrievalError

UPLOAD_TYPES = ["csv", "tsv", "json", "jsonl", "ndjson", "xlsx", "txt", "md", "markdown"]
TABULAR = {".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".xlsx"}
SPREADSHEET_HINT = ("Excel: .xlsx (its first sheet). Other spreadsheets (.xls, .ods, Numbers): save as "
                    "“CSV UTF-8” first.")
DETECT = "(detect)"
MODEL_AUTO = "auto (by corpus language)"
MODEL_PATH = "local folder…"
MODEL_CHOICES = [MODEL_AUTO, MINILM, E5, MODEL_PATH]
LARGE_FILES_HINT = (f"Files over {limits.MAX_FILE_MB} MB (or the browser's upload limit): ingest them on the server "
                    "with `python -m retrieval ingest PATH --collection NAME` (a file or a folder; read, embedded "
                    "and written in batches, with documents/s and time left).")


@dataclass
class FilePreview:
    name: str
    columns: list[str]
    rows: list[dict[str, Any]]
    tabular: bool
    error: str | None = None


# Parsed previews by (SHA-256 of the bytes, file name, options, rows): the Corpus page reruns on
# every widget change, and a file is parsed once per content, not once per rerun. Process-wide
# (the same bytes parse the same for every session); a preview is only read, never changed.
PREVIEWS = LRU(32)


def preview_files(files: list[tuple[str, bytes]], options: ParseOptions, n_rows: int = 5) -> list[FilePreview]:
    """Columns and first rows of each file; a file that cannot be read, or is larger than
    `limits.MAX_FILE_MB`, carries its error. Each file content is parsed once (`PREVIEWS`)."""
    previews = []
    for name, data in files:
        key = (hashlib.sha256(data).hexdigest(), name, options, n_rows)
        previews.append(PREVIEWS.get_or_create(key, lambda name=name, data=data: _preview(name, data, options, n_rows)))
    return previews


def _preview(name: str, data: bytes, options: ParseOptions, n_rows: int) -> FilePreview:
    tabular = PurePath(name).suffix.lower() in TABULAR
    try:
        limits.check_upload_sizes([(name, data)])
        columns, rows = preview(data, name, options, n_rows=n_rows)
        return FilePreview(name, columns, rows, tabular)
    except RetrievalError as exc:
        return FilePreview(name, [], [], tabular, str(exc))


def mapping_columns(previews: list[FilePreview]) -> list[str]:
    """Every column of the tabular files, in first-seen order (the choices for the mapping)."""
    return list(dict.fromkeys(c for p in previews if p.tabular for c in p.columns))


def column_plan(previews: list[FilePreview], options: ParseOptions) -> tuple[list[str], list[str]]:
    """What an ingest of the tabular files will take as id, title and text, in words, one line
    per file; and warnings: a file whose ids will be generated (no id column found), or that has
    no text column. From the previews' columns, by the ingest's own detection."""
    lines, warnings = [], []
    for p in previews:
        if not p.tabular or p.error or not p.columns:
            continue
        try:
            found = detected_columns(p.columns, options.mapping, p.name)
        except RetrievalError as exc:
            warnings.append(str(exc))
            continue
        roles = ", ".join(f"{role} ← '{column}'" for role, column in found.items() if column)
        lines.append(f"{p.name}: {roles}")
        if found["id"] is None:
            stem = PurePath(p.name).stem
            warnings.append(f"{p.name}: no id column found (looked for {', '.join(ID_COLUMNS)}), so ids will be "
                            f"generated from the file name and row ('{stem}-2', '{stem}-3', …). If a column holds "
                            "the ids, pick it as the id column.")
    return lines, warnings


def parse_options(id_column: str = DETECT, title_column: str = DETECT, text_column: str = DETECT,
                  text_mode: str = "paragraphs", markdown_max_chars: int = 1500,
                  skip_invalid: bool = False) -> ParseOptions:
    """ParseOptions from the page's choices: DETECT leaves a column to the parser's detection."""
    def pick(value: str) -> str | None:
        return None if value in (DETECT, "") else value

    return ParseOptions(mapping=ColumnMapping(id=pick(id_column), title=pick(title_column), text=pick(text_column)),
                        text_mode=text_mode, markdown_max_chars=int(markdown_max_chars), skip_invalid=skip_invalid)


def model_name(choice: str, path: str = "") -> str | None:
    """The embedding model for a new collection: None (by language), an alias, or a local path."""
    if choice == MODEL_AUTO:
        return None
    if choice == MODEL_PATH:
        if not path.strip():
            raise RetrievalError("Give the folder of a local sentence-transformers model, or pick another model")
        return path.strip()
    return choice


class StageProgress:
    """The Corpus page's ingest bar: `(fraction, text)` for each `(stage, done, total)` report,
    the text giving documents/s and the time left of the stage ("Embedding: 1,024 of 20,000
    documents · 512 docs/s · about 37 s left"); the rate restarts with each stage."""

    def __init__(self, clock=None):
        self._clock = clock
        self._stage: str | None = None
        self._rate: Throughput | None = None

    def __call__(self, stage: str, done: int, total: int) -> tuple[float, str]:
        if stage != self._stage:
            self._stage = stage
            self._rate = Throughput(self._clock) if self._clock else Throughput()
        if not total and not done:  # a stage without documents to count (loading the models)
            return 0.0, f"{stage.capitalize()}…"
        return min(1.0, done / max(total, 1)), f"{stage.capitalize()}: {self._rate.text(done, total)}"


@dataclass
class IngestReport:
    info: CollectionInfo
    corpus: ParsedCorpus
    added: bool
    note: str = ""  # how many documents the encoder truncated ('' when none)

    @property
    def message(self) -> str:
        """The success message: what was written, then the truncation note."""
        verb = "Added" if self.added else "Ingested"
        xl = f"; cross-lingual vectors {self.info.xl_model}" if self.info.xl_model else ""
        graph = "; entity graph off: the Graph page builds it" if self.info.graph == "off" else ""
        text = (f"{verb} {len(self.corpus.documents)} documents: collection '{self.info.label}' now holds "
                f"{self.info.doc_count} ({self.info.model}, language {self.info.language}{xl}{graph}).")
        if self.note:
            text = f"{text} {self.note[:1].upper()}{self.note[1:]}."
        if self.corpus.skipped:
            text = f"{text} {skipped_note(self.corpus.skipped).capitalize()}."
        return text


def ingest(workbench: Workbench, files: list[tuple[str, bytes]], options: ParseOptions, collection: str,
           add: bool = False, model: str | None = None, progress: Progress | None = None,
           cross_lingual: bool | None = None, graph: str = "auto") -> IngestReport:
    """Parse the uploaded files and create the collection named `collection` (any script: it
    becomes the display name) or add to collection `collection` (a table or display name). All
    or nothing: any problem raises RetrievalError (IngestError for input problems) and nothing is
    written. `cross_lingual`: a new collection's (`indexing.plan.wants_cross_lingual`; None: auto);
    `graph`: its entity graph setting (`indexing.graph.graph_setting`: auto, on, off)."""
    collection = display_name(collection or "")
    if not files:
        raise RetrievalError("Upload at least one file first")
    limits.check_upload_sizes(files)
    if add:
        collection = workbench.resolve(collection)
    corpus = parse_files(files, options)
    if progress:
        progress("parsed", len(corpus.documents), len(corpus.documents))
    if add:
        result = workbench.add(collection, corpus, progress=progress)
    else:
        result = workbench.create(collection, corpus, model=model, progress=progress, cross_lingual=cross_lingual,
                                  graph=graph)
    return IngestReport(result.info, corpus, add, result.note)


EVAL_CACHE_PREFIX = "eval-"  # as retrieval.evaluation.beir_cache.beir_collection_name names them


def is_eval_cache(name: str) -> bool:
    """Collections `python -m retrieval evaluate` creates to cache BEIR corpora ('eval-…')."""
    return name.startswith(EVAL_CACHE_PREFIX)


def index_of(names: list[str], current: str | None) -> int:
    """Where a picker of `names` starts: at the sidebar's collection `current` (the one the user
    is looking at), else the first."""
    return names.index(current) if current in names else 0


def caches_last(names: list[str]) -> list[str]:
    """Collections first, evaluation caches last (each group in the given order): for pickers."""
    return [n for n in names if not is_eval_cache(n)] + [n for n in names if is_eval_cache(n)]


def collections_frame(workbench: Workbench) -> pd.DataFrame:
    """One row per collection with its stats (evaluation caches apart: `eval_caches_frame`)."""
    rows = []
    labels = workbench.labels()
    for info in workbench.collections():
        if is_eval_cache(info.name):
            continue
        shown = labels.get(info.name, info.label)
        try:
            stats = workbench.stats(info.name)
        except RetrievalError as exc:
            rows.append({"collection": shown, "table": info.name, "model": info.model, "note": str(exc)})
            continue
        mix = ", ".join(f"{lang} {n}" for lang, n in stats.language_mix.items() if n)
        rows.append({
            "collection": shown,
            "table": info.name,
            "documents": stats.doc_count,
            "truncated": info.truncated,
            "graph index": graph_state(workbench.graph.status(info.name)),
            "avg tokens": round(stats.avg_tokens, 1),
            "avg chars": round(stats.avg_chars, 1),
            "language mix": mix or "—",
            "language": info.language,
            "model": info.model,
            "encoder backend": info.encoder_backend or "not recorded",
            "dim": info.dim,
            "cross-lingual vectors": info.xl_model or "—",
            "table version": stats.version,
            "LanceDB": info.lancedb_version,
            "chunked": stats.chunked_docs,
            "metadata fields": ", ".join(stats.metadata_fields),
            "updated": info.updated,
        })
    frame = pd.DataFrame(rows)
    if "truncated" in frame:
        frame["truncated"] = frame["truncated"].astype("Int64")  # None: not counted
    return frame


def graph_state(status) -> str:
    """A `GraphStatus` in a table cell: 'built', 'pending', 'building 40 %', 'build failed'."""
    if status.state == "building":
        return f"building {status.percent} %"
    return {"current": "built", "failed": "build failed"}.get(status.state, status.state)


def graph_notes(workbench: Workbench) -> list[str]:
    """Per collection whose entity graph is not built: "<name>: graph index: building 40 % …"."""
    labels = workbench.labels()
    return [f"{labels.get(info.name, info.label)}: {status.note}" for info in workbench.collections()
            if not is_eval_cache(info.name) and (status := workbench.graph.status(info.name)).state != "current"]


def truncation_notes(workbench: Workbench) -> list[str]:
    """Per collection (evaluation caches apart) whose documents the encoder truncated, or whose
    count predates the workbench counting it: "<name>: 3 of 120 documents are longer than the
    encoder's 256-token window …" (`indexing.pipeline.truncation_note`)."""
    notes = []
    labels = workbench.labels()
    for info in workbench.collections():
        if is_eval_cache(info.name):
            continue
        shown = labels.get(info.name, info.label)
        if info.truncated is None:
            notes.append(f"{shown}: not counted how many documents are longer than the encoder's token window "
                         "(ingested before the workbench counted them; the next add counts them)")
        elif info.truncated:
            notes.append(f"{shown}: {workbench.truncation_note(info)}")
    return notes


def collections_overview(workbench: Workbench) -> pd.DataFrame:
    """The catalogue only (cheap): name, documents, language, model, last update; evaluation
    caches apart (`eval_caches_frame`)."""
    labels = workbench.labels()
    return pd.DataFrame([
        {"collection": labels.get(i.name, i.label), "documents": i.doc_count, "language": i.language,
         "model": i.model, "updated": i.updated, "description": i.description}
        for i in workbench.collections() if not is_eval_cache(i.name)
    ])


def eval_caches_frame(workbench: Workbench) -> pd.DataFrame:
    """The evaluation caches (from the catalogue): name, documents, model, last update."""
    return pd.DataFrame([
        {"cache": i.name, "documents": i.doc_count, "model": i.model, "updated": i.updated}
        for i in workbench.collections() if is_eval_cache(i.name)
    ], columns=["cache", "documents", "model", "updated"])


def delete_eval_caches(workbench: Workbench, names: list[str]) -> list[str]:
    """Delete the given evaluation caches through the Workbench; the names deleted. Only names
    that are evaluation caches are touched (a stale list from an earlier run cannot delete a
    collection)."""
    deleted = []
    for name in names:
        if is_eval_cache(name) and workbench.exists(name):
            workbench.delete(name)
            deleted.append(name)
    return deleted
