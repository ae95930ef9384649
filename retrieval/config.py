"""`SearchConfig`: the one object the UI edits, the CLI parses and an experiment records.

Fields split in two: those that decide which candidates are retrieved (`depth` and what each
source's descriptor names in its `key`: BM25's backend, k1 and b, the keyword points, the graph
parameters) form the candidate cache key (`sources.candidate_key`); everything else is applied to
cached candidates. The seed sources' parameter defaults come from their descriptors
(`sources/keyword.py`, `sources/graph.py`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .sources import SOURCES
from .types import RetrievalError

FUSION_METHODS = ("rrf", "weighted")
NORMALIZATIONS = ("minmax", "zscore", "l2", "none")
# Weighted fusion: how the weighted, normalised scores combine (OpenSearch's three techniques).
COMBINATIONS = ("arithmetic", "harmonic", "geometric")
BM25_BACKENDS = ("rank_bm25", "lancedb")
# Sources whose parameters live in a dict field of the same name (`config.keyword`, `config.graph`).
PARAM_GROUPS = ("keyword", "graph")


_GROUP_DEFAULTS = {group: SOURCES[group].defaults(group) for group in PARAM_GROUPS}


def _defaults(group: str) -> dict[str, float]:
    return dict(_GROUP_DEFAULTS[group])


@dataclass
class SearchConfig:
    """Everything that turns a query into a ranked, explained list."""

    fusion: str = "rrf"
    # Per-source weights. RRF: w_s in Σ w_s/(k+rank). Weighted sum: w_s in Σ w_s·norm_s.
    # Seed 003's weighted default is bm25 0.4 / dense 0.6; RRF's classic default is equal weights.
    weights: dict[str, float] = field(default_factory=lambda: {"bm25": 0.5, "dense": 0.5})
    rrf_k: float = 60.0
    normalization: str = "minmax"
    combination: str = "arithmetic"  # weighted fusion only
    depth: int = 100  # candidates fetched per source
    top_k: int = 10
    min_score: float | None = None  # on the fused score
    min_display_score: float | None = None  # on the display score
    min_raw: dict[str, float] = field(default_factory=dict)  # per-source minimum raw score
    tie_field: str | None = None  # numeric metadata field; higher wins a tie, then doc id
    bm25_backend: str = "rank_bm25"
    bm25_k1: float = 0.9
    bm25_b: float = 0.4
    rerank: bool = False
    rerank_top_n: int = 20
    reranker: str = "e5"  # "e5" (offline default) or a CrossEncoder path / id
    # Parameters of the seed sources; a partial dict is completed from the defaults.
    keyword: dict[str, float] = field(default_factory=lambda: _defaults("keyword"))
    graph: dict[str, float] = field(default_factory=lambda: _defaults("graph"))
    graph_focus: str = ""  # comma-separated focus topics for the graph's preference score

    def __post_init__(self) -> None:
        self.keyword = {**_defaults("keyword"), **{k: float(v) for k, v in self.keyword.items()}}
        self.graph = {**_defaults("graph"), **{k: float(v) for k, v in self.graph.items()}}
        self.validate()

    def validate(self) -> None:
        problems = []
        if self.fusion not in FUSION_METHODS:
            problems.append(f"fusion must be one of {FUSION_METHODS}, got {self.fusion!r}")
        if self.normalization not in NORMALIZATIONS:
            problems.append(f"normalization must be one of {NORMALIZATIONS}, got {self.normalization!r}")
        if self.combination not in COMBINATIONS:
            problems.append(f"combination must be one of {COMBINATIONS}, got {self.combination!r}")
        if self.bm25_backend not in BM25_BACKENDS:
            problems.append(f"bm25_backend must be one of {BM25_BACKENDS}, got {self.bm25_backend!r}")
        if not (self.rrf_k >= 1 and math.isfinite(self.rrf_k)):
            problems.append(f"rrf_k must be ≥ 1, got {self.rrf_k}")
        if not self.weights:
            problems.append("weights must name at least one source")
        for name, w in self.weights.items():
            if not (math.isfinite(w) and w >= 0):
                problems.append(f"weight of {name!r} must be a finite number ≥ 0, got {w}")
        if self.weights and sum(self.weights.values()) <= 0:
            problems.append("at least one source weight must be > 0")
        if self.depth < 1:
            problems.append(f"depth must be ≥ 1, got {self.depth}")
        if self.top_k < 1:
            problems.append(f"top_k must be ≥ 1, got {self.top_k}")
        if self.rerank_top_n < 1:
            problems.append(f"rerank_top_n must be ≥ 1, got {self.rerank_top_n}")
        if self.bm25_k1 < 0 or not (0 <= self.bm25_b <= 1):
            problems.append(f"BM25 needs k1 ≥ 0 and 0 ≤ b ≤ 1, got k1={self.bm25_k1}, b={self.bm25_b}")
        for name in PARAM_GROUPS:
            given, defaults = getattr(self, name), _defaults(name)
            unknown = sorted(set(given) - set(defaults))
            if unknown:
                problems.append(f"unknown {name} parameter(s) {', '.join(unknown)}; known: {', '.join(defaults)}")
            bad = [k for k, v in given.items() if not (math.isfinite(v) and v >= 0)]
            if bad:
                problems.append(f"{name} parameter(s) {', '.join(bad)} must be finite numbers ≥ 0")
        if not 1 <= self.keyword.get("limit", 1) <= 50:
            problems.append(f"keyword limit must be 1–50, got {self.keyword['limit']:g}")
        if problems:
            raise RetrievalError("Invalid search config: " + "; ".join(problems))

    @property
    def sources(self) -> tuple[str, ...]:
        """Sources to retrieve from: every source with a weight entry (weight 0 still shows)."""
        return tuple(self.weights)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RetrievalError(f"Unknown config field(s): {', '.join(unknown)}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> SearchConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RetrievalError(f"Config is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise RetrievalError("Config JSON must be an object")
        return cls.from_dict(data)

    # URL query parameters: flat strings, so a link reproduces a view.
    def to_query_params(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, dict):
                out[f.name] = format_weights(value)
            elif isinstance(value, bool):
                out[f.name] = "1" if value else "0"
            else:
                out[f.name] = str(value)
        return out

    @classmethod
    def from_query_params(cls, params: dict[str, str]) -> SearchConfig:
        """Inverse of `to_query_params`; unknown keys are ignored (the page may add its own)."""
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in params:
                continue
            raw = params[f.name]
            try:
                kwargs[f.name] = _parse_field(f.name, raw)
            except ValueError as exc:
                raise RetrievalError(f"Bad value for {f.name!r} in the link: {raw!r}") from exc
        return cls(**kwargs)


def parse_weights(text: str) -> dict[str, float]:
    """'bm25=0.4,dense=0.6' -> {'bm25': 0.4, 'dense': 0.6}."""
    weights: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise RetrievalError(f"Weights look like 'bm25=0.4,dense=0.6'; cannot read {part!r}")
        try:
            weights[name.strip()] = float(value)
        except ValueError as exc:
            raise RetrievalError(f"Weight for {name.strip()!r} is not a number: {value!r}") from exc
    if not weights:
        raise RetrievalError("No weights given")
    return weights


def format_weights(weights: dict[str, float]) -> str:
    return ",".join(f"{name}={value:g}" for name, value in weights.items())


_INT_FIELDS = {"depth", "top_k", "rerank_top_n"}
_FLOAT_FIELDS = {"rrf_k", "min_score", "min_display_score", "bm25_k1", "bm25_b"}


def _parse_field(name: str, raw: str) -> Any:
    if name in ("weights", "min_raw", "keyword", "graph"):
        return parse_weights(raw) if raw else {}
    if name in _INT_FIELDS:
        return int(raw)
    if name in _FLOAT_FIELDS:
        return float(raw)
    if name == "rerank":
        if raw not in ("0", "1", "true", "false"):
            raise ValueError(raw)
        return raw in ("1", "true")
    return raw
