"""Latency of `retrieve_knowledge` over MCP streamable HTTP (`python -m retrieval serve --http`);
prints a table. Run: .venv/bin/python benchmarks/bench_serve.py [BEIR_DIR] [--queries N] [--db DB]

Collections: the bundled sample (`sample_data/xquad` as `sample-xquad`, created when missing)
and a BEIR folder (default ../shared/eval/nfcorpus, ingested once into its `eval-…` cache
collection, as `evaluate` does). Both are served with the default SearchConfig (BM25 + dense,
depth 100, fused as `SearchConfig()` says: weighted sum, l2, 0.4 / 0.6 since default-config.md)
by one server in a subprocess; one client (the SDK's streamable HTTP client, one session) calls
`retrieve_knowledge(query, top_k=10)` for each of N queries, twice:

- first time: the query's candidates are not cached yet (models are loaded and sources built by the
  server's warm-up, as in service);
- repeated: the same queries again, candidates from the server's cache (fusion + JSON only).

For comparison, the same queries through `Workbench.search` in this process (no MCP, no HTTP):
the difference is what the protocol, the transport and the per-result JSON cost.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

import anyio  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from retrieval.evaluation.beir_cache import ensure_beir_collection  # noqa: E402
from retrieval.indexing.readers.parse import parse_path  # noqa: E402
from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.fusion.methods import method_of  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.store import Store  # noqa: E402

SAMPLE = "sample-xquad"
TOP_K = 10


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def spread(items: list[str], n: int) -> list[str]:
    """n items evenly spaced over the list (the sample's file lists English, then Chinese)."""
    if len(items) <= n:
        return items
    return [items[i * len(items) // n] for i in range(n)]


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db: str, collections: list[str], port: int, logfile) -> subprocess.Popen:
    args = [sys.executable, "-m", "retrieval", "--db", db, "serve", "--http", f"127.0.0.1:{port}"]
    for name in collections:
        args += ["--collection", name]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE",
           "LANCEDB_LOG": "error"}
    env.pop("WORKBENCH_MCP_TOKEN", None)
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=logfile, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited with {proc.returncode}; see {logfile.name}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    sys.exit(f"the server did not start in 600 s; see {logfile.name}")


async def time_calls(url: str, plan: list[tuple[str, list[str]]]) -> dict[tuple[str, str], list[float]]:
    """Per (collection, pass) the seconds of each call, first time and repeated."""
    times: dict[tuple[str, str], list[float]] = {}
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for collection, queries in plan:
            for which in ("first time", "repeated"):
                spent = times.setdefault((collection, which), [])
                for query in queries:
                    started = time.perf_counter()
                    result = await session.call_tool("retrieve_knowledge", {
                        "query": query, "top_k": TOP_K, "collection_name": collection})
                    spent.append(time.perf_counter() - started)
                    if result.is_error:
                        sys.exit(f"retrieve_knowledge failed: {result.content[0].text}")
                    assert len(json.loads(result.content[0].text)["results"]) <= TOP_K
    return times


def time_in_process(workbench: Workbench, plan: list[tuple[str, list[str]]]) -> dict[tuple[str, str], list[float]]:
    config = SearchConfig(top_k=TOP_K)
    times: dict[tuple[str, str], list[float]] = {}
    for collection, queries in plan:
        workbench.search(collection, "warm up", config)
        for which in ("first time", "repeated"):
            spent = times.setdefault((collection, which), [])
            for query in queries:
                started = time.perf_counter()
                workbench.search(collection, query, config)
                spent.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("beir_dir", nargs="?", type=Path, default=REPO.parent / "shared" / "eval" / "nfcorpus")
    parser.add_argument("--queries", type=int, default=100, help="queries per collection (default 100)")
    parser.add_argument("--db", help="LanceDB location (default $WORKBENCH_DB or ./data/lancedb)")
    args = parser.parse_args()
    if not (args.beir_dir / "corpus.jsonl").is_file():
        sys.exit(f"{args.beir_dir} is missing or not a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv): "
                 "give one as the first argument; the default is ../shared/eval/nfcorpus beside the repository")
    store = Store(args.db)
    workbench = Workbench(store)
    sample = parse_path(REPO / "sample_data" / "xquad")
    if not workbench.exists(SAMPLE):
        log(f"creating {SAMPLE} from sample_data/xquad …")
        workbench.create(SAMPLE, sample, description="XQuAD sample (60 English + 60 Chinese paragraphs)")
    beir_name, beir = ensure_beir_collection(store, args.beir_dir, log=log)
    judged = [beir.queries[q] for q in beir.qrels if q in beir.queries]
    plan = [(SAMPLE, spread(list(sample.queries.values()), args.queries)), (beir_name, judged[: args.queries])]

    port = free_port()
    with tempfile.NamedTemporaryFile("w", prefix="bench-serve-", suffix=".log", delete=False) as logfile:
        started = time.perf_counter()
        server = start_server(store.uri, [name for name, _ in plan], port, logfile)
        log(f"server up in {time.perf_counter() - started:.1f} s (models loaded, sources built); log {logfile.name}")
        try:
            over_http = anyio.run(time_calls, f"http://127.0.0.1:{port}/mcp", plan)
        finally:
            server.terminate()
            server.wait(timeout=30)
    in_process = time_in_process(workbench, plan)

    docs = {name: workbench.info(name).doc_count for name, _ in plan}
    default = SearchConfig()
    print(f"retrieve_knowledge(top_k={TOP_K}) over MCP streamable HTTP (one client, sequential calls), default "
          f"config (bm25 + dense, depth 100, {method_of(default).title(default)} {default.weights})")
    print(f"{'collection':<26} {'docs':>5} {'queries':>7}  {'path':<40} {'p50':>9} {'p95':>9}")
    for name, queries in plan:
        for label, times in (("MCP HTTP", over_http), ("Workbench.search in-process", in_process)):
            for which in ("first time", "repeated"):
                values = times[(name, which)]
                print(f"{name:<26} {docs[name]:>5} {len(queries):>7}  {f'{label}, {which}':<40} "
                      f"{pct(values, 50) * 1000:>6.1f} ms {pct(values, 95) * 1000:>6.1f} ms")


if __name__ == "__main__":
    main()
