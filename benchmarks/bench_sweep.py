"""Sweep speed benchmark; prints a table. Run: .venv/bin/python benchmarks/bench_sweep.py [BEIR_DIR]

On nfcorpus (323 queries) by default, candidates cached first (one sweep of a single variant
fills the workbench's candidate cache), then:

- the full 121-variant default grid: wall and CPU seconds, split into the cached candidate
  look-ups and fusion + metrics, and per variant;
- the 82 first variants (the size of OpenSearch's hybrid optimizer grid); target ≤ 30 s;
- per query and variant: `plan.fuse` (explained) vs `plan.fused_order` (lean) on the cached
  candidates, which is why the sweep ranks with the lean one.

The machine is shared (2 cores): CPU seconds say what the sweep itself costs, wall seconds what
it took while the others ran.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from retrieval.evaluation.beir_cache import ensure_beir_collection  # noqa: E402
from retrieval.evaluation.sweep import default_grid, run_sweep  # noqa: E402
from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.plan import fuse, fused_order  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.store import Store  # noqa: E402


def timed(function):
    wall, cpu = time.perf_counter(), time.process_time()
    value = function()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared" / "eval" / "nfcorpus"
    if not folder.is_dir():
        sys.exit(f"{folder} is missing: give a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) as the "
                 "first argument; the default is ../shared/eval/nfcorpus beside the repository")
    workbench = Workbench(Store())
    name, corpus = ensure_beir_collection(workbench.store, folder, log=lambda m: print(m, file=sys.stderr))
    grid = default_grid(SearchConfig())
    queries, qrels = corpus.queries, corpus.qrels
    # Fill the candidate cache with a one-variant sweep of a
    # variant that uses both sources (grid[0] has BM25 weight 0: dense alone).
    both = [v for v in grid if len(v.config.weights) == 2][:1]
    _, warm_wall, _ = timed(lambda: run_sweep(workbench, name, queries, qrels, both))
    full, full_wall, full_cpu = timed(lambda: run_sweep(workbench, name, queries, qrels, grid))
    part, part_wall, part_cpu = timed(lambda: run_sweep(workbench, name, queries, qrels, grid[:82]))

    sample = [q for q in qrels if q in queries][:40]
    explained, lean = [], []
    for qid in sample:
        candidates = workbench.candidates(name, queries[qid], grid[0].config).sources
        for variant in grid[::10]:
            started = time.perf_counter()
            fuse(candidates, variant.config)
            explained.append(time.perf_counter() - started)
            started = time.perf_counter()
            fused_order(candidates, variant.config)
            lean.append(time.perf_counter() - started)

    n = full.n_queries
    print(f"sweep benchmark: {folder.name}, {n} judged queries, depth {grid[0].config.depth}, candidates cached")
    print(f"{'what':<52} {'wall s':>9} {'cpu s':>9} {'per variant':>12}")
    print(f"{'first sweep (1 variant, fills the candidate cache)':<52} {warm_wall:>9.2f} {'':>9} {'':>12}")
    runs = ((f"sweep, {len(grid)} variants", full, full_wall, full_cpu, len(grid)),
            ("sweep, 82 variants (OpenSearch grid size)", part, part_wall, part_cpu, 82))
    for label, result, wall, cpu, count in runs:
        print(f"{label:<52} {wall:>9.2f} {cpu:>9.2f} {wall / count * 1000:>9.1f} ms")
        print(f"{'  of which cached candidate look-ups':<52} {result.seconds['retrieval']:>9.2f}")
        print(f"{'  of which fusion + metrics':<52} {result.seconds['fusion+metrics']:>9.2f} {'':>9} "
              f"{result.seconds['fusion+metrics'] / count * 1000:>9.1f} ms")
    print(f"{'fuse (explained), one query × variant, median':<52} {statistics.median(explained) * 1000:>8.3f} ms")
    print(f"{'fused_order (lean), one query × variant, median':<52} {statistics.median(lean) * 1000:>8.3f} ms")
    print(f"best variant: {full.best().label} (ndcg@10 {full.rows[0]['ndcg@10']:.4f})")


if __name__ == "__main__":
    main()
