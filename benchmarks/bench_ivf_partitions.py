"""IVF partitions and probes at scale: for each number of partitions, a fresh index (`--index`:
IVF_RQ, the shipped `limits.ANN_INDEX`, or IVF_SQ, IVF_HNSW_SQ, …) on a copy of a collection's
vectors, then per probes setting the p50 and recall@10 (against numpy's exact top 10) of the
project's vector request (`sources.lance_requests.vector_query`: limit 100, refine ×1, row ids
named by a `RowIdMap`) and of LanceDB's default vector search (limit 10, its default probes, no
refine).

    .venv/bin/python benchmarks/bench_ivf_partitions.py data/scale/db-1000000-minilm-static \
        --queries data/scale/corpus-1000000/queries.jsonl --encoder data/models/minilm-static \
        --plan "default:20,25,30" "500:20,40,60,80" "1000:30,60,90,120" [--index IVF_SQ] \
        [--refine 1,3,5] [--ef 800] [--json]

The copy (id and vector columns only) goes to `--work` (default: `partitions/<database>` beside
the collection's database) and is reused by later runs; the collection itself is not touched.
Results: docs/experiments/peers.md ("partitions probed").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

os.environ.setdefault("LANCEDB_LOG", "error")

import bench_scale  # benchmarks/ is the script's folder

COLLECTION = "scale"
ROWS_PER_ADD = 100_000


def parse_plan(items: list[str]) -> list[tuple[int | None, list[int]]]:
    """"default:20,25" → (None, [20, 25]); "500:20,40" → (500, [20, 40])."""
    plan = []
    for item in items:
        partitions, _, probes = item.partition(":")
        plan.append((None if partitions == "default" else int(partitions), [int(p) for p in probes.split(",")]))
    return plan


def vector_copy(source_db: Path, work: Path, collection: str):
    """A table of the collection's id and vector columns in `work` (made once), and those columns."""
    import lancedb

    from retrieval.store import Store

    columns = Store(str(source_db)).column(collection, ["id", "vector"])
    db = lancedb.connect(str(work))
    if "vectors" in db.table_names():
        return db, db.open_table("vectors"), columns
    table = db.create_table("vectors", columns.slice(0, ROWS_PER_ADD))
    for start in range(ROWS_PER_ADD, columns.num_rows, ROWS_PER_ADD):
        table.add(columns.slice(start, ROWS_PER_ADD))
    table.optimize()
    return db, table, columns


def run(args) -> dict:
    from retrieval.indexing.indexes import index_vectors
    from retrieval.models.embed import load_encoder
    from retrieval.sources.lance_requests import LanceRequest, RowIdMap, vector_query

    warnings.simplefilter("ignore")
    work = args.work or args.db.parent / "partitions" / args.db.name
    db, table, columns = vector_copy(args.db, work, args.collection)
    ids = columns.column("id").to_pylist()
    flat = columns.column("vector").combine_chunks().flatten().to_numpy()
    matrix = np.asarray(flat, np.float32).reshape(len(ids), -1)
    del columns
    texts = [json.loads(line)["text"] for line in args.queries.read_text("utf-8").splitlines() if line.strip()]
    texts = texts[: args.n]
    vectors = load_encoder(args.encoder).encode_queries(texts)
    exact = [bench_scale.exact_top(matrix, ids, v) for v in vectors]
    del matrix
    rows = []
    for partitions, probes_list in parse_plan(args.plan):
        started, cpu = time.perf_counter(), time.process_time()
        index_vectors(table, index_type=args.index, num_partitions=partitions)
        built = (time.perf_counter() - started, time.process_time() - cpu)
        handle = db.open_table("vectors")
        handle.checkout(table.version)
        named = RowIdMap(handle)
        named.wait()
        entry = {"index": args.index, "partitions": partitions or "default", "build_s": built[0],
                 "build_cpu_s": built[1], "project": []}
        for probes in probes_list:
            for refine in args.refine:
                walls, recalls = [], []
                for vector, truth in zip(vectors, exact, strict=True):
                    query = vector_query(vector, "vector", 100, probes, refine, None, with_ids=False)
                    query.ef = args.ef  # HNSW's candidate list (None: LanceDB's default; IVF ignores it)
                    request = LanceRequest(handle, query, lambda found: found)
                    started = time.perf_counter()
                    found = request.run()
                    got = named.ids(found.column("_rowid").combine_chunks())
                    walls.append(time.perf_counter() - started)
                    recalls.append(bench_scale.recall_at(got[:10], truth))
                entry["project"].append({"probes": probes, "refine": refine, "p50_ms": statistics.median(walls) * 1000,
                                         "recall@10": float(np.mean(recalls)), "min_recall@10": float(min(recalls))})
        walls, recalls = [], []
        for vector, truth in zip(vectors, exact, strict=True):
            started = time.perf_counter()
            found = (handle.search(vector, vector_column_name="vector").distance_type("cosine").limit(10)
                     .select(["id"]).to_arrow())
            walls.append(time.perf_counter() - started)
            recalls.append(bench_scale.recall_at(found.column("id").to_pylist(), truth))
        entry["lancedb_defaults"] = {"p50_ms": statistics.median(walls) * 1000, "recall@10": float(np.mean(recalls))}
        rows.append(entry)
    return {"db": str(args.db), "documents": len(ids), "queries": len(texts), "encoder": args.encoder,
            "lance_cpu_threads": os.environ.get("LANCE_CPU_THREADS"), "ef": args.ef, "runs": rows}


def table_text(result: dict) -> str:
    lines = [f"{result['documents']:,} vectors, {result['queries']} queries, encoder {result['encoder']}, "
             f"index {result['runs'][0]['index'] if result['runs'] else '-'}", "",
             "partitions  build s  probes  refine  p50 ms  recall@10 (min)   LanceDB defaults: p50 ms, recall@10"]
    for entry in result["runs"]:
        defaults = entry["lancedb_defaults"]
        for i, row in enumerate(entry["project"]):
            head = f"{entry['partitions']!s:>10}  {entry['build_s']:7.1f}" if i == 0 else " " * 19
            tail = f"   {defaults['p50_ms']:6.1f}, {defaults['recall@10']:.3f}" if i == 0 else ""
            lines.append(f"{head}  {row['probes']:6d}  {row.get('refine', 1):6d}  {row['p50_ms']:6.1f}  "
                         f"{row['recall@10']:.3f} ({row['min_recall@10']:.2f})  {tail}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", type=Path, help="the LanceDB database holding the collection")
    parser.add_argument("--collection", default=COLLECTION)
    parser.add_argument("--queries", type=Path, required=True, help="a BEIR queries.jsonl")
    parser.add_argument("--n", type=int, default=200, help="the first N queries")
    parser.add_argument("--encoder", default=bench_scale.DEFAULT_ENCODER, help="the collection's embedding model")
    parser.add_argument("--plan", nargs="+", default=["default:20,25,30"],
                        help='PARTITIONS:PROBES,… per index ("default" = LanceDB\'s own number)')
    parser.add_argument("--index", default=None, help="the index type (default: limits.ANN_INDEX)")
    parser.add_argument("--refine", type=lambda v: [int(x) for x in v.split(",")], default=[1],
                        help="refine factors, comma-separated (default 1: the project's at depth 100)")
    parser.add_argument("--ef", type=int, default=None, help="HNSW's search list (IVF_HNSW_* indexes)")
    parser.add_argument("--work", type=Path, help="where the copy of the vectors goes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.index is None:
        from retrieval import limits

        args.index = limits.ANN_INDEX
    result = run(args)
    print(json.dumps(result, indent=1) if args.json else table_text(result))


if __name__ == "__main__":
    main()
