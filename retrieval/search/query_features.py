"""Query features and query-dependent fusion weights.

Features of a query, from its text and its candidates (what every ranking of it already has):

    length    log2(1 + n), n = the query's analysed terms (`tokenize.tokenize`)
    cjk       the share of the query's non-space characters that are Han ideographs
    oov       1 − known / n: the share of the query's terms that no document holds, from BM25's
              vocabulary (`SourceResult.coverage`; unknown — None — where the backend keeps no
              vocabulary: LanceDB's native index, from 50,000 documents)
    bm25_gap  (s₁ − s_m) / s₁, s₁ BM25's top raw score and s_m its m-th, m = min(10, hits):
              a query-performance predictor — near 1, one document stands far above the rest;
              None without two BM25 hits or with s₁ ≤ 0

Query-dependent weights (`QueryWeights`, a config's `query_weights`) give the first of two
sources the share

    w₁(q) = σ(b + Σ_f a_f · z_f(q)),   z_f = (x_f − μ_f) / σ_f,   w₂(q) = 1 − w₁(q)

of the weight, with μ_f and σ_f the feature's mean and standard deviation over the training
queries (a feature that is None for a query has z = 0: it counts as average). The optimiser
learns b and the a_f (`optimize`, method query-dependent); the explanation of a ranking lists
each feature's term a_f · z_f, largest first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from retrieval.text.tokenize import tokenize
from retrieval.types import RetrievalError, SourceResult

FEATURES = ("length", "cjk", "oov", "bm25_gap")
FEATURE_LABELS = {"length": "query length", "cjk": "Chinese characters", "oov": "terms no document holds",
                  "bm25_gap": "BM25's top score above its 10th"}
GAP_AT = 10
COEFFICIENT_MAX = 20.0
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def length_feature(terms: Sequence[str]) -> float:
    """log2(1 + number of analysed terms)."""
    return math.log2(1 + len(terms))


def cjk_share(query: str) -> float:
    """Share of the non-space characters that are Han ideographs (0 for an empty query)."""
    chars = [c for c in query if not c.isspace()]
    return sum(1 for c in chars if _HAN.match(c)) / len(chars) if chars else 0.0


def oov_share(result: SourceResult | None) -> float | None:
    """1 − known/terms from BM25's coverage of the query, or None when it is not known."""
    if result is None or result.coverage is None:
        return None
    terms, known = result.coverage
    return 1.0 - known / terms if terms else None


def score_gap(result: SourceResult | None, at: int = GAP_AT) -> float | None:
    """(s₁ − s_m)/s₁ over the source's raw scores, m = min(`at`, hits); None when undefined."""
    if result is None or len(result.hits) < 2:
        return None
    top = result.hits[0].raw_score
    if top <= 0:
        return None
    return (top - result.hits[min(at, len(result.hits)) - 1].raw_score) / top


def query_features(query: str, sources: Mapping[str, SourceResult]) -> dict[str, float | None]:
    """Every feature of the module docstring for `query` and its candidates `sources`."""
    bm25 = sources.get("bm25")
    return dict(_features(query, oov_share(bm25), score_gap(bm25)))


@lru_cache(maxsize=65_536)
def _features(query: str, oov: float | None, gap: float | None) -> tuple[tuple[str, float | None], ...]:
    """The text features, kept per query: the optimiser asks for them once per query and trial."""
    return (("length", length_feature(tokenize(query))), ("cjk", cjk_share(query)), ("oov", oov), ("bm25_gap", gap))


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@dataclass(frozen=True)
class QueryWeights:
    """w₁(q) = σ(b + Σ a_f z_f(q)) for `sources[0]`, 1 − w₁ for `sources[1]` (module docstring)."""

    sources: tuple[str, str]
    intercept: float
    coefficients: Mapping[str, float]
    mean: Mapping[str, float]
    scale: Mapping[str, float]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueryWeights:
        """Validated: two different sources, known features, finite numbers, scales > 0."""
        try:
            sources = tuple(data["sources"])
            model = cls((str(sources[0]), str(sources[1])), float(data["intercept"]),
                        {str(k): float(v) for k, v in dict(data["coefficients"]).items()},
                        {str(k): float(v) for k, v in dict(data["mean"]).items()},
                        {str(k): float(v) for k, v in dict(data["scale"]).items()})
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise RetrievalError("query_weights must be {sources: [two sources], intercept, coefficients, mean, "
                                 f"scale}} with numbers; {type(exc).__name__}: {exc}") from None
        if len(sources) != 2 or model.sources[0] == model.sources[1]:
            raise RetrievalError(f"query_weights splits weight between two different sources; got {list(sources)}")
        unknown = sorted(set(model.coefficients) - set(FEATURES))
        if unknown:
            raise RetrievalError(f"query_weights: unknown feature(s) {unknown}; known: {', '.join(FEATURES)}")
        numbers = [model.intercept, *model.coefficients.values(), *model.mean.values(), *model.scale.values()]
        if not all(math.isfinite(x) for x in numbers):
            raise RetrievalError("query_weights: every number must be finite")
        if any(abs(x) > COEFFICIENT_MAX for x in [model.intercept, *model.coefficients.values()]):
            raise RetrievalError(f"query_weights: intercept and coefficients must be within ±{COEFFICIENT_MAX:g}")
        if any(f not in model.mean or model.scale.get(f, 0) <= 0 for f in model.coefficients):
            raise RetrievalError("query_weights: every feature with a coefficient needs a mean and a scale > 0")
        return model

    def to_dict(self) -> dict[str, Any]:
        return {"sources": list(self.sources), "intercept": self.intercept,
                "coefficients": dict(self.coefficients), "mean": dict(self.mean), "scale": dict(self.scale)}

    def terms(self, features: Mapping[str, float | None]) -> dict[str, float]:
        """a_f · z_f for each feature with a coefficient (0 where the feature is None)."""
        out = {}
        for name, a in self.coefficients.items():
            x = features.get(name)
            out[name] = 0.0 if x is None else a * (x - self.mean[name]) / self.scale[name]
        return out

    def shares(self, features: Mapping[str, float | None]) -> tuple[float, float]:
        """(w₁, w₂) for a query with these features."""
        first = sigmoid(self.intercept + sum(self.terms(features).values()))
        return first, 1.0 - first

    def explain(self, features: Mapping[str, float | None]) -> str:
        """Which features set this query's weights, in a sentence."""
        terms = self.terms(features)
        first, second = self.shares(features)
        parts = [f"{FEATURE_LABELS[name]} {'+' if t >= 0 else '−'}{abs(t):.2f}"
                 + ("" if features.get(name) is not None else " (unknown: counted as average)")
                 for name, t in sorted(terms.items(), key=lambda item: -abs(item[1]))]
        return (f"query-dependent weights: {self.sources[0]} {first:.2f}, {self.sources[1]} {second:.2f} "
                f"= σ({self.intercept:+.2f} base" + "".join(f", {p}" for p in parts) + ")")
