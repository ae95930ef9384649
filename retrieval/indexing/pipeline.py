"""The write path: the only way documents become rows. Every ingest — the Corpus page's upload,
the CLI's `ingest`, the MCP write tools, the evaluation's BEIR cache, examples/ray_embed.py — is
a stream of document batches through the same steps:

    check → tokenise → embed every vector column the collection has (its model's, and the
    cross-lingual one: `plan.vector_models`) → extract entities (below `limits.GRAPH_INLINE_MAX`
    documents, unless the collection's graph setting is off: `graph.graph_setting`) → write the
    batch (`writer.open_write`: one journaled transaction over all batches) → full-text index,
    entities table, catalogue entry → indexes by size → compaction

What is derived is what the sources declare (`SourceSpec.derives`, read by `plan.py`). Only the
embedding step may run elsewhere: `ingest_stream(..., embedding=...)` takes any function that
maps record batches to the same batches with their vector columns (`derive.EmbedBatches` is the
UDF; examples/ray_embed.py maps it over Ray Data batches), so a distributed ingest writes
exactly what the CLI writes.

One-shot ingests (`create_collection`, `add_documents`: a parsed corpus, already in memory) derive
their one batch before the collection's writer lock is taken, so two ingests embed side by side
and only their writes queue; the writer re-checks names and ids under the lock. A streaming
ingest (`ingest_stream`) derives each batch under the lock, so memory holds a few batches (the
next ones read and tokenised in a worker thread, at most `AHEAD` waiting: overlap.py): other
writers to that collection wait for the whole ingest (docs/reliability.md).

A new collection's name may be in any script: the store keeps it as the display name and derives
a safe table name from it (`Store.new_names`, names.py). The encoder embeds each document from its
first `max_seq_length` tokens; how many documents were longer is counted at ingest, kept in the
catalogue (`CollectionInfo.truncated`) and said (`truncation_note`). BM25 indexes every token.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa

import retrieval.indexing.plan as plan
from retrieval import limits
from retrieval.indexing.derive import (
    EmbedBatches,
    check_documents,
    collection_rows,
    count_truncated,
    document_records,
    documents_of,
    embedding_text,
    graph_rows,
)
from retrieval.indexing.graph import OFF, graph_inline, graph_setting
from retrieval.indexing.indexes import index_for_size
from retrieval.indexing.overlap import Ahead
from retrieval.indexing.readers.stream import DocumentStream
from retrieval.indexing.seen_ids import SeenIds
from retrieval.indexing.writer import Batch, clash_error, open_write
from retrieval.models import embed
from retrieval.models.embed import E5, default_model_for
from retrieval.store import CollectionInfo, Progress, Store, stored_documents
from retrieval.store.names import confusable_note
from retrieval.text.tokenize import analyser, corpus_language, document_language, language_from_mix
from retrieval.types import Document, ParsedCorpus

log = logging.getLogger(__name__)

# Batches a streaming ingest reads and tokenises ahead of the one it embeds and writes: memory
# holds at most AHEAD + 2 batches of records (`overlap.Ahead`) plus the one being written.
# 0: one step after the other, in the caller's thread (what the ingest did before the overlap).
AHEAD = 2

# column → model, record batches → the same batches with those vector columns added, in order.
Embedding = Callable[[Mapping[str, str], Iterator[pa.Table]], Iterator[pa.Table]]


@dataclass
class IngestResult:
    """What one ingest did: the collection afterwards, how many documents it wrote, and how many
    of them were longer than the encoder's window of `window` tokens (embedded from their first
    `window` tokens)."""

    info: CollectionInfo
    documents: int
    truncated: int
    window: int
    index_error: str = ""  # why the indexes by size failed after the write committed ('' built or none due)
    name_note: str = ""  # a new name that looks like an existing one (`names.confusable_note`)

    @property
    def note(self) -> str:
        """The truncation sentence for this ingest, what to do when its indexes failed, and a
        look-alike name's warning ('' when there is none of them)."""
        notes = [self.name_note, truncation_note(self.truncated, self.documents, self.window)]
        if self.index_error:
            notes.append(f"the documents are written, but building the collection's indexes failed "
                         f"({self.index_error}): searches read it without them (slower) until "
                         f"`python -m retrieval collections index {self.info.name}` builds them")
        return "; ".join(n for n in notes if n)


def truncation_note(truncated: int | None, documents: int, window: int | None) -> str:
    """'3 of 120 documents are longer than the encoder's 256-token window and were embedded from
    their first 256 tokens; BM25 indexes all of their text'. '' when none was (or the count is
    unknown: None); "the encoder's token window" when the window is unknown (None or 0)."""
    if not truncated:
        return ""
    one = truncated == 1
    span = f"{window}-token window" if window else "token window"
    first = f"first {window} tokens" if window else "first tokens"
    their = "its" if one else "their"
    return (f"{truncated} of {documents} document{'' if documents == 1 else 's'} {'is' if one else 'are'} longer "
            f"than the encoder's {span} and {'was' if one else 'were'} embedded from {their} {first}; "
            f"BM25 indexes all of {their} text")


def embed_here(models: Mapping[str, str], records: Iterable[pa.Table],
               progress: Progress | None = None) -> Iterator[pa.Table]:
    """The embedding step in this process, one batch at a time (lazily: a stream's memory holds
    one batch)."""
    udf = EmbedBatches(models)
    for batch in records:
        yield udf(batch, progress)


LOADING = "loading the embedding models"  # the stage reported before a model's first load


def announce_loading(progress: Progress | None, models) -> None:
    """`progress(LOADING, 0, 0)` when one of `models` is not loaded in this process yet: a first
    load takes seconds, and a built-in's first use on a machine also builds its int8 export
    (MiniLM ≈ 8 s, E5 ≈ 40 s), which a bar should not spend looking stuck."""
    if progress and not all(embed.is_loaded(m) for m in models):
        progress(LOADING, 0, 0)


def create_collection(store: Store, name: str, corpus: ParsedCorpus, model: str | None = None,
                      description: str = "", progress: Progress | None = None,
                      cross_lingual: bool | None = None, graph: str = "auto") -> IngestResult:
    """Create a collection named `name` (any script: the display name; the table name is derived,
    `Store.new_names`) from parsed documents, in one batch derived before the lock; the model
    defaults by corpus language. `cross_lingual`: `plan.wants_cross_lingual`'s `requested`
    (None: auto). `graph`: its entity graph setting (`graph.graph_setting`: auto, on, off)."""
    table, display = store.new_names(name)
    name_note = confusable_note(display, store.display_names().values())
    documents = check_documents(corpus.documents)
    language = corpus_language(embedding_text(d) for d in documents)
    model = model or default_model_for(language)
    announce_loading(progress, [model, *([E5] if cross_lingual is not False else [])])
    info = plan.new_collection(table, display, language, model, len(documents), cross_lingual, description)
    info.graph = _graph_state(graph, len(documents), documents)
    result = write_documents(store, info, [documents], len(documents), create=True, progress=progress)
    result.name_note = name_note
    return result


def add_documents(store: Store, name: str, corpus: ParsedCorpus, progress: Progress | None = None) -> IngestResult:
    """Add documents to an existing collection (its table name) with its recorded models, in one
    batch derived before the lock. All or nothing; ids already in the collection are refused
    (checked first, and again under the lock)."""
    info = store.info(name)
    documents = check_documents(corpus.documents)
    clashes = store.existing_ids(name, [d.id for d in documents])
    if clashes:
        raise clash_error(name, clashes)
    return write_documents(store, info, [documents], len(documents), create=False, progress=progress)


def ingest_stream(store: Store, name: str, stream: DocumentStream, add: bool = False, model: str | None = None,
                  description: str = "", progress: Progress | None = None,
                  cross_lingual: bool | None = None, embedding: Embedding | None = None,
                  graph: str = "auto") -> IngestResult:
    """Create collection `name` (any script, as `create_collection`) from a `DocumentStream`, or
    with `add` add it to collection `name` (its table name), batch by batch under the lock, so
    memory holds one batch; still all or nothing (module doc).

    The model of a new collection, unless given, is chosen by the language of every document, as
    in the one-shot ingest: `stream_language` reads the stream once first (no embedding), which
    also finds any parse problem before anything is written (skipped when `model` is given and
    the language could not give the collection cross-lingual vectors: the multilingual model,
    `cross_lingual` False, or too many documents for them by default). `progress("reading", done,
    total)` during that pass, then `progress("ingesting", documents done, stream.total)` after
    every embedding chunk and batch. `embedding`: where the embedding step runs (default: here,
    `embed_here`). `graph`: a new collection's entity graph setting (`graph.graph_setting`; "auto"
    looks at the first batch for chunks of files); an add keeps the collection's."""
    batches = stream.batches()
    first = next(batches, None)
    if first is None:
        check_documents([])  # "No documents to ingest"
    name_note = ""
    if add:
        info = store.info(name)
    else:
        table, display = store.new_names(name)
        name_note = confusable_note(display, store.display_names().values())
        # A named model needs the language only to decide the cross-lingual vectors: no reading
        # pass when nothing could get them (the placeholder is replaced by the stored mix at the end).
        xl_possible = cross_lingual is True or (cross_lingual is None and stream.total < limits.CROSS_LINGUAL_AUTO_MAX)
        language = stream_language(stream, progress) if not model or (model != E5 and xl_possible) else "mixed"
        announce_loading(progress, [model or default_model_for(language), *([E5] if xl_possible else [])])
        info = plan.new_collection(table, display, language, model or default_model_for(language), stream.total,
                                   cross_lingual, description)
        info.graph = _graph_state(graph, stream.total, first)
    result = write_documents(store, info, _chained(first, batches), stream.total, create=not add, progress=progress,
                             streamed=True, embedding=embedding)
    result.name_note = name_note
    return result


def write_documents(store: Store, info: CollectionInfo, batches: Iterable[list[Document]], count: int,
                    create: bool, progress: Progress | None = None, streamed: bool = False,
                    embedding: Embedding | None = None) -> IngestResult:
    """Derive and write `count` documents, in batches, into collection `info` (new when `create`,
    else its catalogue entry as read before the write): every batch checked (ids also against
    every batch before), tokenised, embedded (`embedding`, default here), its entities found
    when the collection stays below `limits.GRAPH_INLINE_MAX` documents, then written in ONE
    transaction (`writer.open_write`), then the indexes its size calls for.

    One-shot (`streamed` False): every batch is derived before the writer lock is taken, and
    `progress` hears each stage ("tokenising", "embedding", "finding entities" …). Streamed: each
    batch is derived under the lock as it is written (memory: a few batches, `AHEAD`), and
    `progress` hears ("ingesting", documents done, `count`)."""
    announce_loading(progress, plan.vector_models(info).values())
    encoders = plan.encoders_for(info)  # every column's encoder loaded and checked first
    encoder = encoders["vector"]
    done = [0]  # documents written so far: where a batch's embedding progress starts
    stage_progress = None if streamed else progress
    embed_progress = _within(progress, done, count) if streamed else progress
    embed = embedding or functools.partial(embed_here, progress=embed_progress)
    inline = graph_inline(info.doc_count + count, info)
    ingested = datetime.now(UTC)
    seen = SeenIds()  # every batch's ids, 8 bytes each (a set of str grew ~92 MB at 1M)
    # Appended documents are tokenised as the collection's own were (its recorded analyser).
    analyse = analyser(info.tokenizer)
    records = (document_records(check_documents(batch, seen), stage_progress, analyse) for batch in batches)
    # Streamed: reading, checking and tokenising batch n+1 (pure Python) overlap the embedding and
    # the write of batch n (outside the GIL); at most AHEAD batches wait between them (overlap.py).
    ahead = Ahead(records, AHEAD, name="ingest-tokenise") if streamed and AHEAD else None
    derived: Iterable[Batch] = (_batch(embedded, info, encoder, ingested if inline else None, stage_progress)
                                for embedded in embed(plan.vector_models(info), ahead or records))
    if not streamed:
        derived = list(derived)  # before the lock: tokenise, embed, extract
    # A collection ingested before the entity graph (or the truncation count) existed: its stored
    # documents are indexed (counted) too.
    legacy = lambda: graph_rows(stored_documents(store, info.name), datetime.fromisoformat(info.created))  # noqa: E731
    stored = lambda: count_truncated(stored_documents(store, info.name), encoder)  # noqa: E731
    with open_write(store, info, create, legacy_graph_rows=None if create else legacy,
                    stored_truncated=None if create else stored, graph=inline,
                    backends=[e.backend for e in encoders.values()]) as writer, \
            ahead or contextlib.nullcontext():
        for batch in derived:
            writer.append(batch)
            done[0] += batch.rows.num_rows
            if progress and streamed:
                progress("ingesting", done[0], count)
    # After the commit, outside its transaction: a failure here (another process cleared the
    # collection meanwhile, a full disk) leaves the documents written, so the ingest succeeded
    # and says what is missing rather than report a failure that a retry would contradict.
    info, index_error = writer.info, ""
    try:
        info = index_for_size(store, writer.info)
    except Exception as exc:
        log.warning("building the indexes of %s after its write failed", info.name, exc_info=True)
        index_error = f"{type(exc).__name__}: {exc}"
    return IngestResult(info, done[0], writer.truncated, encoder.spec.max_seq_length, index_error)


def _batch(embedded: pa.Table, info: CollectionInfo, encoder, ingested: datetime | None,
           progress: Progress | None) -> Batch:
    """An embedded batch of records as a `Batch` to write: the collection rows, the entity graph
    rows dated `ingested` (None: the graph is deferred; none either when no source reads it) and
    the truncation count."""
    documents = documents_of(embedded)
    rows = collection_rows(embedded, info.dim, info.xl_dim)
    truncated = count_truncated(documents, encoder)
    graph = graph_rows(documents, ingested, progress) if ingested is not None and plan.derives_graph() else None
    return Batch(rows, graph, truncated)


def stream_language(stream: DocumentStream, progress: Progress | None = None) -> str:
    """The corpus language of every document of `stream` (`corpus_language`, as the one-shot
    ingest decides it), in one reading pass without embedding (parsing only: seconds for a
    million JSONL lines, next to the hour the encoder takes); a problem in any batch is found
    here, before anything is written. `progress("reading", done, total)` per batch."""
    mix: list[str] = []
    done = 0
    for batch in stream.batches():
        mix.extend(document_language(embedding_text(d)) for d in batch)
        done += len(batch)
        if progress:
            progress("reading", done, stream.total)
    return language_from_mix(mix)


def _chained(first: list[Document] | None, rest: Iterator[list[Document]]) -> Iterator[list[Document]]:
    if first is not None:
        yield first
    yield from rest


def _graph_state(setting: str, documents: int, sample: list[Document]) -> str:
    """A new collection's `CollectionInfo.graph` before its first write: "off" when its graph
    setting resolves so (`graph.graph_setting`; chunks of files are looked for in `sample`), else
    "" (the write makes it current, or pending when the collection is large)."""
    chunked = any(d.parent_id for d in sample)
    return OFF if graph_setting(setting, documents, chunked) == OFF else ""


def _within(progress: Progress | None, done: list[int], total: int) -> Progress | None:
    """A batch's embedding progress as the stream's: documents written before it (`done[0]`, read
    when reported) plus those embedded in it."""
    if progress is None:
        return None

    def report(stage: str, embedded: int, _: int) -> None:
        if stage == "embedding":
            progress("ingesting", done[0] + embedded, total)
    return report
