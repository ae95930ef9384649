"""The store: collections in LanceDB, and the public names the rest of the project imports.

The store owns collections, their tables, the catalogue and versions, and nothing else: documents
become rows only through the write path (`retrieval/indexing/`), which writes under the
collection's writer lock and transaction that the store provides. The storage layer, one job per
module:

    tables.py       where the database lives, table names, the collection table's columns
    catalogue.py    the catalogue (`CollectionInfo`) and its migrations
    locks.py        writer locks (threads and processes of one machine), crash points
    journal.py      the write transaction: journal, rollback, recovery of a dead writer
    database.py     the `Store`: handles and versions, names, clear and delete
    reads.py        the Store's reads: documents, vectors, columns, graph tables, stats
    side_tables.py  keyed side tables beside the collections (saved configs, snapshots, models)
    versions.py     a collection as it was at a version (`StoreAtVersion`), time travel
    names.py        display names in any script and the safe table names derived from them
    allocator.py    glibc's mmap threshold, fixed when a Store opens (large freed buffers go back)

Writer protocol (docs/reliability.md). Every write to a collection (create, add, clear, delete,
ratings, indexes) holds the collection's writer lock (`Store.writer_lock`), so one writer at a
time across threads *and* processes of one machine, and runs in a transaction
(`Store.transaction`): journal, write, remove the journal; a failed or killed write is rolled
back, by itself or by the next holder of the lock.
"""

from retrieval.store.catalogue import CollectionInfo, CollectionStats
from retrieval.store.database import Store
from retrieval.store.locks import WriterLock, counts_as_write, crash_point, lock_dir
from retrieval.store.names import display_name
from retrieval.store.reads import stored_documents
from retrieval.store.side_tables import KeyedTable
from retrieval.store.tables import (
    AUX_KINDS,
    CATALOGUE_TABLE,
    COLLECTION_NAME_RE,
    GRAPH_KINDS,
    XL_COLUMN,
    Progress,
    aux_table_name,
    collection_schema,
    default_db_uri,
    default_storage_options,
    now_iso,
    sql_string,
    validate_collection_name,
    vector_matrix,
)
from retrieval.store.versions import StoreAtVersion, collection_versions, listed_versions, version_label

__all__ = [
    "AUX_KINDS",
    "CATALOGUE_TABLE",
    "COLLECTION_NAME_RE",
    "GRAPH_KINDS",
    "XL_COLUMN",
    "CollectionInfo",
    "CollectionStats",
    "KeyedTable",
    "Progress",
    "Store",
    "StoreAtVersion",
    "WriterLock",
    "aux_table_name",
    "collection_schema",
    "collection_versions",
    "counts_as_write",
    "crash_point",
    "default_db_uri",
    "default_storage_options",
    "display_name",
    "listed_versions",
    "lock_dir",
    "now_iso",
    "sql_string",
    "stored_documents",
    "validate_collection_name",
    "vector_matrix",
    "version_label",
]
