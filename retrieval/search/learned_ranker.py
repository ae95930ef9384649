"""A learned ranker: LambdaMART (LightGBM's `lambdarank`) over each candidate's features,
reordering the fused candidates of a query (a config's `ranker`, a model in `ranker_models`).

Features of candidate d for query q (`feature_names`; NaN where a value does not exist, which
LightGBM's trees route on their own):

    <s>_raw    d's raw score in source s (NaN: s did not return d, or dropped it under its minimum)
    <s>_norm   min-max of the raw score over s's kept candidates: (x − min)/(max − min), 1 if all equal
    <s>_rank   d's rank in s
    fused      d's fused score under the config's fusion (the plan's, before this ranker)
    length, cjk, oov, bm25_gap   the query's features (`query_features`)
    doc_length  d's number of analysed terms
    title_match the share of q's analysed terms found in d's title (NaN without a title)

for each source s the model was trained with. The ranker scores every kept candidate (those
that passed the per-source minimums), and the ranking is by that score (ties: the plan's usual
order). Its explanation is LightGBM's `pred_contrib` (TreeSHAP): one contribution per feature
and a bias, which add up to the score.

Training (`train`): one group per query, its candidates under the config, labels the query's
grades (unjudged 0, negative grades 0); fixed seed, deterministic, single-threaded, so a model
is reproducible from the same data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from retrieval.search.fusion.fuse import PreparedSource
from retrieval.search.query_features import FEATURE_LABELS, query_features
from retrieval.search.query_features import FEATURES as QUERY_FEATURES
from retrieval.sources import label
from retrieval.text.tokenize import tokenize
from retrieval.types import RetrievalError, SourceResult

PER_SOURCE = ("raw", "norm", "rank")
DOCUMENT_FEATURES = ("doc_length", "title_match")
PER_SOURCE_WORDS = {"raw": "raw score", "norm": "normalised score", "rank": "rank"}  # `feature_label`
FEATURE_WORDS = {"fused": "fused score", "doc_length": "document length", "title_match": "query terms in the title"}
TRAIN_PARAMS = {"objective": "lambdarank", "metric": "ndcg", "ndcg_eval_at": [10], "learning_rate": 0.05,
                "num_leaves": 15, "min_data_in_leaf": 20, "feature_fraction": 0.9, "lambdarank_truncation_level": 20,
                "deterministic": True, "force_row_wise": True, "num_threads": 1, "verbose": -1}
ROUNDS = 200
# Early stopping (why: with 200 rounds the model memorised, in-sample 0.94 against 0.72 held out):
# every EARLY_STOP_EVERY-th query (shuffled by the seed) is held back when there are at least
# EARLY_STOP_MIN_QUERIES, and training stops after EARLY_STOP_PATIENCE rounds without a better
# nDCG@10 on them, keeping the best round; L2 on the leaf values (LightGBM's lambda_l2) shrinks
# what a few queries can teach. LightGBM's early_stopping callback (Prechelt, "Early stopping —
# but when?", 1998: stop on a validation set's plateau).
EARLY_STOP_EVERY = 5
EARLY_STOP_MIN_QUERIES = 10
EARLY_STOP_PATIENCE = 20
L2 = 1.0


def feature_names(sources: Sequence[str]) -> list[str]:
    """Per source raw, norm, rank; then fused, the query features, the document features."""
    return [f"{s}_{kind}" for s in sources for kind in PER_SOURCE] + ["fused", *QUERY_FEATURES, *DOCUMENT_FEATURES]


def feature_label(name: str) -> str:
    """What people read for a feature of `feature_names`, first letter capital: 'dense_rank' →
    'Vector rank' (sources by their label, `sources.label`; the query's features by
    `query_features.FEATURE_LABELS`); a name it does not know as it is."""
    source, _, kind = name.rpartition("_")
    if name in QUERY_FEATURES:
        shown = FEATURE_LABELS[name]
    elif name in FEATURE_WORDS:
        shown = FEATURE_WORDS[name]
    elif source and kind in PER_SOURCE_WORDS:
        shown = f"{label(source)} {PER_SOURCE_WORDS[kind]}"
    else:
        return name
    return shown[:1].upper() + shown[1:]


def sources_of(names: Sequence[str]) -> list[str]:
    """The sources a model's feature names were built for (inverse of `feature_names`)."""
    return [name[: -len("_raw")] for name in names if name.endswith("_raw")]


@dataclass(frozen=True)
class DocumentStats:
    """Per document: its number of analysed terms and its title's terms (`CollectionReads.doc_stats`)."""

    lengths: Mapping[str, int]
    titles: Mapping[str, frozenset[str]]


def candidate_features(query: str, sources: Mapping[str, SourceResult], prepared: Mapping[str, PreparedSource],
                       fused_scores: Mapping[str, float], model_sources: Sequence[str],
                       docs: DocumentStats) -> tuple[list[str], np.ndarray]:
    """The kept candidates (the keys of `fused_scores`, in that order) and their feature matrix
    (one row per candidate, columns `feature_names(model_sources)`)."""
    ids = list(fused_scores)
    width = len(model_sources) * len(PER_SOURCE) + 1 + len(QUERY_FEATURES) + len(DOCUMENT_FEATURES)
    matrix = np.full((len(ids), width), np.nan, dtype=np.float64)
    position = {doc_id: i for i, doc_id in enumerate(ids)}
    for j, source in enumerate(model_sources):
        entry = prepared.get(source)
        result = sources.get(source)
        if entry is None or result is None or not entry.ids:
            continue
        raw = {h.doc_id: h.raw_score for h in result.hits}
        kept = [raw[d] for d in entry.ids]
        low, high = min(kept), max(kept)
        for doc_id, rank, x in zip(entry.ids, entry.ranks, kept, strict=True):
            i = position.get(doc_id)
            if i is None:
                continue
            matrix[i, 3 * j] = x
            matrix[i, 3 * j + 1] = (x - low) / (high - low) if high > low else 1.0
            matrix[i, 3 * j + 2] = rank
    column = 3 * len(model_sources)
    matrix[:, column] = [fused_scores[d] for d in ids]
    features = query_features(query, sources)
    for k, name in enumerate(QUERY_FEATURES, start=column + 1):
        value = features[name]
        matrix[:, k] = np.nan if value is None else value
    terms = set(tokenize(query))
    length_column = column + 1 + len(QUERY_FEATURES)
    for i, doc_id in enumerate(ids):
        length = docs.lengths.get(doc_id)
        matrix[i, length_column] = np.nan if length is None else length
        title = docs.titles.get(doc_id)
        matrix[i, length_column + 1] = (len(terms & title) / len(terms)) if title and terms else np.nan
    return ids, matrix


class LearnedRanker:
    """A trained model (LightGBM's text format) and the collection's document stats."""

    def __init__(self, model_text: str, docs: DocumentStats, model_id: str = ""):
        import lightgbm

        try:
            self.booster = lightgbm.Booster(model_str=model_text)
        except lightgbm.basic.LightGBMError as exc:
            raise RetrievalError(f"Not a LightGBM model: {exc}") from None
        self.names = self.booster.feature_name()
        self.sources = sources_of(self.names)
        if self.names != feature_names(self.sources):
            raise RetrievalError(f"The model's features are not a learned ranker's: {self.names[:8]} …")
        self.docs = docs
        self.model_id = model_id

    def features(self, query: str, sources: Mapping[str, SourceResult], prepared: Mapping[str, PreparedSource],
                 fused_scores: Mapping[str, float]) -> tuple[list[str], np.ndarray]:
        return candidate_features(query, sources, prepared, fused_scores, self.sources, self.docs)

    def scores(self, query: str, sources: Mapping[str, SourceResult], prepared: Mapping[str, PreparedSource],
               fused_scores: Mapping[str, float]) -> dict[str, float]:
        """Every kept candidate's model score."""
        ids, matrix = self.features(query, sources, prepared, fused_scores)
        if not ids:
            return {}
        return dict(zip(ids, (float(x) for x in self.booster.predict(matrix, num_threads=1)), strict=True))

    def contributions(self, query: str, sources: Mapping[str, SourceResult], prepared: Mapping[str, PreparedSource],
                      fused_scores: Mapping[str, float]) -> dict[str, dict[str, float]]:
        """Per candidate: each feature's contribution and 'bias' (TreeSHAP); they add up to its score."""
        ids, matrix = self.features(query, sources, prepared, fused_scores)
        if not ids:
            return {}
        parts = self.booster.predict(matrix, pred_contrib=True, num_threads=1)
        names = [*self.names, "bias"]
        return {doc_id: dict(zip(names, (float(x) for x in row), strict=True)) for doc_id, row in zip(ids, parts,
                                                                                                        strict=True)}


def train(groups: Sequence[tuple[np.ndarray, np.ndarray]], names: Sequence[str], seed: int = 0,
          rounds: int = ROUNDS) -> str:
    """A LambdaMART model from `groups` — per query (feature matrix, grades) — as LightGBM text."""
    import lightgbm

    groups = [(x, y) for x, y in groups if len(y)]
    if not groups:
        raise RetrievalError("No query has candidates to learn from")
    if not any((y > 0).any() for _, y in groups):
        raise RetrievalError("No candidate of the training queries is judged relevant: nothing to learn")
    top = int(max(np.clip(y, 0, None).max() for _, y in groups))
    # linear gain, as the metrics' nDCG (evaluation/metrics.py) (a grade g gains g)
    params = {**TRAIN_PARAMS, "seed": seed, "lambda_l2": L2,
              "label_gain": [float(g) for g in range(max(top, 1) + 1)]}
    fit, check = early_stop_split(groups, seed)

    def dataset(part, reference=None):
        labels = np.concatenate([np.clip(y, 0, None) for _, y in part]).astype(np.int32)
        return lightgbm.Dataset(np.vstack([x for x, _ in part]), labels, group=[len(y) for _, y in part],
                                feature_name=list(names), free_raw_data=True, params={"verbose": -1},
                                reference=reference)

    data = dataset(fit)
    if not check:
        return lightgbm.train(params, data, num_boost_round=rounds).model_to_string()
    booster = lightgbm.train(params, data, num_boost_round=rounds, valid_sets=[dataset(check, data)],
                             callbacks=[lightgbm.early_stopping(EARLY_STOP_PATIENCE, verbose=False)])
    return booster.model_to_string(num_iteration=booster.best_iteration)


def early_stop_split(groups: Sequence[tuple[np.ndarray, np.ndarray]], seed: int
                     ) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[np.ndarray, np.ndarray]]]:
    """(train on, stop on): every `EARLY_STOP_EVERY`-th group of a seeded shuffle is held back,
    when there are at least `EARLY_STOP_MIN_QUERIES` and both parts keep a relevant candidate;
    else nothing is held back."""
    if len(groups) < EARLY_STOP_MIN_QUERIES:
        return list(groups), []
    held = set(np.random.default_rng(seed).permutation(len(groups))[::EARLY_STOP_EVERY].tolist())
    fit = [g for i, g in enumerate(groups) if i not in held]
    check = [g for i, g in enumerate(groups) if i in held]
    if not any((y > 0).any() for _, y in fit) or not any((y > 0).any() for _, y in check):
        return list(groups), []
    return fit, check


def model_summary(model_text: str) -> dict[str, float]:
    """Each feature's share of the model's total gain (what the trees split on), largest first."""
    import lightgbm

    booster = lightgbm.Booster(model_str=model_text)
    gains = booster.feature_importance(importance_type="gain")
    total = float(sum(gains)) or 1.0
    pairs = sorted(zip(booster.feature_name(), (float(g) / total for g in gains), strict=True), key=lambda p: -p[1])
    return {name: share for name, share in pairs if share > 0 and math.isfinite(share)}
