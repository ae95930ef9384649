"""Core speed benchmark; prints a table. Run: .venv/bin/python benchmarks/bench_core.py [BEIR_DIR]

Rows:
- fuse + explain over cached candidates: three real candidate lists of 100 (BM25 via rank-bm25,
  BM25 via LanceDB's index under another name, dense) for each of 50 queries; target median ≤ 5 ms;
- search, first time vs cached (same query again, then a slider move = new rrf_k);
- ingest throughput (parse → tokenise → embed → LanceDB write + index) vs the encoder alone.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from retrieval.evaluation.beir_cache import ensure_beir_collection  # noqa: E402
from retrieval.indexing.pipeline import create_collection  # noqa: E402
from retrieval.models.embed import load_encoder  # noqa: E402
from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.plan import RankingPlan, fuse  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.sources.base import run_source  # noqa: E402
from retrieval.sources.bm25 import LanceFTSSource  # noqa: E402
from retrieval.store import Store  # noqa: E402
from retrieval.text.passages import embedding_text  # noqa: E402
from retrieval.types import ParsedCorpus  # noqa: E402


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared" / "eval" / "nfcorpus"
    if not folder.is_dir():
        sys.exit(f"{folder} is missing: give a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) as the "
                 "first argument; the default is ../shared/eval/nfcorpus beside the repository")
    store = Store()
    name, corpus = ensure_beir_collection(store, folder, log=lambda m: print(m, file=sys.stderr))
    wb = Workbench(store)
    config = SearchConfig(weights={"bm25": 1.0, "dense": 1.0}, depth=100, top_k=10)
    three = SearchConfig(weights={"bm25": 1.0, "dense": 1.0, "fts": 1.0}, depth=100, top_k=10)
    fts = LanceFTSSource(store.table(name))
    first, cached, fuse_times, slider = [], [], [], []
    n_full = 0
    # Queries in file order until 50 have three full lists of 100 (short queries match fewer).
    for query in corpus.queries.values():
        if n_full == 50:
            break
        started = time.perf_counter()
        candidates = wb.candidates(name, query, config)
        first.append(time.perf_counter() - started)
        started = time.perf_counter()
        wb.candidates(name, query, config)
        cached.append(time.perf_counter() - started)
        moved = SearchConfig.from_dict({**config.to_dict(), "rrf_k": 10.0})
        started = time.perf_counter()
        moved_candidates = wb.candidates(name, query, moved)
        RankingPlan(moved).explain(moved_candidates.sources, query, moved_candidates.language)
        slider.append(time.perf_counter() - started)
        lists = {**candidates.sources, "fts": run_source(fts, query, 100)}
        if min(len(r.hits) for r in lists.values()) < 100:
            continue
        n_full += 1
        for _ in range(20):
            started = time.perf_counter()
            fuse(lists, three)
            fuse_times.append(time.perf_counter() - started)
    rows: list[tuple[str, str, str]] = [
        ("fuse + explain, 3 sources × 100 (median)", ms(statistics.median(fuse_times)),
         f"p95 {ms(sorted(fuse_times)[int(len(fuse_times) * 0.95)])}, {n_full} queries × 20"),
        ("search, first time: bm25 + dense candidates (median)", ms(statistics.median(first)),
         f"{len(first)} queries, {len(corpus.documents)} docs"),
        ("search, same query again: cache hit (median)", ms(statistics.median(cached)), "version check + lookup"),
        ("slider move: cached candidates + re-fuse (median)", ms(statistics.median(slider)), "rrf_k 60 → 10"),
    ]

    sample = ParsedCorpus(documents=corpus.documents[:300], format="beir")
    texts = [embedding_text(d) for d in sample.documents]
    encoder = load_encoder(store.info(name).model)
    encoder.encode_passages(texts[:8])  # warm up
    started = time.perf_counter()
    encoder.encode_passages(texts)
    encode_rate = len(texts) / (time.perf_counter() - started)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Store(tmp)
        started = time.perf_counter()
        create_collection(scratch, "bench", sample, model=encoder.spec.name)
        ingest_rate = len(texts) / (time.perf_counter() - started)
    rows.append(("ingest (tokenise + embed + write + index)", f"{ingest_rate:.1f} docs/s",
                 f"{len(texts)} docs, {encoder.spec.name}"))
    rows.append(("encoder only", f"{encode_rate:.1f} docs/s", "same texts"))

    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure':<{width}}  {'value':>14}  notes")
    for label, value, note in rows:
        print(f"{label:<{width}}  {value:>14}  {note}")


if __name__ == "__main__":
    main()
