"""The optimiser: a fusion config searched for on judged queries (Optuna's TPE, a Bayesian
search) and cross-validated over queries, so the gain it reports is measured on queries it never
saw.

What one study searches and how (the search space; the methods bayes, query-dependent and
lambdamart; trials on candidates fetched once) is `study.py`'s docstring.

Cross-validation (`cross_validate`): the judged queries are shuffled with the seed and dealt
into k folds (`query_folds`: fold i holds every k-th query; no query is in two folds). For each
fold a study of N trials on the other folds' queries chooses a config, which is scored on the
fold's own queries; `cv` is the mean over all queries of those held-out values. `in_sample` is a
study on all the queries, scored on the same queries (optimistic: chosen where it is scored);
its config is the one returned.

Inner validation (`inner_split`, `checked_against_start`): a study never sees all of its training
queries. Every `VALIDATION_EVERY`-th of them (shuffled by the study's seed; none when there are
fewer than `MIN_INNER_QUERIES`) is held back, the study tunes on the rest, and the tuned config is
kept only when its mean on the held-back queries is above the base config's; else the study
returns the base config. A tuning that does not generalise (many parameters, few queries, a
learned ranker that memorises) then falls back to where it started instead of ending below it on
held-out queries: the cross-validated score measures this whole procedure, choice included, and
the config returned is chosen the same way on all the queries.

Stop (`should_stop`, the page's button; `seconds`): the study running ends after its current
trial and nothing more is tried — the folds not reached keep the base config (held out, its
values), and the learned config is the best trial so far (`stopped_study`).

95 % intervals: percentile bootstrap of the mean over queries (`paired.bootstrap_ci`). The gain
over the base config is paired per query, but its interval must also carry the tuning's own
variance (another training set, another config chosen), which resampling queries with each
fold's choice fixed leaves out: it is the corrected resampled t interval over the folds' mean
gains (`paired.corrected_cv_ci`, Nadeau & Bengio 2003; the queries' bootstrap is kept as
`ci95_queries`), and a gain whose interval reaches 0 is said to be inside the noise.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.evaluation.evaluate import metric_label
from retrieval.evaluation.paired import bootstrap_ci, corrected_cv_ci
from retrieval.evaluation.study import Prepared, Study, learn_study, run_study
from retrieval.search.config import SearchConfig
from retrieval.search.config_help import FIELD_HELP
from retrieval.search.fusion.methods import FUSION_METHODS
from retrieval.search.learned_ranker import feature_label
from retrieval.search.query_features import FEATURE_LABELS
from retrieval.sources import SOURCES, label
from retrieval.types import RetrievalError

MIN_QUERIES_PER_FOLD = 2
VALIDATION_EVERY = 4  # inner validation: one training query in 4 (25 %) checks the tuned config
MIN_INNER_QUERIES = 8  # fewer training queries: no inner validation (2 checking queries say nothing)
FEW_QUERIES_PER_FOLD = 10  # fewer held-out queries than this per fold: the estimate is noisy (warned)


def param_label(name: str, sources: Sequence[str] = ()) -> str:
    """What people read for a trial parameter of `study.SearchSpace.suggest`, first letter capital:
    'w.dense' → 'Vector weight', 'rrf.rrf_k' → 'RRF k' (`sources`: the space's; 'share' and 'qw.*'
    are the first one's share). Sources by their label (`sources.label`), a config field by
    `config_help.FIELD_HELP`'s, a fusion method's parameter by `FUSION_METHODS`'."""
    first = label(sources[0]) if sources else "the first source"
    head, _, tail = name.partition(".")
    if name == "share":
        shown = f"{first} share of the weight"
    elif head == "w" and tail:
        shown = f"{label(tail)} weight"
    elif head == "min_q" and tail:
        minimum = SOURCES[tail].min_raw if tail in SOURCES else None
        shown = minimum.label if minimum is not None else f"minimum {label(tail)} raw score"
    elif head == "qw" and tail:
        shown = f"{first} share: {FEATURE_LABELS.get(tail, tail)}"
    elif head in FUSION_METHODS and tail:
        method = FUSION_METHODS[head]
        word = next((p.label for p in method.params if p.field == tail), tail)
        shown = word if method.short in word else f"{word} ({method.short})"
    else:
        shown = {"fusion": FIELD_HELP["fusion"][0], "depth": FIELD_HELP["depth"][0],
                 "lambda": FIELD_HELP["rerank_lambda"][0]}.get(name)
        if shown is None:
            return name  # a name this function does not know: as it is
    return shown[:1].upper() + shown[1:]


def query_folds(query_ids: Iterable[str], folds: int, seed: int = 0) -> list[list[str]]:
    """The queries shuffled by `seed` (sorted first, so the input's order does not matter) and
    dealt into `folds` folds: fold i holds positions i, i + k, i + 2k, … of the shuffled list.
    Every query is in exactly one fold; fold sizes differ by at most one."""
    ids = sorted(set(query_ids))
    if folds < 2:
        raise RetrievalError(f"Cross-validation needs at least 2 folds, got {folds}")
    if len(ids) < folds * MIN_QUERIES_PER_FOLD:
        raise RetrievalError(f"{folds} folds need at least {folds * MIN_QUERIES_PER_FOLD} judged queries "
                             f"({MIN_QUERIES_PER_FOLD} per fold); this set has {len(ids)}. Judge more queries "
                             "or use fewer folds.")
    order = np.random.default_rng(seed).permutation(len(ids))
    shuffled = [ids[i] for i in order]
    return [shuffled[i::folds] for i in range(folds)]


def inner_split(query_ids: Sequence[str], seed: int) -> tuple[list[str], list[str]]:
    """(tune on, check on): every `VALIDATION_EVERY`-th of `query_ids` shuffled by `seed` is
    checked on, the rest tuned on, each in the input's order; nothing checked on fewer than
    `MIN_INNER_QUERIES` queries."""
    ids = list(query_ids)
    if len(ids) < MIN_INNER_QUERIES:
        return ids, []
    order = np.random.default_rng(seed).permutation(len(ids))
    check = {ids[i] for i in order[::VALIDATION_EVERY]}
    return [q for q in ids if q not in check], [q for q in ids if q in check]


def checked_against_start(prepared: Prepared, study: Study, check: Sequence[str]) -> Study:
    """`study` keeping its tuned config when it beats the base config on the `check` queries
    (mean metric, strictly above), else the base config (see the module docstring); what was
    compared is in `study.validation`."""
    if not check:
        return study
    base = prepared.space.base
    tuned = float(np.mean(list(prepared.values(study.config, check, study.learned).values())))
    start = float(np.mean(list(prepared.values(base, check).values())))
    kept = "tuned" if tuned > start else "start"
    study.validation = {"queries": len(check), "tuned": tuned, "start": start, "kept": kept}
    if kept == "start":
        study.config, study.learned, study.model_text = base, None, ""
    return study


def mean_ci(values: Sequence[float], seed: int = 42) -> dict[str, Any]:
    """{value: the mean, ci95: [low, high]} (percentile bootstrap of the mean over queries)."""
    low, high = bootstrap_ci(values, seed=seed)
    return {"value": float(np.mean(values)), "ci95": [low, high]}


@dataclass
class OptimizeResult:
    """What an optimisation measured (see the module docstring); `to_json` is the CLI's output."""

    method: str
    metric: str
    folds: int
    trials: int
    seed: int
    config: SearchConfig  # the in-sample study's best: the learned config
    cv: dict[str, Any]  # value, ci95
    in_sample: dict[str, Any]
    default: dict[str, Any]  # the base config on the same queries
    gain: dict[str, Any]  # cv − default, paired per query: value, ci95, inside_noise
    fold_configs: list[SearchConfig]
    studies: list[Study]
    per_query: dict[str, dict[str, float]]  # "cv" / "in_sample" / "default" -> query id -> value
    warnings: list[str]
    seconds: dict[str, float]
    queries_fetched: int  # queries searched (once each, whatever the number of trials)
    stopped: bool = False
    model_text: str = ""  # lambdamart: the model `config.ranker` names (keep it: `ranker_models`)
    sources: tuple[str, ...] = ()  # the sources the studies weighed (the search space's)

    @property
    def full(self) -> Study:
        return self.studies[-1]

    def to_json(self) -> dict[str, Any]:
        metric = self.metric

        def block(summary: Mapping[str, Any]) -> dict[str, Any]:
            return {metric: round(summary["value"], 6), "ci95": [round(x, 6) for x in summary["ci95"]]}

        return {
            "method": self.method,
            "metric": metric,
            "cv": block(self.cv),
            "in_sample": block(self.in_sample),
            "default": block(self.default),
            "gain": {**block(self.gain), "inside_noise": self.gain["inside_noise"],
                     "ci95_queries": [round(x, 6) for x in self.gain["ci95_queries"]]},
            "config": self.config.to_dict(),
            "folds": self.folds,
            "trials": self.trials,
            "seed": self.seed,
            "queries": len(self.per_query["cv"]),
            "fold_configs": [c.to_dict() for c in self.fold_configs],
            "validation": [s.validation for s in self.studies],
            "importance": {k: round(v, 4) for k, v in self.full.importance.items()},
            "best_so_far": [round(h["best"], 6) for h in self.full.history],
            "warnings": self.warnings,
            "stopped": self.stopped,
            "seconds": round(self.seconds["total"], 3),
            "seconds_detail": {k: round(v, 3) for k, v in self.seconds.items()},
            "queries_fetched": self.queries_fetched,
        }

    def importance_labels(self) -> dict[str, float]:
        """The in-sample study's importance (`Study.importance`) under the app's words: a trial
        parameter's (`param_label`) or a learned ranker's feature's (`learned_ranker.feature_label`)."""
        if self.method == "lambdamart":
            return {feature_label(k): v for k, v in self.full.importance.items()}
        return {param_label(k, self.sources): v for k, v in self.full.importance.items()}

    def summary(self) -> str:
        """The result in three sentences (what the CLI and the page print first)."""
        m = metric_label(self.metric)
        gain = self.gain
        lines = [f"{self.method}: {m} cross-validated ({self.folds}-fold) {self.cv['value']:.4f} "
                 f"[{self.cv['ci95'][0]:.4f}, {self.cv['ci95'][1]:.4f}], in-sample {self.in_sample['value']:.4f}, "
                 f"base config {self.default['value']:.4f}.",
                 f"Held-out gain over the base config {gain['value']:+.4f} (95 % CI {gain['ci95'][0]:+.4f} … "
                 f"{gain['ci95'][1]:+.4f})" + (": inside the noise." if gain["inside_noise"] else ".")]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def cross_validate(prepared: Prepared, trials: int = 50, folds: int = 5, seed: int = 0,
                   seconds: float | None = None, should_stop: Callable[[], bool] | None = None,
                   progress: Callable[[dict[str, Any]], None] | None = None,
                   inner_validation: bool = True) -> OptimizeResult:
    """k studies on the folds' training queries and one on all (see the module docstring).
    `seconds` bounds the whole run (each study gets an equal share); `progress` receives
    {study, studies, label, trial, trials, value, best} after every trial. `inner_validation`
    False: each study tunes on all its training queries and keeps what it found (the optimiser
    before the inner check, for comparisons)."""
    if trials < 1:
        raise RetrievalError(f"--trials must be at least 1, got {trials}")
    started = time.perf_counter()
    query_ids = sorted(prepared.qrels)
    fold_ids = query_folds(query_ids, folds, seed)
    cautions = judgment_warnings(prepared.qrels, fold_ids)
    n_studies = folds + 1
    per_study = 1 if prepared.space.method == "lambdamart" else trials  # a model is one step
    per_study_seconds = seconds / n_studies if seconds else None
    stop_event = threading.Event()

    def stop() -> bool:
        if should_stop and should_stop():
            stop_event.set()
        return stop_event.is_set()

    studies: list[Study] = []
    held_out: dict[str, float] = {}
    untuned: list[int] = []  # folds a Stop left untuned: held out by the base config
    for index in range(n_studies):
        is_full = index == folds
        train = query_ids if is_full else [q for f, ids in enumerate(fold_ids) if f != index for q in ids]
        train, check = inner_split(train, seed + index) if inner_validation else (train, [])
        label = "all queries" if is_full else f"fold {index + 1}/{folds}"
        if stop():  # Stop returns at once: no further trial is scored (see `stopped_study`)
            studies.append(stopped_study(studies, label, query_ids if is_full else train, prepared.space.base,
                                         is_full))
            if not is_full:
                untuned.append(index)
            continue

        def on_trial(study: Study, number: int, index: int = index, label: str = label) -> None:
            if progress:
                progress({"study": index + 1, "studies": n_studies, "label": label, "trial": number + 1,
                          "trials": per_study, "value": study.history[-1]["value"], "best": study.value})

        if prepared.space.method == "lambdamart":  # a model is trained whole or not at all
            study = learn_study(prepared, train, seed + index, label)
            on_trial(study, 0)
        else:
            study = run_study(prepared, train, trials, seed + index, label, per_study_seconds, stop, on_trial)
        studies.append(checked_against_start(prepared, study, check))
        if not is_full:
            held_out.update(prepared.values(study.config, fold_ids[index], study.learned))
    default_values = prepared.values(prepared.space.base, query_ids)
    held_out.update({q: default_values[q] for index in untuned for q in fold_ids[index]})
    if untuned:
        cautions.append(f"Stopped: {len(untuned)} of {folds} folds were not tuned (their held-out values are the "
                        "base config's); the learned config is the best trial so far"
                        + ("." if studies[-1].history else " (none was tried: the base config)."))
    full = studies[-1]
    in_sample_values = prepared.values(full.config, query_ids, full.learned)
    cv_values = [held_out[q] for q in query_ids]
    gains = [held_out[q] - default_values[q] for q in query_ids]
    gain = mean_ci(gains)
    gain["ci95_queries"] = gain["ci95"]  # queries resampled, each fold's choice fixed: too narrow
    fold_gains = [float(np.mean([held_out[q] - default_values[q] for q in ids])) for ids in fold_ids]
    gain["ci95"] = list(corrected_cv_ci(fold_gains, 1 / (folds - 1)))
    gain["inside_noise"] = bool(gain["ci95"][0] <= 0.0 <= gain["ci95"][1])
    if full.validation and full.validation["kept"] == "start":
        cautions.append(f"The tuned config scored {full.validation['tuned']:.4f} on the {full.validation['queries']} "
                        f"queries held back to check it, the base config {full.validation['start']:.4f}: the base "
                        "config is kept (the tuning did not generalise).")
    if gain["inside_noise"]:
        cautions.append(f"The cross-validated gain over the base config, {gain['value']:+.4f}, is inside the noise "
                        f"(95 % CI {gain['ci95'][0]:+.4f} … {gain['ci95'][1]:+.4f} reaches 0): keep the base config "
                        "or judge more queries.")
    total = time.perf_counter() - started
    return OptimizeResult(
        prepared.space.method, prepared.metric, folds, trials, seed, full.config,
        mean_ci(cv_values), mean_ci([in_sample_values[q] for q in query_ids]),
        mean_ci([default_values[q] for q in query_ids]), gain,
        [s.config for s in studies[:-1]], studies,
        {"cv": held_out, "in_sample": in_sample_values, "default": default_values},
        cautions, {"total": total}, prepared.queries_fetched, stopped=stop_event.is_set(),
        model_text=full.model_text, sources=prepared.space.sources)


def stopped_study(done: Sequence[Study], label: str, query_ids: Sequence[str], base: SearchConfig,
                  is_full: bool) -> Study:
    """The study a Stop skipped, without scoring anything: a fold's keeps the base config (it was
    not tuned); the study on all queries takes the config of the best trial so far, the best of
    the last study that ran (the one Stop interrupted, whose best the progress bar showed; after
    its inner check), with that study's trials as its history."""
    ran = [s for s in done if s.history]
    if not is_full or not ran:
        return Study(label, list(query_ids), base, math.nan, stopped=True)
    last = ran[-1]
    return Study(label, list(query_ids), last.config, last.value, list(last.history), dict(last.importance),
                 stopped=True, model_text=last.model_text, learned=last.learned, validation=last.validation)


def judgment_warnings(qrels: Mapping[str, Mapping[str, int]], fold_ids: Sequence[Sequence[str]]) -> list[str]:
    """What makes a cross-validated figure weak: few held-out queries per fold, a fold whose
    queries have no relevant document (its held-out score is 0 whatever the config)."""
    said = []
    smallest = min(len(ids) for ids in fold_ids)
    if smallest < FEW_QUERIES_PER_FOLD:
        said.append(f"Only {smallest} judged queries in the smallest fold: each fold's held-out score is noisy "
                        f"(judge at least {FEW_QUERIES_PER_FOLD * len(fold_ids)} queries for {len(fold_ids)} folds).")
    empty = [i + 1 for i, ids in enumerate(fold_ids) if not any(g > 0 for q in ids for g in qrels[q].values())]
    if empty:
        said.append(f"Fold(s) {', '.join(map(str, empty))} hold no query with a relevant document: their "
                        "held-out score is 0 whatever the config.")
    return said
