"""A/B comparison of two runs on the same judged queries, with a paired significance test.

For a metric m and the judged queries q₁…qₙ (`evaluate.evaluate_run`: a judged query a run left
empty scores 0), per query δᵢ = m_B(qᵢ) − m_A(qᵢ); B wins where δ > 0, loses where δ < 0.

- "t-test": two-sided paired Student's t-test, t = mean(δ) / (sd(δ) / √n) with n − 1 degrees of
  freedom. The p-value is ranx's (`ranx.compare(..., stat_test="student")`, which calls
  `scipy.stats.ttest_rel`).
- "randomization": two-sided paired randomization (Fisher) test, the one ranx implements: each
  permutation swaps A and B within each query with probability ½ (i.e. flips the sign of δᵢ),
  and p = (permutations with |mean of the flipped δ| ≥ |mean δ|) / n_permutations. ranx's own
  version seeds numpy inside a parallel numba loop, whose worker threads keep their own random
  state, so its p-value changes from call to call whatever the seed (measured: 0.5315, 0.5615,
  0.5245 for one pair of runs with seed 7); this module draws the sign flips from
  `numpy.random.default_rng(seed)`, so the same seed gives the same p-value.

When every δ is 0 the runs are indistinguishable on this metric and p = 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from retrieval.evaluation.evaluate import Qrels, QrelsEvaluator, Run
from retrieval.evaluation.paired import randomization_p
from retrieval.types import RetrievalError

TESTS = ("t-test", "randomization")


@dataclass
class ABResult:
    """What `compare` measured. Per-query dicts are keyed by query id, in qrels order."""

    metric: str
    test: str
    n_queries: int
    per_query_a: dict[str, float]
    per_query_b: dict[str, float]
    deltas: dict[str, float]  # B − A
    mean_a: float
    mean_b: float
    mean_delta: float
    wins: int  # queries where B is better
    ties: int
    losses: int  # queries where B is worse
    p_value: float
    alpha: float
    n_permutations: int | None = None  # randomization only
    seed: int | None = None  # randomization only

    @property
    def significant(self) -> bool:
        """p < alpha."""
        return self.p_value < self.alpha

    def summary(self) -> str:
        verdict = "significant" if self.significant else "not significant"
        return (f"{self.metric}: A {self.mean_a:.4f}, B {self.mean_b:.4f} (Δ {self.mean_delta:+.4f}) over "
                f"{self.n_queries} queries; B wins {self.wins}, ties {self.ties}, loses {self.losses}; "
                f"{self.test} p = {self.p_value:.4g} ({verdict} at α = {self.alpha:g})")


def compare(
    qrels: Qrels,
    run_a: Run,
    run_b: Run,
    metric: str = "ndcg@10",
    test: str = "t-test",
    n_permutations: int = 10_000,
    seed: int = 42,
    alpha: float = 0.05,
) -> ABResult:
    """Compare run B against run A on `metric` (see the module docstring). Runs are the `Run`
    dicts of `evaluate.run_from_rankings`."""
    if test not in TESTS:
        raise RetrievalError(f"test must be one of {', '.join(TESTS)}, got {test!r}")
    if not 0 < alpha < 1:
        raise RetrievalError(f"alpha must be between 0 and 1, got {alpha}")
    if test == "randomization" and not (isinstance(n_permutations, int) and n_permutations >= 100):
        raise RetrievalError(f"n_permutations must be an integer ≥ 100, got {n_permutations!r}")
    evaluator = QrelsEvaluator(qrels)
    try:
        _, values_a = evaluator.evaluate(run_a, [metric])
        _, values_b = evaluator.evaluate(run_b, [metric])
    except (KeyError, ValueError, AssertionError) as exc:  # ranx on an unknown metric name
        raise RetrievalError(f"Cannot compute metric {metric!r}: {exc}") from exc
    query_ids = evaluator.query_ids
    a = np.array([values_a[q][metric] for q in query_ids], dtype=np.float64)
    b = np.array([values_b[q][metric] for q in query_ids], dtype=np.float64)
    deltas = b - a
    if not np.any(deltas):
        p_value = 1.0
    elif test == "t-test":
        p_value = ranx_t_test_p(evaluator, run_a, run_b, metric)
    else:
        p_value = randomization_p(deltas, n_permutations, seed)
    return ABResult(
        metric=metric, test=test, n_queries=len(query_ids),
        per_query_a=dict(zip(query_ids, a.tolist(), strict=True)),
        per_query_b=dict(zip(query_ids, b.tolist(), strict=True)),
        deltas=dict(zip(query_ids, deltas.tolist(), strict=True)),
        mean_a=float(a.mean()), mean_b=float(b.mean()), mean_delta=float(b.mean() - a.mean()),
        wins=int((deltas > 0).sum()), ties=int((deltas == 0).sum()), losses=int((deltas < 0).sum()),
        p_value=float(p_value), alpha=alpha,
        n_permutations=n_permutations if test == "randomization" else None,
        seed=seed if test == "randomization" else None,
    )


def ranx_t_test_p(evaluator: QrelsEvaluator, run_a: Run, run_b: Run, metric: str) -> float:
    """ranx's two-sided paired t-test p-value for B vs A on the evaluator's judged queries."""
    from ranx import Run as RanxRun
    from ranx import compare as ranx_compare

    runs = [RanxRun(_nonempty(run, evaluator.judged) or _placeholder(evaluator), name=name)
            for run, name in ((run_a, "A"), (run_b, "B"))]
    report = ranx_compare(evaluator.ranx_qrels, runs, [metric], stat_test="student", make_comparable=True)
    return float(report.comparisons["A", "B"][metric]["p_value"])


def _nonempty(run: Run, judged: Mapping[str, Mapping[str, int]]) -> Run:
    """ranx refuses empty per-query dicts; `make_comparable` scores the missing queries 0."""
    return {q: docs for q, docs in run.items() if docs and q in judged}


def _placeholder(evaluator: QrelsEvaluator) -> Run:
    """A run retrieving nothing relevant: one unjudged document for the first judged query."""
    qid = evaluator.query_ids[0]
    return {qid: {_unjudged_id(evaluator.judged[qid]): 1.0}}


def _unjudged_id(judged_docs: Mapping[str, int]) -> str:
    name = "\x00none"
    while name in judged_docs:
        name += "_"
    return name

