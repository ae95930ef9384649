"""The write side: the one path by which documents become rows of a collection.

    plan.py      what a collection derives, read from the sources' declarations
                 (`SourceSpec.derives`); a new collection's model and cross-lingual vectors
    derive.py    one batch: check, tokenise, embed (`EmbedBatches`, the embedding UDF), rows,
                 entities, truncation count
    writer.py    the journaled write of one or many batches (`open_write`), and the deferred
                 entity graph's (`write_graph`)
    indexes.py   full-text index after every write; by size: ANN indexes, id index, compaction
    pipeline.py  the ingests: `create_collection`, `add_documents` (one batch, derived before the
                 lock), `ingest_stream` (batch by batch under the lock), `write_documents`

Nothing is imported here, so importing one module loads only what it needs.
"""
