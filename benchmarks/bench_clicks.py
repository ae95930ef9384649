"""How far implicit judgments can be trusted, measured on simulated click logs as the log grows.
Run:

    .venv/bin/python benchmarks/bench_clicks.py [--sizes 1000,10000,100000,1000000] [--max-sessions N]
                                                [--users pbm,cascade] [--queries 100] [--json]

The truth. `--queries` queries × 20 documents with grades 0–3 drawn with a fixed seed (uniform).
The log: `judging.implicit.simulate` users (position-based, γ_r = 1/(r + 1); or cascade) over the
top 10 of an imperfect production ranker (grade + a fixed N(0, 1) error per document, a fresh
N(0, 1) per session), attractiveness α(g) = ε + (1 − 2ε)(2^g − 1)/7 with ε = 0.05. The log is read
into `ClickCounts` (max rank 10) and each model of `MODELS` (ctr, coec, pbm, sdbn) grades it with
its default thresholds (`grading.DEFAULT_THRESHOLDS`), minimum 1 impression.

Per log size, user and model:
- τ/query: Kendall's τ-b between the model's score and the true grade over the documents the
  model judged, averaged over the queries with two or more of them (scipy's `kendalltau`);
- judged: the share of the true (query, document) pairs the model judged (a document the ranker
  never shows in the top 10 is never judged);
- nDCG: two rankers, A (fixed error N(0, 1.5²)) and B (N(0, 1)), ranked by their scores; nDCG@10 of
  each query under the implicit grades against under the true grades (`evaluation.abtest.compare`,
  the library's nDCG): `|ΔnDCG|` the mean absolute difference for A, `nDCG τ` Kendall's τ of the
  per-query values (does the list order the queries as the truth does);
- A/B: the verdict of B against A on nDCG@10 (paired t-test, α = 0.05: "B+" / "B−" significant,
  "=" not) on the implicit grades, and whether it is the verdict on the true grades;
- seconds: reading the log into counts (`log s`, simulation included: the events are generated
  while they are counted) and fitting the model (`fit s`); peak: the peak RSS of the child process
  that simulated, counted and fitted that size and user (it imports only the click models; sizes
  do not share a peak), and of which the log: that peak minus the RSS after the imports. The
  figures above are computed in the parent from the child's judgments.

The first run of each size is the measurement (no warm-up: the fit is pure numpy and Python).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from retrieval.judging.implicit.counts import ClickCounts
from retrieval.judging.implicit.grading import MODELS, implicit_judgments
from retrieval.judging.implicit.simulate import simulate

REPO = Path(__file__).resolve().parent.parent


DOCS = 20
DEPTH = 10
SEED = 11
METRIC = "ndcg@10"


def truth(n_queries: int) -> dict[str, dict[str, int]]:
    rng = np.random.default_rng(SEED)
    return {f"q{i}": {f"d{j}": int(g) for j, g in enumerate(rng.integers(0, 4, DOCS))} for i in range(n_queries)}


def ranker_runs(relevance: dict[str, dict[str, int]]) -> tuple[dict, dict]:
    """Runs of rankers A (error N(0, 1.5²)) and B (N(0, 1)): query -> doc -> score."""
    rng = np.random.default_rng(SEED + 1)
    runs = []
    for noise in (1.5, 1.0):
        runs.append({q: {d: float(g + rng.normal(0.0, noise)) for d, g in docs.items()}
                     for q, docs in relevance.items()})
    return runs[0], runs[1]


def verdict(result) -> str:
    if not result.significant:
        return "="
    return "B+" if result.mean_delta > 0 else "B−"


def memory_mb(field: str) -> float:
    """This process's VmRSS or VmHWM (its peak) in MB, from /proc/self/status: unlike
    `ru_maxrss`, the peak of a process started by exec is its own, not its parent's at the fork."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fitted(sessions: int, user: str, n_queries: int) -> dict:
    """Every model fitted to one simulated log, in a child process that imports only the click
    models (so its peak RSS is the log's): scores, grades, seconds, peak and baseline RSS."""
    baseline = memory_mb("VmRSS")
    relevance = truth(n_queries)
    started = time.perf_counter()
    counts = ClickCounts(max_rank=DEPTH).add_all(simulate(relevance, sessions, user=user, depth=DEPTH, seed=SEED))
    out = {"log_seconds": time.perf_counter() - started, "models": {}}
    for model in MODELS:
        started = time.perf_counter()
        implicit = implicit_judgments(counts, model)
        out["models"][model] = {"seconds": time.perf_counter() - started,
                                "judgments": [[j.query, j.doc, j.score, j.grade] for j in implicit.judgments]}
    out["peak_mb"] = memory_mb("VmHWM")
    out["baseline_mb"] = baseline
    return out


def measured(sessions: int, user: str, n_queries: int, fit: dict) -> list[dict]:
    """The figures of the module docstring for one log's fitted models."""
    from retrieval.evaluation.abtest import compare

    relevance = truth(n_queries)
    run_a, run_b = ranker_runs(relevance)
    true_ab = compare(relevance, run_a, run_b, METRIC)
    rows = []
    for model, result in fit["models"].items():
        scores = {(q, d): score for q, d, score, _ in result["judgments"]}
        qrels: dict[str, dict[str, int]] = {}
        for q, d, _, grade in result["judgments"]:
            qrels.setdefault(q, {})[d] = grade
        taus = []
        for q, docs in relevance.items():
            judged = [d for d in docs if (q, d) in scores]
            if len(judged) >= 2:
                tau = kendalltau([docs[d] for d in judged], [scores[q, d] for d in judged]).statistic
                if tau == tau:  # NaN when one side is constant
                    taus.append(tau)
        shared = [q for q in relevance if q in qrels]
        implicit_ab = compare({q: qrels[q] for q in shared}, {q: run_a[q] for q in shared},
                              {q: run_b[q] for q in shared}, METRIC)
        on_implicit = np.array([implicit_ab.per_query_a[q] for q in shared])
        on_truth = np.array([true_ab.per_query_a[q] for q in shared])
        ndcg_tau = kendalltau(on_truth, on_implicit).statistic if len(shared) >= 2 else float("nan")
        rows.append({
            "sessions": sessions, "user": user, "model": model,
            "tau_per_query": float(np.mean(taus)) if taus else None,
            "judged": len(scores) / sum(len(d) for d in relevance.values()),
            "ndcg_abs_diff": float(np.mean(np.abs(on_implicit - on_truth))) if shared else None,
            "ndcg_tau": None if ndcg_tau != ndcg_tau else float(ndcg_tau),
            "ab_implicit": verdict(implicit_ab), "ab_truth": verdict(true_ab),
            "ab_match": verdict(implicit_ab) == verdict(true_ab),
            "delta_implicit": implicit_ab.mean_delta, "delta_truth": true_ab.mean_delta,
            "log_seconds": fit["log_seconds"], "fit_seconds": result["seconds"],
            "peak_mb": fit["peak_mb"], "baseline_mb": fit["baseline_mb"],
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000", help="sessions per log, comma-separated")
    parser.add_argument("--max-sessions", type=int, help="leave out the sizes above this")
    parser.add_argument("--users", default="pbm,cascade", help="simulated users: pbm, cascade")
    parser.add_argument("--queries", type=int, default=100, help="queries (20 documents each; default 100)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--one", nargs=2, metavar=("SESSIONS", "USER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(fitted(int(args.one[0]), args.one[1], args.queries)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    sizes = [s for s in sizes if args.max_sessions is None or s <= args.max_sessions]
    rows = []
    for size in sizes:
        for user in [u.strip() for u in args.users.split(",") if u.strip()]:
            child = subprocess.run([sys.executable, __file__, "--one", str(size), user, "--queries", str(args.queries)],
                                   capture_output=True, text=True, check=True)
            rows += measured(size, user, args.queries, json.loads(child.stdout))
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    print(f"{args.queries} queries × {DOCS} documents, top {DEPTH}; A/B truth: "
          f"{rows[0]['ab_truth'] if rows else '-'} (Δ nDCG@10 {rows[0]['delta_truth']:+.4f})" if rows else "no sizes")
    print(f"{'sessions':>9} {'user':>8} {'model':>6} {'τ/query':>8} {'judged':>7} {'|ΔnDCG|':>8} {'nDCG τ':>7} "
          f"{'A/B':>4} {'match':>5} {'log s':>7} {'fit s':>6} {'peak MB':>8} {'of which log':>12}")
    for r in rows:
        shown = {k: ("-" if r[k] is None else f"{r[k]:.3f}") for k in ("tau_per_query", "ndcg_abs_diff", "ndcg_tau")}
        print(f"{r['sessions']:>9,} {r['user']:>8} {r['model']:>6} {shown['tau_per_query']:>8} {r['judged']:>7.0%} "
              f"{shown['ndcg_abs_diff']:>8} {shown['ndcg_tau']:>7} {r['ab_implicit']:>4} "
              f"{'yes' if r['ab_match'] else 'no':>5} {r['log_seconds']:>7.2f} {r['fit_seconds']:>6.2f} "
              f"{r['peak_mb']:>8.0f} {r['peak_mb'] - r['baseline_mb']:>12.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
