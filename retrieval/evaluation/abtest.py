"""A/B comparison of two runs on the same judged queries, with a paired significance test.

For a metric m and the judged queries q₁…qₙ (`evaluate.evaluate_run`: a judged query a run left
empty scores 0), per query δᵢ = m_B(qᵢ) − m_A(qᵢ); B wins where δ > 0, loses where δ < 0.

- "t-test": two-sided paired Student's t-test, t = mean(δ) / (sd(δ) / √n) with n − 1 degrees of
  freedom (`paired.t_test_p`: `scipy.stats.ttest_rel`, what ranx's "student" test calls). With
  one query, or every δ the same non-zero value, there is no p: "not enough queries" (None).
- "randomization": two-sided paired randomization (Fisher) test, the one ranx implements: each
  permutation swaps A and B within each query with probability ½ (i.e. flips the sign of δᵢ),
  and p = (b + 1) / (m + 1), b of the m permutations reaching |mean δ| (`paired.randomization_p`:
  never 0). ranx's own version seeds numpy inside a parallel numba loop, whose worker threads
  keep their own random state, so its p-value changes from call to call whatever the seed
  (measured: 0.5315, 0.5615, 0.5245 for one pair of runs with seed 7); this module draws the sign
  flips from `numpy.random.default_rng(seed)`, so the same seed gives the same p-value.

When every δ is 0 the runs are indistinguishable on this metric and p = 1.

Beside p, Δ = mean(δ) gets its 95 % percentile bootstrap interval (`paired.bootstrap_ci`: the n
queries resampled with replacement 10,000 times, seed 42), the interval every other paired
comparison of the workbench reports (snapshot diffs, the optimiser's gain).

The verdict (`verdict`) is the one place that says whether to believe the difference: it weighs
the test and, when given, the trust check of the judgments' holes (`trust.flip_check`) — a
difference significant on today's judgments that judging the unjudged documents could reverse
is not a "yes".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.evaluation.evaluate import Qrels, QrelsEvaluator, Run
from retrieval.evaluation.paired import NOT_ENOUGH_QUERIES, bootstrap_ci, p_text, randomization_p, t_test_p
from retrieval.evaluation.trust import FlipCheck
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
    p_value: float | None  # None: not enough queries for the test (see the module docstring)
    alpha: float
    n_permutations: int | None = None  # randomization only
    seed: int | None = None  # randomization only
    delta_ci: tuple[float, float] | None = None  # 95 % bootstrap interval of mean_delta

    @property
    def significant(self) -> bool:
        """p < alpha (never without a p)."""
        return self.p_value is not None and self.p_value < self.alpha

    def summary(self, flip: FlipCheck | None = None) -> str:
        return (f"{self.metric}: A {self.mean_a:.4f}, B {self.mean_b:.4f} (Δ {self.mean_delta:+.4f}) over "
                f"{self.n_queries} queries; B wins {self.wins}, ties {self.ties}, loses {self.losses}; "
                f"{self.test} {p_text(self.p_value)}: {verdict(self, flip).sentence}")


@dataclass(frozen=True)
class Verdict:
    """Whether to believe B's difference from A: a short answer and the sentence saying why."""

    answer: str  # "yes", "no", "not yet: judge first", "not enough queries"
    sentence: str
    believed: bool  # significant, and the judgments' holes cannot reverse it (as far as checked)


def verdict(result: ABResult, flip: FlipCheck | None = None) -> Verdict:
    """The one verdict of an A/B comparison (see the module docstring): the test's answer at α,
    unless judging the holes could reverse the difference (`flip.can_flip`)."""
    level = f"α = {result.alpha:g}"
    if result.p_value is None:
        return Verdict(NOT_ENOUGH_QUERIES, f"{NOT_ENOUGH_QUERIES} for a {result.test} (it needs at least two "
                       "queries whose differences are not all the same): no verdict", False)
    if not result.significant:
        return Verdict("no", f"not significant at {level}: the difference may be noise over these queries", False)
    if flip is not None and flip.can_flip:
        return Verdict("not yet: judge first", f"significant at {level} on today's judgments, but judging the "
                       "unjudged documents of the two top 10s could reverse it: judge them before trusting it",
                       False)
    return Verdict("yes", f"significant at {level}", True)


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
    _, values_a = evaluator.evaluate(run_a, [metric])  # an unknown metric name: a RetrievalError
    _, values_b = evaluator.evaluate(run_b, [metric])
    query_ids = evaluator.query_ids
    a = np.array([values_a[q][metric] for q in query_ids], dtype=np.float64)
    b = np.array([values_b[q][metric] for q in query_ids], dtype=np.float64)
    deltas = b - a
    if not np.any(deltas):
        p_value = 1.0
    elif test == "t-test":
        p_value = t_test_p(a, b)
    else:
        p_value = randomization_p(deltas, n_permutations, seed)
    return ABResult(
        metric=metric, test=test, n_queries=len(query_ids),
        per_query_a=dict(zip(query_ids, a.tolist(), strict=True)),
        per_query_b=dict(zip(query_ids, b.tolist(), strict=True)),
        deltas=dict(zip(query_ids, deltas.tolist(), strict=True)),
        mean_a=float(a.mean()), mean_b=float(b.mean()), mean_delta=float(b.mean() - a.mean()),
        wins=int((deltas > 0).sum()), ties=int((deltas == 0).sum()), losses=int((deltas < 0).sum()),
        p_value=None if p_value is None else float(p_value), alpha=alpha,
        n_permutations=n_permutations if test == "randomization" else None,
        seed=seed if test == "randomization" else None,
        delta_ci=bootstrap_ci(deltas) if deltas.size else None,
    )
