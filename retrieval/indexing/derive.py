"""What an ingest derives from one batch of documents, step by step (each a pure function of the
batch, so a batch can be derived anywhere: here, or the embedding step on Ray workers):

    check_documents  → document_records (tokenise: tokens, n_tokens, language; metadata as JSON)
                     → EmbedBatches     (the embedding step: one vector column per model)
                     → collection_rows  (the collection table's columns, `store.collection_schema`)
    count_truncated, graph_rows (entity extraction) beside them.

`EmbedBatches` is the embedding UDF: a table of document records in, the same table with its
vector columns added out. The in-process ingest calls it batch by batch; examples/ray_embed.py
maps it over Ray Data batches (`map_batches`), so both write the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

import numpy as np
import pyarrow as pa

from retrieval.indexing.seen_ids import SeenIds
from retrieval.models import embed  # `embed.load_encoder` looked up per call: a test may swap the encoder
from retrieval.store import XL_COLUMN, Progress, collection_schema
from retrieval.text.entity_tables import graph_table_rows
from retrieval.text.passages import embedding_text, title_and_text
from retrieval.text.tokenize import document_language, tokenize
from retrieval.types import Document, IngestError

XL_STAGE = "embedding for other languages"  # the progress stage of the cross-lingual column
# A record's fields besides the derived ones, as `Document` names them (metadata: JSON text).
DOCUMENT_FIELDS = ("id", "title", "text", "metadata", "parent_id", "chunk_index", "start_line", "end_line")
_INT32_FIELDS = ("chunk_index", "start_line", "end_line")


def check_documents(documents: list[Document], seen: SeenIds | None = None) -> list[Document]:
    """Last line of defence before a write (parsers report problems with row numbers first):
    no empty id, no document with neither a title nor a text, no id twice. `seen`: the ids of the
    batches before (a streaming ingest), updated with these. Returns `documents`."""
    if not documents:
        raise IngestError("No documents to ingest")
    problems = []
    seen = SeenIds() if seen is None else seen
    ids = [doc.id for doc in documents]
    earlier = seen.seen_before(ids)
    in_batch: set[str] = set()
    for doc, seen_earlier in zip(documents, earlier, strict=True):
        if not doc.id or not doc.id.strip():
            problems.append("a document has an empty id")
        elif seen_earlier or doc.id in in_batch:
            problems.append(f"id {doc.id!r} appears more than once")
        in_batch.add(doc.id)
        if not (doc.text or "").strip() and not (doc.title or "").strip():
            problems.append(f"document {doc.id!r} has neither a title nor a text")
    seen.add(ids)
    if problems:
        raise IngestError("Documents rejected; nothing was written", problems, skippable=True)
    return documents


def document_records(documents: list[Document], progress: Progress | None = None,
                     analyse: Callable[[str], list[str]] = tokenize) -> pa.Table:
    """The batch as records: the documents' fields (metadata as the JSON text the collection
    stores) and what tokenising derives with `analyse` (the collection's analyser, `tokenize`
    for a new one: tokens space-joined, n_tokens, language).
    `progress("tokenising", done, total)` every 500 documents."""
    total = len(documents)
    token_lists = []
    for i, doc in enumerate(documents):
        token_lists.append(analyse(embedding_text(doc)))
        if progress and (i % 500 == 0 or i == total - 1):
            progress("tokenising", i + 1, total)
    columns: dict[str, pa.Array | list] = {f: [getattr(d, f) for d in documents] for f in DOCUMENT_FIELDS}
    # No title is stored as null, not "": Lance lays out a column of only "" so that taking 10
    # rows of 1M reads 7.5 ms of it, a null column 2 ms (docs/experiments/peers.md). Rows read
    # back give "" again (`Store.documents`, `documents_of`).
    columns["title"] = [d.title or None for d in documents]
    columns["metadata"] = [json.dumps(d.metadata, ensure_ascii=False, default=str) for d in documents]
    for field in _INT32_FIELDS:
        columns[field] = pa.array(columns[field], pa.int32())
    columns["tokens"] = [" ".join(t) for t in token_lists]
    columns["n_tokens"] = pa.array([len(t) for t in token_lists], pa.int32())
    columns["language"] = [document_language(embedding_text(d)) for d in documents]
    return pa.table(columns)


def documents_of(records: pa.Table) -> list[Document]:
    """The documents a table of records holds (the inverse of `document_records`' fields)."""
    fields = records.select(list(DOCUMENT_FIELDS)).to_pylist()
    return [Document(**{**r, "title": r["title"] or "", "metadata": json.loads(r["metadata"] or "{}")})
            for r in fields]


class EmbedBatches:
    """The embedding step as a batch UDF: `udf(records)` is `records` plus one vector column per
    entry of `models` (column → model name, e.g. {"vector": MiniLM, "vector_xl": E5}), each row
    the unit passage embedding of `embedding_text(title, text)`. Encoders load once per process
    (`embed.load_encoder`), so a Ray actor loads them once, not per batch."""

    def __init__(self, models: Mapping[str, str]):
        self.encoders = {column: embed.load_encoder(model) for column, model in models.items()}

    @classmethod
    def of(cls, encoders: Mapping[str, object]) -> EmbedBatches:
        """The UDF over already loaded encoders (anything with `spec.dim` and `encode_passages`)."""
        udf = cls({})
        udf.encoders = dict(encoders)
        return udf

    def __call__(self, records: pa.Table, progress: Progress | None = None) -> pa.Table:
        texts = [title_and_text(title, text) for title, text in zip(
            records.column("title").to_pylist(), records.column("text").to_pylist(), strict=True)]
        for column, encoder in self.encoders.items():
            stage = "embedding" if column == "vector" else XL_STAGE
            report = (lambda done, n, stage=stage: progress(stage, done, n)) if progress else None
            vectors = encoder.encode_passages(texts, progress=report)
            records = records.append_column(column, vector_array(vectors, encoder.spec.dim))
        return records


def vector_array(vectors, dim: int) -> pa.FixedSizeListArray:
    """An n × dim matrix as an Arrow column of float32 vectors of size `dim`."""
    return pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(vectors, dtype=np.float32).ravel()), dim)


def collection_rows(embedded: pa.Table, dim: int, xl_dim: int = 0) -> pa.Table:
    """Embedded records as the collection table's rows: its columns in its order
    (`collection_schema(dim, xl_dim)`). A vector column that came back in another Arrow type (Ray
    Data hands back its own tensor type, or variable-size lists) is cast to the schema's."""
    schema = collection_schema(dim, xl_dim)
    columns = []
    for field in schema:
        column = embedded.column(field.name)
        if column.type != field.type and pa.types.is_fixed_size_list(field.type):
            matrix = np.asarray(column.to_numpy(zero_copy_only=False).tolist(), dtype=np.float32)
            column = vector_array(matrix, field.type.list_size)
        columns.append(column.cast(field.type) if column.type != field.type else column)
    return pa.Table.from_arrays(columns, schema=schema)


def document_rows(documents: list[Document], encoder, progress: Progress | None = None,
                  xl_encoder=None) -> pa.Table:
    """Tokenise and embed in memory, in this process: the collection table's rows; with
    `xl_encoder` also the cross-lingual vectors (`vector_xl`)."""
    encoders = {"vector": encoder, **({XL_COLUMN: xl_encoder} if xl_encoder is not None else {})}
    embedded = EmbedBatches.of(encoders)(document_records(documents, progress), progress)
    return collection_rows(embedded, encoder.spec.dim, xl_encoder.spec.dim if xl_encoder is not None else 0)


def count_truncated(documents: Iterable[Document], encoder) -> int:
    """How many documents' embedding text is longer than the encoder's token window."""
    return encoder.count_truncated([embedding_text(d) for d in documents])


def graph_rows(documents: Iterable[Document], ingested: datetime,
               progress: Progress | None = None) -> dict[str, list[dict]]:
    """Entities, event–entity links and event times of `documents`, in memory (entity_tables.py)."""
    documents = list(documents)
    if progress:
        progress("finding entities", 0, len(documents))
    rows = graph_table_rows(documents, ingested)
    if progress:
        progress("finding entities", len(documents), len(documents))
    return rows
