"""Distributed ingest on Ray: embed a corpus in Ray Data batches with the project's own encoder and
write it as a normal collection (the same table layout, catalogue entry, native BM25 index and
entity graph tables as `python -m retrieval ingest`), so the app and the CLI open it as any other.

    .venv/bin/pip install -r requirements-scale.txt        # ray[data]; not part of CI
    .venv/bin/python examples/ray_embed.py ray-xquad                        # the bundled sample
    .venv/bin/python examples/ray_embed.py ray-xquad4 --repeat 4 --compare  # 4 copies, timed against one process

The work is split as the pipeline splits it (`retrieval/pipeline.py`): tokenising and embedding
(`pipeline.document_rows`) and entity extraction (`pipeline.graph_rows`) run on Ray workers, one
encoder per worker (an actor pool: the model loads once per worker, not per batch); the driver
then makes the one all-or-nothing store write (`Store.write_collection`, under the collection's
writer lock, so a failed or killed run leaves nothing). `ray.init()` with no address starts a
local Ray on this machine; with `RAY_ADDRESS` set it joins that cluster, and `WORKBENCH_DB` (with
`WORKBENCH_STORAGE_OPTIONS`) can name an `s3://…` store the app instances share. docs/scale.md
gives the measured rates and what changes for 10M+ documents (the driver must then stop holding
every row: workers write Lance fragments and the driver commits them; see there).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import lancedb  # noqa: E402
import pyarrow as pa  # noqa: E402

from retrieval.embed import default_model_for, resolve_model  # noqa: E402
from retrieval.entities import merge_entities  # noqa: E402
from retrieval.ingest import parse_path  # noqa: E402
from retrieval.pipeline import check_documents, create_collection, embedding_text, graph_rows  # noqa: E402
from retrieval.store import CollectionInfo, Store, collection_schema, now_iso  # noqa: E402
from retrieval.tokenize import TOKENIZER_NAME, corpus_language  # noqa: E402
from retrieval.types import Document, ParsedCorpus  # noqa: E402

DOC_FIELDS = ("id", "title", "text", "metadata", "parent_id", "chunk_index", "start_line", "end_line")


def to_record(doc: Document) -> dict:
    """A document as one Ray Data row (metadata as JSON, as the collection stores it)."""
    row = {f: getattr(doc, f) for f in DOC_FIELDS}
    row["metadata"] = json.dumps(doc.metadata, ensure_ascii=False, default=str)
    return row


def from_batch(batch: pa.Table) -> list[Document]:
    return [Document(**{**r, "metadata": json.loads(r["metadata"] or "{}")}) for r in batch.to_pylist()]


class EmbedBatches:
    """A Ray Data UDF (run in an actor pool): the collection rows of a batch of documents."""

    def __init__(self, model: str, threads: int):
        import torch

        torch.set_num_threads(threads)  # several workers on one machine share its cores
        from retrieval.embed import load_encoder

        self.encoder = load_encoder(model)

    def __call__(self, batch: pa.Table) -> pa.Table:
        from retrieval.pipeline import document_rows

        return document_rows(from_batch(batch), self.encoder)


def extract_graph(batch: pa.Table, ingested: str) -> dict[str, list[dict]]:
    """Entity graph rows of one batch (runs as a Ray task)."""
    return graph_rows(from_batch(batch), datetime.fromisoformat(ingested))


def merge_graphs(parts: list[dict[str, list[dict]]]) -> dict[str, list[dict]]:
    """One collection's graph rows from per-batch parts: links and times appended, entity counts
    added (as `Store.append` merges them)."""
    out: dict[str, list[dict]] = {"entities": [], "event_entities": [], "event_times": []}
    for part in parts:
        out["entities"] = merge_entities(out["entities"], part["entities"])
        out["event_entities"] += part["event_entities"]
        out["event_times"] += part["event_times"]
    return out


def ray_ingest(store: Store, name: str, documents: list[Document], model: str, workers: int,
               batch_size: int) -> tuple[CollectionInfo, dict]:
    """Embed and extract on Ray, then one store write. Returns the collection and the timings."""
    import ray

    check_documents(documents)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    # Workers import `retrieval` from this checkout: on a cluster, the repository and its
    # virtualenv must sit at the same path on every node.
    runtime_env = {"env_vars": {"OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                "PYTHONPATH": str(REPO)}}
    # A local Ray starts its workers at nice 15: on a machine that also runs other work they then
    # starve (a run here stalled for 10 minutes behind other jobs); 0 is the single process's priority.
    os.environ.setdefault("RAY_worker_niceness", "0")
    with warnings.catch_warnings():  # ray.init starts its daemons by fork+exec: nothing of lancedb runs there
        warnings.filterwarnings("ignore", message="lancedb fork support")
        if os.environ.get("RAY_ADDRESS"):  # join a running cluster: it has its own CPUs
            ray.init(log_to_driver=False, runtime_env=runtime_env)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
    ray.data.DataContext.get_current().enable_progress_bars = False
    timings["ray_start_s"] = time.perf_counter() - start
    try:
        ingested = datetime.now(UTC).isoformat()
        blocks = max(workers, -(-len(documents) // batch_size))  # one batch per block: all workers busy
        dataset = ray.data.from_arrow(pa.Table.from_pylist([to_record(d) for d in documents])).repartition(blocks)
        dataset = dataset.materialize()
        # 1. tokenise and embed: an actor pool, one encoder (one model load) per worker
        begin = time.perf_counter()
        embedded = dataset.map_batches(
            EmbedBatches, fn_constructor_kwargs={"model": model, "threads": 1}, batch_size=batch_size,
            batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=1)
        schema = collection_schema(resolve_model(model).dim)
        rows = pa.concat_tables([_as_schema(b, schema)
                                 for b in embedded.iter_batches(batch_size=None, batch_format="pyarrow")])
        timings["embed_s"] = time.perf_counter() - begin
        # 2. entities: one task per batch (no model), merged on the driver
        begin = time.perf_counter()
        extract = ray.remote(num_cpus=1)(extract_graph)
        graph_parts = ray.get([extract.remote(b, ingested)
                               for b in dataset.iter_batches(batch_size=batch_size, batch_format="pyarrow")])
        timings["extract_s"] = time.perf_counter() - begin
    finally:
        ray.shutdown()
    order = {d.id: i for i, d in enumerate(documents)}  # storage order as the pipeline writes it
    ids = rows.column("id").to_pylist()
    rows = rows.take(sorted(range(rows.num_rows), key=lambda i: order[ids[i]]))
    begin = time.perf_counter()
    info = store.write_collection(_info(name, documents, model, rows.schema), rows, merge_graphs(graph_parts))
    timings["write_s"] = time.perf_counter() - begin
    timings["total_s"] = time.perf_counter() - start
    return info, timings


def _as_schema(batch: pa.Table, schema: pa.Schema) -> pa.Table:
    """Ray may hand the vector column back as its own tensor type: cast to the collection's."""
    if batch.schema.equals(schema):
        return batch
    columns = []
    for field in schema:
        column = batch.column(field.name)
        if field.name == "vector" and column.type != field.type:
            import numpy as np

            values = np.asarray(column.to_numpy(zero_copy_only=False).tolist(), dtype=np.float32)
            column = pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), field.type.list_size)
        columns.append(column.cast(field.type) if column.type != field.type else column)
    return pa.Table.from_arrays(columns, schema=schema)


def _info(name: str, documents: list[Document], model: str, schema: pa.Schema) -> CollectionInfo:
    now = now_iso()
    dim = schema.field("vector").type.list_size
    return CollectionInfo(name=name, model=model, dim=dim, tokenizer=TOKENIZER_NAME,
                          language=corpus_language(embedding_text(d) for d in documents),
                          doc_count=len(documents), created=now, updated=now,
                          lancedb_version=lancedb.__version__, description="ingested on Ray (examples/ray_embed.py)")


def single_process(store: Store, name: str, documents: list[Document], model: str) -> dict:
    """The same documents through the single-process pipeline (`pipeline.create_collection`), timed
    the same way: the model loaded first; tokenise and embed until the pipeline starts its entity
    step, extraction until it reports that step done (its last before the write), then the write."""
    from retrieval.embed import load_encoder

    load_encoder(model)
    marks: dict[str, float] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "finding entities":
            marks["extracted" if done == total else "embedded"] = time.perf_counter()

    begin = time.perf_counter()
    create_collection(store, name, ParsedCorpus(documents), model, progress=progress)
    end = time.perf_counter()
    return {"single_collection": name, "single_embed_s": round(marks["embedded"] - begin, 2),
            "single_extract_s": round(marks["extracted"] - marks["embedded"], 2),
            "single_write_s": round(end - marks["extracted"], 2), "single_total_s": round(end - begin, 2),
            "single_docs_per_s": round(len(documents) / (marks["extracted"] - begin), 1)}


def repeated(documents: list[Document], times: int) -> list[Document]:
    """`times` copies of the corpus with distinct ids (a bigger corpus to time, same text)."""
    if times == 1:
        return documents
    return [replace(d, id=f"{d.id}~{k}", parent_id=f"{d.parent_id}~{k}" if d.parent_id else d.parent_id)
            for k in range(times) for d in documents]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("collection", help="name of the new collection")
    parser.add_argument("--source", default=str(REPO / "sample_data" / "xquad"),
                        help="a file or folder `python -m retrieval ingest` reads (default: the bundled sample)")
    parser.add_argument("--model", default=None, help="embedding model (default: by corpus language, as ingest)")
    parser.add_argument("--repeat", type=int, default=1, help="copies of the corpus (distinct ids), to time")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="Ray workers (one CPU each)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--db", default=None, help="store URI (default $WORKBENCH_DB)")
    parser.add_argument("--compare", action="store_true",
                        help="also ingest the same documents with the single-process pipeline (as "
                             "<collection>-single) and print both rates")
    args = parser.parse_args(argv)

    documents = repeated(parse_path(args.source).documents, args.repeat)
    model = args.model or default_model_for(corpus_language(embedding_text(d) for d in documents))
    store = Store(args.db)
    info, timings = ray_ingest(store, args.collection, documents, model, args.workers, args.batch_size)
    report = {"collection": info.name, "documents": info.doc_count, "model": model, "workers": args.workers,
              **{k: round(v, 2) for k, v in timings.items()},
              "ray_docs_per_s": round(len(documents) / (timings["embed_s"] + timings["extract_s"]), 1)}
    if args.compare:
        report.update(single_process(store, f"{args.collection}-single", documents, model))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
