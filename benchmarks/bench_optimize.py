"""Tuning the fusion on judgments, cross-validated: the default config, the best grid variant, the
optimiser (Bayesian), query-dependent fusion and LambdaMART, each nDCG@10 held out over the same
folds with a 95 % CI and the time it took, in one run. Run:

    .venv/bin/python benchmarks/bench_optimize.py [BEIR_DIR ...] [--folds 5] [--trials 40] [--seed 0]
        [--unchecked] [--json]

BEIR_DIR defaults to the developers' sets beside the repository (../shared/eval/nfcorpus,
vaswani, cmrc2018-dev, xquad-en), each ingested once into a cache collection
(`beir_cache.ensure_beir_collection`, the store of $WORKBENCH_DB or ./data/lancedb).

Per set, one Workbench: every judged query's candidates are fetched once (`study.prepare`,
timed as 'candidates'); then, on the same folds (`optimize.query_folds`, the seed):

- default — `SearchConfig()`, the shipped config, on every query (nothing chosen, nothing held out)
- grid — the sweep's 132 variants (`sweep.default_grid`), the best on each fold's training
  queries scored on its held-out queries (`sweep.held_out_estimate` with the same folds)
- bayes, query-dependent, lambdamart — `optimize.cross_validate`: k studies (or models) on the
  training folds scored on the held-out fold, and one on all queries (in-sample); each study
  tunes on three quarters of its training queries and keeps the tuned config only when it beats
  the default on the other quarter (`optimize.checked_against_start`)
- with --unchecked, the same three without that check ("bayes, unchecked", …: each study keeps
  what it tuned on all its training queries): what the tuning itself does held out, and whether
  a model memorises (its in-sample against its held-out value)

Each row: the held-out nDCG@10 (the mean over all queries of each query's held-out value) with
its bootstrap 95 % CI; the gain over the default with its 95 % interval, the corrected
resampled t over the folds' mean gains (`paired.corrected_cv_ci`, Nadeau & Bengio 2003: it
carries the tuning's own variance; the same folds for every method, the grid's included) and,
beside it, the per-query paired bootstrap (each fold's choice fixed: narrower); the in-sample
value; how many of the k + 1 studies kept their tuned config after the inner check ("kept");
and the seconds the method took after the candidates were fetched (the grid: ranking and
scoring 132 variants). JSON: {set: {method: {ndcg@10, ci95, gain, gain_ci95, gain_ci95_queries,
in_sample, kept, seconds}}, plus candidates_seconds and queries}.
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
from retrieval.evaluation.paired import corrected_cv_ci  # noqa: E402
from retrieval.evaluation.study import prepare  # noqa: E402
from retrieval.evaluation.sweep import default_grid, held_out_estimate, run_sweep  # noqa: E402
from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.store import Store  # noqa: E402

SETS = ("nfcorpus", "vaswani", "cmrc2018-dev", "xquad-en")
METHODS = ("bayes", "query-dependent", "lambdamart")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def row(per_query: dict[str, float], default: dict[str, float], fold_ids: list[list[str]], seconds: float,
        in_sample: float | None, kept: str = "") -> dict:
    """Held-out mean and CI, the gain over the default with its corrected resampled t interval
    over the folds and its per-query bootstrap interval (see the module docstring)."""
    ids = sorted(default)
    held = mean_ci([per_query[q] for q in ids])
    gain = mean_ci([per_query[q] - default[q] for q in ids])
    fold_gains = [sum(per_query[q] - default[q] for q in fold) / len(fold) for fold in fold_ids]
    return {"ndcg@10": held["value"], "ci95": held["ci95"], "gain": gain["value"],
            "gain_ci95": list(corrected_cv_ci(fold_gains, 1 / (len(fold_ids) - 1))),
            "gain_ci95_queries": gain["ci95"], "in_sample": in_sample, "kept": kept, "seconds": seconds}


def kept(result) -> str:
    """'k/n': the studies that kept their tuned config after the inner check (n: all k + 1)."""
    checked = [s.validation for s in result.studies]
    return f"{sum(1 for v in checked if not v or v['kept'] == 'tuned')}/{len(checked)}"


def run_set(folder: Path, folds: int, trials: int, seed: int, unchecked: bool = False) -> dict:
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
           "default": row(default, default, fold_ids, 0.0, mean_ci(list(default.values()))["value"])}

    started = time.perf_counter()
    sweep = run_sweep(workbench, name, queries, {q: qrels[q] for q in ids}, default_grid(base), ("ndcg@10",))
    held = held_out_estimate(sweep, "ndcg@10", fold_ids=fold_ids)
    out["grid"] = row(held.per_query, default, fold_ids, time.perf_counter() - started, held.in_sample)
    log(f"{folder.name}: grid {out['grid']['ndcg@10']:.4f} ({out['grid']['seconds']:.1f} s)")
    for checked in (True, False) if unchecked else (True,):
        for method in METHODS:
            started = time.perf_counter()
            result = cross_validate(ready[method], trials, folds, seed, inner_validation=checked)
            label = method if checked else f"{method}, unchecked"
            out[label] = row(result.per_query["cv"], default, fold_ids, time.perf_counter() - started,
                             result.in_sample["value"], kept(result) if checked else "")
            log(f"{folder.name}: {label} {out[label]['ndcg@10']:.4f} ({out[label]['seconds']:.1f} s)")
    return out


def table(results: dict[str, dict], folds: int, trials: int) -> str:
    lines = []
    for set_name, out in results.items():
        lines += [f"\n{set_name}: {out['queries']} judged queries, {folds} folds, {trials} trials per study, "
                  f"candidates fetched in {out['candidates_seconds']:.1f} s",
                  "| method | nDCG@10 held out [95 % CI] | gain over default [95 % CI, folds' corrected t] "
                  "| [queries' bootstrap] | in-sample | kept | seconds |",
                  "|---|---|---|---|---|---|---|"]
        for method in (m for m in out if isinstance(out[m], dict)):
            r = out[method]
            held = f"{r['ndcg@10']:.4f} [{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}]"
            low, high = r["gain_ci95"]
            gain, by_query = "—", "—"
            if method != "default":
                gain = f"{r['gain']:+.4f} [{low:+.4f}, {high:+.4f}]"
                by_query = "[{:+.4f}, {:+.4f}]".format(*r["gain_ci95_queries"])
            lines.append(f"| {method} | {held} | {gain} | {by_query} | {r['in_sample']:.4f} | {r['kept'] or '—'} "
                         f"| {r['seconds']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("beir_dirs", nargs="*", type=Path,
                        default=[REPO.parent / "shared" / "eval" / s for s in SETS])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=40, help="trials per study (bayes, query-dependent)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unchecked", action="store_true",
                        help="also run bayes, query-dependent and lambdamart without the inner check")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {folder.name: run_set(folder, args.folds, args.trials, args.seed, args.unchecked)
               for folder in args.beir_dirs}
    print(json.dumps(results) if args.json else table(results, args.folds, args.trials))


if __name__ == "__main__":
    main()
