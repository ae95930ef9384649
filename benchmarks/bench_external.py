"""What an outside engine adds to a search's latency, with its answers cached and not.

Run: .venv/bin/python benchmarks/bench_external.py [--engine bm25-api|chroma] [--queries N] [--rounds R] [--json]

A real engine serves the bundled sample's 60 English paragraphs (sample_data/xquad); the same
paragraphs are a local collection. `bm25-api` (default): the tests' BM25 JSON API
(tests/search_engine.py: http.server on 127.0.0.1 in a thread). `chroma`: Chroma's server
(`chroma run` on 127.0.0.1, tests/chroma_server.py) holding the paragraphs with the collection's
own vectors, queried through the preset examples/sources/chroma.json with `{query_vector}` (the
query embedded by the collection's encoder: cached per query like every query vector, so no row
times the embedding). For each of N questions, R rounds, the median (p50) of `Workbench.search`
(each row one pass over the questions, after a warm-up pass):

    bm25 alone                              candidates not cached (cleared before each query)
    bm25 + engine, caching off              candidates and the engine's answers cleared: one
                                            HTTP request per query
    bm25 + engine, caching on (new search)  candidates cleared, the answers cached: a collection
                                            write or another config over the same query
    bm25 + engine, slider move              candidates cached (a weight moved): no request

and the latency the source adds (each row's p50 minus bm25 alone's).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from retrieval.indexing.pipeline import create_collection  # noqa: E402
from retrieval.indexing.readers.parse import parse_path  # noqa: E402
from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.sources.external import close_engines, parse_descriptor  # noqa: E402
from retrieval.store import Store  # noqa: E402
from retrieval.types import ParsedCorpus  # noqa: E402


def load_test_module(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "tests" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def p50_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("bm25-api", "chroma"), default="bm25-api")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3, help="passes over the queries per row (default 3)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sample = parse_path(REPO / "sample_data" / "xquad")
    documents = [d for d in sample.documents if d.id.startswith("en-")]
    queries = [sample.queries[q] for q in sample.qrels if q.startswith("en-")][: args.queries]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(str(Path(tmp) / "db"))
        create_collection(store, "bench", ParsedCorpus(documents), "all-MiniLM-L6-v2")
        wb = Workbench(store)
        if args.engine == "chroma":
            from retrieval.models.embed import load_encoder
            from retrieval.text.passages import embedding_text

            engine = load_test_module("chroma_server").Chroma(Path(tmp))
            vectors = load_encoder("all-MiniLM-L6-v2").encode_passages([embedding_text(d) for d in documents])
            engine.load("bench", documents, vectors)
            descriptor = engine.descriptor()
        else:
            search_engine = load_test_module("search_engine")
            engine = search_engine.Engine({d.id: (d.title, d.text) for d in documents})
            descriptor = parse_descriptor(search_engine.descriptor(engine.start()))
        wb.use_source(descriptor)
        name = descriptor.name
        alone = SearchConfig(weights={"bm25": 1.0}, depth=100)
        both = SearchConfig(weights={"bm25": 1.0, name: 1.0}, depth=100)
        moved = both.replace(weights={"bm25": 0.3, name: 0.7})
        # The warm-up pass caches every answer; "caching off" clears them, so it comes last.
        passes = (("bm25 alone", alone, ("candidates",)),
                  ("bm25 + engine, caching on (new search)", both, ("candidates",)),
                  ("bm25 + engine, slider move", moved, ()),
                  ("bm25 + engine, caching off", both, ("candidates", "responses")))
        rows: dict[str, list[float]] = {row: [] for row, _, _ in passes}
        calls = 0 if hasattr(engine, "calls") else None  # Chroma's server does not count them for us
        for _ in range(args.rounds):
            for query in queries:  # warm: the BM25 index, the connection, the answers, per-query memos
                wb.search("bench", query, both)
            warm_calls = getattr(engine, "calls", 0)
            for row, config, clear in passes:  # one pass over the queries per row
                for query in queries:
                    for cache in clear:
                        getattr(wb.caches, cache).clear()
                    started = time.perf_counter()
                    result = wb.search("bench", query, config)
                    rows[row].append(time.perf_counter() - started)
                    assert all(r.error is None for r in result.candidates.sources.values())
            if calls is not None:
                calls += engine.calls - warm_calls
        engine.stop()
        close_engines()
    base_ms = p50_ms(rows["bm25 alone"])
    out = [{"row": row, "p50_ms": round(p50_ms(t), 3), "added_p50_ms": round(p50_ms(t) - base_ms, 3)}
           for row, t in rows.items()]
    if args.json:
        print(json.dumps({"engine": args.engine, "queries": len(queries), "rounds": args.rounds,
                          "engine_calls": calls, "rows": out}))
        return
    print(f"{args.engine}: {len(queries)} queries × {args.rounds} rounds, 60 paragraphs"
          + ("" if calls is None else f"; after each round's warm-up pass the engine answered {calls} requests "
             "(one per query with caching off, none cached)"))
    print(f"{'search':<42} {'p50':>10} {'added':>10}")
    for r in out:
        print(f"{r['row']:<42} {r['p50_ms']:>8.2f} ms {r['added_p50_ms']:>+8.2f} ms")


if __name__ == "__main__":
    main()
