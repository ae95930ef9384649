"""`SearchConfig`: the one object the UI edits, the CLI parses and an experiment records.

Fields split in two: those that decide which candidates are retrieved (`depth` and what each
source's descriptor names in its `key`: BM25's backend, k1 and b, the keyword points, the graph
parameters) form the candidate cache key (`sources.candidate_key`); everything else is applied to
cached candidates. The seed sources' parameter defaults come from their descriptors
(`sources/keyword.py`, `sources/graph.py`).

Longer than 400 lines because it is one class: the fields (with why each default), validation and
the JSON and URL forms are `SearchConfig`'s own methods; what sits outside it is the URL form's
value parsing (`parse_weights`, `format_weights`, `_parse_field`), called by those methods (and the
CLI's `--weights`), which a cut would only move away from them.
"""

from __future__ import annotations

import copy
import json
import math
import numbers
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from retrieval.limits import (
    BM25_K1_MAX,
    DEPTH_MAX,
    LINK_JSON_MAX_CHARS,
    NAME_MAX,
    RERANK_TOP_N_MAX,
    RRF_K_MAX,
    RRF_K_MIN,
    SCORE_MAX,
    SOURCE_PARAM_MAX,
    TOP_K_MAX,
    WEIGHT_MAX,
    WEIGHT_MIN,
    check_json_text,
)
from retrieval.search.filters import parse_filters
from retrieval.search.fusion.methods import COMBINATIONS as COMBINATION_REGISTRY
from retrieval.search.fusion.methods import FUSION_METHODS as METHOD_REGISTRY
from retrieval.search.fusion.normalize import NORMALIZERS
from retrieval.search.rules.text import parse_rules
from retrieval.sources import SOURCES, source_name
from retrieval.types import RetrievalError

# The names of the registries' entries (`fusion.methods`, `fusion.normalize`): what a config may name.
FUSION_METHODS = tuple(METHOD_REGISTRY)
NORMALIZATIONS = tuple(NORMALIZERS)
# Weighted fusion: how the weighted, normalised scores combine (OpenSearch's three techniques).
COMBINATIONS = tuple(COMBINATION_REGISTRY)
# "auto": rank_bm25 below `limits.SCALE_DOCS` documents, lancedb from there on (sources/bm25.py).
BM25_BACKENDS = ("auto", "rank_bm25", "lancedb")
# Sources whose parameters live in a dict field of the same name (`config.keyword`, `config.graph`).
PARAM_GROUPS = ("keyword", "graph")


_GROUP_DEFAULTS = {group: SOURCES[group].defaults(group) for group in PARAM_GROUPS}


def _defaults(group: str) -> dict[str, float]:
    return dict(_GROUP_DEFAULTS[group])


# (field, whole number?, low, high): the numeric fields' types and bounds (see `retrieval.limits`).
_RANGES = (
    ("rrf_k", False, RRF_K_MIN, RRF_K_MAX),
    ("depth", True, 1, DEPTH_MAX),
    ("top_k", True, 1, TOP_K_MAX),
    ("rerank_top_n", True, 1, RERANK_TOP_N_MAX),
    ("rerank_lambda", False, 0.0, 1.0),
    ("bm25_k1", False, 0.0, BM25_K1_MAX),
    ("bm25_b", False, 0.0, 1.0),
)


def _is_int(value: Any) -> bool:
    """An int (numpy's too), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    """A finite int or float (numpy's too), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _number_dict_problem(name: str, value: Any) -> str | None:
    """What is wrong with a dict field that must map non-empty strings to finite numbers, or None."""
    if not isinstance(value, dict):
        return f"{name} must be an object of name → number, got {value!r}"
    bad_keys = [k for k in value if not isinstance(k, str) or not k.strip()]
    if bad_keys:
        return f"{name} keys must be non-empty strings, got {bad_keys!r}"
    bad = [f"{k!r} must be a finite number, got {v!r}" for k, v in value.items() if not _is_finite(v)]
    return f"{name}: {'; '.join(bad)}" if bad else None


@dataclass(frozen=True)
class SearchConfig:
    """Everything that turns a query into a ranked, explained list. Frozen: a change is a new
    config (`replace`, validated; or, for a UI holding what a user is typing, `edited`)."""

    # The shipped default fusion (weighted sum, l2, arithmetic, BM25 0.4 / vector 0.6) was chosen by
    # leave-one-set-out over the five evaluation sets among the sweep's 121 variants: held out it
    # beats RRF k=60 0.5/0.5 on average (docs/experiments/default-config.md).
    fusion: str = "weighted"
    # Per-source weights. RRF: w_s in Σ w_s/(k+rank). Weighted sum: w_s in Σ w_s·norm_s.
    weights: dict[str, float] = field(default_factory=lambda: {"bm25": 0.4, "dense": 0.6})
    rrf_k: float = 60.0
    normalization: str = "l2"
    combination: str = "arithmetic"  # weighted fusion only
    depth: int = 100  # candidates fetched per source
    top_k: int = 10
    min_score: float | None = None  # on the fused score
    min_display_score: float | None = None  # on the display score
    min_raw: dict[str, float] = field(default_factory=dict)  # per-source minimum raw score
    tie_field: str | None = None  # numeric metadata field; higher wins a tie, then doc id
    bm25_backend: str = "auto"
    bm25_k1: float = 0.9
    bm25_b: float = 0.4
    rerank: bool = False
    # Across languages (query script ≠ collection's), word-matching sources get weight 0 in the
    # fusion (`retrieval.search.language`).
    language_aware: bool = True
    # Top-N 20 and λ 0.6: chosen by leave-one-set-out over the five evaluation sets among the
    # (top-N, λ) that lower no set's nDCG@10, with E5 on the backend it embeds with here (the int8
    # export on a CPU; docs/experiments/rerank.md); λ 0 (the reranker's order alone) lowered every
    # set, by 0.007–0.134.
    rerank_top_n: int = 20
    # λ: final = λ·minmax(fused) + (1 − λ)·minmax(rerank) over the reranked top-N (`rerank.interpolate`);
    # 0 replaces the fused order by the reranker's.
    rerank_lambda: float = 0.6
    reranker: str = "e5"  # "e5" (offline default) or a CrossEncoder path / id
    # Parameters of the seed sources; a partial dict is completed from the defaults.
    keyword: dict[str, float] = field(default_factory=lambda: _defaults("keyword"))
    graph: dict[str, float] = field(default_factory=lambda: _defaults("graph"))
    graph_focus: str = ""  # comma-separated focus topics for the graph's preference score
    # Metadata filters applied before ranking in every source (`retrieval.search.filters`), e.g.
    # ["category=hair_problem", "year>=2010"]; all must pass.
    filters: list[str] = field(default_factory=list)
    # Query-dependent weights (`query_features.QueryWeights`, learned by the optimiser): the split
    # of weight between two sources set per query from its features; {} = the fixed `weights`.
    query_weights: dict[str, Any] = field(default_factory=dict)
    # A learned ranker (`learned_ranker`, a model kept in the store's `ranker_models` under this
    # id) that reorders the fused candidates; "" = the fusion's order.
    ranker: str = ""
    # Query rules in Querqy's common-rules text (`search.rules`): synonyms, deletes, filters, UP/DOWN,
    # PIN/HIDE per query; "" = none. Kept as text: saved, snapshotted and exported as written.
    rules: str = ""

    def __post_init__(self) -> None:
        # A source named by its label ('vector', the app's word for dense) is that source
        # (`sources.source_name`), from a JSON config, a URL, the CLI or an MCP call alike.
        for name in ("weights", "min_raw"):
            given = getattr(self, name)
            if isinstance(given, dict) and any(source_name(k) != k for k in given if isinstance(k, str)):
                named = {source_name(k) if isinstance(k, str) else k: v for k, v in given.items()}
                if len(named) == len(given):  # 'vector' beside 'dense' is left for validate to name
                    object.__setattr__(self, name, named)
        # Complete the parameter dicts from the defaults, once their values are known to be numbers
        # (a bad dict is left as given for `validate` to name).
        for group in PARAM_GROUPS:
            given = getattr(self, group)
            if _number_dict_problem(group, given) is None:
                object.__setattr__(self, group, {**_defaults(group), **{k: float(v) for k, v in given.items()}})
        self.validate()

    def replace(self, **changes: Any) -> SearchConfig:
        """A new config with `changes`, validated (RetrievalError naming every bad field)."""
        return replace(self, **changes)

    def edited(self, **changes: Any) -> SearchConfig:
        """A new config with `changes`, NOT validated: what a UI holds while a user edits it (all
        weights at 0 on the way to another split). Whoever ranks with it validates it first
        (`Workbench.rank`), so the page says what is wrong instead of a control refusing a move."""
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            raise RetrievalError(f"Unknown config field(s): {', '.join(unknown)}")
        new = copy.copy(self)
        for name, value in changes.items():
            object.__setattr__(new, name, value)
        return new

    def validate(self) -> None:
        """Raise RetrievalError naming every bad field; see `retrieval.limits` for the bounds.

        Types first (a JSON config or a UI may hand in anything): whole numbers are ints (not
        bools), other numbers are finite ints or floats, choices and names are strings, `rerank`
        is a bool, and the dict fields map non-empty strings to finite numbers. Then the ranges:
        each weight 0 or in [1e-6, 1000] and one > 0, rrf_k in [1, 1e6], depth and top_k in [1, 10000],
        rerank_top_n in [1, 1000], rerank_lambda in [0, 1], BM25 k1 in [0, 100] and b in [0, 1],
        minimum scores finite with |x| ≤ 1e100 (or None), source parameters in [0, 1e6] (keyword
        limit 1–50). Within these bounds fusion gives finite fused and display scores (tests/test_properties.py).
        """
        problems = []
        for name, choices in (("fusion", FUSION_METHODS), ("normalization", NORMALIZATIONS),
                              ("combination", COMBINATIONS), ("bm25_backend", BM25_BACKENDS)):
            value = getattr(self, name)
            if not isinstance(value, str) or value not in choices:
                problems.append(f"{name} must be one of {choices}, got {value!r}")
        for name in ("reranker", "graph_focus"):
            if not isinstance(getattr(self, name), str):
                problems.append(f"{name} must be a string, got {getattr(self, name)!r}")
        if self.tie_field is not None and not isinstance(self.tie_field, str):
            problems.append(f"tie_field must be a string or null, got {self.tie_field!r}")
        for name in ("rerank", "language_aware"):
            if not isinstance(getattr(self, name), bool):
                problems.append(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name, whole, low, high in _RANGES:
            value = getattr(self, name)
            if whole and not _is_int(value):
                problems.append(f"{name} must be a whole number, got {value!r}")
            elif not whole and not _is_finite(value):
                problems.append(f"{name} must be a finite number, got {value!r}")
            elif not low <= value <= high:
                problems.append(f"{name} must be ≥ {low:g} and ≤ {high:g}, got {value:g}")
        for name in ("min_score", "min_display_score"):
            value = getattr(self, name)
            if value is not None and not (_is_finite(value) and abs(value) <= SCORE_MAX):
                problems.append(f"{name} must be a finite number (|x| ≤ {SCORE_MAX:g}) or null, got {value!r}")
        problems += self._dict_problems()
        if not isinstance(self.filters, list) or not all(isinstance(f, str) for f in self.filters):
            problems.append(f"filters must be a list of strings like 'category=a', got {self.filters!r}")
        else:
            try:
                parse_filters(self.filters)
            except RetrievalError as exc:
                problems.append(str(exc))
        problems += self._query_weights_problems()
        if not isinstance(self.rules, str):
            problems.append(f"rules must be the text of a rules file, got {type(self.rules).__name__}")
        elif self.rules:
            try:
                parse_rules(self.rules)  # cached per text: a config validated per search parses once
            except RetrievalError as exc:
                problems.append(str(exc))
        if not isinstance(self.ranker, str):
            problems.append(f"ranker must be a string, got {self.ranker!r}")
        elif self.ranker:
            from retrieval.search.ranker_models import MODEL_ID_RE

            if not MODEL_ID_RE.fullmatch(self.ranker):
                problems.append(f"ranker must be a learned ranker's id ('lambdamart-' and 16 hex digits), "
                                f"got {self.ranker!r}")
            if self.min_score is not None or self.min_display_score is not None:
                problems.append("a learned ranker orders by its own score: minimum fused or display scores do not "
                                "apply (leave them empty)")
        if problems:
            raise RetrievalError("Invalid search config: " + "; ".join(problems))

    def derived(self, **changes: Any) -> SearchConfig:
        """A copy with `changes`, not validated again: for the ranking plan's per-query config,
        whose change (a weight split by a share of the same total) keeps a valid config valid.
        Validation costs more than the fusion it would guard, once per query and trial."""
        new = copy.copy(self)
        for name, value in changes.items():
            object.__setattr__(new, name, value)
        return new

    def _query_weights_problems(self) -> list[str]:
        if not isinstance(self.query_weights, dict):
            return [f"query_weights must be an object, got {self.query_weights!r}"]
        if not self.query_weights:
            return []
        from retrieval.search.query_features import QueryWeights

        try:
            model = QueryWeights.from_dict(self.query_weights)
        except RetrievalError as exc:
            return [str(exc)]
        missing = [s for s in model.sources if s not in self.weights]
        return [f"query_weights names source(s) {missing} that the config does not weigh"] if missing else []

    def _dict_problems(self) -> list[str]:
        """Problems of the dict fields: weights, min_raw and the source parameter groups."""
        problems = []
        for name in ("weights", "min_raw", *PARAM_GROUPS):
            problem = _number_dict_problem(name, getattr(self, name))
            if problem:
                problems.append(problem)
        if isinstance(self.weights, dict) and not self.weights:
            problems.append("weights must name at least one source")
        for name in ("weights", "min_raw"):
            given = getattr(self, name)
            twice = [k for k in given if isinstance(k, str) and source_name(k) != k
                     and source_name(k) in given] if isinstance(given, dict) else []
            if twice:
                problems.append(f"{name} name a source twice: " + ", ".join(f"{k!r} is {source_name(k)!r}"
                                                                              for k in twice))
        if _number_dict_problem("weights", self.weights) is None and self.weights:
            for source, w in self.weights.items():
                if not (w == 0 or WEIGHT_MIN <= w <= WEIGHT_MAX):
                    problems.append(f"weight of {source!r} must be 0 or in [{WEIGHT_MIN:g}, {WEIGHT_MAX:g}], "
                                    f"got {w:g}")
                if len(source) > NAME_MAX:
                    problems.append(f"source names must be at most {NAME_MAX} characters")
            if all(w <= 0 for w in self.weights.values()):
                problems.append("at least one source weight must be > 0")
        if _number_dict_problem("min_raw", self.min_raw) is None:
            bad = [k for k, v in self.min_raw.items() if abs(v) > SCORE_MAX]
            if bad:
                problems.append(f"min_raw of {', '.join(map(repr, bad))} must be within ±{SCORE_MAX:g}")
        for name in PARAM_GROUPS:
            given, defaults = getattr(self, name), _defaults(name)
            if _number_dict_problem(name, given) is not None:
                continue
            unknown = sorted(set(given) - set(defaults))
            if unknown:
                problems.append(f"unknown {name} parameter(s) {', '.join(unknown)}; known: {', '.join(defaults)}")
            bad = [k for k, v in given.items() if not 0 <= v <= SOURCE_PARAM_MAX]
            if bad:
                problems.append(f"{name} parameter(s) {', '.join(bad)} must be ≥ 0 and ≤ {SOURCE_PARAM_MAX:g}")
        keyword = self.keyword
        if _number_dict_problem("keyword", keyword) is None and not 1 <= keyword.get("limit", 1) <= 50:
            problems.append(f"keyword limit must be 1–50, got {keyword['limit']:g}")
        return problems

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
        bad = sorted(k for k in data if not isinstance(k, str))
        if bad:
            raise RetrievalError(f"Config field names must be strings, got {bad!r}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> SearchConfig:
        return cls.from_dict(json_object(text))

    # URL query parameters: flat strings, so a link reproduces a view.
    def to_query_params(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or (f.name in ("filters", "rules") and not value):
                continue
            if f.name == "query_weights" and not value:
                continue
            if f.name in ("filters", "query_weights"):
                out[f.name] = json.dumps(value, ensure_ascii=False)
            elif isinstance(value, dict):
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


def json_object(text: str) -> dict[str, Any]:
    """A config's JSON text as a dict, or a one-line `RetrievalError`."""
    check_json_text(text, "The config")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RetrievalError(f"Config is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise RetrievalError("Config JSON must be an object")
    return data


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
_FLOAT_FIELDS = {"rrf_k", "min_score", "min_display_score", "bm25_k1", "bm25_b", "rerank_lambda"}


def _parse_field(name: str, raw: str) -> Any:
    if name in ("filters", "query_weights"):
        check_json_text(raw, f"{name} in the link", LINK_JSON_MAX_CHARS)
    if name == "filters":
        value = json.loads(raw) if raw else []
        if not isinstance(value, list):
            raise ValueError(raw)
        return value
    if name == "query_weights":
        value = json.loads(raw) if raw else {}
        if not isinstance(value, dict):
            raise ValueError(raw)
        return value
    if name in ("weights", "min_raw", "keyword", "graph"):
        return parse_weights(raw) if raw else {}
    if name in _INT_FIELDS:
        return int(raw)
    if name in _FLOAT_FIELDS:
        return float(raw)
    if name in ("rerank", "language_aware"):
        if raw not in ("0", "1", "true", "false"):
            raise ValueError(raw)
        return raw in ("1", "true")
    return raw
