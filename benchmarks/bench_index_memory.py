"""What each index step at the end of a large ingest adds to a process's memory, LanceDB alone
(issue 42: the pipeline's own memory is flat; is the rest LanceDB's?); prints a table, or with
--json one object.

    nice -n 5 .venv/bin/python benchmarks/bench_index_memory.py --docs 100000,1000000
    ... --io-threads 2        # LANCE_IO_THREADS for the steps (LanceDB's default when not given)
    ... --repeat 2            # each step's process run that many times (its peak varies ±100 MB)

For each size N a table like the one a streamed ingest writes is made in a temporary folder: N
rows of `id`, `tokens` (vaswani's texts, lower-cased words, repeated) and a 384-dim `vector`
(random unit vectors, 16,384 distinct ones repeated), appended 2,048 rows at a time as the
streaming writer does (`readers.stream.STREAM_BATCH`: one data file each). Then the steps
`indexing.indexes.index_for_size` and the writer run after the stream, in their order: the
full-text index (`index_text`), IVF_RQ (`index_vectors`, `limits.ANN_RQ_BITS`), the id BTREE
(`index_ids`), the compaction (`compact`'s `optimize`), each in a fresh process that opens
the table, samples its RSS every 20 ms (`bench_rq_bits.PeakRss`) and reports the seconds, its RSS
before the step (LanceDB imported, the table open) and its peak. Keys of --json: `sizes`, a list
of {`docs`, `steps`: {step: {`s`, `base_mb`, `peak_mb`, `added_mb`}}} (`added_mb` the largest
over --repeat runs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STEPS = ("fts", "ivf_rq", "id_btree", "compaction")
WRITE_ROWS = 2048  # the streaming writer's batch (readers.stream.STREAM_BATCH)
DIM = 384


def make_table(path: Path, docs: int, source: Path) -> None:
    """`docs` rows appended `WRITE_ROWS` at a time, as a streamed ingest lays them out."""
    import lancedb
    import numpy as np
    import pyarrow as pa

    corpus = source / "corpus.jsonl" if source.is_dir() else source
    texts = [" ".join(re.findall(r"\w+", (d.get("title", "") + " " + d["text"]).lower()))
             for d in map(json.loads, corpus.read_text(encoding="utf-8").splitlines())]
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((16_384, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    db, table = lancedb.connect(str(path)), None
    for start in range(0, docs, WRITE_ROWS):
        end = min(docs, start + WRITE_ROWS)
        # 16,384 is a multiple of WRITE_ROWS: a batch never wraps past the distinct vectors.
        rows = pa.table({"id": [f"d{i}" for i in range(start, end)],
                         "tokens": [texts[i % len(texts)] for i in range(start, end)],
                         "vector": pa.FixedSizeListArray.from_arrays(
                             pa.array(vectors[start % 16_384:][: end - start].ravel()), DIM)})
        if table is None:
            table = db.create_table("c", rows)
        else:
            table.add(rows)


def run_step(path: Path, step: str) -> dict:
    """One step on the table at `path`, in this process, as the product builds it (`indexes`):
    seconds, RSS before, peak (`bench_rq_bits.PeakRss`)."""
    import lancedb
    from bench_rq_bits import PeakRss  # benchmarks/ is the script's folder

    from retrieval.indexing.indexes import index_ids, index_text, index_vectors

    table = lancedb.connect(str(path)).open_table("c")
    table.count_rows()
    started = time.perf_counter()
    with PeakRss() as rss, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if step == "fts":
            index_text(table, "tokens")
        elif step == "ivf_rq":  # as indexes.build_vector_index builds it, without a Store's lock
            index_vectors(table)
        elif step == "id_btree":
            index_ids(table)
        elif step == "compaction":
            table.optimize()
    seconds = time.perf_counter() - started
    base_mb, peak_mb = round(rss.start), round(rss.start + rss.added_mb)
    return {"s": round(seconds, 1), "base_mb": base_mb, "peak_mb": peak_mb, "added_mb": peak_mb - base_mb}


def measure(docs: int, source: Path, repeat: int, io_threads: int | None) -> dict:
    env = {**os.environ, **({"LANCE_IO_THREADS": str(io_threads)} if io_threads else {})}
    steps: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(repeat):
            path = Path(tmp) / f"db{run}"
            make_table(path, docs, source)
            for step in STEPS:  # in order, each on what the one before left, in its own process
                out = subprocess.run([sys.executable, __file__, "--step", step, "--table", str(path)], env=env,
                                     cwd=REPO, capture_output=True, text=True, check=True).stdout
                result = json.loads(out.strip().splitlines()[-1])
                if step not in steps or result["added_mb"] > steps[step]["added_mb"]:
                    steps[step] = result
    return {"docs": docs, "steps": steps}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", default="100000,1000000", help="comma-separated table sizes")
    parser.add_argument("--source", type=Path, default=REPO.parent / "shared" / "eval" / "vaswani",
                        help="a BEIR corpus.jsonl, or a folder holding one (the tokens' texts)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size (the largest rise is kept)")
    parser.add_argument("--io-threads", type=int, help="LANCE_IO_THREADS for the steps")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    parser.add_argument("--table", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.step:
        print(json.dumps(run_step(args.table, args.step)))
        return
    sizes = [measure(int(n), args.source, args.repeat, args.io_threads) for n in args.docs.split(",")]
    if args.json:
        print(json.dumps({"io_threads": args.io_threads, "sizes": sizes}))
        return
    print(f"LANCE_IO_THREADS: {args.io_threads or 'LanceDB default'}\n")
    print("| documents | step | s | RSS before MB | peak MB | added MB |\n| ---: | --- | ---: | ---: | ---: | ---: |")
    for size in sizes:
        for step, r in size["steps"].items():
            print(f"| {size['docs']:,} | {step} | {r['s']} | {r['base_mb']:,} | {r['peak_mb']:,} | {r['added_mb']:,} |")


if __name__ == "__main__":
    main()
