"""The ingest pipeline: parsed documents → checked → tokenised → embedded → entities extracted →
written in one all-or-nothing store write.

    parse (ingest.py) → check_documents → document_rows (tokenize.py, embed.py)
                      → graph_rows (entities.py) → Store.write_collection / Store.append

Everything before the write happens in memory, so a rejected or failed ingest writes nothing; the
store makes the write itself all or nothing (docs/reliability.md). The expensive steps run before
the store's writer lock is taken, so concurrent ingests embed side by side and only their writes
queue; the store re-checks names and ids under the lock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime

import lancedb
import numpy as np
import pyarrow as pa

from .entities import graph_table_rows
from .store import CollectionInfo, Progress, Store, collection_schema, now_iso, validate_collection_name
from .tokenize import TOKENIZER_NAME, corpus_language, document_language, tokenize
from .types import Document, IngestError, ParsedCorpus, RetrievalError


def embedding_text(doc: Document) -> str:
    """What the encoder and BM25 see: title and text together, as BEIR systems index them."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def check_documents(documents: list[Document]) -> None:
    """Last line of defence before a write (parsers report problems with row numbers first)."""
    if not documents:
        raise IngestError("No documents to ingest")
    problems = []
    seen: set[str] = set()
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


def document_rows(documents: list[Document], encoder, progress: Progress | None = None) -> pa.Table:
    """Tokenise and embed in memory: the collection table's rows (`store.collection_schema`)."""
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
    return pa.table(
        {
            "id": [d.id for d in documents],
            "title": [d.title for d in documents],
            "text": [d.text for d in documents],
            "tokens": [" ".join(t) for t in token_lists],
            "n_tokens": pa.array([len(t) for t in token_lists], pa.int32()),
            "language": [document_language(t) for t in texts],
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(np.asarray(vectors, dtype=np.float32).ravel()), encoder.spec.dim
            ),
            "metadata": [json.dumps(d.metadata, ensure_ascii=False, default=str) for d in documents],
            "parent_id": [d.parent_id for d in documents],
            "chunk_index": pa.array([d.chunk_index for d in documents], pa.int32()),
            "start_line": pa.array([d.start_line for d in documents], pa.int32()),
            "end_line": pa.array([d.end_line for d in documents], pa.int32()),
        },
        schema=collection_schema(encoder.spec.dim),
    )


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


def create_collection(store: Store, name: str, corpus: ParsedCorpus, model: str | None = None,
                      description: str = "", progress: Progress | None = None) -> CollectionInfo:
    """Create collection `name` from parsed documents; the model defaults by corpus language.

    Tokenising, embedding and extraction run before the writer lock is taken, so two ingests
    embed at the same time and only their writes queue; the store checks again under the lock
    that the name is free."""
    from .embed import default_model_for, load_encoder

    validate_collection_name(name)
    if store.has_table(name):
        raise RetrievalError(f"Collection {name!r} already exists: add to it, or delete it first")
    check_documents(corpus.documents)
    language = corpus_language(embedding_text(d) for d in corpus.documents)
    encoder = load_encoder(model or default_model_for(language))
    rows = document_rows(corpus.documents, encoder, progress)
    graph = graph_rows(corpus.documents, datetime.now(UTC), progress)
    now = now_iso()
    info = CollectionInfo(
        name=name, model=encoder.spec.name, dim=encoder.spec.dim, tokenizer=TOKENIZER_NAME,
        language=language, doc_count=len(corpus.documents), created=now, updated=now,
        lancedb_version=lancedb.__version__, description=description,
    )
    return index_for_size(store, store.write_collection(info, rows, graph))


def index_for_size(store: Store, info: CollectionInfo) -> CollectionInfo:
    """From `limits.SCALE_DOCS` documents on, (re)build the vector column's ANN index after a
    write (IVF_PQ; the dense source re-scores its shortlist exactly, `refine_factor`), so vector
    search stays in milliseconds; BM25 switches to the native index by itself ('auto' backend).
    Searches go on meanwhile: they read the version before the index until it is committed."""
    from . import limits

    if info.doc_count >= limits.SCALE_DOCS:
        store.build_vector_index(info.name)
    return info


def add_documents(store: Store, name: str, corpus: ParsedCorpus, progress: Progress | None = None) -> CollectionInfo:
    """Add documents to an existing collection with its recorded model. All or nothing; ids
    already in the collection are refused (checked first, and again by the store under the lock)."""
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
    rows = document_rows(corpus.documents, encoder, progress)
    graph = graph_rows(corpus.documents, datetime.now(UTC), progress)
    # A collection ingested before the entity graph existed: its stored documents are indexed too.
    legacy = lambda: graph_rows(stored_documents(store, name), datetime.fromisoformat(info.created))  # noqa: E731
    return index_for_size(store, store.append(name, rows, graph, legacy))
