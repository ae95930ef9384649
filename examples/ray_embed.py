"""Distributed ingest on Ray: the CLI's ingest (`python -m retrieval ingest`) with its embedding
step spread over Ray workers, so the collection it writes is the one the CLI writes — the same
columns (the cross-lingual `vector_xl` included), indexes, catalogue entry and entity graph — and
the app and the CLI open it as any other.

    .venv/bin/pip install -r requirements-scale.txt        # ray[data]; also in requirements-dev.txt
    .venv/bin/python examples/ray_embed.py ray-xquad                        # the bundled sample
    .venv/bin/python examples/ray_embed.py ray-xquad4 --repeat 4 --compare  # 4 copies, timed against one process

Only the embedding step runs on Ray: Ray Data maps the write path's own embedding UDF
(`retrieval.indexing.derive.EmbedBatches`) over the batches with an actor pool (one model load per
worker, not per batch) and hands the embedded batches back in order; everything else —
reading the file as a stream, checks, tokenising, entity extraction, the journaled batch write
under the collection's writer lock, the indexes by size — is `indexing.pipeline.ingest_stream`,
the CLI's. A failed or killed run leaves nothing. `ray.init()` with no address starts a local Ray
on this machine; with `RAY_ADDRESS` set it joins that cluster, and `WORKBENCH_DB` (with
`WORKBENCH_STORAGE_OPTIONS`) can name an `s3://…` store the app instances share. docs/scale.md
gives the measured rates and what changes for 10M+ documents.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pyarrow as pa  # noqa: E402

from retrieval.indexing.derive import EmbedBatches  # noqa: E402
from retrieval.indexing.pipeline import Embedding, IngestResult, ingest_stream  # noqa: E402
from retrieval.indexing.readers.parse import parse_path  # noqa: E402
from retrieval.indexing.readers.stream import STREAM_BATCH, open_stream  # noqa: E402
from retrieval.store import Store  # noqa: E402
from retrieval.types import Document, RetrievalError  # noqa: E402

# Workers import `retrieval` as installed in the virtualenv (`pip install -e .`, ./run.sh does
# it): on a cluster, the project must be installed in the same virtualenv path on every node.
# Models ship in PyPI packages: nothing is downloaded.
RUNTIME_ENV = {"env_vars": {"OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}}


class EmbedOnWorker(EmbedBatches):
    """`EmbedBatches` in a Ray actor: torch limited to `threads` threads (several workers on one
    machine share its cores), the models loaded once when the actor starts."""

    def __init__(self, models: Mapping[str, str], threads: int):
        import torch

        torch.set_num_threads(threads)
        super().__init__(models)

    def __call__(self, records: pa.Table) -> pa.Table:
        return super().__call__(records)


def ray_embedding(workers: int, batch_size: int, threads: int = 1) -> Embedding:
    """The write path's embedding step on Ray Data: the record batches (texts and tokens, no
    vectors) become one dataset of one block per `batch_size` records (at least one per worker,
    so every worker has work), an actor pool of `workers` maps `EmbedOnWorker` over it, and the
    embedded batches come back in the records' order (checked: the rows are written as they come)."""
    def embed(models: Mapping[str, str], records: Iterator[pa.Table]) -> Iterator[pa.Table]:
        import ray

        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.execution_options.preserve_order = True  # rows are written in the file's order
        tables = list(records)
        ids = [i for table in tables for i in table.column("id").to_pylist()]
        blocks = max(workers, -(-len(ids) // batch_size))
        # Repartitioned before the actors start: they take every CPU of a local Ray, which would
        # leave none for the repartition's own tasks (the run then waits for ever).
        dataset = ray.data.from_arrow(tables).repartition(blocks).materialize()
        embedded = dataset.map_batches(
            EmbedOnWorker, fn_constructor_kwargs={"models": dict(models), "threads": threads},
            batch_size=batch_size, batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=workers),
            num_cpus=1)
        done = 0
        for batch in embedded.iter_batches(batch_size=None, batch_format="pyarrow"):
            if batch.column("id").to_pylist() != ids[done:done + batch.num_rows]:
                raise RetrievalError("Ray Data returned the embedded batches out of order")
            done += batch.num_rows
            yield batch
    return embed


def start_ray(workers: int) -> None:
    """A local Ray of `workers` CPUs, or the cluster `RAY_ADDRESS` names."""
    import ray

    # A local Ray starts its workers at nice 15: on a machine that also runs other work they then
    # starve (a run here stalled for 10 minutes behind other jobs); 0 is the single process's priority.
    os.environ.setdefault("RAY_worker_niceness", "0")
    with warnings.catch_warnings():  # ray.init starts its daemons by fork+exec: nothing of lancedb runs there
        warnings.filterwarnings("ignore", message="lancedb fork support")
        if os.environ.get("RAY_ADDRESS"):  # join a running cluster: it has its own CPUs
            ray.init(log_to_driver=False, runtime_env=RUNTIME_ENV)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, runtime_env=RUNTIME_ENV)


def ray_ingest(store: Store, name: str, source: str | Path, model: str | None = None, workers: int = 1,
               batch_size: int = 64, stream_batch: int = STREAM_BATCH) -> tuple[IngestResult, dict]:
    """`python -m retrieval ingest SOURCE --collection NAME [--model MODEL]` with the embedding on
    Ray. Returns the ingest's result and the timings (Ray's start, the ingest)."""
    import ray

    timings: dict[str, float] = {}
    start = time.perf_counter()
    start_ray(workers)
    timings["ray_start_s"] = time.perf_counter() - start
    try:
        begin = time.perf_counter()
        result = ingest_stream(store, name, open_stream(source, batch_size=stream_batch), model=model,
                               embedding=ray_embedding(workers, batch_size))
        timings["ingest_s"] = time.perf_counter() - begin
    finally:
        ray.shutdown()
    timings["total_s"] = time.perf_counter() - start
    return result, timings


def single_process(store: Store, name: str, source: str | Path, model: str | None) -> dict:
    """The same file through the CLI's ingest in this process, timed the same way."""
    begin = time.perf_counter()
    result = ingest_stream(store, name, open_stream(source), model=model)
    seconds = time.perf_counter() - begin
    return {"single_collection": name, "single_ingest_s": round(seconds, 2),
            "single_docs_per_s": round(result.documents / seconds, 1)}


def repeated(documents: list[Document], times: int) -> list[Document]:
    """`times` copies of the corpus with distinct ids (a bigger corpus to time, same text)."""
    if times == 1:
        return documents
    return [replace(d, id=f"{d.id}~{k}", parent_id=f"{d.parent_id}~{k}" if d.parent_id else d.parent_id)
            for k in range(times) for d in documents]


def repeated_file(source: str | Path, times: int, folder: Path) -> Path:
    """`times` copies of the corpus at `source` as one JSONL file (id, title, text; for timing)."""
    path = folder / "repeated.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for doc in repeated(parse_path(source).documents, times):
            out.write(json.dumps({"id": doc.id, "title": doc.title, "text": doc.text}, ensure_ascii=False) + "\n")
    return path


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("collection", help="name of the new collection")
    parser.add_argument("--source", default=str(REPO / "sample_data" / "xquad"),
                        help="a file or folder `python -m retrieval ingest` reads (default: the bundled sample)")
    parser.add_argument("--model", default=None, help="embedding model (default: by corpus language, as ingest)")
    parser.add_argument("--repeat", type=int, default=1, help="copies of the corpus (distinct ids), to time")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="Ray workers (one CPU each)")
    parser.add_argument("--batch-size", type=int, default=64, help="documents per Ray Data batch")
    parser.add_argument("--db", default=None, help="store URI (default $WORKBENCH_DB)")
    parser.add_argument("--compare", action="store_true",
                        help="also ingest the same file with the CLI's ingest in this process (as "
                             "<collection>-single) and print both rates")
    args = parser.parse_args(argv)

    store = Store(args.db)
    with tempfile.TemporaryDirectory() as tmp:
        source = args.source if args.repeat == 1 else repeated_file(args.source, args.repeat, Path(tmp))
        result, timings = ray_ingest(store, args.collection, source, args.model, args.workers, args.batch_size)
        info = result.info
        report = {"collection": info.name, "documents": info.doc_count, "model": info.model,
                  "xl_model": info.xl_model, "workers": args.workers, **{k: round(v, 2) for k, v in timings.items()},
                  "ray_docs_per_s": round(result.documents / timings["ingest_s"], 1)}
        if args.compare:
            report.update(single_process(store, f"{args.collection}-single", source, args.model))
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
