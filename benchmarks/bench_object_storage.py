"""Search on object storage vs local disk; prints a table (docs/scale.md).

    .venv/bin/python benchmarks/bench_object_storage.py [BEIR_DIR] [--queries N]

Starts an S3-compatible server on 127.0.0.1 (moto's `ThreadedMotoServer`, in this process),
embeds the corpus once (default: the bundled sample, sample_data/xquad) and writes the same rows
to a local store and to `s3://bench/db`. Then, per store, with query vectors embedded beforehand
(so only retrieval is timed):

- open: a new `Store` and its collection listing;
- first search per config, on a new Workbench (empty caches): loads the sources (rank-bm25 reads
  the whole token column);
- then per-query search, N other distinct queries (no cache hits), p50 / p95: BM25 (rank-bm25,
  in memory once loaded), BM25 (LanceDB's native index, read per query), dense (LanceDB exact
  vector search), and the default hybrid (BM25 + dense). Every search also checks the table
  version and reads its hits' documents;
- `Store.version`: the manifest check every read makes (read_consistency_interval = 0);
- a write by a second `Store` on the same URI, and how many reads the first needs to see it.

moto is an in-process Python server on loopback: every object request costs ~1 ms of Python, not
the 10–50 ms first-byte time of a real S3 region. Read the S3 column as "how many requests", not
as what a region would give.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("LANCEDB_LOG", "error")  # before lancedb loads (retrieval.store.database sets it too, later)

import boto3  # noqa: E402
import lancedb  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

from retrieval.indexing.derive import document_rows, graph_rows  # noqa: E402
from retrieval.indexing.pipeline import add_documents  # noqa: E402
from retrieval.indexing.readers.parse import parse_path  # noqa: E402
from retrieval.indexing.writer import Batch, write_batches  # noqa: E402
from retrieval.models.embed import default_model_for, load_encoder  # noqa: E402
from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.store import CollectionInfo, Store, now_iso  # noqa: E402
from retrieval.text.passages import embedding_text  # noqa: E402
from retrieval.text.tokenize import TOKENIZER_NAME, corpus_language  # noqa: E402
from retrieval.types import Document, ParsedCorpus  # noqa: E402

CONFIGS = {
    "bm25 (rank-bm25)": SearchConfig(weights={"bm25": 1.0}),
    "bm25 (LanceDB index)": SearchConfig(weights={"bm25": 1.0}, bm25_backend="lancedb"),
    "dense (LanceDB exact)": SearchConfig(weights={"dense": 1.0}),
    "hybrid (bm25 + dense)": SearchConfig(weights={"bm25": 1.0, "dense": 1.0}),
}


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"{statistics.median(values) * 1000:.1f} / {p95 * 1000:.1f}"


def measure(uri: str, options: dict | None, name: str, queries: list[str], model: str) -> dict[str, str]:
    out: dict[str, str] = {}
    started = time.perf_counter()
    store = Store(uri, storage_options=options)
    store.collection_names()
    out["open + list collections (ms)"] = f"{(time.perf_counter() - started) * 1000:.1f}"
    vectors = Workbench(store)
    for query in queries:  # query vectors first, shared by every Workbench below: only retrieval is timed
        vectors.query_vector(model, query)
    for label, config in CONFIGS.items():
        workbench = Workbench(store)  # empty caches: nothing of the previous config is reused
        workbench.caches.query_vectors = vectors.caches.query_vectors
        started = time.perf_counter()
        workbench.search(name, queries[0], config)
        out[f"first search, {label} (ms)"] = f"{(time.perf_counter() - started) * 1000:.1f}"
        times = []
        for query in queries[1:]:
            started = time.perf_counter()
            workbench.search(name, query, config)
            times.append(time.perf_counter() - started)
        out[f"search p50 / p95, {label} (ms)"] = ms(times)
    times = []
    for _ in range(50):
        started = time.perf_counter()
        store.version(name)
        times.append(time.perf_counter() - started)
    out["Store.version p50 / p95 (ms)"] = ms(times)
    # A second instance writes; how many reads until the first sees it (0 = the next read).
    other = Store(uri, storage_options=options)
    before = store.version(name)
    started = time.perf_counter()
    add_documents(other, name, ParsedCorpus([Document("bench-new", "A zeppelin over the harbour.")]))
    out["add 1 document by a 2nd instance (ms)"] = f"{(time.perf_counter() - started) * 1000:.1f}"
    reads = 0
    while store.version(name) == before:
        reads += 1
    out["reads before the 1st instance sees it"] = str(reads)
    top = workbench.search(name, "zeppelin harbour", CONFIGS["bm25 (rank-bm25)"]).outcome.results
    out["1st instance's next search finds it"] = str(bool(top) and top[0].doc_id == "bench-new")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", nargs="?", default=str(REPO / "sample_data" / "xquad"))
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    corpus = parse_path(args.folder)
    documents: list[Document] = corpus.documents
    queries = list(corpus.queries.values())[: args.queries + 1]
    language = corpus_language(embedding_text(d) for d in documents)
    model = default_model_for(language)
    encoder = load_encoder(model)
    started = time.perf_counter()
    rows = document_rows(documents, encoder)
    graph = graph_rows(documents, datetime.now(UTC))
    print(f"{len(documents)} documents embedded once with {model} in {time.perf_counter() - started:.1f} s; "
          f"{len(queries) - 1} queries", file=sys.stderr)

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    options = {"aws_endpoint": endpoint, "aws_access_key_id": "bench", "aws_secret_access_key": "bench",
               "aws_region": "us-east-1", "allow_http": "true"}
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                 region_name="us-east-1").create_bucket(Bucket="bench")
    name = "bench"
    now = now_iso()
    info = CollectionInfo(name=name, model=model, dim=encoder.spec.dim, tokenizer=TOKENIZER_NAME, language=language,
                          doc_count=len(documents), created=now, updated=now, lancedb_version=lancedb.__version__)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {"local disk": (str(Path(tmp) / "db"), None), "S3 (moto, 127.0.0.1)": ("s3://bench/db", options)}
        for label, (uri, opts) in stores.items():
            started = time.perf_counter()
            write_batches(Store(uri, storage_options=opts), info, True, [Batch(rows, graph)])
            write = f"{(time.perf_counter() - started) * 1000:.1f}"
            results[label] = {"write collection: rows, index, graph, catalogue (ms)": write,
                              **measure(uri, opts, name, queries, model)}
    server.stop()
    labels = list(results)
    print(f"| {len(documents)} documents, {len(queries) - 1} queries | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for row in results[labels[0]]:
        print(f"| {row} | " + " | ".join(results[label][row] for label in labels) + " |")
    print(json.dumps(results), file=sys.stderr)


if __name__ == "__main__":
    main()
