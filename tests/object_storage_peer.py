"""A second app process for tests/store/test_object_storage.py: opens the store named by the environment
(`WORKBENCH_DB=s3://…`, `WORKBENCH_STORAGE_OPTIONS`, `WORKBENCH_LOCK_DIR`), as `./run.sh app`
would, does one thing and prints one JSON line.

    python object_storage_peer.py COLLECTION QUERY [ID TEXT]

It lists the collections and, if COLLECTION is one, gives its document count and its BM25 top hit
for QUERY; then, with ID and TEXT, adds that document through the ingest pipeline (real model).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.types import Document, ParsedCorpus  # noqa: E402


def main(argv: list[str]) -> dict:
    workbench = Workbench()  # the default store: $WORKBENCH_DB with $WORKBENCH_STORAGE_OPTIONS
    collection, query, add = argv[0], argv[1], argv[2:]
    out: dict = {"uri": workbench.store.uri, "collections": workbench.collection_names()}
    if collection in out["collections"]:
        result = workbench.search(collection, query, SearchConfig(weights={"bm25": 1.0}))
        out["top"] = result.outcome.results[0].doc_id if result.outcome.results else None
        out["doc_count"] = workbench.info(collection).doc_count
    if add:
        info = workbench.add(collection, ParsedCorpus([Document(add[0], add[1])])).info
        out["added"] = {"doc_count": info.doc_count, "version": workbench.store.version(collection)}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
