"""Fusion of per-source candidate lists into one explained ranking.

Pure functions of cached candidates plus a `SearchConfig`: no I/O, no models, so a slider move
costs milliseconds.

Reciprocal rank fusion (Cormack et al. 2009), with per-source weights:

    score(d) = Σ_s w_s / (k + rank_s(d))          (a source that did not return d adds 0)

Seed 001's `α/(k + r_vec) + (1 − α)/(k + r_fts)` is the two-source case with w = (α, 1 − α).
Because every term is at most w_s/(k+1), raw RRF scores are tiny at k = 60 (0.014–0.016); the
display score rescales so that rank 1 in every source reads 1.0:

    display(d) = score(d) × (k + 1) / Σ_s w_s

Weighted sum of normalised scores (seed 003's 0.4 BM25 / 0.6 vector):

    score(d) = Σ_s w_s × norm_s(d)                 (a source that did not return d adds 0)
    display(d) = score(d) / Σ_s w_s

Every result carries, per source, its raw score, normalised score (the config's normalisation over
that source's kept candidates, shown for both methods), rank and contribution; contributions add
up to the fused score. Ties are broken by the configured quality field (higher first, missing
last), then by document id.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .config import SearchConfig
from .normalize import normalize
from .types import FusedResult, FusionOutcome, Hit, SourceContribution, SourceResult


def rrf_term(rank: int, k: float, weight: float = 1.0) -> float:
    """One source's RRF contribution: w / (k + rank)."""
    return weight / (k + rank)


def rrf_display_factor(k: float, total_weight: float) -> float:
    """(k + 1) / Σw: multiplying a fused RRF score by this makes rank 1 everywhere read 1.0."""
    return (k + 1) / total_weight


def fuse(
    candidates: Mapping[str, SourceResult],
    config: SearchConfig,
    tie_values: Mapping[str, float] | None = None,
) -> FusionOutcome:
    """Fuse, rank, threshold and explain. See the module docstring for the formulas.

    Thresholds, in order: per-source minimum raw score (a hit below it is dropped from that
    source before fusion, as if the source had not returned it; other hits keep their ranks);
    minimum fused score; minimum display score; top-K. `removed` counts what each one removed.
    """
    tie_values = tie_values or {}
    weights = config.weights
    total_weight = sum(weights.values())
    notes: list[str] = []
    removed: dict[str, int] = {}

    all_ids: set[str] = set()
    kept: dict[str, list[Hit]] = {}
    dropped_raw: dict[str, dict[str, Hit]] = {}
    for source in weights:
        result = candidates.get(source)
        if result is None:
            notes.append(f"{source}: no candidates were retrieved for this source")
            kept[source] = []
            continue
        if result.error:
            notes.append(f"{source} failed and was left out: {result.error}")
        elif not result.hits:
            notes.append(f"{source} returned no candidates")
        notes.extend(f"{source}: {note}" for note in result.notes)
        all_ids.update(hit.doc_id for hit in result.hits)
        minimum = config.min_raw.get(source)
        if minimum is None:
            kept[source] = list(result.hits)
        else:
            kept[source] = [h for h in result.hits if h.raw_score >= minimum]
            dropped_raw[source] = {h.doc_id: h for h in result.hits if h.raw_score < minimum}
            removed[f"min raw {source}"] = len(dropped_raw[source])

    per_source: dict[str, dict[str, tuple[Hit, float]]] = {}
    for source, hits in kept.items():
        normalized = normalize([h.raw_score for h in hits], config.normalization)
        per_source[source] = {h.doc_id: (h, n) for h, n in zip(hits, normalized)}

    fused_ids = set().union(*(s.keys() for s in per_source.values())) if per_source else set()
    if config.fusion == "rrf":
        display_factor = rrf_display_factor(config.rrf_k, total_weight)
    else:
        display_factor = 1.0 / total_weight

    unranked = []
    for doc_id in fused_ids:
        contributions: dict[str, SourceContribution] = {}
        score = 0.0
        for source, weight in weights.items():
            entry = per_source[source].get(doc_id)
            if entry is None:
                contributions[source] = _absent(source, doc_id, config, dropped_raw.get(source, {}))
                continue
            hit, norm = entry
            if config.fusion == "rrf":
                part = rrf_term(hit.rank, config.rrf_k, weight)
            else:
                part = weight * norm
            score += part
            contributions[source] = SourceContribution(source, hit.raw_score, norm, hit.rank, part,
                                                       detail=hit.detail)
        unranked.append((doc_id, score, contributions))

    def order(item):
        doc_id, score, _ = item
        tie = tie_values.get(doc_id)
        has_tie = tie is not None and math.isfinite(tie)
        return (-score, 0 if has_tie else 1, -(tie if has_tie else 0.0), doc_id)

    unranked.sort(key=order)
    ranked = [
        FusedResult(doc_id, rank, score, score * display_factor, contributions, tie_values.get(doc_id))
        for rank, (doc_id, score, contributions) in enumerate(unranked, start=1)
    ]

    results = ranked
    if config.min_score is not None:
        results, removed["min fused score"] = _cut(results, lambda r: r.score >= config.min_score)
    if config.min_display_score is not None:
        results, removed["min display score"] = _cut(
            results, lambda r: r.display_score >= config.min_display_score
        )
    removed["top-k"] = max(0, len(results) - config.top_k)
    results = results[: config.top_k]
    return FusionOutcome(ranked, results, len(all_ids), removed, config.fusion, notes)


def _absent(source: str, doc_id: str, config: SearchConfig, dropped: Mapping[str, Hit]) -> SourceContribution:
    """Explain a zero contribution: either under the source's minimum, or not retrieved at all."""
    hit = dropped.get(doc_id)
    if hit is not None:
        note = f"raw score {hit.raw_score:.4g} is below the {source} minimum {config.min_raw[source]:g}: contributes 0"
        return SourceContribution(source, hit.raw_score, None, hit.rank, 0.0, note, hit.detail)
    note = f"not in {source}'s top {config.depth} candidates: contributes 0"
    return SourceContribution(source, None, None, None, 0.0, note)


def _cut(results: list[FusedResult], keep) -> tuple[list[FusedResult], int]:
    """Keep the prefix of a score-sorted list that passes `keep`; return it and how many went."""
    n = 0
    while n < len(results) and keep(results[n]):
        n += 1
    return results[:n], len(results) - n
