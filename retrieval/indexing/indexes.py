"""The indexes a collection gets, as its sources declare them (`plan.py`): LanceDB's native
full-text index after every write, and from `limits.SCALE_DOCS` documents an ANN index per vector
column, a BTREE index on `id` and a compaction of the write's files (`index_for_size`), which
also adds a write's rows to the indexes it keeps (`needs_training`).
"""

from __future__ import annotations

import warnings

import retrieval.indexing.plan as plan
from retrieval import limits
from retrieval.store import CollectionInfo, Store, counts_as_write


def index_text(table, column: str) -> None:
    """(Re)build the native BM25 index over our own tokens in `column` (whitespace-separated),
    with LanceDB's processing off, so both BM25 backends see the same terms."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        table.create_fts_index(
            column, use_tantivy=False, replace=True, base_tokenizer="whitespace",
            lower_case=False, stem=False, remove_stop_words=False, ascii_folding=False,
            max_token_length=None,
        )


def index_texts(table) -> None:
    """Every declared full-text index of a collection table (`plan.text_index_columns`)."""
    for column in plan.text_index_columns():
        index_text(table, column)


@counts_as_write
def compact(store: Store, name: str) -> None:
    """Merge the collection's small data files into large ones (LanceDB `optimize`: the rows
    and every index stay valid; versions older than LanceDB's default 7 days are pruned, the
    versions a running write or a reader may still use are not). LanceDB merges only files
    the same indexes cover, so call it after the indexes are built. A streaming ingest writes
    one file per batch: 489 at 1M documents, and an IVF_PQ search re-scoring 1,000 vectors
    across them took 64 ms, 23 ms after compacting into one (27 s; docs/experiments/scale.md).
    Bumps the collection version."""
    with store.writer_lock(name):
        store.table(name).optimize()


def ann_index_options(index_type: str) -> dict:
    """The options `create_index` gets besides the type: RaBitQ's bits per dimension for IVF_RQ
    (`limits.ANN_RQ_BITS`; LanceDB's legacy call would pass 8, its product-quantisation default),
    none for the other types. Benchmarks build their indexes with the same options."""
    return {"num_bits": limits.ANN_RQ_BITS} if index_type == "IVF_RQ" else {}


@counts_as_write
def build_vector_index(store: Store, name: str, index_type: str | None = None, num_partitions: int | None = None,
                       column: str = "vector") -> None:
    """An approximate vector index for large collections (`limits.ANN_INDEX` unless
    `index_type` says otherwise; exact search is fine below `limits.SCALE_DOCS`).

    The dense source then asks LanceDB to re-score its shortlist with full vectors
    (`refine_factor`), so reported similarities stay exact. Bumps the collection version.
    """
    with store.writer_lock(name):
        index_vectors(store.table(name), column, index_type, num_partitions)


def index_vectors(table, column: str = "vector", index_type: str | None = None,
                  num_partitions: int | None = None) -> None:
    """(Re)build the ANN index of `column` on a LanceDB table (cosine, `limits.ANN_INDEX` unless
    `index_type` says otherwise, its options from `ann_index_options`); the caller holds the lock."""
    index_type = index_type or limits.ANN_INDEX
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        table.create_index(metric="cosine", index_type=index_type, num_partitions=num_partitions,
                           vector_column_name=column, replace=True, **ann_index_options(index_type))


@counts_as_write
def build_id_index(store: Store, name: str) -> None:
    """A BTREE index on `id` for a large collection: reading 100 candidates' rows by id
    (`Store.documents`) at 1M documents took 681 ms without it and 160 ms with it (built in
    0.7 s; docs/experiments/scale.md). Bumps the collection version."""
    with store.writer_lock(name):
        index_ids(store.table(name))


def index_ids(table) -> None:
    """(Re)build the BTREE index on `id` of a LanceDB table; the caller holds the lock."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        table.create_scalar_index("id", index_type="BTREE", replace=True)


def needs_training(table, column: str) -> bool:
    """Whether a write's new rows in `column` need the ANN index trained anew rather than added
    to the one there (`compact`'s LanceDB `optimize` partitions them by its centroids): when the
    column has no index, one of another type than `limits.ANN_INDEX` (an IVF_SQ of before), or
    when u / i > `limits.ANN_RETRAIN_SHARE` (u rows not indexed, i indexed) or the index already
    has `limits.ANN_MAX_SEGMENTS` segments (its first build and one per incremental add)."""
    index = next((i for i in table.list_indices() if i.columns == [column]), None)
    if index is None or index.index_type.replace("_", "").lower() != limits.ANN_INDEX.replace("_", "").lower():
        return True
    stats = table.index_stats(index.name)
    if stats is None:
        return True
    return (stats.num_unindexed_rows > limits.ANN_RETRAIN_SHARE * stats.num_indexed_rows
            or stats.num_indices >= limits.ANN_MAX_SEGMENTS)


def index_for_size(store: Store, info: CollectionInfo, retrain: bool = False) -> CollectionInfo:
    """From `limits.SCALE_DOCS` documents on, after a write: build the ANN index of each declared
    vector column the collection has (`limits.ANN_INDEX`; the dense source re-scores its
    shortlist exactly), so vector search stays in milliseconds — trained anew when `retrain` or
    `needs_training` says so, else kept and the write's rows added to it by the compaction —, and
    a BTREE index on `id`, built with any ANN index (else kept, the compaction adds the new rows
    to it), so reading the candidates' rows does not scan the table; then merge the write's data files (`compact`).
    BM25 switches to the native index by itself ('auto' backend). Searches go on meanwhile: they
    read the version before each step until it is committed."""
    if info.doc_count >= limits.SCALE_DOCS:
        table = store.table(info.name)
        trained = [column for column in plan.ann_columns(info) if retrain or needs_training(table, column)]
        for column in trained:
            build_vector_index(store, info.name, column=column)
        # Rebuilt with the ANN index: the compaction merges only the files that every index
        # covers alike, and the id index's added segments would keep them apart.
        if trained or not any(i.columns == ["id"] for i in table.list_indices()):
            build_id_index(store, info.name)
        # Last: LanceDB merges only files that the same indexes cover, so a write's new files
        # (not yet indexed) stay apart until every index covers them; `optimize` indexes them.
        compact(store, info.name)
    return info
