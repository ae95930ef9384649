"""One study of the optimiser: the search space over a base config (`SearchSpace`), every judged
query's candidates fetched once (`prepare`, `Prepared`), and a study on them: Optuna's TPE trials
(`run_study`, a Bayesian search) or a LambdaMART model (`learn_study`). `optimize.cross_validate`
runs one study per fold and one on all the queries.

The search space (`SearchSpace`, from the base config and the sources searched):

    share      2 sources: the first source's share w ∈ [0, 1] of the weight (the second gets
               1 − w); 3 or more: each source's weight w_s ∈ [0, 1] (the config keeps the
               ones above 0.005)
    fusion     every method of `fusion.methods.FUSION_METHODS`, and what the method reads:
               normalization, combination (categorical), rrf_k (log-uniform in [1, 200])
    depth      {10, 20, …, the base depth}: each source's candidates kept before fusion
    min_q.s    a per-source minimum raw score, as a quantile q ∈ [0, 0.5] of the source's raw
               scores over the study's queries' candidates (q < 0.02: the base's own minimum,
               none by default)
    lambda     the rerank λ, when the base config reranks

Method query-dependent (2 sources): instead of one share for every query, the share of the
first source is σ(b + Σ_f a_f·z_f(q)) (`query_features.QueryWeights`), b in [−3, 3] and each
a_f in [−1, 1], with each feature standardised over the study's own queries; the rest of the space as
above. Its base trial is b = logit(base share), every a_f = 0: the base config exactly.

Method lambdamart: no search; a LambdaMART model (`learned_ranker.train`) is trained on the
training queries' candidates under the base config and reorders them (the config's `ranker`);
`trials` does not apply. The same folds, the same held-out scoring.

Every trial ranks candidates fetched once per query before the first trial
(`candidates.fetch_candidates`, `candidates.CandidateRanker`): a trial costs a re-fusion and the
metric, not a search. The base config is the first trial of every study, so a study's best is
never worse than the base on the queries it is chosen on.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval.evaluation.candidates import CandidateRanker, fetch_candidates, retrieval_plan
from retrieval.evaluation.evaluate import DEFAULT_METRICS, QrelsEvaluator
from retrieval.search.config import SearchConfig
from retrieval.search.fusion.methods import COMBINATIONS, FUSION_METHODS
from retrieval.search.fusion.normalize import NORMALIZERS
from retrieval.search.learned_ranker import DocumentStats, LearnedRanker, candidate_features, feature_names, train
from retrieval.search.plan import RankingPlan, evaluation_config
from retrieval.search.query_features import FEATURES, query_features
from retrieval.search.ranker_models import model_id
from retrieval.sources import source_params
from retrieval.types import RetrievalError

METHODS = ("bayes", "query-dependent", "lambdamart")
# The logit's base b (a share of 0.05 … 0.95) and each feature's a_f per standard deviation (a
# feature one σ from its mean moves the logit by at most 1: the share 0.4 to at most 0.62). A
# wider a_f range makes most random trials split every query at random (measured: on nfcorpus
# ±4 kept no trial better than the base in 40; docs/experiments/optimize.md).
INTERCEPT_RANGE = (-3.0, 3.0)
COEFFICIENT_RANGE = (-1.0, 1.0)
DEFAULT_METRIC = "ndcg@10"
RRF_K_RANGE = (1.0, 200.0)
DEPTH_STEP = 10
MIN_QUANTILE = 0.5  # the highest minimum raw score tried: the source's median candidate score
NO_MINIMUM_BELOW = 0.02  # a quantile under this keeps every candidate (no minimum)
WEIGHT_FLOOR = 0.005  # a source weighted less than this (of Σw = 1) is left out of the config


@dataclass(frozen=True)
class SearchSpace:
    """What a study may change in `base` (see the module docstring)."""

    base: SearchConfig
    sources: tuple[str, ...]
    max_depth: int
    method: str = "bayes"

    @classmethod
    def of(cls, base: SearchConfig, sources: Sequence[str] | None = None, method: str = "bayes") -> SearchSpace:
        sources = tuple(dict.fromkeys(sources or base.sources))
        if not sources:
            raise RetrievalError("The optimiser needs at least one source to weigh")
        if method not in METHODS:
            raise RetrievalError(f"Unknown method {method!r}; choose from {', '.join(METHODS)}")
        if method == "query-dependent" and len(sources) != 2:
            raise RetrievalError(f"Query-dependent fusion splits weight between two sources; got {list(sources)}")
        # The search starts from the base's fusion: its query-dependent weights or learned ranker,
        # if it has them, are not part of it.
        return cls(dataclasses.replace(base, query_weights={}, ranker=""), sources, base.depth, method)

    @property
    def query_dependent(self) -> bool:
        return self.method == "query-dependent"

    def depths(self) -> list[int]:
        steps = list(range(DEPTH_STEP, self.max_depth + 1, DEPTH_STEP))
        return steps if steps and steps[-1] == self.max_depth else [*steps, self.max_depth]

    def params_of(self, config: SearchConfig) -> dict[str, Any]:
        """The trial parameters that give `config` back (the study's first trial is the base's)."""
        params: dict[str, Any] = {"fusion": config.fusion}
        weights = {s: config.weights.get(s, 0.0) for s in self.sources}
        total = sum(weights.values()) or 1.0
        if self.query_dependent:
            share = min(max(weights[self.sources[0]] / total, 1e-6), 1 - 1e-6)
            params["qw.intercept"] = min(max(math.log(share / (1 - share)), INTERCEPT_RANGE[0]), INTERCEPT_RANGE[1])
            params.update({f"qw.{f}": 0.0 for f in FEATURES})
        elif len(self.sources) == 2:
            params["share"] = weights[self.sources[0]] / total
        elif len(self.sources) > 2:
            params.update({f"w.{s}": weights[s] / total for s in self.sources})
        method = FUSION_METHODS[config.fusion]
        for name in ("normalization", "combination"):
            if method.uses(name):
                params[f"{config.fusion}.{name}"] = getattr(config, name)
        if method.uses("rrf_k"):
            params[f"{config.fusion}.rrf_k"] = min(max(float(config.rrf_k), RRF_K_RANGE[0]), RRF_K_RANGE[1])
        depths = self.depths()
        params["depth"] = min(depths, key=lambda d: abs(d - config.depth))
        params.update({f"min_q.{s}": 0.0 for s in self.sources})
        if self.base.rerank:
            params["lambda"] = config.rerank_lambda
        return params

    def suggest(self, trial) -> dict[str, Any]:
        """One point of the space, drawn by the trial's sampler (conditional on the method)."""
        params: dict[str, Any] = {"fusion": trial.suggest_categorical("fusion", list(FUSION_METHODS))}
        if self.query_dependent:
            params["qw.intercept"] = trial.suggest_float("qw.intercept", *INTERCEPT_RANGE)
            for name in FEATURES:
                params[f"qw.{name}"] = trial.suggest_float(f"qw.{name}", *COEFFICIENT_RANGE)
        elif len(self.sources) == 2:
            params["share"] = trial.suggest_float("share", 0.0, 1.0)
        elif len(self.sources) > 2:
            params.update({f"w.{s}": trial.suggest_float(f"w.{s}", 0.0, 1.0) for s in self.sources})
        method = FUSION_METHODS[params["fusion"]]
        # Parameters named per method: TPE models each method's own values apart.
        if method.uses("normalization"):
            name = f"{method.name}.normalization"
            params[name] = trial.suggest_categorical(name, list(NORMALIZERS))
        if method.uses("combination"):
            name = f"{method.name}.combination"
            params[name] = trial.suggest_categorical(name, list(COMBINATIONS))
        if method.uses("rrf_k"):
            name = f"{method.name}.rrf_k"
            params[name] = trial.suggest_float(name, *RRF_K_RANGE, log=True)
        params["depth"] = trial.suggest_categorical("depth", self.depths())
        for source in self.sources:
            params[f"min_q.{source}"] = trial.suggest_float(f"min_q.{source}", 0.0, MIN_QUANTILE)
        if self.base.rerank:
            params["lambda"] = trial.suggest_float("lambda", 0.0, 1.0)
        return params

    def config(self, params: Mapping[str, Any], score_quantile: Callable[[str, float], float],
               feature_stats: Mapping[str, tuple[float, float]] | None = None) -> SearchConfig:
        """The config of trial parameters `params`; `score_quantile(source, q)` turns a minimum's
        quantile into a raw score, `feature_stats` gives each query feature's (mean, standard
        deviation) — both over the study's own queries."""
        fusion = params["fusion"]
        query_weights: dict[str, Any] = {}
        if self.query_dependent:
            stats = {f: v for f, v in (feature_stats or {}).items() if v[1] > 0}
            query_weights = {"sources": list(self.sources), "intercept": round(float(params["qw.intercept"]), 4),
                             "coefficients": {f: round(float(params[f"qw.{f}"]), 4) for f in FEATURES if f in stats},
                             "mean": {f: stats[f][0] for f in FEATURES if f in stats},
                             "scale": {f: stats[f][1] for f in FEATURES if f in stats}}
            raw = dict.fromkeys(self.sources, 1.0)  # the split is the query's; the weights only sum
        elif len(self.sources) == 1:
            raw = {self.sources[0]: 1.0}
        elif len(self.sources) == 2:
            share = float(params["share"])
            raw = {self.sources[0]: share, self.sources[1]: 1.0 - share}
        else:
            raw = {s: float(params[f"w.{s}"]) for s in self.sources}
        total = sum(raw.values())
        if total <= 0:
            raw, total = dict.fromkeys(self.sources, 1.0), float(len(self.sources))
        weights = {s: round(w / total, 4) for s, w in raw.items() if w / total >= WEIGHT_FLOOR}
        fields: dict[str, Any] = {**self.base.to_dict(), "fusion": fusion, "weights": weights,
                                  "depth": int(params["depth"]), "query_weights": query_weights}
        for name in ("normalization", "combination", "rrf_k"):
            key = f"{fusion}.{name}"
            if key in params:
                fields[name] = round(params[key], 3) if name == "rrf_k" else params[key]
        minimums = dict(self.base.min_raw)
        for source in self.sources:
            q = float(params.get(f"min_q.{source}", 0.0))
            if q >= NO_MINIMUM_BELOW:
                minimums[source] = round(score_quantile(source, q), 6)
            # else the base's own minimum for the source, if it has one
        fields["min_raw"] = {s: v for s, v in minimums.items() if s in weights}
        if "lambda" in params:
            fields["rerank_lambda"] = round(float(params["lambda"]), 4)
        return SearchConfig.from_dict(fields)


@dataclass
class Study:
    """One study's trials: each trial's value and the best so far, its best config and value."""

    label: str  # "fold 2/5" or "all queries"
    query_ids: list[str]
    config: SearchConfig
    value: float
    history: list[dict[str, Any]] = field(default_factory=list)  # {trial, value, best}
    importance: dict[str, float] = field(default_factory=dict)
    stopped: bool = False
    model_text: str = ""  # lambdamart: the model the config's `ranker` names
    learned: LearnedRanker | None = None
    validation: dict[str, Any] | None = None  # the optimiser's inner check (`optimize.checked_against_start`)


@dataclass
class Prepared:
    """A judged query set with every query's candidates fetched once: what studies rank."""

    ranker: CandidateRanker
    qrels: dict[str, dict[str, int]]
    space: SearchSpace
    metric: str
    queries_fetched: int
    _evaluators: dict[tuple[str, ...], QrelsEvaluator] = field(default_factory=dict)
    _scores: dict[tuple[str, ...], dict[str, np.ndarray]] = field(default_factory=dict)
    _features: dict[str, dict[str, float | None]] | None = None
    _groups: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def evaluator(self, query_ids: Sequence[str]) -> QrelsEvaluator:
        key = tuple(query_ids)
        if key not in self._evaluators:
            self._evaluators[key] = QrelsEvaluator({q: self.qrels[q] for q in key})
        return self._evaluators[key]

    def values(self, config: SearchConfig, query_ids: Sequence[str],
               learned: LearnedRanker | None = None) -> dict[str, float]:
        """`config`'s metric on each of `query_ids` (its evaluation run, from the cached candidates);
        `learned`: the model of `config.ranker`, when it is not in the store (a fold's)."""
        plan = (RankingPlan(evaluation_config(config), learned) if learned is not None
                else self.ranker.plan(evaluation_config(config)))
        if config.rerank:
            for qid in query_ids:
                self.ranker.score_heads(qid, [plan])
        _, per_query = self.evaluator(query_ids).evaluate_rankings(self.ranker.rankings(plan, query_ids),
                                                                  [self.metric])
        return {q: v[self.metric] for q, v in per_query.items()}

    def training_group(self, qid: str) -> tuple[np.ndarray, np.ndarray]:
        """Query `qid`'s candidates under the base config as a learned ranker sees them (feature
        matrix, `learned_ranker.candidate_features`) and their grades (unjudged 0)."""
        if qid not in self._groups:
            plan = RankingPlan(evaluation_config(self.space.base))
            ranker = self.ranker
            sources = ranker.sources(qid, plan)
            fused, _ = plan.fused_config(ranker.queries[qid], ranker.language, sources)
            kept = plan.prepare(sources, fused)
            ids, matrix = candidate_features(ranker.queries[qid], sources, kept, plan.scores(kept, fused),
                                             self.space.sources, self.doc_stats())
            grades = np.array([self.qrels[qid].get(d, 0) for d in ids], dtype=np.float64)
            self._groups[qid] = (matrix, grades)
        return self._groups[qid]

    def doc_stats(self) -> DocumentStats:
        return self.ranker.workbench.reads.doc_stats(self.ranker.collection, self.ranker.state)

    def feature_stats(self, query_ids: Sequence[str]) -> dict[str, tuple[float, float]]:
        """Each query feature's (mean, population standard deviation) over `query_ids`, from the
        queries' texts and cached candidates; a feature unknown for every query is left out."""
        if self._features is None:
            plan = RankingPlan(self.space.base)
            self._features = {q: query_features(self.ranker.queries[q], self.ranker.sources(q, plan))
                              for q in self.qrels}
        stats = {}
        for name in FEATURES:
            values = [v for q in query_ids if (v := self._features[q][name]) is not None]
            if values:
                stats[name] = (float(np.mean(values)), float(np.std(values)))
        return stats

    def score_quantile(self, query_ids: Sequence[str]) -> Callable[[str, float], float]:
        """(source, q) -> the q-quantile of the source's raw candidate scores over `query_ids`."""
        key = tuple(query_ids)
        if key not in self._scores:
            base = self.space.base
            per_source = {}
            for source in self.space.sources:
                params = source_params(source, SearchConfig.from_dict({**base.to_dict(),
                                                                        "weights": {source: 1.0}}))
                per_source[source] = np.array([h.raw_score for q in key
                                               for h in self.ranker.fetched[q][params].hits[: base.depth]],
                                              dtype=np.float64)
            self._scores[key] = per_source
        scores = self._scores[key]

        def quantile(source: str, q: float) -> float:
            values = scores[source]
            return float(np.quantile(values, q)) if values.size else 0.0

        return quantile


def prepare(workbench, collection: str, queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]],
            base: SearchConfig, sources: Sequence[str] | None = None, metric: str = DEFAULT_METRIC,
            progress: Callable[[int, int], None] | None = None, method: str = "bayes") -> Prepared:
    """Fetch every judged query's candidates once, for every source the space weighs, at the base
    config's depth (the deepest a trial cuts at). `progress(done, total)` per query."""
    if metric not in DEFAULT_METRICS:
        raise RetrievalError(f"The optimiser maximises one of {', '.join(DEFAULT_METRICS)}; got {metric!r}")
    space = SearchSpace.of(base, sources, method)
    judged = [q for q in qrels if qrels[q] and q in queries]
    if not judged:
        raise RetrievalError("None of the judged queries has a query text")
    fetch_base = SearchConfig.from_dict({**base.to_dict(), "weights": dict.fromkeys(space.sources, 1.0)})
    fetch_configs = retrieval_plan([fetch_base])
    state = workbench.state(collection)
    fetched = fetch_candidates(workbench, collection, queries, judged, fetch_configs, state,
                               (lambda done: progress(done, len(judged))) if progress else None)
    ranker = CandidateRanker(workbench, collection, queries, fetched, state)
    return Prepared(ranker, {q: dict(qrels[q]) for q in judged}, space, metric, len(judged))


def run_study(prepared: Prepared, query_ids: Sequence[str], trials: int, seed: int, label: str,
              seconds: float | None = None, should_stop: Callable[[], bool] | None = None,
              on_trial: Callable[[Study, int], None] | None = None) -> Study:
    """A TPE study of up to `trials` trials (and `seconds`, when given) maximising the mean metric
    over `query_ids`; the base config is its first trial. `should_stop()` is asked after every
    trial (the page's Stop); the best so far is kept. `on_trial(study, trial number)` after each."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = prepared.space
    query_ids = list(query_ids)
    quantile = prepared.score_quantile(query_ids)
    stats = prepared.feature_stats(query_ids) if space.query_dependent else None
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(10, max(1, trials // 4)))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial(space.params_of(space.base))
    result = Study(label, query_ids, space.base, -math.inf)

    def objective(trial) -> float:
        config = space.config(space.suggest(trial), quantile, stats)
        values = prepared.values(config, query_ids)
        value = float(np.mean(list(values.values())))
        if value > result.value:
            result.value, result.config = value, config
        return value

    def after(study_, trial) -> None:
        result.history.append({"trial": trial.number, "value": trial.value, "best": result.value})
        if on_trial:
            on_trial(result, trial.number)
        if should_stop and should_stop():
            result.stopped = True
            study_.stop()

    study.optimize(objective, n_trials=trials, timeout=seconds, callbacks=[after], catch=())
    result.importance = parameter_importance(study)
    return result


def learn_study(prepared: Prepared, query_ids: Sequence[str], seed: int, label: str) -> Study:
    """A LambdaMART model trained on `query_ids` (`learned_ranker.train`) over the base config's
    candidates; its config is the base with `ranker` = the model's id. `history` holds one entry
    (the training queries' mean metric under the model) so every study reads alike."""
    from retrieval.search.learned_ranker import model_summary

    space = prepared.space
    text = train([prepared.training_group(q) for q in query_ids], feature_names(space.sources), seed)
    ident = model_id(text)
    learned = LearnedRanker(text, prepared.doc_stats(), ident)
    config = SearchConfig.from_dict({**space.base.to_dict(), "ranker": ident})
    values = prepared.values(config, query_ids, learned)
    value = float(np.mean(list(values.values())))
    return Study(label, list(query_ids), config, value, [{"trial": 0, "value": value, "best": value}],
                 model_summary(text), model_text=text, learned=learned)


def parameter_importance(study) -> dict[str, float]:
    """Each parameter's share of the variance of the trial values (PED-ANOVA, Optuna's, no
    extra dependency), largest first; empty when the study is too small to say."""
    import optuna

    completed = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if len(completed) < 10 or len({t.value for t in completed}) < 2:
        return {}
    try:
        with warnings.catch_warnings():  # "some regimes have less than 2 trials": a small study's caveat
            warnings.simplefilter("ignore")
            importance = optuna.importance.get_param_importances(
                study, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    except (ValueError, RuntimeError, ZeroDivisionError):
        return {}
    return dict(sorted(importance.items(), key=lambda item: -item[1]))
