"""Where a store lives and what tables it holds: the database location, collection and auxiliary
table names, and the collection table's columns.

Location: `$WORKBENCH_DB` if set (any LanceDB URI: a folder, or object storage such as
`s3://bucket/path`), else `<repo>/data/lancedb`. Object storage takes LanceDB's `storage_options`
(the `Store` argument, else `$WORKBENCH_STORAGE_OPTIONS` as JSON, else LanceDB reads `AWS_*`
variables); the store works there unchanged (tests/store/test_object_storage.py, docs/scale.md).

Each collection table has one row per document: id, title, text, tokens (the analyser's terms,
space-joined, so they can be shown and indexed), n_tokens, language, vector (and, for some
collections, the cross-lingual `vector_xl`), metadata (JSON text), and chunk fields (parent_id,
chunk_index, start_line, end_line). Tables that belong to a collection sit beside it as
`_<kind>__<collection>` (`AUX_KINDS`); the catalogue is `_catalogue` (store/catalogue.py).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from retrieval.paths import REPO_DIR
from retrieval.store.names import TABLE_NAME_RE
from retrieval.types import RetrievalError

CATALOGUE_TABLE = "_catalogue"
# Tables that belong to a collection sit beside it as `_<kind>__<collection>` (a collection name
# never starts with '_', so they are never listed as collections). Kind -> whether the table
# holds per-document data (dropped by `clear` too) or data about the collection (kept by `clear`).
AUX_KINDS: dict[str, bool] = {
    "queries": False,  # query sets (judgments.py): kept by clear, dropped by delete
    "judgments": False,  # graded judgments of those query sets (judgments.py)
    # The entity graph (text/entity_tables.py, sources/graph.py), written at every ingest:
    "entities": True,  # typed entities: id, type, name, normalized_name, event_count
    "event_entities": True,  # chunk (event) id -> entity id
    "event_times": True,  # each chunk's date for the time decay, and where it came from
}
GRAPH_KINDS = ("entities", "event_entities", "event_times")
COLLECTION_NAME_RE = TABLE_NAME_RE  # fullmatch: no trailing newline
XL_COLUMN = "vector_xl"  # the cross-lingual vectors (CollectionInfo.xl_model)
DOCUMENT_COLUMNS = ["id", "title", "text", "tokens", "metadata", "parent_id", "chunk_index",
                    "start_line", "end_line", "language"]

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def default_db_uri() -> str:
    return os.environ.get("WORKBENCH_DB") or str(REPO_DIR / "data" / "lancedb")


def is_remote(uri: str) -> bool:
    """Whether `uri` is a URL (object storage: `s3://…`, `gs://…`, `az://…`), not a local folder."""
    return "://" in uri


def canonical_uri(uri: str) -> str:
    """One spelling per database, since the writer locks are found by it (`store.locks.lock_dir`):
    two spellings of one database would take two locks and could undo each other's commits.
    `file://` URLs become the local folder; an object-storage URL gets a lower-case scheme, no
    repeated or trailing slash; a query is kept only where LanceDB reads one (`s3+ddb://…
    ?ddbTableName=…`, the DynamoDB commit store), else refused with a fragment (options go in
    $WORKBENCH_STORAGE_OPTIONS)."""
    from urllib.parse import urlsplit
    from urllib.request import url2pathname

    if not is_remote(uri):
        return uri
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if parts.fragment or (parts.query and scheme != "s3+ddb"):
        raise RetrievalError(f"Database URL {uri!r} has a query or fragment: give object storage options in "
                             "$WORKBENCH_STORAGE_OPTIONS instead")
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise RetrievalError(f"Database URL {uri!r} names another host: give a local folder")
        return url2pathname(parts.path) or "/"  # also file:///C:/data/db on Windows
    path = re.sub(r"/{2,}", "/", parts.path).rstrip("/")
    return f"{scheme}://{parts.netloc}{path}" + (f"?{parts.query}" if parts.query else "")


def default_storage_options() -> dict[str, str] | None:
    """LanceDB's `storage_options` for object storage from `$WORKBENCH_STORAGE_OPTIONS` (a JSON
    object of strings, e.g. `{"aws_endpoint": "http://127.0.0.1:9000", "allow_http": "true"}`),
    else None: LanceDB then reads the usual `AWS_*` variables (AWS_ENDPOINT, AWS_REGION,
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ALLOW_HTTP) and the AWS credential chain."""
    raw = os.environ.get("WORKBENCH_STORAGE_OPTIONS")
    if not raw:
        return None
    try:
        options = json.loads(raw)
    except ValueError as exc:
        raise RetrievalError(f"WORKBENCH_STORAGE_OPTIONS is not JSON: {exc}") from None
    if not isinstance(options, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in options.items()):
        raise RetrievalError("WORKBENCH_STORAGE_OPTIONS must be a JSON object of strings, "
                             'e.g. {"aws_endpoint": "http://127.0.0.1:9000", "allow_http": "true"}')
    return options


def validate_collection_name(name: str, what: str = "collection name") -> str:
    """Names are 1–64 characters of a–z, 0–9, '_' and '-', starting with a letter or digit.

    They become (parts of) LanceDB table names, so nothing else (no dots, slashes or spaces) is
    allowed. `what` names the kind of name in the error (query sets follow the same rule).
    """
    if not isinstance(name, str) or not COLLECTION_NAME_RE.fullmatch(name):
        raise RetrievalError(
            f"Invalid {what} {name!r}: use 1–64 characters from a–z, 0–9, '_' and '-', "
            "starting with a letter or digit"
        )
    return name


def aux_table_name(collection: str, kind: str) -> str:
    """The name of a collection's auxiliary table of `kind` (a key of `AUX_KINDS`)."""
    if kind not in AUX_KINDS:
        raise ValueError(f"unknown auxiliary table kind {kind!r}")
    return f"_{kind}__{validate_collection_name(collection)}"


def graph_table_names(collection: str) -> list[str]:
    """The collection's entity graph tables (`GRAPH_KINDS`), in that order."""
    return [aux_table_name(collection, kind) for kind in GRAPH_KINDS]


def sql_string(value: str) -> str:
    """A SQL string literal for LanceDB filters: single quotes doubled."""
    return "'" + value.replace("'", "''") + "'"


def ids_where(ids: list[str]) -> str:
    """A LanceDB filter keeping the rows whose id is one of `ids`."""
    return "id IN (" + ", ".join(sql_string(i) for i in ids) + ")"


def collection_schema(dim: int, xl_dim: int = 0) -> pa.Schema:
    """The columns of a collection table whose vectors have `dim` dimensions; with `xl_dim` > 0
    also the cross-lingual vectors (`vector_xl`, `xl_dim` dimensions), after `vector`."""
    xl = [pa.field(XL_COLUMN, pa.list_(pa.float32(), xl_dim))] if xl_dim else []
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("title", pa.string()),
            pa.field("text", pa.string()),
            pa.field("tokens", pa.string()),
            pa.field("n_tokens", pa.int32()),
            pa.field("language", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            *xl,
            pa.field("metadata", pa.string()),
            pa.field("parent_id", pa.string()),
            pa.field("chunk_index", pa.int32()),
            pa.field("start_line", pa.int32()),
            pa.field("end_line", pa.int32()),
        ]
    )


_SQL_TYPES = {pa.int64(): "BIGINT", pa.string(): "STRING"}


def add_missing_columns(table, schema: pa.Schema, fills: dict[str, str] | None = None) -> list[str]:
    """Add the columns of `schema` that `table` (written before they existed) lacks, in one commit
    (LanceDB's `add_columns`: the new version has them all or none), each filled by its SQL in
    `fills` or null. Returns their names. The caller holds the table's lock."""
    present = set(table.schema.names)
    missing = [f for f in schema if f.name not in present]
    if missing:
        table.add_columns({f.name: (fills or {}).get(f.name, f"CAST(NULL AS {_SQL_TYPES[f.type]})")
                           for f in missing})
    return [f.name for f in missing]


def vector_matrix(rows: pa.Table, column: str) -> np.ndarray:
    """A vector column of `rows` as a new (writable) n × dim float32 matrix, in row order (0 × dim
    for no rows: the dimension is the column type's)."""
    if not rows.num_rows:
        return np.zeros((0, getattr(rows.schema.field(column).type, "list_size", 0)), dtype=np.float32)
    flat = rows.column(column).combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.array(flat, dtype=np.float32).reshape(rows.num_rows, -1)


def now_iso() -> str:
    """Now, UTC, to the second: the catalogue's time format."""
    return datetime.now(UTC).isoformat(timespec="seconds")
