"""'Why not this document?': where one document stands for a query, the first stage of the
search that dropped it, and the smallest single change of the config that brings it into the
top-K, found by trying changes, not guessed.

Per source, over the whole collection (the documents the config's filters allow; every document
when the filters remove this one, to say what it would have been):

    score    the source's raw score (BM25 over the stored tokens, cosine to the query, keyword
             points, graph score): from the source run at depth = collection size (`run_source`),
             or, for a source with a `ranking(query, allowed)` hook (the keyword scorer, whose
             result limit and minimum relevance would hide a weaker match), from that hook
    rank     1 + the number of documents the source scores strictly higher
    ties     the number of *other* documents with exactly the same score (they share the rank)
    position its place in the source's own returned order (ties broken as the source breaks
             them, by id): what the candidate depth cuts
A document a source does not score at all (BM25: no shared term; keyword: no field matches;
graph: not activated) has no rank there, and says so.

The stages of a search, in pipeline order (`first_dropping_stage`): filter → depth (no source
returned it within the depth) → per-source minimum raw score (every source that returned it has
it below its minimum) → fused minimum (min_score, then min_display_score) → top-K → rerank (it
was in the top-K before rerank and is not after). A document in the final top-K is "shown".

The smallest change (`trial_changes`, then `best_change`): one knob at a time, each trial a real
run of the config's ranking plan (`Workbench.rank` on the cached candidates, the rerank included
when the config has it; a depth or filter trial searches once, then it is cached). Tried: each source's
weight over `WEIGHT_GRID`, the fusion method's own parameters over their trial grids (RRF k:
`fusion_methods.RRF_K_GRID`), each threshold lowered to the
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
from dataclasses import dataclass, field, replace
from typing import Any

from retrieval.search.config import SearchConfig
from retrieval.search.fusion.methods import FUSION_METHODS, method_of
from retrieval.search.language import crosses_languages
from retrieval.search.retriever import SearchResult
from retrieval.sources import SOURCES, candidate_key, label
from retrieval.types import Hit, RetrievalError, SourceResult

# Stages, in pipeline order; SHOWN: it is in the final top-K.
FILTER, DEPTH, MIN_RAW, MIN_FUSED, MIN_DISPLAY, TOP_K, RERANK, SHOWN = (
    "filter", "depth", "min raw", "min fused score", "min display score", "top-k", "rerank", "shown")
STAGES = (FILTER, DEPTH, MIN_RAW, MIN_FUSED, MIN_DISPLAY, TOP_K, RERANK)

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
class SourceStanding:
    """One source's view of the document for the query (see the module doc for rank and ties)."""

    source: str
    scored: bool
    score: float | None = None
    rank: int | None = None
    ties: int = 0
    position: int | None = None  # in the source's returned order; None: not returned at any depth
    scored_count: int = 0  # documents this source scores for the query
    in_candidates: bool = False  # returned within the config's depth
    minimum: float | None = None  # the config's minimum raw score for this source
    note: str = ""
    detail: dict[str, Any] | None = None

    @property
    def passes_minimum(self) -> bool | None:
        """None when the source has no minimum or does not score the document."""
        if self.minimum is None or self.score is None:
            return None
        return self.score >= self.minimum


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


@dataclass
class Explanation:
    collection: str
    query: str
    doc_id: str
    title: str
    config: SearchConfig
    stage: str  # one of STAGES, or SHOWN
    reason: str  # the stage in a sentence
    final_rank: int | None  # in the final top-K (SHOWN), else None
    fused_rank: int | None  # rank in the fused ranking before the fused-score thresholds, if fused
    fused_score: float | None
    display_score: float | None
    standings: list[SourceStanding]
    changes: list[Change] = field(default_factory=list)  # every change that worked, smallest first
    tried: int = 0  # how many single-knob changes were tried
    over_whole_collection: bool = False  # the filters removed it: standings ignore the filters

    @property
    def best(self) -> Change | None:
        return self.changes[0] if self.changes else None

    def to_json_dict(self) -> dict[str, Any]:
        """What `search --explain-doc ID --json` prints: plain JSON values, changes smallest first."""
        def change(c: Change) -> dict[str, Any]:
            return {"knob": c.knob, "old": c.old, "new": c.new, "size": c.size, "requery": c.kind == REQUERY,
                    "raises_top_k": c.kind == RAISE_TOP_K, "rank": c.rank, "description": c.describe()}

        return {
            "collection": self.collection, "query": self.query, "doc_id": self.doc_id, "title": self.title,
            "stage": self.stage, "reason": self.reason, "final_rank": self.final_rank,
            "fused_rank": self.fused_rank, "fused_score": self.fused_score, "display_score": self.display_score,
            "standings_ignore_filters": self.over_whole_collection,
            "sources": [{"source": s.source, "scored": s.scored, "score": s.score, "rank": s.rank, "ties": s.ties,
                         "position": s.position, "scored_count": s.scored_count, "in_candidates": s.in_candidates,
                         "minimum": s.minimum, "passes_minimum": s.passes_minimum, "note": s.note}
                        for s in self.standings],
            "smallest_change": change(self.best) if self.best else None,
            "changes": [change(c) for c in self.changes], "tried": self.tried,
            "config": self.config.to_dict(),
        }


# ---- pure parts ------------------------------------------------------------------------------
def collection_rank(scores: Sequence[float], score: float) -> tuple[int, int]:
    """(rank, ties) of `score` among `scores` (which include it once): rank = 1 + #{s > score},
    ties = #{s == score} − 1 (other documents sharing the rank)."""
    higher = sum(1 for s in scores if s > score)
    equal = sum(1 for s in scores if s == score)
    return 1 + higher, max(0, equal - 1)


def standing(source: str, doc_id: str, scored: Sequence[Hit], returned: SourceResult,
             candidates: SourceResult | None, minimum: float | None, unscored: str) -> SourceStanding:
    """The document's standing in one source from its whole-collection scores (`scored`), the
    source's full returned list (`returned`, position) and the config's candidates."""
    in_candidates = candidates is not None and any(h.doc_id == doc_id for h in candidates.hits)
    if returned.error:
        return SourceStanding(source, False, note=f"{label(source)} failed: {returned.error}", minimum=minimum)
    hit = next((h for h in scored if h.doc_id == doc_id), None)
    position = next((h.rank for h in returned.hits if h.doc_id == doc_id), None)
    if hit is None:
        return SourceStanding(source, False, scored_count=len(scored), minimum=minimum,
                              note=f"{label(source)} does not score it: {unscored}")
    rank, ties = collection_rank([h.raw_score for h in scored], hit.raw_score)
    note = ""
    if position is None:
        note = f"{label(source)} scores it but does not return it at any depth (its own limit or minimum)"
    elif not in_candidates:
        note = f"position {position} in {label(source)}'s order is beyond the candidate depth"
    return SourceStanding(source, True, hit.raw_score, rank, ties, position, len(scored), in_candidates, minimum,
                          note, hit.detail)


def final_ids(result: SearchResult) -> list[str]:
    return [fused.doc_id for fused, _ in result.final_ranking()]


def uncut_position(result: SearchResult, doc_id: str) -> int | None:
    """The document's position in the final ordering before the top-K cut (the reranked top-N,
    then the other results that passed the thresholds), None when it did not pass them."""
    eligible = [r.doc_id for r in result.eligible()]
    if result.reranked is not None:
        head = [r.doc_id for r in result.reranked]
        eligible = head + [d for d in eligible if d not in set(head)]
    return eligible.index(doc_id) + 1 if doc_id in eligible else None


def first_dropping_stage(result: SearchResult, doc_id: str, allowed: frozenset[str] | None) -> tuple[str, str]:
    """(stage, sentence): the first stage of `result`'s search that dropped the document, in the
    module doc's order, or SHOWN with its rank."""
    config = result.config
    shown = final_ids(result)
    if doc_id in shown:
        return SHOWN, f"It is shown: rank {shown.index(doc_id) + 1} of the top {config.top_k}."
    if allowed is not None and doc_id not in allowed:
        return FILTER, f"The filter {' AND '.join(config.filters)} removes it before any source ranks."
    sources = result.candidates.sources
    returned_by = [s for s in config.sources if s in sources and any(h.doc_id == doc_id for h in sources[s].hits)]
    if not returned_by:
        return DEPTH, f"No source returns it within the candidate depth {config.depth}."
    ranked = {r.doc_id: r for r in result.outcome.ranked}
    if doc_id not in ranked:
        return MIN_RAW, ("Every source that returns it has it below its minimum raw score ("
                         + ", ".join(f"{label(s)} < {config.min_raw[s]:g}" for s in returned_by) + ").")
    fused = ranked[doc_id]
    eligible = {r.doc_id for r in result.eligible()}
    if doc_id not in eligible:
        if config.min_score is not None and fused.score < config.min_score:
            return MIN_FUSED, (f"Its fused score {fused.score:.6g} is below the minimum fused score "
                               f"{config.min_score:g}.")
        return MIN_DISPLAY, (f"Its display score {fused.display_score:.4g} is below the minimum display score "
                             f"{config.min_display_score:g}.")
    if config.rerank and doc_id in {r.doc_id for r in result.outcome.results}:
        reranked = next((r for r in result.reranked or () if r.doc_id == doc_id), None)
        where = f"rank {reranked.rank} after rerank" if reranked else "below the reranked results"
        return RERANK, (f"It is at fused rank {fused.rank}, inside the top {config.top_k} before rerank; the "
                        f"reranker moves it to {where}, out of the top {config.top_k}.")
    position = uncut_position(result, doc_id)
    return TOP_K, f"It passes every threshold but is at rank {position}, below the top {config.top_k}."


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


# ---- the walk, over a Workbench ----------------------------------------------------------------
def explain(workbench, collection: str, query: str, config: SearchConfig, doc_id: str) -> Explanation:
    """`Workbench.explain_document`: the standings, the dropping stage and the changes that work."""
    config.validate()
    doc_id = (doc_id or "").strip()
    if not doc_id:
        raise RetrievalError("Give a document id to explain")
    workbench.reads.require_documents(collection)
    row = workbench.documents(collection, [doc_id]).get(doc_id)
    if row is None:
        raise RetrievalError(f"Unknown document id {doc_id!r} in collection {collection!r}")
    allowed = workbench.reads.filtered_ids(collection, config.filters)[0] if config.filters else None
    filtered_out = allowed is not None and doc_id not in allowed
    base = workbench.search(collection, query, config)
    ranking_config = replace(config, filters=[]) if filtered_out else config
    rankings = workbench.retriever.source_rankings(collection, query, ranking_config)
    standings = [standing(name, doc_id, scored, returned, base.candidates.sources.get(name),
                          config.min_raw.get(name), unscored)
                 for name, (returned, scored, unscored) in rankings.items()]
    stage, reason = first_dropping_stage(base, doc_id, allowed)
    fused = next((r for r in base.outcome.ranked if r.doc_id == doc_id), None)
    explanation = Explanation(
        collection, query, doc_id, row.get("title") or "", config, stage, reason,
        final_ids(base).index(doc_id) + 1 if stage == SHOWN else None,
        fused.rank if fused else None, fused.score if fused else None, fused.display_score if fused else None,
        standings, over_whole_collection=filtered_out)
    if stage == SHOWN:
        return explanation
    trials = trial_changes(config, standings, base, doc_id, filtered_out)
    found = []
    for trial in trials:
        shown = final_ids(run_trial(workbench, base, trial.config))
        if doc_id in shown:
            found.append(Change(trial.knob, trial.old, trial.new, trial.size, trial.kind,
                                shown.index(doc_id) + 1, trial.config))
    explanation.changes, explanation.tried = best_changes(found), len(trials)
    return explanation


def run_trial(workbench, base: SearchResult, config: SearchConfig) -> SearchResult:
    """The search under `config`: its ranking plan on `base`'s candidates when they are the same
    (a fusion-only change: `Workbench.rank`, what a search runs after retrieval), else a search."""
    if candidate_key(config) != candidate_key(base.config):
        return workbench.search(base.candidates.collection, base.query, config)
    return workbench.rank(base.candidates, config)


def standing_cells(s: SourceStanding, depth: int) -> dict[str, str]:
    """One source's standing as table cells (the CLI's and the Search page's table)."""
    def passes() -> str:
        return "-" if s.passes_minimum is None else "yes" if s.passes_minimum else f"no (< {s.minimum:g})"

    if not s.scored:
        return {"source": label(s.source), "score": "-", "rank": "-", "ties": "-", "position": "-",
                f"within depth {depth}": "no", "passes minimum": "-", "note": s.note}
    return {"source": label(s.source), "score": f"{s.score:.6g}", "rank": f"{s.rank} of {s.scored_count}",
            "ties": str(s.ties), "position": "-" if s.position is None else str(s.position),
            f"within depth {depth}": "yes" if s.in_candidates else "no", "passes minimum": passes(),
            "note": s.note}


@dataclass(frozen=True)
class RecallGap:
    """A judged-relevant document an evaluated query did not rank in its first `cutoff`."""

    query_id: str
    doc_id: str
    grade: int
    retrieved_by: tuple[str, ...]  # sources that returned it within the depth (none: not retrieved)
    fused_rank: int | None  # its rank in the evaluated fused ranking, None when it is not in it

    @property
    def retrieved(self) -> bool:
        return bool(self.retrieved_by)


def recall_gaps(runs: dict[str, dict[str, dict[str, float]]], qrels: dict[str, dict[str, int]],
                fused: str = "hybrid", cutoff: int = 10) -> list[RecallGap]:
    """Per judged query, its relevant documents (grade > 0) that no source returned within the
    depth, and those retrieved but not in the fused top `cutoff` (ranked below it, or not fused at
    all: under a per-source minimum). `runs`: system → query → doc → score, higher first (an
    `EvaluationReport`'s runs: each source's candidates and the fused ranking). Queries in id
    order; per query the unretrieved first, then by fused rank (absent last), grade, id."""
    gaps = []
    sources = [s for s in runs if s != fused]
    for qid in sorted(qrels):
        ranking = runs.get(fused, {}).get(qid, {})
        order = {doc: rank for rank, doc in enumerate(sorted(ranking, key=lambda d: (-ranking[d], d)), start=1)}
        found = []
        for doc_id, grade in qrels[qid].items():
            if grade <= 0:
                continue
            by = tuple(s for s in sources if doc_id in runs[s].get(qid, {}))
            rank = order.get(doc_id)
            if not by or rank is None or rank > cutoff:
                found.append(RecallGap(qid, doc_id, grade, by, rank))
        found.sort(key=lambda g: (g.retrieved, g.fused_rank is None, g.fused_rank or 0, -g.grade, g.doc_id))
        gaps += found
    return gaps
