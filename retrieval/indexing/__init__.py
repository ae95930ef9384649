"""Files in: the readers, which turn files into documents, and the write side, the one path by which
documents become rows of a collection.

The read side, files to documents (no storage; the UI may import it):

    readers/     options.py (`ParseOptions`, `ColumnMapping`), formats.py (one reader per
                 format), documents.py (records to documents: columns, checks, catalogue
                 records), parse.py (`parse_bytes`, `parse_files`, `parse_path`, BEIR folders),
                 stream.py (`open_stream`: a `DocumentStream` read in batches)

The write side (only the Workbench calls it):

    plan.py        what a collection derives, read from the sources' declarations
                   (`SourceSpec.derives`); a new collection's model and cross-lingual vectors
    derive.py      one batch: check, tokenise, embed (`EmbedBatches`, the embedding UDF), rows,
                   entities, truncation count
    seen_ids.py    the ids a stream has met, as 64-bit hashes (`SeenIds`): no id twice, 8 bytes each
    writer.py      the journaled write of one or many batches (`open_write`), and the deferred
                   entity graph's (`write_graph`)
    indexes.py     full-text index after every write; by size: ANN indexes, id index, compaction
    pipeline.py    the ingests: `create_collection`, `add_documents` (one batch, derived before the
                   lock), `ingest_stream` (batch by batch under the lock), `write_documents`
    overlap.py     a streaming ingest's batches read and tokenised in a worker thread, a bounded
                   queue ahead of their embedding and write (`Ahead`)
    graph.py       the entity graph of a large collection, built after its ingest (`build_graph`)
    graph_jobs.py  those builds as background jobs of the process, one per collection at a time
                   (`GraphBuilds`), reporting how far they are to `sources/graph_status.py`

For the front ends:

    throughput.py  documents per second and time left of a long run (`Throughput`)

The entry points, re-exported here: `parse_path`, `parse_bytes`, `parse_files`, `open_stream`,
`ParseOptions`, `ColumnMapping` (read), `create_collection`, `add_documents`, `ingest_stream`
(write). The modules of this package import each other directly, never through this file; the UI
imports the readers' modules, never the write side (tests/test_architecture.py, `WRITE_SIDE`).
Importing any module of the package runs this file, so it loads the write side too: a few modules
more than the readers load anyway (they reach the store through `judging.qrels`).
"""

from retrieval.indexing.pipeline import add_documents, create_collection, ingest_stream
from retrieval.indexing.readers.options import ColumnMapping, ParseOptions
from retrieval.indexing.readers.parse import parse_bytes, parse_files, parse_path
from retrieval.indexing.readers.stream import open_stream

__all__ = [
    "ColumnMapping",
    "ParseOptions",
    "add_documents",
    "create_collection",
    "ingest_stream",
    "open_stream",
    "parse_bytes",
    "parse_files",
    "parse_path",
]
