"""Where one document stands for a query: per source, and the first stage of the search that
dropped it.

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

The stages of a search, in pipeline order (`first_dropping_stage`): filter → a query rule's FILTER
→ depth (no source returned it within the depth) → per-source minimum raw score (every source
that returned it has it below its minimum) → fused minimum (min_score, then min_display_score) →
a query rule's HIDE → top-K → rerank (it was in the top-K before rerank and is not after). A
document in the final top-K is "shown".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.search.search_result import SearchResult
from retrieval.sources import label
from retrieval.types import Hit, SourceResult

# Stages, in pipeline order; SHOWN: it is in the final top-K.
FILTER, DEPTH, MIN_RAW, MIN_FUSED, MIN_DISPLAY, TOP_K, RERANK, SHOWN = (
    "filter", "depth", "min raw", "min fused score", "min display score", "top-k", "rerank", "shown")
RULE_FILTER, RULE_HIDE = "rule filter", "rule hide"  # query rules (`search.rules`)
STAGES = (FILTER, RULE_FILTER, DEPTH, MIN_RAW, MIN_FUSED, MIN_DISPLAY, RULE_HIDE, TOP_K, RERANK)


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


def first_dropping_stage(result: SearchResult, doc_id: str, allowed: frozenset[str] | None,
                         rule_allowed: frozenset[str] | None = None) -> tuple[str, str]:
    """(stage, sentence): the first stage of `result`'s search that dropped the document, in the
    module doc's order, or SHOWN with its rank. `rule_allowed`: the ids the config's filters and
    the query rules' FILTERs allow together (None: no rule filters this query)."""
    config = result.config
    shown = final_ids(result)
    if doc_id in shown:
        return SHOWN, f"It is shown: rank {shown.index(doc_id) + 1} of the top {config.top_k}."
    if allowed is not None and doc_id not in allowed:
        return FILTER, f"The filter {' AND '.join(config.filters)} removes it before any source ranks."
    rules = result.candidates.rules
    if rule_allowed is not None and doc_id not in rule_allowed and rules is not None:
        which = ", ".join(f"FILTER {f} of rule {n}" for n, f in rules.filters)
        return RULE_FILTER, f"The query rules' {which} remove it for this query before any source ranks."
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
    hidden = next((n for n, d in result.rules.hides if d == doc_id), None) if result.rules is not None else None
    if hidden is not None:
        return RULE_HIDE, f"HIDE of rule {hidden} removes it from this query's results (rules act last)."
    if config.rerank and doc_id in {r.doc_id for r in result.outcome.results}:
        reranked = next((r for r in result.reranked or () if r.doc_id == doc_id), None)
        where = f"rank {reranked.rank} after rerank" if reranked else "below the reranked results"
        return RERANK, (f"It is at fused rank {fused.rank}, inside the top {config.top_k} before rerank; the "
                        f"reranker moves it to {where}, out of the top {config.top_k}.")
    position = uncut_position(result, doc_id)
    return TOP_K, f"It passes every threshold but is at rank {position}, below the top {config.top_k}."
