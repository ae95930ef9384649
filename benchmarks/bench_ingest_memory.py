"""Peak memory of the streaming ingest vs the one-shot ingest; prints a table.

    .venv/bin/python benchmarks/bench_ingest_memory.py [--docs 5000,20000] [--batch-size 2048]
                                                       [--chars 400] [--model all-MiniLM-L6-v2]

For each size N a JSONL of N documents is generated from the bundled XQuAD paragraphs
(sample_data/xquad: document i is paragraph i mod 120, its first `--chars` characters, with its
number appended so no two texts are equal), then ingested into a fresh database by each path in
its own process (`python -m retrieval ingest`'s streaming path: `open_stream` +
`ingest_stream`; the one-shot path: `parse_path` + `create_collection`), which reports its peak
RSS (`ru_maxrss`) and time. The streaming path's peak should stay flat as N grows (one batch of
texts, tokens and vectors in memory, plus the ids as 8-byte hashes and the entity counts); the one-shot
path's grows with N. Run it under `nice -n 19` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def generate(path: Path, docs: int, chars: int) -> None:
    paragraphs = [json.loads(line) for line in (REPO / "sample_data" / "xquad" / "corpus.jsonl")
                  .read_text(encoding="utf-8").splitlines()]
    with path.open("w", encoding="utf-8") as out:
        for i in range(docs):
            source = paragraphs[i % len(paragraphs)]
            out.write(json.dumps({"id": f"g{i}", "title": source["title"],
                                  "text": f"{source['text'][:chars]} ({i})"}, ensure_ascii=False) + "\n")


def child(mode: str, path: str, db: str, model: str, batch_size: int) -> None:
    from retrieval.indexing.pipeline import create_collection, ingest_stream
    from retrieval.indexing.readers.parse import parse_path
    from retrieval.indexing.readers.stream import open_stream
    from retrieval.store import Store

    store = Store(db)
    started = time.perf_counter()
    if mode == "stream":
        result = ingest_stream(store, "bench", open_stream(path, batch_size=batch_size), model=model)
    else:
        result = create_collection(store, "bench", parse_path(path), model=model)
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"docs": result.info.doc_count, "seconds": seconds, "peak_mb": peak_mb}))


def run(mode: str, path: Path, model: str, batch_size: int) -> dict:
    with tempfile.TemporaryDirectory() as db:
        out = subprocess.run([sys.executable, __file__, "--child", mode, str(path), db, "--model", model,
                              "--batch-size", str(batch_size)], capture_output=True, text=True, check=True,
                             env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", default="5000,20000", help="corpus sizes, comma-separated")
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--chars", type=int, default=400, help="characters of each paragraph kept")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--modes", default="stream,one-shot")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "FILE", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.model, args.batch_size)
        return
    print(f"model {args.model}, batch size {args.batch_size}, {args.chars}-character documents")
    print(f"{'documents':>10} {'path':>9} {'peak RSS':>10} {'time':>9} {'docs/s':>8}")
    with tempfile.TemporaryDirectory() as folder:
        for size in (int(n) for n in args.docs.split(",")):
            path = Path(folder) / f"corpus-{size}.jsonl"
            generate(path, size, args.chars)
            for mode in args.modes.split(","):
                r = run(mode, path, args.model, args.batch_size)
                assert r["docs"] == size, r
                print(f"{size:>10,} {mode:>9} {r['peak_mb']:>7,.0f} MB {r['seconds']:>7.1f} s "
                      f"{size / r['seconds']:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
