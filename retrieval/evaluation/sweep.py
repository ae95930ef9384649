"""Parameter sweeps: many fusion configs judged on one query set, retrieval done once.

`default_grid(base)` is OpenSearch-hybrid-optimizer-style: for two sources s₁, s₂ and the weight
w ∈ {0.0, 0.1, …, 1.0} of s₁ (s₂ gets 1 − w), every fusion method's grid points
(`FusionMethod.sweep_points` in `fusion.methods.FUSION_METHODS`) × 11 weights:

e.g. weighted fusion: normalisation ∈ {minmax, l2} × combination ∈ {arithmetic, harmonic,
geometric} × 11 weights = 66 variants; RRF: k ∈ {1, 5, 10, 20, 60} × 11 weights = 55 variants;
132 in all with today's three methods. A variant with weight 0 on a source leaves that source
out of its config (weights {s₂: 1.0}): it is the other source alone, not a fusion with a silent partner whose candidates
would still be ranked behind, tied at 0.

`run_sweep` fetches each query's candidates once per (source, source parameters) at the largest
depth any variant asks for (`candidates.fetch_candidates`), then, for every variant, runs its
ranking plan (`plan.RankingPlan` of `plan.evaluation_config(config)`, what
`evaluate.evaluate_collection` judges: the language rule, per-source minimums, fusion, top-K =
depth, no fused-score thresholds) lean on each query's cached candidates
(`candidates.CandidateRanker`), and scores the runs with `evaluate.QrelsEvaluator` (`metrics.py`,
every query at once).

Rerank variants (`rerank_grid`: one first-stage config × top-N × λ ∈ {0.0, 0.1, …, 1.0}) are
first-stage variants with `rerank` on. Their reranker scores are taken once per query, for the
union of their heads (`Workbench.rerank_scores`: the texts, caches and stored passage vectors of
`Workbench.apply_rerank`), before any variant is ranked; each variant's plan then reorders its
top-N with them (`RankingPlan.reranked`, the order a reranked search shows).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.evaluation.candidates import CandidateRanker, fetch_candidates, retrieval_plan
from retrieval.evaluation.evaluate import DEFAULT_METRICS, QrelsEvaluator, metric_label
from retrieval.search.config import SearchConfig
from retrieval.search.fusion.methods import FUSION_METHODS, method_of
from retrieval.search.plan import evaluation_config
from retrieval.types import RetrievalError

WEIGHT_STEPS = tuple(round(i / 10, 1) for i in range(11))  # 0.0, 0.1, …, 1.0
RERANK_LAMBDAS = WEIGHT_STEPS  # λ of the rerank variants: 0 replaces the first stage's order, 1 keeps it
RERANK_FIELDS = ("rerank", "reranker", "rerank_top_n", "rerank_lambda")


@dataclass(frozen=True)
class Variant:
    """One config of a sweep. `weight` is the weight of the grid's first source (None for a
    variant not made by a grid; rows then show that source's share w₁/Σw of the first weight)."""

    label: str
    config: SearchConfig
    weight: float | None = None


def pair_weights(sources: Sequence[str], weight: float) -> dict[str, float]:
    """{s₁: w, s₂: 1 − w}, leaving out a source whose weight is 0 (so w = 0 is s₂ alone)."""
    first, second = sources
    rest = round(1.0 - weight, 10)  # 1 − 0.7 reads 0.3, not 0.30000000000000004
    return {name: value for name, value in ((first, weight), (second, rest)) if value > 0}


def variant_label(config: SearchConfig, sources: Sequence[str], weight: float) -> str:
    """e.g. 'rrf k=60 bm25=0.3 dense=0.7' or 'weighted l2 harmonic bm25=0.3 dense=0.7'."""
    first, second = sources
    return f"{method_of(config).describe(config)} {first}={weight:g} {second}={round(1.0 - weight, 10):g}"


def default_grid(base: SearchConfig, sources: Sequence[str] = ("bm25", "dense")) -> list[Variant]:
    """The grid of the module docstring (every method's sweep points × 11 weights), every other
    field taken from `base` (depth, BM25 parameters, per-source minimums, tie field …; rerank off,
    no learned query-dependent split or ranker)."""
    sources = tuple(sources)
    if len(sources) != 2 or sources[0] == sources[1]:
        raise RetrievalError(f"The sweep grid splits weight between two different sources; got {list(sources)}")
    # the grid varies the fusion itself: a base's learned split or ranker is not carried into it
    common = {**base.to_dict(), "rerank": False, "query_weights": {}, "ranker": ""}
    variants: list[Variant] = []

    def add(weight: float, **fields: Any) -> None:
        config = SearchConfig.from_dict({**common, **fields, "weights": pair_weights(sources, weight)})
        variants.append(Variant(variant_label(config, sources, weight), config, weight))

    for method in FUSION_METHODS.values():
        for point in method.sweep_points:
            for weight in WEIGHT_STEPS:
                add(weight, fusion=method.name, **point)
    return variants


def first_stage_label(config: SearchConfig) -> str:
    """A config's fusion as a label: 'rrf k=60 bm25=0.5 dense=0.5' or 'weighted l2 arithmetic
    bm25=0.4 dense=0.6' (every weighted source, in the config's order)."""
    split = " ".join(f"{name}={weight:g}" for name, weight in config.weights.items())
    return f"{method_of(config).describe(config)} {split}"


def rerank_label(config: SearchConfig) -> str:
    """e.g. 'rerank e5 top-50 λ=0.9 · weighted l2 arithmetic bm25=0.4 dense=0.6'."""
    rerank = f"rerank {config.reranker} top-{config.rerank_top_n} λ={config.rerank_lambda:g}"
    return f"{rerank} · {first_stage_label(config)}"


def rerank_grid(base: SearchConfig, lambdas: Sequence[float] = RERANK_LAMBDAS,
                top_ns: Sequence[int] | None = None) -> list[Variant]:
    """`base`'s first stage with rerank on, for every top-N in `top_ns` (default: base's) and
    every λ in `lambdas`, every other field taken from `base` (its reranker too)."""
    top_ns = tuple(dict.fromkeys(top_ns or (base.rerank_top_n,)))
    lambdas = tuple(dict.fromkeys(float(lam) for lam in lambdas))
    if not lambdas:
        raise RetrievalError("A rerank grid needs at least one λ")
    common = base.to_dict()
    return [Variant(rerank_label(config), config)
            for top_n in top_ns for lam in lambdas
            for config in [SearchConfig.from_dict({**common, "rerank": True, "rerank_top_n": int(top_n),
                                                   "rerank_lambda": lam})]]


def with_rerank_grid(variants: Sequence[Variant], base: SearchConfig, lambdas: Sequence[float] = RERANK_LAMBDAS,
                     top_ns: Sequence[int] | None = None) -> list[Variant]:
    """`variants`, then `base`'s first stage without rerank (labelled '… · no rerank', unless a
    variant already has exactly that config: the rerank rows' baseline), then `rerank_grid`."""
    first_stage = SearchConfig.from_dict({**base.to_dict(), "rerank": False})
    extra = [] if any(is_first_stage_of(v.config, base) for v in variants) else [
        Variant(f"{first_stage_label(first_stage)} · no rerank", first_stage)]
    return [*variants, *extra, *rerank_grid(base, lambdas, top_ns)]


def first_stage_key(config: SearchConfig) -> str:
    """What a config's first-stage ranking depends on: every field but the rerank ones."""
    return json.dumps({k: v for k, v in config.to_dict().items() if k not in RERANK_FIELDS}, sort_keys=True)


def is_first_stage_of(config: SearchConfig, reranked: SearchConfig) -> bool:
    """Whether `config` is `reranked`'s first stage without rerank (the baseline of its row)."""
    return not config.rerank and first_stage_key(config) == first_stage_key(reranked)


@dataclass
class SweepResult:
    """What a sweep measured.

    `rows`: one dict per variant — label, fusion, normalization and combination (None for RRF),
    weight (of the grid's first source), rrf_k (None for weighted fusion), rerank_top_n and
    rerank_lambda (None without rerank), then each metric's mean — sorted best first by the first
    metric (then the next metrics, then grid order).
    `per_query`: variant label -> query id -> metric -> value, for every variant.
    `seconds`: 'retrieval' (fetching candidates, cached or not) and 'fusion+metrics'.
    """

    metrics: tuple[str, ...]
    n_queries: int
    rows: list[dict[str, Any]]
    variants: dict[str, Variant]  # label -> variant
    per_query: dict[str, dict[str, dict[str, float]]]
    seconds: dict[str, float] = field(default_factory=dict)
    stopped: bool = False  # `should_stop` ended it: only the variants judged until then

    def best(self) -> Variant:
        """The variant of the first row: the best by the first metric."""
        return self.variants[self.rows[0]["label"]]

    def variant(self, label: str) -> Variant:
        try:
            return self.variants[label]
        except KeyError:
            raise RetrievalError(f"No variant labelled {label!r} in this sweep") from None

    def frame(self):
        """`rows` as a pandas DataFrame, best first."""
        import pandas as pd

        columns = [*DESCRIPTION_COLUMNS, *self.metrics]
        return pd.DataFrame.from_records(self.rows, columns=columns)

    def to_json_list(self, digits: int = 6) -> list[dict[str, Any]]:
        """Best first: label, config (as `SearchConfig.to_dict`) and each metric's mean."""
        return [{"label": row["label"], "config": self.variants[row["label"]].config.to_dict(),
                 "metrics": {m: round(row[m], digits) for m in self.metrics}} for row in self.rows]


def run_sweep(
    workbench,
    collection: str,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    variants: Iterable[Variant],
    metrics: Iterable[str] = DEFAULT_METRICS,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> SweepResult:
    """Judge every variant on the judged queries that have a text (see the module docstring).

    `progress(done, total)` is called after each query's retrieval, after each query's rerank
    scoring (when a variant reranks) and after each variant's evaluation: total = number of
    judged queries (twice with rerank variants) + number of variants. `should_stop()` is asked
    after each variant: the variants judged so far are the result (`stopped`).
    """
    variants = list(variants)
    metrics = tuple(metrics)
    if not variants:
        raise RetrievalError("A sweep needs at least one variant")
    if not metrics:
        raise RetrievalError("A sweep needs at least one metric")
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        raise RetrievalError(f"Variant labels must be unique; repeated: {', '.join(duplicates)}")
    judged = [q for q in qrels if qrels[q] and q in queries]
    if not judged:
        raise RetrievalError("None of the judged queries has a query text")
    reranking = [v for v in variants if v.config.rerank]
    total_steps = len(judged) * (2 if reranking else 1) + len(variants)

    fetch_configs = retrieval_plan([v.config for v in variants])
    started = time.perf_counter()
    state = workbench.state(collection)  # one state for the whole sweep
    fetched = fetch_candidates(workbench, collection, queries, judged, fetch_configs, state,
                               (lambda done: progress(done, total_steps)) if progress else None)
    retrieval_seconds = time.perf_counter() - started

    started = time.perf_counter()
    evaluator = QrelsEvaluator({q: qrels[q] for q in judged})
    rows: list[dict[str, Any]] = []
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    ranker = CandidateRanker(workbench, collection, queries, fetched, state)
    plans = {v.label: ranker.plan(evaluation_config(v.config)) for v in variants}

    # Rerank variants: the reranker's scores of the union of their heads taken once per query
    # (the slow part: a model runs), before any variant is ranked.
    for n, qid in enumerate(judged if reranking else [], start=1):
        ranker.score_heads(qid, [plans[v.label] for v in reranking])
        if progress:
            progress(len(judged) + n, total_steps)
    done_before = total_steps - len(variants)

    stopped = False
    for done, variant in enumerate(variants, start=1):
        if done > 1 and should_stop and should_stop():
            stopped = True
            break
        rankings = ranker.rankings(plans[variant.label], judged)
        mean, values = evaluator.evaluate_rankings(rankings, metrics)
        per_query[variant.label] = values
        rows.append({**describe(variant), **mean})
        if progress:
            progress(done_before + done, total_steps)
    order = {label: i for i, label in enumerate(labels)}
    rows.sort(key=lambda row: (*(-row[m] for m in metrics), order[row["label"]]))
    return SweepResult(metrics, len(judged), rows, {v.label: v for v in variants if v.label in per_query}, per_query,
                       {"retrieval": retrieval_seconds, "fusion+metrics": time.perf_counter() - started}, stopped)


DESCRIPTION_COLUMNS = ("label", "fusion", "normalization", "combination", "weight", "rrf_k", "rerank_top_n",
                       "rerank_lambda")


def describe(variant: Variant) -> dict[str, Any]:
    """A row's descriptive columns (`DESCRIPTION_COLUMNS`)."""
    config = variant.config
    method = method_of(config)
    weight = variant.weight
    if weight is None:
        first = next(iter(config.weights))
        weight = config.weights[first] / sum(config.weights.values())
    return {
        "label": variant.label,
        "fusion": config.fusion,
        "normalization": config.normalization if method.uses("normalization") else None,
        "combination": config.combination if method.uses("combination") else None,
        "weight": weight,
        "rrf_k": config.rrf_k if method.uses("rrf_k") else None,
        "rerank_top_n": config.rerank_top_n if config.rerank else None,
        "rerank_lambda": config.rerank_lambda if config.rerank else None,
    }



CURRENT_LABEL = "current config"
TIE_TOLERANCE = 1e-12  # means this close are the same score (floats summed in another order)


def with_current(variants: Sequence[Variant], current: SearchConfig) -> tuple[list[Variant], str]:
    """`variants` with `current` (the config being tuned) among them, and its label: the grid
    variant with exactly that config, or `CURRENT_LABEL` added at the end."""
    for variant in variants:
        if variant.config == current:
            return list(variants), variant.label
    return [*variants, Variant(CURRENT_LABEL, current)], CURRENT_LABEL


@dataclass(frozen=True)
class Headline:
    """What a sweep says about the config being tuned: its score, the best score, every variant
    tied at the best, and whether the first of them is significantly better than the current one
    (paired randomization test over the queries, two-sided, `paired.randomization_p`)."""

    metric: str
    n_variants: int
    current: str  # the current config's label
    current_value: float
    best: str  # the first best row
    best_value: float
    tied: tuple[str, ...]  # every variant scoring the best value, best row first
    p_value: float

    @property
    def significant(self) -> bool:
        return self.best_value > self.current_value and self.p_value < 0.05

    def sentence(self) -> str:
        """The headline for a person (the metric as people read it): current beside best, ties named, the verdict."""
        metric = metric_label(self.metric)
        head = (f"Current config: {metric} {self.current_value:.4f}. Best of {self.n_variants} variants: "
                f"{self.best_value:.4f}")
        if self.current in self.tied:
            others = len(self.tied) - 1
            return head + (" — the current config is already the best" +
                           (f", tied with {others} other variant(s)." if others else "."))
        verdict = ("significantly better" if self.significant else "not significantly better: the difference "
                   "may be noise over these queries")
        tie = (f" {len(self.tied)} variants tie at the best; the first in the table is offered, any of them "
               "scores the same." if len(self.tied) > 1 else "")
        from retrieval.evaluation.paired import p_text

        return (head + f" (Δ {self.best_value - self.current_value:+.4f}, paired randomization "
                f"{p_text(self.p_value)}: {verdict}).{tie}")


def headline(result: SweepResult, current: str, metric: str | None = None, seed: int = 42) -> Headline:
    """The `Headline` of `result` for the variant labelled `current` (see `with_current`)."""
    from retrieval.evaluation.paired import randomization_p

    metric = metric or result.metrics[0]
    values = {row["label"]: row[metric] for row in result.rows}
    if current not in values:
        raise RetrievalError(f"No variant labelled {current!r} in this sweep")
    best = result.rows[0]["label"]
    best_value = values[best]
    tied = tuple(row["label"] for row in result.rows if abs(row[metric] - best_value) <= TIE_TOLERANCE)
    queries = sorted(result.per_query[best])
    deltas = [result.per_query[best][q][metric] - result.per_query[current][q][metric] for q in queries]
    p_value = 1.0 if current in tied else randomization_p(deltas, seed=seed)
    return Headline(metric, len(result.rows), current, values[current], best, best_value, tied, p_value)


@dataclass(frozen=True)
class HeldOut:
    """A cross-validated estimate of what picking the sweep's best variant is worth."""

    metric: str
    folds: int
    score: float  # mean over all queries of the metric, each query scored by a variant chosen without it
    chosen: tuple[str, ...]  # the variant chosen on each fold's training queries
    in_sample: float  # the best variant's mean on all queries (chosen and scored on the same ones)
    per_query: dict[str, float] = field(default_factory=dict)  # each query's held-out value


def held_out_estimate(result: SweepResult, metric: str | None = None, folds: int = 2,
                      fold_ids: Sequence[Sequence[str]] | None = None) -> HeldOut:
    """k-fold cross-validation over queries of "take the sweep's best variant".

    Queries, sorted by id, go to fold i mod k (or the folds `fold_ids` gives, e.g. the
    optimiser's `optimize.query_folds`, so both are scored on the same folds). For each fold,
    the variant with the best mean `metric` on the other folds' queries is chosen (ties: the
    earlier row) and scored on the fold's own queries; `score` = the mean over all queries of those held-out values. The
    in-sample best mean is optimistic (chosen on the queries it is scored on); the gap between
    the two is the tuning's selection bias.
    """
    metric = metric or result.metrics[0]
    if metric not in result.metrics:
        raise RetrievalError(f"Metric {metric!r} was not measured; measured: {', '.join(result.metrics)}")
    query_ids = sorted(next(iter(result.per_query.values())))
    if fold_ids is None and not 2 <= folds <= len(query_ids):
        raise RetrievalError(f"folds must be between 2 and the number of queries ({len(query_ids)}), got {folds}")
    labels = [row["label"] for row in result.rows]
    if fold_ids is None:
        fold_ids = [query_ids[fold::folds] for fold in range(folds)]
    elif sorted(q for ids in fold_ids for q in ids) != query_ids:
        raise RetrievalError("The folds must hold every query of the sweep exactly once")
    folds = len(fold_ids)
    total, chosen, per_query = 0.0, [], {}
    for fold in range(folds):
        test = list(fold_ids[fold])
        train = [q for f, ids in enumerate(fold_ids) if f != fold for q in ids]

        def train_mean(label: str, train: list[str] = train) -> float:
            values = result.per_query[label]
            return sum(values[q][metric] for q in train) / len(train)

        best = max(labels, key=lambda label: (train_mean(label), -labels.index(label)))
        chosen.append(best)
        per_query.update({q: result.per_query[best][q][metric] for q in test})
        total += sum(per_query[q] for q in test)
    in_sample = max(row[metric] for row in result.rows)
    return HeldOut(metric, folds, total / len(query_ids), tuple(chosen), in_sample, per_query)
