"""Scale benchmark (issue 9): a collection of N documents made from real text, ingested through
the UI's code path, then timed the way the app uses it. Prints a table, or with --json one object.

    nice -n 19 .venv/bin/python benchmarks/bench_scale.py --docs 10000 [--queries 1000] [--json]
    nice -n 19 .venv/bin/python benchmarks/bench_scale.py --docs 20000 --queries 10000   # evaluate ≥ 200 q/s
    nice -n 19 .venv/bin/python benchmarks/bench_scale.py --docs 100000

The corpus (deterministic, seed --seed, cached as a BEIR folder data/scale/corpus-N/):
- sentences of the `../shared/eval` corpora: English from nfcorpus and vaswani (whose texts have
  no punctuation left, so "sentences" are windows of 12–20 words) and xquad-en (split after
  . ! ?); Chinese from xquad-zh and cmrc2018-dev (split after 。！？);
- each document is 80 % English / 20 % Chinese (drawn per document), 3–8 sentences of its
  language drawn at random with replacement (English joined by spaces, Chinese without);
- each query takes a document at random and two phrases from two of its sentences (English: 3–5
  consecutive words each; Chinese: 4–8 consecutive characters each), joined by a space; its one
  judgment (grade 1) is that document. The same sentence recurs in other documents, the pair
  rarely does, so the source document is the one to find.

Ingest: `Workbench.create` (the Corpus page's call: tokenise → embed → entities → one write →
native BM25 index; ≥ limits.SCALE_DOCS documents also an IVF_RQ vector index (IVF_SQ before
2026-11-27's session 18, IVF_PQ before 2026-11-23's session 6) and a compaction) into a dedicated
database data/scale/db-N[-encoder], in a child process whose peak RSS (ru_maxrss) is the
`peak_rss_mb`. The same child first times the encoder alone on the first --encoder-sample texts
(all texts when N is smaller). The ingest's figures are kept beside the database and reused
until --rebuild. The encoder defaults to all-MiniLM-L6-v2 for every N (the UI would pick the
multilingual E5 for a mixed corpus); --encoder names another (a folder: see docs/experiments/scale.md).

Timings, in this (fresh) process, each over --latency-queries distinct queries never searched
before (p50 of per-query wall time, after one warm-up search):
- bm25: `Workbench.candidates` with BM25 only, depth 100 (`source` = the source's own search;
  "incl. rows" is the whole call, which read every candidate's row until rows became on-demand
  in session 6 and now reads none);
- vector: the same with the vector source only; queries embedded first in one batch
  (`Retriever.embed_queries`, as evaluation does), so this is retrieval; `query_embed` is one
  query's embedding on its own;
- vector_recall_at_10: served vector top 10 ∩ exact top 10 (numpy dot products over every
  stored vector) / 10, averaged;
- hybrid: `Workbench.search` with both sources (weights 1 and 1), depth 100, fused and explained
  with the default fusion (weighted l2 arithmetic since the shipped default changed; RRF before),
  the query embedded on the way, as a first search in the app;
- refuse: `Workbench.rank` (the ranking plan, explained) on those cached candidates with rrf_k
  60 → 10 (a slider move's core;
  under weighted fusion rrf_k changes nothing, but the fusion runs in full);
- evaluate: `evaluate.evaluate_collection` over every query (batched query embedding, hybrid
  config, metrics by `evaluation/metrics.py`) on a fresh Workbench whose sources are loaded, after
  the metrics' first use (timed on its own); queries/s of wall time.
  Its lean path (ids and scores only, `evaluate.ranked_lean`) is then compared with the
  explained path (`Workbench.search` per query) on the first --check-queries queries: the number
  of queries whose rankings (every source and the fusion) are identical, and whether the metrics are.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("LANCEDB_LOG", "error")

EVAL_DIR = REPO.parent / "shared" / "eval"
DATA_DIR = REPO / "data" / "scale"
COLLECTION = "scale"
DEFAULT_ENCODER = "all-MiniLM-L6-v2"
EN_SOURCES = ("nfcorpus", "vaswani", "xquad-en")
ZH_SOURCES = ("xquad-zh", "cmrc2018-dev")
ZH_SHARE = 0.2
SENTENCES = (3, 8)  # per document, inclusive
# Measured before this benchmark (docs/experiments/scale.md): 1M documents.
ANCHORS = {"bm25_p50_ms": "1,366 ms (rank-bm25, 1M)", "vector_p50_ms": "1,640 ms (LanceDB exact, 1M)",
           "ingest_docs_per_s": "~30 long docs/s", "evaluate_queries_per_s": "~14 queries/s"}
TARGETS = {"hybrid_p50_ms": "≤ 50 ms at 1M", "bm25_p50_ms": "≤ 15 ms at 1M", "vector_p50_ms": "≤ 20 ms at 1M",
           "vector_recall_at_10": "≥ 0.98", "refuse_p50_ms": "≤ 5 ms", "ingest_vs_encoder": "≥ 0.90",
           "evaluate_queries_per_s": "≥ 200 q/s (20k docs, 10k queries)"}

_EN_END = re.compile(r"(?<=[.!?])\s+")
_ZH_END = re.compile(r"(?<=[。！？])")


# ---- corpus -----------------------------------------------------------------------------------
def split_sentences(text: str, language: str) -> list[str]:
    """Sentences of one source text. Chinese: after 。！？. English: after . ! ? followed by
    space; a text without any (nfcorpus, vaswani keep no punctuation) is cut into windows of
    12–20 words (sizes cycle deterministically)."""
    text = " ".join(text.split())
    if not text:
        return []
    if language == "zh":
        parts = [p.strip() for p in _ZH_END.split(text)]
        return [p for p in parts if len(p) >= 4]
    if _EN_END.search(text):
        parts = [p.strip() for p in _EN_END.split(text)]
        return [p for p in parts if len(p.split()) >= 3]
    words = text.split()
    out, start, size = [], 0, 12
    while start < len(words):
        window = words[start:start + size]
        if len(window) >= 3:
            out.append(" ".join(window))
        start += size
        size = 12 + (size - 11) % 9  # 12, 13, … 20, 12, …
    return out


def sentence_pools(eval_dir: Path = EVAL_DIR) -> dict[str, list[str]]:
    """{'en': sentences, 'zh': sentences} from the eval corpora, in file order."""
    pools: dict[str, list[str]] = {"en": [], "zh": []}
    for language, names in (("en", EN_SOURCES), ("zh", ZH_SOURCES)):
        for name in names:
            with open(eval_dir / name / "corpus.jsonl", encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        row = json.loads(line)
                        pools[language].extend(split_sentences(f"{row.get('title') or ''} {row['text']}", language))
    return pools


def query_phrase(sentence: str, language: str, rng: np.random.Generator) -> str:
    """3–5 consecutive words (English) or 4–8 consecutive characters (Chinese) of a sentence."""
    if language == "zh":
        chars = sentence.replace(" ", "")
        size = min(len(chars), int(rng.integers(4, 9)))
        start = int(rng.integers(0, len(chars) - size + 1))
        return chars[start:start + size]
    words = sentence.split()
    size = min(len(words), int(rng.integers(3, 6)))
    start = int(rng.integers(0, len(words) - size + 1))
    return " ".join(words[start:start + size])


def build_corpus(pools: dict[str, list[str]], n_docs: int, n_queries: int, seed: int = 0
                 ) -> tuple[list[dict], dict[str, str], dict[str, dict[str, int]]]:
    """(documents as BEIR rows, queries, qrels): see the module doc. Deterministic in `seed`."""
    rng = np.random.default_rng(seed)
    languages = np.where(rng.random(n_docs) < ZH_SHARE, "zh", "en")
    counts = rng.integers(SENTENCES[0], SENTENCES[1] + 1, n_docs)
    width = len(str(n_docs - 1))
    docs, parts = [], []
    for i in range(n_docs):
        language = str(languages[i])
        pool = pools[language]
        chosen = [pool[j] for j in rng.integers(0, len(pool), int(counts[i]))]
        parts.append(chosen)
        docs.append({"_id": f"d{i:0{width}d}", "title": "", "text": (" " if language == "en" else "").join(chosen),
                     "lang": language})
    queries, qrels = {}, {}
    qwidth = len(str(max(n_queries - 1, 0)))
    for q in range(n_queries):
        i = int(rng.integers(0, n_docs))
        a, b = rng.choice(len(parts[i]), 2, replace=False)
        language = docs[i]["lang"]
        qid = f"q{q:0{qwidth}d}"
        queries[qid] = f"{query_phrase(parts[i][a], language, rng)} {query_phrase(parts[i][b], language, rng)}"
        qrels[qid] = {docs[i]["_id"]: 1}
    return docs, queries, qrels


def write_beir(folder: Path, docs: list[dict], queries: dict[str, str], qrels: dict[str, dict[str, int]]) -> None:
    """A BEIR folder: corpus.jsonl (with a `lang` column, kept as metadata), queries.jsonl, qrels/test.tsv."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "qrels").mkdir(parents=True)
    with open(tmp / "corpus.jsonl", "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    with open(tmp / "queries.jsonl", "w", encoding="utf-8") as f:
        for qid, text in queries.items():
            f.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    with open(tmp / "qrels" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, judged in qrels.items():
            for doc_id, grade in judged.items():
                f.write(f"{qid}\t{doc_id}\t{grade}\n")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def ensure_corpus(n_docs: int, n_queries: int, seed: int, data_dir: Path, eval_dir: Path, log) -> Path:
    folder = data_dir / f"corpus-{n_docs}" if seed == 0 else data_dir / f"corpus-{n_docs}-s{seed}"
    stamp = folder / "queries.jsonl"
    if stamp.is_file() and len(stamp.read_text(encoding="utf-8").splitlines()) >= n_queries:
        return folder
    log(f"building corpus of {n_docs:,} documents and {n_queries:,} queries in {folder} …")
    docs, queries, qrels = build_corpus(sentence_pools(eval_dir), n_docs, n_queries, seed)
    write_beir(folder, docs, queries, qrels)
    return folder


# ---- metrics ----------------------------------------------------------------------------------
def p50_ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1000 if seconds else float("nan")


def recall_at(served: list[str], exact: list[str], k: int = 10) -> float:
    """|served top k ∩ exact top k| / |exact top k| (1.0 when exact is empty)."""
    exact_k = set(exact[:k])
    return len(set(served[:k]) & exact_k) / len(exact_k) if exact_k else 1.0


def exact_top(matrix: np.ndarray, ids: list[str], query: np.ndarray, k: int = 10) -> list[str]:
    """The k ids of highest dot product (cosine: unit vectors), best first."""
    sims = matrix @ query
    top = np.argpartition(-sims, min(k, len(sims) - 1))[:k]
    return [ids[i] for i in sorted(top, key=lambda i: (-sims[i], ids[i]))]


# ---- ingest (child process) --------------------------------------------------------------------
class PrecomputedPassages:
    """A loaded encoder whose passage vectors come from `precompute_vectors.py`'s shards of the
    same corpus, in corpus order (an ingest embeds its batches in that order): the model's own
    vectors without the CPU-hours of computing them again. Each call's first text is encoded
    again by the model and must give its stored vector to 1e-6 (a shard out of step, or of
    another model or backend, stops the ingest); queries, truncation counts and everything else
    are the model's. The model stays loaded, so an ingest's peak RSS includes it. With `wait_s`, a
    shard not written yet is waited for (up to `wait_s` seconds each, polled): an ingest can then run
    beside the precompute that is still making the last shards (its times include the waits,
    `waited_s`; the precompute renames a shard into place only once it is whole)."""

    POLL_S = 5.0

    def __init__(self, encoder, folder: Path, corpus: Path, wait_s: float = 0.0):
        manifest = json.loads((folder / "manifest.json").read_text())
        if (manifest["model"], manifest["backend"]) != (encoder.spec.name, encoder.backend):
            raise SystemExit(f"{folder} holds {manifest['model']} on {manifest['backend']}, "
                             f"not {encoder.spec.name} on {encoder.backend}")
        if Path(manifest["corpus"]) != corpus.resolve():
            raise SystemExit(f"{folder} holds the vectors of {manifest['corpus']}, not of {corpus.resolve()}")
        self.encoder, self.folder, self.shard = encoder, folder, manifest["shard"]
        self.position = 0  # corpus position of the next passage
        self.checked = 0
        self.wait_s, self.waited_s = wait_s, 0.0
        self._held: tuple[int, np.ndarray | None] = (-1, None)

    def __getattr__(self, name: str):
        return getattr(self.encoder, name)

    def encode_passages(self, texts, batch_size=None, progress=None) -> np.ndarray:
        texts = list(texts)
        vectors = self._take(len(texts))
        if texts:
            fresh = self.encoder.encode_passages(texts[:1])[0]
            if np.abs(fresh - vectors[0]).max() > 1e-6:
                raise SystemExit(f"passage {self.position} differs from its precomputed vector in {self.folder}")
            self.checked += 1
        self.position += len(texts)
        if progress:
            progress(len(texts), len(texts))
        return vectors

    def _take(self, n: int) -> np.ndarray:
        parts, position = [], self.position
        while n:
            index, offset = divmod(position, self.shard)
            part = self._shard(index)[offset:offset + n]
            if not len(part):
                raise SystemExit(f"the ingest asked for passage {position}, past the vectors in {self.folder}")
            parts.append(part)
            position, n = position + len(part), n - len(part)
        return np.concatenate(parts) if parts else np.empty((0, self.encoder.spec.dim), np.float32)

    def _shard(self, index: int) -> np.ndarray:
        if self._held[0] != index:
            path = self.folder / f"shard-{index:05d}.npy"
            if self.wait_s and not path.is_file():  # only a real wait counts (the table says so)
                started = time.perf_counter()
                while not path.is_file() and time.perf_counter() - started < self.wait_s:
                    time.sleep(min(self.POLL_S, self.wait_s))
                self.waited_s += time.perf_counter() - started
            if not path.is_file():
                raise SystemExit(f"{path} is missing: run benchmarks/precompute_vectors.py to the end")
            self._held = (index, np.load(path))  # read whole: one shard in memory, not a mapped file
        return self._held[1]


def ingest_child(folder: Path, db: Path, encoder_name: str, sample: int, stream: bool = False,
                 vectors: Path | None = None, vectors_wait_s: float = 0.0) -> dict:
    """Parse, time the encoder alone, then ingest through `Workbench.create` (or, with `stream`,
    `Workbench.ingest_stream`: the CLI's path, one batch in memory); figures as a dict. With
    `vectors`, the ingest takes the passage vectors from those shards (`PrecomputedPassages`, waiting
    up to `vectors_wait_s` for each shard not written yet)."""
    from retrieval.indexing.readers.parse import parse_path
    from retrieval.indexing.readers.stream import open_stream
    from retrieval.models import embed
    from retrieval.models.embed import load_encoder
    from retrieval.search.workbench import Workbench
    from retrieval.store import Store
    from retrieval.text.passages import embedding_text

    started = time.perf_counter()
    if stream:  # only the encoder's sample is held in memory
        corpus, texts = None, []
        documents = open_stream(folder / "corpus.jsonl")
        n = documents.total
        for batch in documents.batches():
            texts.extend(embedding_text(d) for d in batch)
            if len(texts) >= sample:
                break
    else:
        corpus = parse_path(folder)
        corpus.queries, corpus.qrels = {}, {}
        texts = [embedding_text(d) for d in corpus.documents]
        n = len(texts)
    parse_s = time.perf_counter() - started
    encoder = load_encoder(encoder_name)
    encoder.encode_passages(texts[:64])  # warm up
    sample_texts = texts[:sample]
    wall, cpu = time.perf_counter(), time.process_time()
    encoder.encode_passages(sample_texts)
    encode_wall, encode_cpu = time.perf_counter() - wall, time.process_time() - cpu

    stages: dict[str, float] = {}

    def progress(stage: str, done: int, total: int) -> None:
        stages.setdefault(f"{stage} start", time.perf_counter())
        stages[f"{stage} end"] = time.perf_counter()

    precomputed = None
    if vectors is not None:  # every later load_encoder(encoder_name) gets it
        precomputed = PrecomputedPassages(encoder, vectors, folder, vectors_wait_s)
        embed._encoders[encoder_name] = precomputed
    shutil.rmtree(db, ignore_errors=True)
    wb = Workbench(Store(str(db)))
    wall, cpu = time.perf_counter(), time.process_time()
    if stream:
        result = wb.ingest_stream(COLLECTION, open_stream(folder / "corpus.jsonl"), model=encoder_name,
                                  description="bench_scale", progress=progress, graph="on")
    else:
        # graph "on", as every run in docs/experiments/scale.md had it: this flat corpus's default
        # ("auto") is now off from 10,000 documents (bench_ingest.py measures that)
        result = wb.create(COLLECTION, corpus, model=encoder_name, description="bench_scale", progress=progress,
                           graph="on")
    ingest_wall, ingest_cpu = time.perf_counter() - wall, time.process_time() - cpu
    end = wall + ingest_wall
    figures = {
        "docs": n, "encoder": encoder.spec.name, "parse_s": parse_s,
        "encoder_sample": len(sample_texts), "encoder_only_s": encode_wall, "encoder_only_cpu_s": encode_cpu,
        "encoder_only_docs_per_s": len(sample_texts) / encode_wall,
        "ingest_s": ingest_wall, "ingest_cpu_s": ingest_cpu, "ingest_docs_per_s": n / ingest_wall,
        "truncated": result.truncated, "language": result.info.language,
        "chars_per_doc": sum(map(len, texts)) / len(texts), "path": "stream" if stream else "create",
        "encoder_backend": encoder.backend,
    }
    if precomputed is not None:
        figures.update(vectors=str(vectors), vectors_checked=precomputed.checked, vectors_used=precomputed.position,
                       vectors_waited_s=precomputed.waited_s)
    if stream:  # per-batch stages interleave: only reading (none when the named model settles everything) and the rest
        read_end = stages.get("reading end", wall)
        figures["stages_s"] = {"reading": read_end - stages.get("reading start", wall),
                               "tokenise, embed, write (batches) + indexes": end - read_end}
    else:
        tok0, emb0, ent0 = stages["tokenising start"], stages["embedding start"], stages["finding entities start"]
        figures["stages_s"] = {"tokenise": emb0 - tok0, "embed": stages["embedding end"] - emb0,
                               "count truncated": ent0 - stages["embedding end"],
                               "entities": stages["finding entities end"] - ent0,
                               "write + indexes": end - stages["finding entities end"]}
    return figures


def ensure_ingest(folder: Path, db: Path, encoder: str, sample: int, rebuild: bool, log, stream: bool = False,
                  vectors: Path | None = None, vectors_wait_s: float = 0.0) -> dict:
    figures_path = db.with_name(db.name + ".ingest.json")
    if not rebuild and figures_path.is_file() and db.is_dir():
        log(f"reusing {db} (ingested before: {figures_path.name}; --rebuild to redo)")
        return json.loads(figures_path.read_text())
    log(f"ingesting {folder.name} into {db} with {encoder} (child process) …")
    out = subprocess.run([sys.executable, __file__, "--ingest-child", str(folder), str(db), encoder, str(sample),
                          "stream" if stream else "create", str(vectors or ""), str(vectors_wait_s)],
                         stdout=subprocess.PIPE, check=True, text=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    figures_path.write_text(json.dumps(figures, indent=1))
    return figures


# ---- measurements ------------------------------------------------------------------------------
def measure(db: Path, folder: Path, n_latency: int, log, profile: Path | None = None,
            n_check: int = 300) -> dict:
    from retrieval.evaluation.evaluate import QrelsEvaluator, evaluate_collection
    from retrieval.models.embed import load_encoder
    from retrieval.search.config import SearchConfig
    from retrieval.search.workbench import Workbench
    from retrieval.store import Store

    rows = [json.loads(line) for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = {row["_id"]: row["text"] for row in rows}
    qrels: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc_id, grade = line.rstrip("\n").split("\t")
        qrels.setdefault(qid, {})[doc_id] = int(grade)
    texts = list(dict.fromkeys(queries.values()))
    if len(texts) < 3 * n_latency + 5:
        sys.exit(f"need {3 * n_latency + 5} distinct queries, the corpus has {len(texts)}: raise --queries")
    bm25_q, vector_q, hybrid_q = (texts[i * n_latency:(i + 1) * n_latency] for i in range(3))
    warm = texts[-5:]

    store = Store(str(db))
    wb = Workbench(store)
    info = wb.info(COLLECTION)
    started = time.perf_counter()
    backends = wb.backends(COLLECTION)  # loads and builds both sources (rank-bm25: reads all tokens)
    load_s = time.perf_counter() - started
    log(f"sources loaded in {load_s:.1f} s: {backends}")
    bm25_cfg = SearchConfig(weights={"bm25": 1.0}, depth=100, top_k=10)
    vector_cfg = SearchConfig(weights={"dense": 1.0}, depth=100, top_k=10)
    hybrid_cfg = SearchConfig(weights={"bm25": 1.0, "dense": 1.0}, depth=100, top_k=10)
    moved_cfg = SearchConfig.from_dict({**hybrid_cfg.to_dict(), "rrf_k": 10.0})
    for q in warm:
        wb.search(COLLECTION, q, hybrid_cfg)

    def timed(fn, items):
        walls, results = [], []
        for item in items:
            t = time.perf_counter()
            results.append(fn(item))
            walls.append(time.perf_counter() - t)
        return walls, results

    bm25_wall, bm25_sets = timed(lambda q: wb.candidates(COLLECTION, q, bm25_cfg), bm25_q)
    wb.retriever.embed_queries(COLLECTION, vector_q, vector_cfg)
    vector_wall, vector_sets = timed(lambda q: wb.candidates(COLLECTION, q, vector_cfg), vector_q)
    encoder = load_encoder(info.model)
    embed_wall, _ = timed(lambda q: encoder.encode_queries([q]), hybrid_q)
    hybrid_wall, hybrid_results = timed(lambda q: wb.search(COLLECTION, q, hybrid_cfg), hybrid_q)
    refuse_wall, _ = timed(lambda r: wb.rank(r.candidates, moved_cfg), hybrid_results)
    slider_wall, _ = timed(lambda q: wb.rank(wb.candidates(COLLECTION, q, moved_cfg), moved_cfg), hybrid_q)
    hybrid_depths = [min(len(r.candidates.sources[s].hits) for s in ("bm25", "dense")) for r in hybrid_results]

    log("exact vector top 10 (numpy over every stored vector) …")
    columns = store.column(COLLECTION, ["id", "vector"])
    ids = columns.column("id").to_pylist()
    matrix = np.asarray(columns.column("vector").combine_chunks().flatten().to_numpy(), np.float32)
    matrix = matrix.reshape(len(ids), -1)
    recalls = [recall_at([h.doc_id for h in cs.sources["dense"].hits],
                         exact_top(matrix, ids, wb.retriever.query_vector(info.model, q)))
               for q, cs in zip(vector_q, vector_sets, strict=True)]
    del matrix, columns

    from retrieval.evaluation import evaluate

    threads = getattr(evaluate, "QUERY_THREADS", 1)
    log(f"evaluate over {len(queries):,} queries on a fresh Workbench, {threads} thread(s) …")
    ewb = Workbench(store)
    ewb.backends(COLLECTION)
    # The metrics' first use in a process (numpy only since 2026-11-28; before, importing ranx and
    # numba and loading its compiled functions) is paid once: timed on its own, outside the evaluation.
    ranx_wall, ranx_cpu = time.perf_counter(), time.process_time()
    QrelsEvaluator({"q": {"d": 1}}).evaluate_rankings({"q": ["d"]}, ("ndcg@10", "recall@100"))
    ranx_wall, ranx_cpu = time.perf_counter() - ranx_wall, time.process_time() - ranx_cpu
    profiler = None
    if profile is not None:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    wall, cpu = time.perf_counter(), time.process_time()
    report = evaluate_collection(ewb, COLLECTION, queries, qrels, hybrid_cfg, metrics=("ndcg@10", "recall@100"))
    eval_wall, eval_cpu = time.perf_counter() - wall, time.process_time() - cpu
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(str(profile))
        log(f"profile written to {profile}")
    # The lean path against the explained one (`Workbench.search` per query) on the first queries,
    # each on a fresh Workbench: rankings of every system and metrics must be identical.
    sample = dict(list(queries.items())[:n_check])
    log(f"lean = explained? {len(sample)} queries through both paths …")
    check_metrics = ("ndcg@10", "recall@100")
    lean = evaluate_collection(Workbench(store), COLLECTION, sample, qrels, hybrid_cfg, metrics=check_metrics)
    explained = evaluate_collection(Workbench(store), COLLECTION, sample, qrels, hybrid_cfg, metrics=check_metrics,
                                    explained=True)
    same_queries = sum(all(lean.runs[s][q] == explained.runs[s][q] for s in lean.runs) for q in sample)

    return {
        "docs": info.doc_count, "encoder": info.model, "backends": backends, "sources_load_s": load_s,
        "latency_queries": n_latency,
        "bm25_p50_ms": p50_ms([cs.seconds["bm25"] for cs in bm25_sets]),
        "bm25_candidates_p50_ms": p50_ms(bm25_wall),
        "vector_p50_ms": p50_ms([cs.seconds["dense"] for cs in vector_sets]),
        "vector_candidates_p50_ms": p50_ms(vector_wall),
        "query_embed_p50_ms": p50_ms(embed_wall),
        "vector_recall_at_10": float(np.mean(recalls)),
        "vector_recall_at_10_min": float(np.min(recalls)),
        "hybrid_p50_ms": p50_ms(hybrid_wall),
        "hybrid_p95_ms": float(np.percentile(hybrid_wall, 95) * 1000),
        "hybrid_full_depth_share": sum(d >= 100 for d in hybrid_depths) / len(hybrid_depths),
        "refuse_p50_ms": p50_ms(refuse_wall),
        "slider_p50_ms": p50_ms(slider_wall),
        "ranx_first_use_s": ranx_wall, "ranx_first_use_cpu_s": ranx_cpu,
        "evaluate_queries": report.n_queries, "evaluate_threads": threads,
        "evaluate_s": eval_wall, "evaluate_cpu_s": eval_cpu,
        "evaluate_queries_per_s": report.n_queries / eval_wall,
        "evaluate_metrics": {s: {m: round(v, 4) for m, v in values.items()} for s, values in report.metrics.items()},
        "lean_check_queries": len(sample), "lean_check_same_rankings": same_queries,
        "lean_check_same_metrics": lean.metrics == explained.metrics and lean.per_query == explained.per_query,
    }


def table(result: dict) -> str:
    ing = result["ingest"]
    rows = [
        ("documents", f"{result['docs']:,}", f"{ing['chars_per_doc']:.0f} chars/doc, language {ing['language']}", ""),
        ("encoder", result["encoder"], f"{ing['truncated']:,} docs truncated at its window", ""),
        ("backends: bm25", result["backends"]["bm25"], "", ""),
        ("backends: vector", result["backends"]["dense"], "", ""),
        ("ingest (" + ("Workbench.ingest_stream" if ing.get("path") == "stream" else "Workbench.create") + ")",
         f"{result['ingest_docs_per_s']:.1f} docs/s",
         f"{ing['ingest_s']:.0f} s wall, {ing['ingest_cpu_s']:.0f} CPU s", ANCHORS["ingest_docs_per_s"]),
        ("  of which: " + ", ".join(ing["stages_s"]), " / ".join(f"{v:.0f}" for v in ing["stages_s"].values()) + " s",
         "wall seconds per stage", ""),
        ("encoder only", f"{result['encoder_only_docs_per_s']:.1f} docs/s",
         f"first {ing['encoder_sample']:,} texts, {ing['encoder_only_s']:.0f} s wall, "
         f"{ing['encoder_only_cpu_s']:.0f} CPU s",
         ""),
        ("ingest / encoder only", f"{result['ingest_docs_per_s'] / result['encoder_only_docs_per_s']:.2f}",
         "target ≥ 0.90", ""),
        *([("embedding inside ingest", f"{result['docs'] / ing['stages_s']['embed']:.1f} docs/s", "", "")]
          if "embed" in ing["stages_s"] else []),
        ("peak RSS of the ingest", f"{result['peak_rss_mb']:,.0f} MB", "child process ru_maxrss", ""),
        ("sources loaded (first use)", f"{result['sources_load_s']:.1f} s", "both, from the stored collection", ""),
        ("bm25 top 100, p50", f"{result['bm25_p50_ms']:.1f} ms",
         f"Workbench.candidates {result['bm25_candidates_p50_ms']:.1f} ms; target ≤ 15 ms", ANCHORS["bm25_p50_ms"]),
        ("vector top 100, p50", f"{result['vector_p50_ms']:.1f} ms",
         f"Workbench.candidates {result['vector_candidates_p50_ms']:.1f} ms; target ≤ 20 ms",
         ANCHORS["vector_p50_ms"]),
        ("vector recall@10 vs exact", f"{result['vector_recall_at_10']:.3f}",
         f"min {result['vector_recall_at_10_min']:.1f}; target ≥ 0.98", ""),
        ("query embedding alone, p50", f"{result['query_embed_p50_ms']:.1f} ms", "one query, inside hybrid", ""),
        ("hybrid search, p50", f"{result['hybrid_p50_ms']:.1f} ms",
         f"p95 {result['hybrid_p95_ms']:.1f} ms, both depth 100 in {result['hybrid_full_depth_share']:.0%}; "
         "target ≤ 50 ms", ""),
        ("re-fuse (Workbench.rank), p50", f"{result['refuse_p50_ms']:.2f} ms",
         f"slider move incl. cache lookup {result['slider_p50_ms']:.2f} ms; target ≤ 5 ms", ""),
        ("metrics library loaded (first use)", f"{result.get('ranx_first_use_s', 0):.1f} s",
         f"{result.get('ranx_first_use_cpu_s', 0):.1f} CPU s; once per process, before evaluate", ""),
        ("evaluate", f"{result['evaluate_queries_per_s']:.1f} queries/s",
         f"{result['evaluate_queries']:,} queries, {result.get('evaluate_threads', 1)} thread(s), "
         f"{result['evaluate_s']:.1f} s wall, "
         f"{result['evaluate_cpu_s']:.1f} CPU s; hybrid ndcg@10 {result['evaluate_metrics']['hybrid']['ndcg@10']:.3f}",
         ANCHORS["evaluate_queries_per_s"]),
        ("evaluate: lean = explained path",
         f"{result['lean_check_same_rankings']:,} of {result['lean_check_queries']:,}",
         "queries with identical rankings (every source and the fusion); metrics identical: "
         + ("yes" if result["lean_check_same_metrics"] else "NO"), ""),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    lines = [f"{'measure':<{widths[0]}}  {'value':>{widths[1]}}  notes  [anchor]"]
    for label, value, note, anchor in rows:
        lines.append(f"{label:<{widths[0]}}  {value:>{widths[1]}}  {note}" + (f"  [{anchor}]" if anchor else ""))
    lines.append(f"(latencies: p50 over {result['latency_queries']} distinct uncached queries each)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--ingest-child":
        folder, db, encoder, sample, stream, vectors, vectors_wait_s = argv[1:8]
        print(json.dumps(ingest_child(Path(folder), Path(db), encoder, int(sample), stream == "stream",
                                      Path(vectors) if vectors else None, float(vectors_wait_s))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, required=True, help="documents in the collection")
    parser.add_argument("--queries", type=int, default=1000, help="queries generated (all are evaluated)")
    parser.add_argument("--latency-queries", type=int, default=100, help="distinct queries per latency (≥ 50)")
    parser.add_argument("--encoder", default=DEFAULT_ENCODER, help="embedding model name or folder")
    parser.add_argument("--encoder-sample", type=int, default=10_000, help="texts the encoder alone is timed on")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rebuild", action="store_true", help="ingest again even if the database exists")
    parser.add_argument("--stream", action="store_true",
                        help="ingest through the streaming path (the CLI's: one batch in memory) instead of "
                             "Workbench.create (the Corpus page's: the whole corpus in memory)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the evaluate run here")
    parser.add_argument("--eval-threads", type=int, help="queries evaluated at once (default: evaluate.QUERY_THREADS)")
    parser.add_argument("--check-queries", type=int, default=300,
                        help="queries evaluated through both the lean and the explained path, compared")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    if args.eval_threads is not None:
        from retrieval.evaluation import evaluate

        evaluate.QUERY_THREADS = args.eval_threads
    folder = ensure_corpus(args.docs, args.queries, args.seed, args.data_dir, args.eval_dir, log)
    slug = "" if args.encoder == DEFAULT_ENCODER else "-" + re.sub(r"[^A-Za-z0-9]+", "-", Path(args.encoder).name)
    seed = "" if args.seed == 0 else f"-s{args.seed}"
    db = args.data_dir / f"db-{args.docs}{seed}{slug}"
    ingest = ensure_ingest(folder, db, args.encoder, args.encoder_sample, args.rebuild, log, args.stream)
    result = measure(db, folder, args.latency_queries, log, args.profile, args.check_queries)
    result.update({"ingest_docs_per_s": ingest["ingest_docs_per_s"],
                   "encoder_only_docs_per_s": ingest["encoder_only_docs_per_s"],
                   "peak_rss_mb": ingest["peak_rss_mb"], "ingest": ingest})
    (args.data_dir / f"result-{db.name}-q{args.queries}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1) if args.json else table(result))


if __name__ == "__main__":
    main()
