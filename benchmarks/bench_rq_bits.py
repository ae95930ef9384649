"""IVF_RQ's bits per dimension and k-means sample: build time, the memory the build adds, and
recall of the project's vector request for each `num_bits` and `sample_rate`, on real vectors.
Chose `limits.ANN_RQ_BITS`; results in docs/experiments/ingest.md ("The vector index's bits").

    .venv/bin/python benchmarks/bench_rq_bits.py --docs 100000 --encoder data/models/minilm-static
    .venv/bin/python benchmarks/bench_rq_bits.py --docs 30000 --encoder all-MiniLM-L6-v2 [--json]

The texts are bench_scale's corpus of --docs documents and its --queries queries (seed 0; made
from ../shared/eval); their vectors are embedded once (`encode_passages`, `encode_queries`) and
kept in data/scale/rq-bits/. The vectors go into a LanceDB table in batches of 5,000 rows (as an
ingest writes them); then, per bits and --sample-rate setting, a fresh IVF_RQ index (cosine,
LanceDB's default number of partitions) is built, timed and its added memory sampled, and every
query is sent as the dense source sends it (`sources.lance_requests.vector_query`'s request
through LanceDB's query builder: cosine, limit 100, refine ×1 or ×3, the given probes).
recall@10 = |served top 10 ∩ exact top 10| / 10, exact by numpy over every vector, averaged over
the queries; p50 is one request's wall time. Every partition probed isolates the codes' ordering
(the shortlist of 100 is chosen by the codes, then re-scored exactly); fewer probes add the
partitioning's misses, which differ between builds (k-means is trained anew each time).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np

os.environ.setdefault("LANCEDB_LOG", "error")

import bench_scale  # benchmarks/ is the script's folder
from bench_clicks import memory_mb

REPO = Path(__file__).resolve().parents[1]
ROWS_PER_ADD = 5_000


def vectors(docs: int, queries: int, encoder_name: str, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """(document vectors, query vectors) of bench_scale's corpus, embedded once and cached."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", encoder_name).strip("-")
    d_path, q_path = cache / f"{slug}-{docs}-d.npy", cache / f"{slug}-{docs}-q{queries}.npy"
    if d_path.exists() and q_path.exists():
        return np.load(d_path), np.load(q_path)
    from retrieval.models.embed import load_encoder

    corpus, asked, _ = bench_scale.build_corpus(bench_scale.sentence_pools(), docs, queries, seed=0)
    encoder = load_encoder(encoder_name)
    q = np.asarray(encoder.encode_queries(list(asked.values())), dtype=np.float32)
    d = np.asarray(encoder.encode_passages([row["text"] for row in corpus]), dtype=np.float32)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(d_path, d)
    np.save(q_path, q)
    return d, q


class PeakRss:
    """The highest resident set seen while the block runs, sampled every 20 ms, above the one at
    its start: what an index build adds to a process's memory."""

    def __enter__(self):
        self.start = self.peak = memory_mb("VmRSS")
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(0.02):
            self.peak = max(self.peak, memory_mb("VmRSS"))

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self.added_mb = max(self.peak, memory_mb("VmRSS")) - self.start


def run(args) -> dict:
    import lancedb
    import pyarrow as pa
    from lancedb.index import IvfRq

    warnings.simplefilter("ignore")
    d, q = vectors(args.docs, args.queries, args.encoder, args.cache)
    unit = d / np.linalg.norm(d, axis=1, keepdims=True)
    exact = np.argsort(-(q @ unit.T), axis=1)[:, :10]
    work = args.cache / "db"
    shutil.rmtree(work, ignore_errors=True)
    db = lancedb.connect(str(work))
    table = None
    for start in range(0, len(d), ROWS_PER_ADD):
        part = d[start:start + ROWS_PER_ADD]
        data = pa.table({"id": [str(i) for i in range(start, start + len(part))],
                         "vector": pa.FixedSizeListArray.from_arrays(pa.array(part.ravel()), d.shape[1])})
        if table is None:
            table = db.create_table("vectors", data)
        else:
            table.add(data)
    rows = []
    for bits, sample_rate in [(b, r) for b in args.bits for r in args.sample_rate]:
        with PeakRss() as memory:
            started = time.perf_counter()
            table.create_index("vector", config=IvfRq(distance_type="cosine", num_bits=bits, sample_rate=sample_rate),
                               replace=True)
            build = time.perf_counter() - started
        for probes in args.probes:
            for refine in (1, 3):
                recalls, times = [], []
                for i, vector in enumerate(q):
                    started = time.perf_counter()
                    result = table.search(vector, vector_column_name="vector").distance_type("cosine") \
                        .nprobes(probes).refine_factor(refine).limit(100).select(["id"]).to_arrow()
                    times.append(time.perf_counter() - started)
                    top = [int(x) for x in result.column("id").to_pylist()[:10]]
                    recalls.append(len(set(top) & set(exact[i].tolist())) / 10)
                rows.append({"bits": bits, "sample_rate": sample_rate, "build_s": round(build, 2),
                             "build_added_rss_mb": round(memory.added_mb), "probes": probes, "refine": refine,
                             "recall_at_10": round(float(np.mean(recalls)), 4),
                             "p50_ms": round(1000 * statistics.median(times), 1)})
    shutil.rmtree(work, ignore_errors=True)
    return {"docs": len(d), "queries": len(q), "encoder": args.encoder, "rows": rows}


def table_text(result: dict) -> str:
    lines = [f"{result['docs']:,} vectors, {result['queries']} queries, encoder {result['encoder']}",
             "| bits | sample rate | build s | build's added RSS MB | probes | refine | recall@10 | p50 ms |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['bits']} | {r['sample_rate']} | {r['build_s']} | {r['build_added_rss_mb']} | {r['probes']} "
              f"| ×{r['refine']} | {r['recall_at_10']:.4f} | {r['p50_ms']} |" for r in result["rows"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=30_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2")
    parser.add_argument("--bits", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 8])
    parser.add_argument("--sample-rate", type=lambda s: [int(x) for x in s.split(",")], default=[256],
                        help="k-means training vectors per partition (LanceDB's sample_rate; default 256)")
    parser.add_argument("--probes", type=lambda s: [int(x) for x in s.split(",")], default=[2, 100])
    parser.add_argument("--cache", type=Path, default=REPO / "data" / "scale" / "rq-bits")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args)
    print(json.dumps(result) if args.json else table_text(result))


if __name__ == "__main__":
    sys.exit(main())
