"""The smallest single change of the config that brings a document into the top-K, found by
trying changes, not guessed.

The smallest change (`trial_changes`, then `best_changes`): one knob at a time, each trial a real
run of the config's ranking plan (`Workbench.rank` on the cached candidates, the rerank included
when the config has it; a depth or filter trial searches once, then it is cached). Tried: each source's
weight over `WEIGHT_GRID`, the fusion method's own parameters over their trial grids (RRF k:
`fusion.methods.RRF_K_GRID`), each threshold lowered to the
largest value on its step grid that the document's score passes (or removed), rerank off, the
rerank λ over `LAMBDA_GRID`, language-aware fusion off (a query crossing languages), the depth
raised to the document's position in each source, the filters removed, top-K raised to the
document's position. The grids are the Search page's slider ranges, so a suggestion can be
applied there as it is. Among the changes that bring it into the top-K, the smallest is the one
with the lowest

    (class, size)    class 0: fusion-only changes (weights, k, thresholds, rerank off): no
                              re-query, and the top-K means what it meant
                     class 1: re-query changes (depth, filters)
                     class 2: raising top-K itself (always works once the document is ranked,
                              so it is the last resort)
                     size     the knob's relative change |new − old| / |old| (`relative_change`);
                              from 0, or switching something off: |new − old| / 1, and 1
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from retrieval.search.config import SearchConfig
from retrieval.search.fusion.methods import FUSION_METHODS, method_of
from retrieval.search.language import crosses_languages
from retrieval.search.search_result import SearchResult
from retrieval.search.whynot.standing import SourceStanding, uncut_position
from retrieval.sources import SOURCES, candidate_key, label
from retrieval.types import RetrievalError

# The search space of the trials: the Search page's slider ranges and steps (ui/search/knobs.py), so
# that a suggested change can be applied there without a slider clamping or rounding it.
WEIGHT_GRID = tuple(round(0.05 * i, 2) for i in range(21))  # 0, 0.05, …, 1
LAMBDA_GRID = tuple(round(0.05 * i, 2) for i in range(21))  # rerank λ: the slider's 0, 0.05, …, 1
DEPTH_TRIAL_MAX = 500
TOP_K_TRIAL_MAX = 100
MIN_DISPLAY_STEP = 0.01
MIN_SCORE_STEP = 1e-5  # the raw-scale minimum's input shows five decimals

FUSION_ONLY, REQUERY, RAISE_TOP_K = 0, 1, 2


@dataclass(frozen=True)
class Change:
    """One single-knob change of the config that brings the document into the top-K."""

    knob: str  # "weights.bm25", "rrf_k", "min_raw.dense", "min_score", "min_display_score", "rerank",
    #            "depth", "filters" or "top_k"
    old: Any
    new: Any
    size: float  # relative change (module doc)
    kind: int  # FUSION_ONLY, REQUERY or RAISE_TOP_K
    rank: int  # the document's rank in the final top-K after the change
    config: SearchConfig

    def describe(self) -> str:
        return f"{knob_label(self.knob)}: {_value(self.old)} → {_value(self.new)} (document at rank {self.rank})"


def relative_change(old: float | None, new: float | None) -> float:
    """|new − old| / |old|; from 0 or off (None) to a value v: |v|; to off: 1."""
    if new is None:
        return 1.0
    if old is None or old == 0:
        return abs(new)
    return abs(new - old) / abs(old)


def floor_to(value: float, step: float) -> float:
    """The largest multiple of `step` ≤ value (rounded off float noise)."""
    floored = round(math.floor(value / step + 1e-9) * step, 10)
    return floored if floored <= value else round(floored - step, 10)


@dataclass(frozen=True)
class Trial:
    knob: str
    old: Any
    new: Any
    size: float
    kind: int
    config: SearchConfig


def _with(config: SearchConfig, **changes: Any) -> SearchConfig | None:
    """A copy of `config` with `changes`, or None when that is not a valid config."""
    try:
        return replace(config, **changes)
    except RetrievalError:
        return None


def trial_changes(config: SearchConfig, standings: Sequence[SourceStanding], base: SearchResult,
                  doc_id: str, filtered_out: bool) -> list[Trial]:
    """Every single-knob change to try (module doc), each with its size and class."""
    trials: list[Trial] = []

    def add(knob: str, old: Any, new: Any, size: float, kind: int, changed: SearchConfig | None) -> None:
        if changed is not None and new != old:
            trials.append(Trial(knob, old, new, size, kind, changed))

    for source, weight in config.weights.items():
        for value in WEIGHT_GRID:
            weights = {**config.weights, source: value}
            if any(w > 0 for w in weights.values()):
                add(f"weights.{source}", weight, value, relative_change(weight, value), FUSION_ONLY,
                    _with(config, weights=weights))
    for param in method_of(config).params:  # the fusion method's own parameters, on their trial grids
        old = getattr(config, param.field)
        for value in param.trial_grid:
            add(param.field, old, value, relative_change(old, value), FUSION_ONLY,
                _with(config, **{param.field: value}))
    for s in standings:
        if s.minimum is not None and s.score is not None and s.score < s.minimum:
            spec = SOURCES.get(s.source)
            step = spec.min_raw.step if spec is not None and spec.min_raw is not None else None
            lowered = floor_to(s.score, step) if step else s.score
            rest = {k: v for k, v in config.min_raw.items() if k != s.source}
            if lowered > (spec.min_raw.low if spec is not None and spec.min_raw is not None else -math.inf):
                add(f"min_raw.{s.source}", s.minimum, lowered, relative_change(s.minimum, lowered), FUSION_ONLY,
                    _with(config, min_raw={**rest, s.source: lowered}))
            add(f"min_raw.{s.source}", s.minimum, None, 1.0, FUSION_ONLY, _with(config, min_raw=rest))
    fused = next((r for r in base.outcome.ranked if r.doc_id == doc_id), None)
    for name, step, value in (("min_score", MIN_SCORE_STEP, fused.score if fused else None),
                              ("min_display_score", MIN_DISPLAY_STEP, fused.display_score if fused else None)):
        old = getattr(config, name)
        if old is None:
            continue
        if value is not None and value < old:
            lowered = floor_to(value, step)
            if lowered > 0:
                add(name, old, lowered, relative_change(old, lowered), FUSION_ONLY, _with(config, **{name: lowered}))
        add(name, old, None, 1.0, FUSION_ONLY, _with(config, **{name: None}))
    if config.rerank:
        add("rerank", True, False, 1.0, FUSION_ONLY, _with(config, rerank=False))
        for lam in LAMBDA_GRID:
            add("rerank_lambda", config.rerank_lambda, lam, abs(lam - config.rerank_lambda), FUSION_ONLY,
                _with(config, rerank_lambda=lam))
    if config.language_aware and crosses_languages(base.query, base.candidates.language):
        add("language_aware", True, False, 1.0, FUSION_ONLY, _with(config, language_aware=False))
    for s in standings:
        if s.position is not None and config.depth < s.position <= DEPTH_TRIAL_MAX:
            add("depth", config.depth, s.position, relative_change(config.depth, s.position), REQUERY,
                _with(config, depth=s.position))
    if filtered_out:
        add("filters", list(config.filters), [], 1.0, REQUERY, _with(config, filters=[]))
    position = uncut_position(base, doc_id)
    if position is not None and config.top_k < position <= TOP_K_TRIAL_MAX:
        add("top_k", config.top_k, position, relative_change(config.top_k, position), RAISE_TOP_K,
            _with(config, top_k=position))
    return trials


def best_changes(found: Sequence[Change]) -> list[Change]:
    """The changes that worked, smallest first: (class, size), then the knob's name and the new
    value's text, so the order is deterministic; per knob only its smallest change is kept."""
    ordered = sorted(found, key=lambda c: (c.kind, c.size, c.knob, str(c.new)))
    kept, seen = [], set()
    for change in ordered:
        if change.knob not in seen:
            seen.add(change.knob)
            kept.append(change)
    return kept


def knob_label(knob: str) -> str:
    name, _, source = knob.partition(".")
    if name == "weights":
        return f"{label(source)} weight"
    if name == "min_raw":
        return f"minimum {label(source)} raw score"
    params = {p.field: p.label for method in FUSION_METHODS.values() for p in method.params}
    if knob in params:
        return params[knob]
    return {"min_score": "minimum fused score", "min_display_score": "minimum display score",
            "rerank": "rerank", "depth": "candidate depth", "filters": "filters", "top_k": "top-K"}.get(knob, knob)


def _value(value: Any) -> str:
    if value is None:
        return "off"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return " AND ".join(value) if value else "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)



def run_trial(workbench, base: SearchResult, config: SearchConfig) -> SearchResult:
    """The search under `config`: its ranking plan on `base`'s candidates when they are the same
    (a fusion-only change: `Workbench.rank`, what a search runs after retrieval), else a search."""
    if candidate_key(config) != candidate_key(base.config):
        return workbench.search(base.candidates.collection, base.query, config)
    return workbench.rank(base.candidates, config)
