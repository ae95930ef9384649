"""Tuning the fusion on judgments, cross-validated: the default config, the best grid variant, the
optimiser (Bayesian), query-dependent fusion and LambdaMART, each nDCG@10 held out over the same
folds with a 95 % CI and the time it took, in one run. Run:

    .venv/bin/python benchmarks/bench_optimize.py [BEIR_DIR ...] [--folds 5] [--trials 40] [--seed 0] [--json]

BEIR_DIR defaults to the developers' sets beside the repository (../shared/eval/nfcorpus,
vaswani, cmrc2018-dev, xquad-en), each ingested once into a cache collection
(`beir_cache.ensure_beir_collection`, the store of $WORKBENCH_DB or ./data/lancedb).

Per set, one Workbench: every judged query's candidates are fetched once (`study.prepare`,
timed as 'candidates'); then, on the same folds (`optimize.query_folds`, the seed):

- default — `SearchConfig()`, the shipped config, on every query (nothing chosen, nothing held out)
- grid — the sweep's 132 variants (`sweep.default_grid`), the best on each fold's training
  queries scored on its held-out queries (`sweep.held_out_estimate` with the same folds)
- bayes, query-dependent, lambdamart — `optimize.cross_validate`: k studies (or models) on the
  training folds scored on the held-out fold, and one on all queries (in-sample)

Each row: the held-out nDCG@10 (the mean over all queries of each query's held-out value) with
its bootstrap 95 % CI, the gain over the default paired per query with its CI, the in-sample
value, and the seconds the method took after the candidates were fetched (the grid: ranking
and scoring 132 variants). JSON: {set: {method: {ndcg@10, ci95, gain, gain_ci95, in_sample,
seconds}}, plus candidates_seconds and queries}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("LANCEDB_LOG", "error")

from retrieval.evaluation.beir_cache import ensure_beir_collection  # noqa: E402
from retrieval.evaluation.optimize import cross_validate, mean_ci, query_folds  # noqa: E402
from retrieval.evaluation.study import prepare  # noqa: E402
from retrieval.evaluation.sweep import default_grid, held_out_estimate, run_sweep  # noqa: E402
from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.store import Store  # noqa: E402

SETS = ("nfcorpus", "vaswani", "cmrc2018-dev", "xquad-en")
METHODS = ("bayes", "query-dependent", "lambdamart")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def row(per_query: dict[str, float], default: dict[str, float], seconds: float, in_sample: float | None) -> dict:
    """Held-out mean and CI, the paired gain over the default and its CI."""
    ids = sorted(default)
    held = mean_ci([per_query[q] for q in ids])
    gain = mean_ci([per_query[q] - default[q] for q in ids])
    return {"ndcg@10": held["value"], "ci95": held["ci95"], "gain": gain["value"], "gain_ci95": gain["ci95"],
            "in_sample": in_sample, "seconds": seconds}


def run_set(folder: Path, folds: int, trials: int, seed: int) -> dict:
    workbench = Workbench(Store())
    name, corpus = ensure_beir_collection(workbench.store, folder, log=log)
    queries, qrels = corpus.queries, {q: d for q, d in corpus.qrels.items() if d and q in corpus.queries}
    base = SearchConfig()
    started = time.perf_counter()
    ready = {"bayes": prepare(workbench, name, queries, qrels, base, method="bayes")}
    candidates_seconds = time.perf_counter() - started
    ready["query-dependent"] = prepare(workbench, name, queries, qrels, base, method="query-dependent")
    ready["lambdamart"] = prepare(workbench, name, queries, qrels, base, method="lambdamart")
    ids = sorted(ready["bayes"].qrels)
    fold_ids = query_folds(ids, folds, seed)
    default = ready["bayes"].values(base, ids)
    out = {"queries": len(ids), "candidates_seconds": candidates_seconds,
           "default": row(default, default, 0.0, mean_ci(list(default.values()))["value"])}

    started = time.perf_counter()
    sweep = run_sweep(workbench, name, queries, {q: qrels[q] for q in ids}, default_grid(base), ("ndcg@10",))
    held = held_out_estimate(sweep, "ndcg@10", fold_ids=fold_ids)
    out["grid"] = row(held.per_query, default, time.perf_counter() - started, held.in_sample)
    log(f"{folder.name}: grid {out['grid']['ndcg@10']:.4f} ({out['grid']['seconds']:.1f} s)")
    for method in METHODS:
        started = time.perf_counter()
        result = cross_validate(ready[method], trials, folds, seed)
        out[method] = row(result.per_query["cv"], default, time.perf_counter() - started, result.in_sample["value"])
        log(f"{folder.name}: {method} {out[method]['ndcg@10']:.4f} ({out[method]['seconds']:.1f} s)")
    return out


def table(results: dict[str, dict], folds: int, trials: int) -> str:
    lines = []
    for set_name, out in results.items():
        lines += [f"\n{set_name}: {out['queries']} judged queries, {folds} folds, {trials} trials per study, "
                  f"candidates fetched in {out['candidates_seconds']:.1f} s",
                  "| method | nDCG@10 held out [95 % CI] | gain over default [95 % CI] | in-sample | seconds |",
                  "|---|---|---|---|---|"]
        for method in ("default", "grid", *METHODS):
            r = out[method]
            held = f"{r['ndcg@10']:.4f} [{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}]"
            low, high = r["gain_ci95"]
            gain = "—" if method == "default" else f"{r['gain']:+.4f} [{low:+.4f}, {high:+.4f}]"
            lines.append(f"| {method} | {held} | {gain} | {r['in_sample']:.4f} | {r['seconds']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("beir_dirs", nargs="*", type=Path,
                        default=[REPO.parent / "shared" / "eval" / s for s in SETS])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=40, help="trials per study (bayes, query-dependent)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {folder.name: run_set(folder, args.folds, args.trials, args.seed) for folder in args.beir_dirs}
    print(json.dumps(results) if args.json else table(results, args.folds, args.trials))


if __name__ == "__main__":
    main()
