"""This project's search and ingest against the tools a user would pick instead, measured side by
side in one run, on one BEIR folder and the same queries. Prints two tables, or with --json one
object.

    nice -n 19 .venv/bin/python benchmarks/bench_peers.py --docs 10000 --encoder data/models/minilm-static
    nice -n 19 .venv/bin/python benchmarks/bench_peers.py --docs 100000 --encoder data/models/minilm-static --stream
    nice -n 19 .venv/bin/python benchmarks/bench_peers.py [BEIR_DIR] [--docs N] [--encoder NAME] [--json]
    nice -n 19 .venv/bin/python benchmarks/bench_peers.py --docs 1000000 --stream \
        --vectors data/scale/vectors-corpus-1000000-all-MiniLM-L6-v2-onnx-int8   # the real MiniLM at 1M
        [--vectors-wait 3600]   # started beside precompute_vectors.py: wait for each shard not made yet

bm25s is in requirements.txt (its numba backend uses the numba ranx already brings); without it
the bm25s row is skipped and says so.

Corpus and collection: without BEIR_DIR the scale corpus of `bench_scale.py` (deterministic, seed
0, cached as data/scale/corpus-N/, built from ../shared/eval sentences; docs/experiments/scale.md)
and its ingest into data/scale/db-N[-encoder] (reused when it exists, as bench_scale.py reuses it).
With BEIR_DIR (corpus.jsonl, queries.jsonl, qrels/test.tsv), the folder is ingested the same way
into data/peers/db-<folder>[-encoder]. The ingest is `bench_scale.ensure_ingest`: a child process
running `Workbench.create` (or `Workbench.ingest_stream` with --stream), which first times the
encoder alone on the first --encoder-sample texts.

Queries: the folder's first --queries queries that have judgments (distinct texts), the same for
every system; 5 further ones warm every system up first. nDCG@10 is over those queries against the
folder's qrels (`evaluate.QrelsEvaluator`, ranx). Every system answers from the query string to its
top 10 ids, so query tokenising and query embedding are inside every timing; they run in one
process, interleaved (query i goes to every system, in an order rotated by i), so a change in the
shared machine's load hits them all alike. p50 / p95 of per-query wall time; q/s = queries / their
summed wall time (one query at a time); CPU ms = the process's CPU time per query (all threads,
LanceDB's runtime included).

The systems and their exact calls (`q` the query string, `terms = retrieval.text.tokenize.tokenize(q)`,
`qvec = load_encoder(model).encode_queries([q])[0]`, the collection's own encoder):
- project_bm25 / project_vector / project_hybrid: `Workbench.search("scale", q, config)`, what the
  app's Search page calls (candidates at depth 100, fused and explained, the shown rows read), with
  `SearchConfig(weights={"bm25": 1.0})`, `SearchConfig(weights={"dense": 1.0})` and
  `SearchConfig()` (the shipped default: weighted l2 fusion 0.4 / 0.6). One Workbench per system
  (their caches apart), all on one `Store`; the sources and the row-id map are loaded before the clock starts.
- lancedb_fts: `table.search(" ".join(terms), query_type="fts", fts_columns="tokens").limit(10)
  .select(["id", "text"]).to_arrow()` — the collection's own native BM25 index on `tokens`.
- lancedb_vector: `table.search(qvec, vector_column_name="vector").distance_type("cosine")
  .limit(10).select(["id", "text"]).to_arrow()` — LanceDB's defaults otherwise (its nprobes and no
  refine on the collection's IVF index from 50k documents; an exact scan below).
- lancedb_hybrid: `table.search(query_type="hybrid", vector_column_name="vector",
  fts_columns="tokens").vector(qvec).text(" ".join(terms)).distance_type("cosine").limit(10)
  .rerank(RRFReranker()).select(["id", "text"]).to_arrow()` — LanceDB's own hybrid: FTS top 10 and
  vector top 10, fused by its RRF reranker (k 60). Fed the project's analysed query terms, so its
  FTS side matches the same index the project's BM25 uses. lancedb_hybrid_d100 is the same with
  `.limit(100)` and the first 10 kept: both sides at the project's candidate depth.
  The table is the collection's own (`Store.table`), opened through a separate `lancedb.connect`.
- bm25s: `bm25s.BM25(k1, b, method="lucene", backend="numba")`, `.index((token_ids, vocab))` over the
  stored `tokens` column (the project's analysed terms), `.retrieve([terms], k=10, n_threads=1)`;
  hits with score 0 dropped. k1/b are the project's BM25 at that size: 1.2 / 0.75 with LanceDB's
  native index (≥ limits.SCALE_DOCS documents), else 0.9 / 0.4 (the in-memory postings).
- rank_bm25: `rank_bm25.BM25Okapi(token_lists, k1, b)` over the same tokens, `.get_scores(terms)`,
  top 10 by numpy (`np.argpartition`), score > 0. Only up to --rank-bm25-max documents (100,000):
  it scores every document in Python.

Ingest (documents/s of wall time; CPU s beside): the project's ingest (`Workbench.create` or
`ingest_stream`: tokenise, embed, …, write, native BM25 index, from 50k the ANN and id indexes and
a compaction); the encoder alone (`encode_passages` on the first --encoder-sample texts); and
LanceDB's `add` of the pre-computed vectors into a fresh table of a minimal schema (id string, text
string, vector fixed-size list of float32) in a scratch database: `db.create_table(name,
schema=schema)` then `table.add(batch)` per 50,000 rows read from the collection (the reading is
outside the clock), then, timed on its own, `create_fts_index("text", use_tantivy=False)` (LanceDB's
default tokenizer) and from 50k documents the ANN index as the project builds it
(`indexes.index_vectors`: cosine, IVF_RQ with 4-bit codes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("LANCEDB_LOG", "error")


def _load_bench_scale():
    """The scale corpus and its ingest (benchmarks/bench_scale.py), loaded from its file: the
    benchmarks are not a package, and nothing here edits sys.path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_scale", REPO / "benchmarks" / "bench_scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module
    spec.loader.exec_module(module)
    return module


bench_scale = _load_bench_scale()

COLLECTION = bench_scale.COLLECTION
PEERS_DIR = REPO / "data" / "peers"
WARM = 5
K = 10
SYSTEMS = ("project_bm25", "lancedb_fts", "bm25s", "rank_bm25", "project_vector", "lancedb_vector",
           "project_hybrid", "lancedb_hybrid", "lancedb_hybrid_d100")
LABELS = {
    "project_bm25": "this project: BM25 (Workbench.search)",
    "lancedb_fts": "LanceDB native FTS (same index)",
    "bm25s": "bm25s (numba, same tokens)",
    "rank_bm25": "rank-bm25 (same tokens)",
    "project_vector": "this project: vector (Workbench.search)",
    "lancedb_vector": "LanceDB vector search (defaults)",
    "project_hybrid": "this project: hybrid (Workbench.search)",
    "lancedb_hybrid": "LanceDB hybrid, RRFReranker, limit 10",
    "lancedb_hybrid_d100": "LanceDB hybrid, RRFReranker, limit 100 → 10",
}


# ---- inputs --------------------------------------------------------------------------------------
def read_queries(folder: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """The folder's queries and qrels (qrels/test.tsv, else the first qrels/*.tsv)."""
    queries = {}
    with open(folder / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                queries[str(row["_id"])] = row["text"]
    qrels_path = folder / "qrels" / "test.tsv"
    if not qrels_path.is_file():
        qrels_path = sorted((folder / "qrels").glob("*.tsv"))[0]
    qrels: dict[str, dict[str, int]] = {}
    for line in qrels_path.read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc_id, grade = line.rstrip("\n").split("\t")[:3]
        if int(grade) > 0:
            qrels.setdefault(qid, {})[doc_id] = int(grade)
    return queries, qrels


def pick_queries(queries: dict[str, str], qrels: dict, n: int) -> tuple[list[tuple[str, str]], list[str]]:
    """The first n judged queries of distinct text, and WARM more texts for warming up."""
    seen, timed, warm = set(), [], []
    for qid, text in queries.items():
        if qid not in qrels or text in seen or not text.strip():
            continue
        seen.add(text)
        if len(timed) < n:
            timed.append((qid, text))
        elif len(warm) < WARM:
            warm.append(text)
        else:
            break
    if len(timed) < n or len(warm) < WARM:
        sys.exit(f"need {n + WARM} judged queries of distinct text, the folder has {len(timed) + len(warm)}: "
                 "lower --queries (or raise bench_scale's --queries when building the corpus)")
    return timed, warm


def read_tokens(table) -> tuple[list[str], list[str]]:
    """(ids, space-joined tokens) of every row, in table order."""
    rows = table.search().select(["id", "tokens"]).limit(None).to_arrow()
    return rows.column("id").to_pylist(), rows.column("tokens").to_pylist()


# ---- the systems ---------------------------------------------------------------------------------
def project_systems(db: Path, log) -> tuple[dict, dict]:
    from retrieval.search.config import SearchConfig
    from retrieval.search.workbench import Workbench
    from retrieval.store import Store

    store = Store(str(db))
    configs = {"project_bm25": SearchConfig(weights={"bm25": 1.0}),
               "project_vector": SearchConfig(weights={"dense": 1.0}),
               "project_hybrid": SearchConfig()}
    systems, notes = {}, {}
    for name, config in configs.items():
        wb = Workbench(store)
        started = time.perf_counter()
        backends = wb.backends(COLLECTION)
        # the row-id map the LanceDB sources name their hits with (read in the background after a write)
        wb.retriever.reads.row_id_map(COLLECTION, store.state_key(COLLECTION)).wait()
        notes[name] = {"sources_load_s": time.perf_counter() - started, "backends": backends}

        def run(q, wb=wb, config=config):
            return [r.doc_id for r, _ in wb.search(COLLECTION, q, config).final_ranking()][:K]

        systems[name] = run
    log(f"project sources: {notes['project_hybrid']['backends']}")
    return systems, notes


def lancedb_systems(db: Path, model: str) -> dict:
    import lancedb
    from lancedb.rerankers import RRFReranker

    from retrieval.models.embed import load_encoder
    from retrieval.text.tokenize import tokenize

    table = lancedb.connect(str(db)).open_table(COLLECTION)
    encoder = load_encoder(model)
    reranker = RRFReranker()

    def fts(q):
        terms = tokenize(q)
        if not terms:
            return []
        rows = (table.search(" ".join(terms), query_type="fts", fts_columns="tokens")
                .limit(K).select(["id", "text"]).to_arrow())
        return rows.column("id").to_pylist()

    def vector(q):
        qvec = encoder.encode_queries([q])[0]
        rows = (table.search(qvec, vector_column_name="vector").distance_type("cosine")
                .limit(K).select(["id", "text"]).to_arrow())
        return rows.column("id").to_pylist()

    def hybrid(q, limit=K):
        qvec = encoder.encode_queries([q])[0]
        terms = tokenize(q)
        if not terms:  # nothing for the FTS side: LanceDB's hybrid needs a text; vector alone
            rows = (table.search(qvec, vector_column_name="vector").distance_type("cosine")
                    .limit(K).select(["id", "text"]).to_arrow())
            return rows.column("id").to_pylist()
        rows = (table.search(query_type="hybrid", vector_column_name="vector", fts_columns="tokens")
                .vector(qvec).text(" ".join(terms)).distance_type("cosine").limit(limit)
                .rerank(reranker).select(["id", "text"]).to_arrow())
        return rows.column("id").to_pylist()[:K]

    return {"lancedb_fts": fts, "lancedb_vector": vector, "lancedb_hybrid": hybrid,
            "lancedb_hybrid_d100": lambda q: hybrid(q, 100)}


def bm25_params(doc_count: int) -> tuple[float, float, str]:
    from retrieval import limits
    from retrieval.search.config import SearchConfig
    from retrieval.sources.bm25 import resolved_backend

    if resolved_backend("auto", doc_count) == "lancedb":
        return 1.2, 0.75, "LanceDB's fixed k1 1.2, b 0.75 (the project's backend at this size)"
    config = SearchConfig()
    return config.bm25_k1, config.bm25_b, (f"the project's in-memory k1 {config.bm25_k1}, b {config.bm25_b} "
                                           f"(below {limits.SCALE_DOCS:,} documents)")


def bm25s_system(ids: list[str], token_strings: list[str], k1: float, b: float, log):
    try:
        import bm25s
    except ImportError:
        log("bm25s is not installed: `.venv/bin/pip install bm25s` (skipped)")
        return None, {"skipped": "bm25s not installed: .venv/bin/pip install bm25s"}
    from retrieval.text.tokenize import tokenize

    vocab: dict[str, int] = {}
    wall, cpu = time.perf_counter(), time.process_time()
    # Token ids per document (each id object shared through `vocab`: ~8 bytes a token).
    token_ids = [[vocab.setdefault(t, len(vocab)) for t in s.split()] for s in token_strings]
    model = bm25s.BM25(k1=k1, b=b, method="lucene", backend="numba")
    model.index((token_ids, vocab), show_progress=False)
    del token_ids
    notes = {"index_s": time.perf_counter() - wall, "index_cpu_s": time.process_time() - cpu,
             "version": bm25s.__version__}

    def run(q):
        terms = tokenize(q)
        if not terms:
            return []
        docs, scores = model.retrieve([terms], k=min(K, len(ids)), show_progress=False, n_threads=1)
        return [ids[int(d)] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    return run, notes


def rank_bm25_system(ids: list[str], token_strings: list[str], k1: float, b: float):
    from rank_bm25 import BM25Okapi

    from retrieval.text.tokenize import tokenize

    wall, cpu = time.perf_counter(), time.process_time()
    model = BM25Okapi([s.split() for s in token_strings], k1=k1, b=b)
    notes = {"index_s": time.perf_counter() - wall, "index_cpu_s": time.process_time() - cpu}

    def run(q):
        terms = tokenize(q)
        if not terms:
            return []
        scores = model.get_scores(terms)
        top = np.argpartition(-scores, min(K, len(scores) - 1))[:K]
        return [ids[i] for i in sorted(top, key=lambda i: -scores[i]) if scores[i] > 0]

    return run, notes


# ---- LanceDB add of pre-computed vectors ----------------------------------------------------------
def lancedb_add(db: Path, scratch: Path, log, batch_rows: int = 50_000) -> dict:
    import lancedb
    import pyarrow as pa

    from retrieval import limits
    from retrieval.indexing.indexes import index_vectors

    source = lancedb.connect(str(db)).open_table(COLLECTION)
    dim = source.schema.field("vector").type.list_size
    schema = pa.schema([pa.field("id", pa.string()), pa.field("text", pa.string()),
                        pa.field("vector", pa.list_(pa.float32(), dim))])
    shutil.rmtree(scratch, ignore_errors=True)
    target = lancedb.connect(str(scratch))
    add_wall = add_cpu = 0.0
    n = 0
    t, c = time.perf_counter(), time.process_time()
    table = target.create_table("peers_add", schema=schema)
    add_wall, add_cpu = time.perf_counter() - t, time.process_time() - c
    reader = source.search().select(["id", "text", "vector"]).limit(None).to_batches(batch_rows)
    for data in _chunks(reader, batch_rows):
        data = data.select(["id", "text", "vector"]).cast(schema)
        t, c = time.perf_counter(), time.process_time()
        table.add(data)
        add_wall += time.perf_counter() - t
        add_cpu += time.process_time() - c
        n += data.num_rows
    log(f"LanceDB add: {n:,} rows in {add_wall:.1f} s; indexes …")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        t, c = time.perf_counter(), time.process_time()
        table.create_fts_index("text", use_tantivy=False)
        fts_wall, fts_cpu = time.perf_counter() - t, time.process_time() - c
        ann_wall = ann_cpu = 0.0
        if n >= limits.SCALE_DOCS:
            t, c = time.perf_counter(), time.process_time()
            index_vectors(table)
            ann_wall, ann_cpu = time.perf_counter() - t, time.process_time() - c
    shutil.rmtree(scratch, ignore_errors=True)
    return {"rows": n, "batch_rows": batch_rows, "add_s": add_wall, "add_cpu_s": add_cpu,
            "add_docs_per_s": n / add_wall, "fts_index_s": fts_wall, "fts_index_cpu_s": fts_cpu,
            "ann_index": limits.ANN_INDEX, "ann_index_s": ann_wall, "ann_index_cpu_s": ann_cpu,
            "with_indexes_docs_per_s": n / (add_wall + fts_wall + ann_wall)}


def _chunks(reader, rows: int):
    """Tables of about `rows` rows from a record batch reader."""
    import pyarrow as pa

    pending, count = [], 0
    for batch in reader:
        pending.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield pa.Table.from_batches(pending)
            pending, count = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


# ---- the run -------------------------------------------------------------------------------------
def measure(db: Path, folder: Path, n_queries: int, rank_bm25_max: int, skip: set[str], log) -> dict:
    from retrieval.evaluation.evaluate import QrelsEvaluator
    from retrieval.store import Store

    queries, qrels = read_queries(folder)
    timed, warm = pick_queries(queries, qrels, n_queries)
    info = Store(str(db)).info(COLLECTION)
    model, doc_count = info.model, info.doc_count
    log(f"{doc_count:,} documents, encoder {model}, {len(timed)} queries")

    systems, notes = project_systems(db, log)
    systems.update(lancedb_systems(db, model))
    k1, b, bm25_note = bm25_params(doc_count)
    notes["bm25_params"] = {"k1": k1, "b": b, "why": bm25_note}
    if not {"bm25s", "rank_bm25"} <= skip:
        from retrieval.store import Store as _Store

        ids, token_strings = read_tokens(_Store(str(db)).table(COLLECTION))
        if "bm25s" not in skip:
            log("bm25s index …")
            run, notes["bm25s"] = bm25s_system(ids, token_strings, k1, b, log)
            if run is not None:
                systems["bm25s"] = run
        if "rank_bm25" not in skip:
            if doc_count <= rank_bm25_max:
                log("rank-bm25 index …")
                systems["rank_bm25"], notes["rank_bm25"] = rank_bm25_system(ids, token_strings, k1, b)
            else:
                notes["rank_bm25"] = {"skipped": f"{doc_count:,} documents > --rank-bm25-max {rank_bm25_max:,}"}
        del ids, token_strings
    names = [s for s in SYSTEMS if s in systems and s not in skip]

    log("warm-up …")
    for name in names:
        for q in warm:
            systems[name](q)
    evaluator = QrelsEvaluator({qid: qrels[qid] for qid, _ in timed})
    evaluator.evaluate_rankings({timed[0][0]: []}, ("ndcg@10",))  # the metrics' first use, off the clock
    walls = {s: [] for s in names}
    cpus = {s: [] for s in names}
    rankings = {s: {} for s in names}
    load = [os.getloadavg()]
    log(f"timing {len(names)} systems × {len(timed)} queries, interleaved …")
    for i, (qid, text) in enumerate(timed):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            wall, cpu = time.perf_counter(), time.process_time()
            ranking = systems[name](text)
            walls[name].append(time.perf_counter() - wall)
            cpus[name].append(time.process_time() - cpu)
            rankings[name][qid] = ranking
    load.append(os.getloadavg())

    from retrieval.models.embed import device

    result = {"folder": str(folder), "docs": doc_count, "encoder": model, "encoder_device": device(),
              "lance_cpu_threads": os.environ.get("LANCE_CPU_THREADS", "Lance's default"),
              "queries": len(timed),
              "systems": names, "load_average": {"start": load[0], "end": load[1]}, "notes": notes,
              "ndcg@10": {}}
    for name in names:
        w = np.asarray(walls[name]) * 1000
        result[f"{name}_p50_ms"] = float(np.median(w))
        result[f"{name}_p95_ms"] = float(np.percentile(w, 95))
        result[f"{name}_qps"] = float(len(w) / (w.sum() / 1000))
        result[f"{name}_cpu_p50_ms"] = float(statistics.median(cpus[name]) * 1000)
        ndcg = evaluator.evaluate_rankings(rankings[name], ("ndcg@10",))[0]["ndcg@10"]
        result[f"{name}_ndcg@10"] = result["ndcg@10"][name] = float(ndcg)
    result["vector_recall@10"] = vector_recall(db, model, timed, rankings, log)
    if "project_hybrid" in names and "lancedb_hybrid" in names:
        result["hybrid_ratio_vs_lancedb"] = result["project_hybrid_p50_ms"] / result["lancedb_hybrid_p50_ms"]
    if "project_hybrid" in names and "lancedb_hybrid_d100" in names:
        result["hybrid_ratio_vs_lancedb_d100"] = (result["project_hybrid_p50_ms"]
                                                  / result["lancedb_hybrid_d100_p50_ms"])
    return result


def vector_recall(db: Path, model: str, timed: list[tuple[str, str]], rankings: dict, log) -> dict[str, float]:
    """Mean recall@10 of each vector system's top 10 (the project's through its IVF index,
    probes and refine; LanceDB's defaults) against the exact top 10: numpy dot products of the
    query's vector with every stored vector (`bench_scale.exact_top`)."""
    from retrieval.models.embed import load_encoder
    from retrieval.store import Store

    systems = [s for s in ("project_vector", "lancedb_vector") if s in rankings]
    if not systems:
        return {}
    log("exact vector top 10 (numpy over every stored vector) …")
    columns = Store(str(db)).column(COLLECTION, ["id", "vector"])
    ids = columns.column("id").to_pylist()
    flat = columns.column("vector").combine_chunks().flatten().to_numpy()
    matrix = np.asarray(flat, np.float32).reshape(len(ids), -1)
    del columns
    encoder = load_encoder(model)
    exact = {qid: bench_scale.exact_top(matrix, ids, encoder.encode_queries([text])[0]) for qid, text in timed}
    return {s: float(np.mean([bench_scale.recall_at(rankings[s][qid], exact[qid]) for qid, _ in timed]))
            for s in systems}


def tables(result: dict) -> str:
    lines = [f"{result['docs']:,} documents, encoder {result['encoder']} on {result['encoder_device']} "
             f"(a GPU: fp16, batches of 128), {result['queries']} queries "
             f"(the same for every system, interleaved); load average "
             f"{result['load_average']['start'][0]:.2f} → {result['load_average']['end'][0]:.2f}; "
             f"Lance compute threads {result.get('lance_cpu_threads', '?')} (every system: one process)", ""]
    head = ("system", "p50 ms", "p95 ms", "q/s", "CPU ms p50", "nDCG@10")
    rows = [(LABELS[s], f"{result[f'{s}_p50_ms']:.1f}", f"{result[f'{s}_p95_ms']:.1f}", f"{result[f'{s}_qps']:.1f}",
             f"{result[f'{s}_cpu_p50_ms']:.1f}", f"{result[f'{s}_ndcg@10']:.3f}") for s in result["systems"]]
    lines += _table(head, rows)
    for key, label in (("hybrid_ratio_vs_lancedb", "LanceDB hybrid (limit 10)"),
                       ("hybrid_ratio_vs_lancedb_d100", "LanceDB hybrid (limit 100)")):
        if key in result:
            lines.append(f"project hybrid p50 / {label} p50: {result[key]:.2f}")
    notes = result["notes"]
    for system, recall in result.get("vector_recall@10", {}).items():
        lines.append(f"vector recall@10 against the exact top 10, {LABELS[system]}: {recall:.3f}")
    lines.append(f"project backends: bm25 = {notes['project_hybrid']['backends']['bm25']}; "
                 f"vector = {notes['project_hybrid']['backends']['dense']}")
    lines.append(f"bm25s / rank-bm25 k1, b: {notes['bm25_params']['why']}")
    for name in ("bm25s", "rank_bm25"):
        if name in notes:
            n = notes[name]
            lines.append(f"{name}: " + (n["skipped"] if "skipped" in n else
                                         f"index built in {n['index_s']:.1f} s ({n['index_cpu_s']:.1f} CPU s)"))
    if "ingest" in result:
        ing, add = result["ingest"], result.get("lancedb_add")
        lines += ["", "ingest"]
        if ing.get("peak_rss_mb"):
            lines.append(f"peak RSS of the project's ingest: {ing['peak_rss_mb']:,.0f} MB")
        irows = [(f"this project ({'Workbench.ingest_stream' if ing.get('path') == 'stream' else 'Workbench.create'})",
                  f"{ing['ingest_docs_per_s']:.1f}", f"{ing['docs']:,}", f"{ing['ingest_s']:.1f}",
                  f"{ing['ingest_cpu_s']:.1f}"),
                 ("encoder alone (encode_passages)", f"{ing['encoder_only_docs_per_s']:.1f}",
                  f"{ing['encoder_sample']:,}", f"{ing['encoder_only_s']:.1f}", f"{ing['encoder_only_cpu_s']:.1f}")]
        if add:
            irows.append(("LanceDB add, pre-computed vectors (id, text, vector)", f"{add['add_docs_per_s']:.1f}",
                          f"{add['rows']:,}", f"{add['add_s']:.1f}", f"{add['add_cpu_s']:.1f}"))
            ann = f" + {add.get('ann_index', 'IVF_SQ')} index" if add["ann_index_s"] else ""
            irows.append(("  … + FTS index on text" + ann,
                          f"{add['with_indexes_docs_per_s']:.1f}", f"{add['rows']:,}",
                          f"{add['add_s'] + add['fts_index_s'] + add['ann_index_s']:.1f}",
                          f"{add['add_cpu_s'] + add['fts_index_cpu_s'] + add['ann_index_cpu_s']:.1f}"))
        lines += _table(("path", "docs/s", "documents", "wall s", "CPU s"), irows)
        if ing.get("vectors"):
            lines.append(f"(the ingest took its passage vectors from {ing['vectors']}, computed by the same "
                         f"model and backend, {ing['vectors_checked']:,} of them checked against the model: "
                         "its docs/s leave out embedding; the encoder row is the model's own speed)")
            if ing.get("vectors_waited_s"):
                lines.append(f"(the ingest ran beside the precompute still making shards and waited "
                             f"{ing['vectors_waited_s']:,.0f} s for them: its wall time and docs/s are not a speed "
                             "figure; its peak RSS is its own process's)")
        if ing.get("reused"):
            lines.append("(the project's ingest and encoder figures are from the ingest that built the "
                         f"collection: {ing['reused']})")
    return "\n".join(lines)


def _table(head: tuple, rows: list[tuple]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]

    def fmt(row: tuple) -> str:
        cells = zip(row, widths, strict=True)
        return "  ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(cells))

    return [fmt(head), *[fmt(r) for r in rows]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("beir_dir", nargs="?", type=Path,
                        help="a BEIR folder (default: the scale corpus of --docs documents)")
    parser.add_argument("--docs", type=int, default=10_000, help="documents of the scale corpus (without BEIR_DIR)")
    parser.add_argument("--scale-queries", type=int, default=1000, help="queries generated with the scale corpus")
    parser.add_argument("--queries", type=int, default=200, help="timed queries, the same for every system")
    parser.add_argument("--encoder", default=bench_scale.DEFAULT_ENCODER, help="embedding model name or folder")
    parser.add_argument("--encoder-sample", type=int, default=None,
                        help="texts the encoder alone is timed on (default: all documents)")
    parser.add_argument("--stream", action="store_true", help="ingest through Workbench.ingest_stream")
    parser.add_argument("--rebuild", action="store_true", help="ingest again even if the database exists")
    parser.add_argument("--rank-bm25-max", type=int, default=100_000, help="rank-bm25 only up to this many documents")
    parser.add_argument("--skip", default="", help="comma-separated systems (or 'lancedb_add') left out")
    parser.add_argument("--vectors", type=Path, default=None,
                        help="passage vectors of the corpus from benchmarks/precompute_vectors.py (the same model "
                             "and backend): the ingest takes them instead of embedding again")
    parser.add_argument("--vectors-wait", type=float, default=0.0, metavar="SECONDS",
                        help="wait up to this long for each shard of --vectors not written yet (an ingest beside a "
                             "precompute still running: its times then include the waits, its peak RSS does not)")
    parser.add_argument("--ingest-only", action="store_true",
                        help="build (or reuse) the corpus and its collection, then stop (time the systems later)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    parser.add_argument("--out", type=Path, help="also write the JSON object to this file")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    slug = ("" if args.encoder == bench_scale.DEFAULT_ENCODER
            else "-" + re.sub(r"[^A-Za-z0-9]+", "-", Path(args.encoder).name))
    if args.beir_dir is None:
        folder = bench_scale.ensure_corpus(args.docs, args.scale_queries, 0, bench_scale.DATA_DIR,
                                           bench_scale.EVAL_DIR, log)
        db = bench_scale.DATA_DIR / f"db-{args.docs}{slug}"
    else:
        folder = args.beir_dir.resolve()
        PEERS_DIR.mkdir(parents=True, exist_ok=True)
        db = PEERS_DIR / f"db-{re.sub(r'[^A-Za-z0-9]+', '-', folder.name)}{slug}"
    figures_path = db.with_name(db.name + ".ingest.json")
    reused = figures_path.is_file() and db.is_dir() and not args.rebuild
    sample = args.encoder_sample or 10**12  # bench_scale's child caps it at the corpus
    ingest = bench_scale.ensure_ingest(folder, db, args.encoder, sample, args.rebuild, log, args.stream,
                                       args.vectors, args.vectors_wait)
    if reused:
        written = time.strftime("%Y-%m-%d %H:%M", time.gmtime(figures_path.stat().st_mtime))
        ingest["reused"] = f"{figures_path.name}, written {written} UTC"
    if args.ingest_only:
        print(json.dumps(ingest, indent=1))
        return
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    result = measure(db, folder, args.queries, args.rank_bm25_max, skip, log)
    result["ingest"] = ingest
    if "lancedb_add" not in skip:
        result["lancedb_add"] = lancedb_add(db, PEERS_DIR / f"scratch-add-{os.getpid()}", log)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1) if args.json else tables(result))


if __name__ == "__main__":
    main()
