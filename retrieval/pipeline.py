"""The ingest pipeline: parsed documents → checked → tokenised → embedded → entities extracted →
written in one all-or-nothing store write.

    parse (ingest.py) → check_documents → document_rows (tokenize.py, embed.py)
                      → count_truncated → graph_rows (entities.py)
                      → Store.write_collection / Store.append → IngestResult

A collection that the ingest leaves with `limits.GRAPH_INLINE_MAX` documents or more skips
`graph_rows` (in every path: create, add, stream): its graph is marked "pending" and built
afterwards in batches (`graph_build.build_graph`), so entity extraction never blocks a large
ingest. Below it nothing changes.

The streaming ingest (`ingest_stream`, the CLI's) does the same per batch of a
`ingest.DocumentStream`, inside one `Store.streaming_write`: memory holds one batch, and the
whole ingest is still one all-or-nothing write (see `ingest_stream`).

A new collection's name may be in any script: the store keeps it as the display name and
derives a safe table name from it (`Store.new_names`, names.py). The encoder embeds each
document from its first `max_seq_length` tokens; how many documents were longer is counted at
ingest, kept in the catalogue (`CollectionInfo.truncated`) and said (`truncation_note`). BM25
indexes every token of every document.

Everything before the write happens in memory, so a rejected or failed ingest writes nothing; the
store makes the write itself all or nothing (docs/reliability.md). The expensive steps run before
the store's writer lock is taken, so concurrent ingests embed side by side and only their writes
queue; the store re-checks names and ids under the lock.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import lancedb
import numpy as np
import pyarrow as pa

from .entities import graph_table_rows
from .graph_build import graph_inline
from .ingest import DocumentStream
from .store import XL_COLUMN, CollectionInfo, Progress, Store, collection_schema, now_iso
from .tokenize import TOKENIZER_NAME, corpus_language, document_language, language_from_mix, tokenize
from .types import Document, IngestError, ParsedCorpus, RetrievalError


def embedding_text(doc: Document) -> str:
    """What the encoder and BM25 see: title and text together, as BEIR systems index them."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


@dataclass
class IngestResult:
    """What one ingest did: the collection afterwards, how many documents it wrote, and how many
    of them were longer than the encoder's window of `window` tokens (embedded from their first
    `window` tokens)."""

    info: CollectionInfo
    documents: int
    truncated: int
    window: int

    @property
    def note(self) -> str:
        """The truncation sentence for this ingest ('' when no document was truncated)."""
        return truncation_note(self.truncated, self.documents, self.window)


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


def check_documents(documents: list[Document], seen: set[str] | None = None) -> None:
    """Last line of defence before a write (parsers report problems with row numbers first).
    `seen`: the ids of the batches before (a streaming ingest), updated with these."""
    if not documents:
        raise IngestError("No documents to ingest")
    problems = []
    seen = set() if seen is None else seen
    for doc in documents:
        if not doc.id or not doc.id.strip():
            problems.append("a document has an empty id")
        elif doc.id in seen:
            problems.append(f"id {doc.id!r} appears more than once")
        seen.add(doc.id)
        if not doc.text or not doc.text.strip():
            problems.append(f"document {doc.id!r} has empty text")
    if problems:
        raise IngestError("Documents rejected; nothing was written", problems)


def document_rows(documents: list[Document], encoder, progress: Progress | None = None,
                  xl_encoder=None) -> pa.Table:
    """Tokenise and embed in memory: the collection table's rows (`store.collection_schema`);
    with `xl_encoder` also the cross-lingual vectors (`vector_xl`)."""
    total = len(documents)
    texts = [embedding_text(d) for d in documents]
    token_lists = []
    for i, text in enumerate(texts):
        token_lists.append(tokenize(text))
        if progress and (i % 500 == 0 or i == total - 1):
            progress("tokenising", i + 1, total)
    vectors = encoder.encode_passages(
        texts, progress=(lambda done, n: progress("embedding", done, n)) if progress else None
    )
    xl = {}
    if xl_encoder is not None:
        xl_vectors = xl_encoder.encode_passages(
            texts, progress=(lambda done, n: progress(XL_STAGE, done, n)) if progress else None)
        xl = {XL_COLUMN: _vector_array(xl_vectors, xl_encoder.spec.dim)}
    return pa.table(
        {
            "id": [d.id for d in documents],
            "title": [d.title for d in documents],
            "text": [d.text for d in documents],
            "tokens": [" ".join(t) for t in token_lists],
            "n_tokens": pa.array([len(t) for t in token_lists], pa.int32()),
            "language": [document_language(t) for t in texts],
            "vector": _vector_array(vectors, encoder.spec.dim),
            **xl,
            "metadata": [json.dumps(d.metadata, ensure_ascii=False, default=str) for d in documents],
            "parent_id": [d.parent_id for d in documents],
            "chunk_index": pa.array([d.chunk_index for d in documents], pa.int32()),
            "start_line": pa.array([d.start_line for d in documents], pa.int32()),
            "end_line": pa.array([d.end_line for d in documents], pa.int32()),
        },
        schema=collection_schema(encoder.spec.dim, xl_encoder.spec.dim if xl_encoder is not None else 0),
    )


def _vector_array(vectors, dim: int) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(vectors, dtype=np.float32).ravel()), dim)


XL_STAGE = "embedding for other languages"


def wants_cross_lingual(language: str, model: str, documents: int, requested: bool | None = None) -> bool:
    """Whether a new collection gets cross-lingual vectors (`vector_xl`, multilingual E5): so that
    a question in the other language finds its documents with default settings (Chinese
    questions over English XQuAD paragraphs: nDCG@10 0.095 with MiniLM alone, 0.815 with E5;
    docs/experiments/cross-lingual.md), while the collection's own model (MiniLM for English,
    which E5 would cost 0.012–0.013 nDCG@10) keeps serving queries in its language.

    Only a one-language collection ('en' or 'zh', which a query can cross) whose model is not
    the multilingual one needs them. `requested` None (auto): below
    `limits.CROSS_LINGUAL_AUTO_MAX` documents, where the second encoder (~3× the ingest's CPU) is
    affordable; True / False decide for the user."""
    from . import limits
    from .embed import E5

    if language not in ("en", "zh") or model == E5 or requested is False:
        return False
    return requested is True or documents < limits.CROSS_LINGUAL_AUTO_MAX


def _xl_encoder(info: CollectionInfo):
    """The loaded encoder of a collection's cross-lingual vectors, None when it has none."""
    from .embed import load_encoder

    if not info.xl_model:
        return None
    encoder = load_encoder(info.xl_model)
    if encoder.spec.dim != info.xl_dim:
        raise RetrievalError(f"Model {info.xl_model!r} now gives {encoder.spec.dim}-d vectors, "
                             f"the collection's cross-lingual column holds {info.xl_dim}-d ones")
    return encoder


def graph_rows(documents: Iterable[Document], ingested: datetime,
               progress: Progress | None = None) -> dict[str, list[dict]]:
    """Entities, event–entity links and event times of `documents`, in memory (entities.py)."""
    documents = list(documents)
    if progress:
        progress("finding entities", 0, len(documents))
    rows = graph_table_rows(documents, ingested)
    if progress:
        progress("finding entities", len(documents), len(documents))
    return rows


def stored_documents(store: Store, name: str) -> list[Document]:
    """The collection's documents as stored (id, title, text, metadata), in storage order."""
    stored = store.column(name, ["id", "title", "text", "metadata"]).to_pylist()
    return [Document(id=r["id"], text=r["text"] or "", title=r["title"] or "",
                     metadata=json.loads(r["metadata"] or "{}")) for r in stored]


def count_truncated(documents: Iterable[Document], encoder) -> int:
    """How many documents' embedding text is longer than the encoder's token window."""
    return encoder.count_truncated([embedding_text(d) for d in documents])


def create_collection(store: Store, name: str, corpus: ParsedCorpus, model: str | None = None,
                      description: str = "", progress: Progress | None = None,
                      cross_lingual: bool | None = None) -> IngestResult:
    """Create a collection named `name` (any script: the display name; the table name is derived,
    `Store.new_names`) from parsed documents; the model defaults by corpus language.

    Tokenising, embedding and extraction run before the writer lock is taken, so two ingests
    embed at the same time and only their writes queue; the store checks again under the lock
    that the name is free. `cross_lingual`: `wants_cross_lingual`'s `requested` (None: auto)."""
    from .embed import E5, default_model_for, load_encoder

    table, display = store.new_names(name)
    check_documents(corpus.documents)
    language = corpus_language(embedding_text(d) for d in corpus.documents)
    encoder = load_encoder(model or default_model_for(language))
    xl = wants_cross_lingual(language, encoder.spec.name, len(corpus.documents), cross_lingual)
    xl_encoder = load_encoder(E5) if xl else None
    rows = document_rows(corpus.documents, encoder, progress, xl_encoder)
    truncated = count_truncated(corpus.documents, encoder)
    inline = graph_inline(len(corpus.documents))
    graph = graph_rows(corpus.documents, datetime.now(UTC), progress) if inline else None
    now = now_iso()
    info = CollectionInfo(
        name=table, model=encoder.spec.name, dim=encoder.spec.dim, tokenizer=TOKENIZER_NAME,
        language=language, doc_count=len(corpus.documents), created=now, updated=now,
        lancedb_version=lancedb.__version__, description=description, display_name=display,
        truncated=truncated, graph="" if inline else "pending",
        xl_model=xl_encoder.spec.name if xl_encoder else "", xl_dim=xl_encoder.spec.dim if xl_encoder else 0,
    )
    info = index_for_size(store, store.write_collection(info, rows, graph))
    return IngestResult(info, len(corpus.documents), truncated, encoder.spec.max_seq_length)


def index_for_size(store: Store, info: CollectionInfo) -> CollectionInfo:
    """From `limits.SCALE_DOCS` documents on, after a write: merge the write's data files
    (`Store.compact`), (re)build the vector columns' ANN indexes (`limits.ANN_INDEX`; the dense
    source re-scores its shortlist exactly), so vector search stays in milliseconds, and a BTREE
    index on `id`, so reading the candidates' rows does not scan the table; BM25 switches to the
    native index by itself ('auto' backend). Searches go on meanwhile: they read the version
    before each step until it is committed."""
    from . import limits

    if info.doc_count >= limits.SCALE_DOCS:
        store.build_vector_index(info.name)
        if info.xl_model:
            store.build_vector_index(info.name, column=XL_COLUMN)
        store.build_id_index(info.name)
        # Last: LanceDB merges only files that the same indexes cover, so a write's new files
        # (not yet indexed) stay apart until every index covers them.
        store.compact(info.name)
    return info


def add_documents(store: Store, name: str, corpus: ParsedCorpus, progress: Progress | None = None) -> IngestResult:
    """Add documents to an existing collection (its table name) with its recorded model. All or
    nothing; ids already in the collection are refused (checked first, and again by the store
    under the lock)."""
    from .embed import load_encoder

    info = store.info(name)
    check_documents(corpus.documents)
    clashes = store.existing_ids(name, [d.id for d in corpus.documents])
    if clashes:
        raise IngestError(
            f"{len(clashes)} document id(s) already exist in {name!r}; nothing was added",
            [f"id {i!r} is already in the collection" for i in sorted(clashes)],
        )
    encoder = load_encoder(info.model)
    if encoder.spec.dim != info.dim:
        raise RetrievalError(f"Model {info.model!r} now gives {encoder.spec.dim}-d vectors, "
                             f"the collection holds {info.dim}-d ones")
    rows = document_rows(corpus.documents, encoder, progress, _xl_encoder(info))
    truncated = count_truncated(corpus.documents, encoder)
    inline = graph_inline(info.doc_count + len(corpus.documents), info)
    graph = graph_rows(corpus.documents, datetime.now(UTC), progress) if inline else None
    # A collection ingested before the entity graph (or the truncation count) existed: its stored
    # documents are indexed (counted) too.
    legacy = lambda: graph_rows(stored_documents(store, name), datetime.fromisoformat(info.created))  # noqa: E731
    stored = lambda: count_truncated(stored_documents(store, name), encoder)  # noqa: E731
    info = index_for_size(store, store.append(name, rows, graph, legacy, truncated, stored))
    return IngestResult(info, len(corpus.documents), truncated, encoder.spec.max_seq_length)


def ingest_stream(store: Store, name: str, stream: DocumentStream, add: bool = False, model: str | None = None,
                  description: str = "", progress: Progress | None = None,
                  cross_lingual: bool | None = None) -> IngestResult:
    """Create collection `name` (any script, as `create_collection`) from a `DocumentStream`, or
    with `add` add it to collection `name` (its table name), batch by batch: each batch is
    checked (ids also against every batch before: one set of ids is kept, small next to texts),
    tokenised, embedded, its entities found, and appended, so memory holds one batch.

    All or nothing: the batches are written inside ONE `Store.streaming_write`, which holds the
    collection's writer lock from the first batch to the catalogue entry (other writers to the
    collection wait for the whole ingest) under one journal, so a problem in any batch, or a kill
    anywhere, leaves the collection exactly as before (rolled back at once, or by the next holder
    of the lock after a kill). Unlike the one-shot ingest, embedding runs under the lock.

    The model of a new collection, unless given, is chosen by the language of every document, as
    in the one-shot ingest: `stream_language` reads the stream once first (no embedding), which
    also finds any parse problem before anything is written (skipped when `model` is given and
    the language could not give the collection cross-lingual vectors: the multilingual model,
    `cross_lingual` False, or too many documents for them by default). `progress("reading", done,
    total)` during that pass, then `progress("ingesting", documents done, stream.total)` after
    every embedding chunk and batch. `cross_lingual`: as `create_collection`'s."""
    from . import limits
    from .embed import E5, default_model_for, load_encoder

    batches = stream.batches()
    first = next(batches, None)
    if first is None:
        raise IngestError("No documents to ingest")
    if add:
        info = store.info(name)
        encoder = load_encoder(info.model)
        if encoder.spec.dim != info.dim:
            raise RetrievalError(f"Model {info.model!r} now gives {encoder.spec.dim}-d vectors, "
                                 f"the collection holds {info.dim}-d ones")
        xl_encoder = _xl_encoder(info)
    else:
        table, display = store.new_names(name)
        # A named model needs the language only to decide the cross-lingual vectors: no reading
        # pass when nothing could get them (the placeholder is replaced by the stored mix at the end).
        xl_possible = cross_lingual is True or (cross_lingual is None and stream.total < limits.CROSS_LINGUAL_AUTO_MAX)
        language = stream_language(stream, progress) if not model or (model != E5 and xl_possible) else "mixed"
        encoder = load_encoder(model or default_model_for(language))
        xl = wants_cross_lingual(language, encoder.spec.name, stream.total, cross_lingual)
        xl_encoder = load_encoder(E5) if xl else None
        now = now_iso()
        info = CollectionInfo(
            name=table, model=encoder.spec.name, dim=encoder.spec.dim, tokenizer=TOKENIZER_NAME,
            language=language, doc_count=0, created=now, updated=now,
            lancedb_version=lancedb.__version__, description=description, display_name=display, truncated=0,
            xl_model=xl_encoder.spec.name if xl_encoder else "", xl_dim=xl_encoder.spec.dim if xl_encoder else 0,
        )
    total = stream.total
    inline = graph_inline(info.doc_count + total, info if add else None)
    if not inline:
        info.graph = "pending"
    done = 0
    seen: set[str] = set()
    ingested = datetime.now(UTC)
    legacy = lambda: graph_rows(stored_documents(store, name), datetime.fromisoformat(info.created))  # noqa: E731
    stored = lambda: count_truncated(stored_documents(store, name), encoder)  # noqa: E731
    with store.streaming_write(info, create=not add, legacy_graph_rows=legacy if add else None,
                               stored_truncated=stored if add else None, graph=inline) as writer:
        for batch in itertools.chain([first], batches):
            check_documents(batch, seen)
            rows = document_rows(batch, encoder, _within(progress, done, total), xl_encoder)
            writer.append(rows, graph_table_rows(batch, ingested) if inline else None,
                          count_truncated(batch, encoder))
            done += len(batch)
            if progress:
                progress("ingesting", done, total)
    info = index_for_size(store, writer.info)
    return IngestResult(info, done, writer.truncated, encoder.spec.max_seq_length)


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


def _within(progress: Progress | None, done: int, total: int) -> Progress | None:
    """A batch's embedding progress as the stream's: documents done before it plus embedded in it."""
    if progress is None:
        return None

    def report(stage: str, embedded: int, _: int) -> None:
        if stage == "embedding":
            progress("ingesting", done + embedded, total)
    return report
