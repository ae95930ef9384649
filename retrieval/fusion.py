"""Fusion of per-source candidate lists into one explained ranking.

Pure functions of cached candidates plus a `SearchConfig`: no I/O, no models, so a slider move
costs milliseconds.

Reciprocal rank fusion (Cormack et al. 2009), with per-source weights:

    score(d) = Σ_s w_s / (k + rank_s(d))          (a source that did not return d adds 0)

Seed 001's `α/(k + r_vec) + (1 − α)/(k + r_fts)` is the two-source case with w = (α, 1 − α).
Because every term is at most w_s/(k+1), raw RRF scores are tiny at k = 60 (0.014–0.016); the
display score rescales so that rank 1 in every source reads 1.0:

    display(d) = score(d) × (k + 1) / Σ_s w_s

Weighted fusion of normalised scores x_s = norm_s(d) (the config's normalisation over that
source's kept candidates), combined as `config.combination` says — OpenSearch's three
techniques:

    arithmetic   score(d) = Σ_s w_s · x_s            (a source that did not return d adds 0)
                 display(d) = score(d) / Σ_s w_s     (Σ over every configured source)
    harmonic     score(d) = Σ_{s∈S(d)} w_s / Σ_{s∈S(d)} (w_s / x_s)
    geometric    score(d) = exp( Σ_{s∈S(d)} w_s · ln x_s / Σ_{s∈S(d)} w_s )
                 display(d) = score(d)               (already a weighted mean of the x_s)

where S(d) holds the sources that returned d with x_s > 0: as in OpenSearch, a source whose
normalised score is ≤ 0 (min-max gives the lowest candidate exactly 0; z-score gives negatives)
or that did not return d is left out of d's harmonic or geometric mean, its weight too. When
S(d) is empty, or every weight in it is 0, the score is 0. (Seed 003's 0.4 BM25 / 0.6 vector
sum is arithmetic.) OpenSearch's min-max floors a 0 at 0.001 instead; here the 0 stays and the
lowest candidate simply drops out of its source's mean.

Every result carries, per source, its raw score, normalised score (shown for both methods), rank
and contribution; contributions add up to the fused score:

    rrf          contribution_s = w_s / (k + rank_s)
    arithmetic   contribution_s = w_s · x_s
    harmonic,    contribution_s = score(d) · w_s·x_s / Σ_{t∈S(d)} w_t·x_t   for s ∈ S(d), else 0
    geometric

i.e. for the two means the fused score is split between the sources that entered it in
proportion to their weighted normalised scores (the arithmetic rule is the same split, exact:
there score = Σ w·x). A source left out of the mean is explained with contribution 0 and a note.

Bounds (`SearchConfig.validate`, numbers in `retrieval/limits.py`): each weight is 0 or in
[1e-6, 1000] and one is > 0; 1 ≤ k ≤ 1e6. Normalised scores are finite for finite raw scores
(`normalize.py`; 'none' clamps raw scores to ±1e100). So every term is finite — w/(k + rank) ≤
1000, |w·x| ≤ 1e103, display factors ≤ (1e6 + 1)/1e-6 — and, for any finite candidate scores,
fused and display scores are never NaN or infinite, and the contributions add up to the fused
score (exactly for RRF and arithmetic, to rounding for the means). tests/test_properties.py
checks this over random candidate lists, weights, k, normalisations and combinations.

Ties are broken by the configured quality field (higher first, missing last), then by document
id. `fuse` explains everything; `fused_order` computes the same ranking with the same formula
functions but builds no explanation objects (for sweeps: ~10× cheaper).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .config import SearchConfig
from .normalize import normalize
from .types import FusedResult, FusionOutcome, Hit, SourceContribution, SourceResult

# (weight, normalised score) of each source that returned a document, in config order.
WeightedNorms = Sequence[tuple[float, float]]


def rrf_term(rank: int, k: float, weight: float = 1.0) -> float:
    """One source's RRF contribution: w / (k + rank)."""
    return weight / (k + rank)


def rrf_display_factor(k: float, total_weight: float) -> float:
    """(k + 1) / Σw: multiplying a fused RRF score by this makes rank 1 everywhere read 1.0."""
    return (k + 1) / total_weight


def arithmetic_score(pairs: WeightedNorms) -> float:
    """Σ w·x, added in the given order (a missing source simply has no pair)."""
    score = 0.0
    for weight, norm in pairs:
        score += weight * norm
    return score


def harmonic_score(pairs: WeightedNorms) -> float:
    """Σw / Σ(w/x) over the pairs with x > 0; 0 when no pair with x > 0 has a weight > 0."""
    weight_sum = 0.0
    inverse_sum = 0.0
    for weight, norm in pairs:
        if norm > 0:
            weight_sum += weight
            inverse_sum += weight / norm
    return weight_sum / inverse_sum if inverse_sum > 0 else 0.0


def geometric_score(pairs: WeightedNorms) -> float:
    """exp(Σ w·ln x / Σw) over the pairs with x > 0; 0 when their weights sum to 0."""
    weight_sum = 0.0
    log_sum = 0.0
    for weight, norm in pairs:
        if norm > 0:
            weight_sum += weight
            log_sum += weight * math.log(norm)
    return math.exp(log_sum / weight_sum) if weight_sum > 0 else 0.0


COMBINERS: dict[str, Callable[[WeightedNorms], float]] = {
    "arithmetic": arithmetic_score,
    "harmonic": harmonic_score,
    "geometric": geometric_score,
}


def weighted_score(pairs: WeightedNorms, combination: str) -> float:
    """The weighted-fusion score of one document under the named combination."""
    return COMBINERS[combination](pairs)


def weighted_display_factor(combination: str, total_weight: float) -> float:
    """Arithmetic: 1/Σw (the sum becomes a weighted mean, missing sources as 0). The harmonic and
    geometric scores already are weighted means, so they display as they are."""
    return 1.0 / total_weight if combination == "arithmetic" else 1.0


def enters_mean(norm: float, combination: str) -> bool:
    """Whether a returned source's normalised score takes part in the document's score:
    always for arithmetic, only x > 0 for the harmonic and geometric means."""
    return combination == "arithmetic" or norm > 0


def contribution_shares(pairs: WeightedNorms, score: float, combination: str) -> list[float]:
    """Each pair's part of `score`, summing to it (see the module docstring).

    Arithmetic: w·x. Harmonic / geometric: score · w·x / Σ w·x over the pairs with x > 0
    (0 for the others, and for all when that sum is 0, where the score is 0 too).
    """
    if combination == "arithmetic":
        return [weight * norm for weight, norm in pairs]
    total = 0.0
    for weight, norm in pairs:
        if norm > 0:
            total += weight * norm
    if total <= 0:
        return [0.0] * len(pairs)
    # The share (≤ 1) first: score · w · x could underflow to 0 for tiny scores.
    return [score * (weight * norm / total) if norm > 0 else 0.0 for weight, norm in pairs]


def kept_hits(candidates: Mapping[str, SourceResult], config: SearchConfig) -> dict[str, list[Hit]]:
    """Each configured source's hits that pass its minimum raw score (others keep their ranks)."""
    kept: dict[str, list[Hit]] = {}
    for source in config.weights:
        result = candidates.get(source)
        if result is None:
            kept[source] = []
            continue
        minimum = config.min_raw.get(source)
        kept[source] = list(result.hits) if minimum is None else [h for h in result.hits if h.raw_score >= minimum]
    return kept


def order_key(tie_values: Mapping[str, float]) -> Callable[[tuple[str, float]], tuple]:
    """Sort key of a (doc id, fused score) pair: score descending, then the quality field
    (higher first, missing or non-finite last), then doc id."""

    def key(item: tuple[str, float]) -> tuple:
        doc_id, score = item
        tie = tie_values.get(doc_id)
        has_tie = tie is not None and math.isfinite(tie)
        return (-score, 0 if has_tie else 1, -(tie if has_tie else 0.0), doc_id)

    return key


@dataclass(frozen=True)
class PreparedSource:
    """One source's kept candidates for one query, ready to fuse: ids, ranks and (weighted fusion)
    normalised scores, in the source's order. Depends only on the hits, the source's minimum raw
    score and the normalisation, so a sweep prepares each once and fuses it under many configs."""

    ids: tuple[str, ...]
    ranks: tuple[int, ...]
    norms: tuple[float, ...] | None  # None when prepared for RRF (no normalisation needed)


def prepare_source(hits: Sequence[Hit], minimum: float | None, normalization: str | None) -> PreparedSource:
    """Drop hits under `minimum` (the others keep their ranks), then normalise the rest's raw
    scores with `normalization` (None: skip, for RRF)."""
    kept = hits if minimum is None else [h for h in hits if h.raw_score >= minimum]
    norms = None
    if normalization is not None:
        norms = tuple(normalize([h.raw_score for h in kept], normalization))
    return PreparedSource(tuple(h.doc_id for h in kept), tuple(h.rank for h in kept), norms)


def prepare(candidates: Mapping[str, SourceResult], config: SearchConfig) -> dict[str, PreparedSource]:
    """`prepare_source` for every configured source (a missing source has no candidates)."""
    normalization = None if config.fusion == "rrf" else config.normalization
    return {
        source: prepare_source(candidates[source].hits if source in candidates else (),
                               config.min_raw.get(source), normalization)
        for source in config.weights
    }


def scores_from_prepared(prepared: Mapping[str, PreparedSource], config: SearchConfig) -> dict[str, float]:
    """Every kept candidate's fused score, exactly as `fuse` computes it (same functions, same
    order of floating-point operations), without any explanation."""
    scores: dict[str, float] = {}
    weights = config.weights
    if config.fusion == "rrf" or config.combination == "arithmetic":
        # Sums of per-source terms, added in config order from 0.0: the very additions of `fuse`
        # (and of `arithmetic_score`), so the floats are equal. 0.0 + t == t, so a document's
        # first term is stored as it is.
        k = config.rrf_k
        for source, weight in weights.items():
            entry = prepared[source]
            if config.fusion == "rrf":
                terms = [rrf_term(rank, k, weight) for rank in entry.ranks]
            else:
                terms = [weight * norm for norm in entry.norms]
            if not scores:
                scores = dict(zip(entry.ids, terms, strict=True))
                continue
            get = scores.get
            for doc_id, term in zip(entry.ids, terms, strict=True):
                previous = get(doc_id)
                scores[doc_id] = term if previous is None else previous + term
        return scores
    pairs: dict[str, list[tuple[float, float]]] = {}
    for source, weight in weights.items():
        entry = prepared[source]
        for doc_id, norm in zip(entry.ids, entry.norms, strict=True):
            pairs.setdefault(doc_id, []).append((weight, norm))
    combine = COMBINERS[config.combination]
    return {doc_id: combine(doc_pairs) for doc_id, doc_pairs in pairs.items()}


def fused_scores(candidates: Mapping[str, SourceResult], config: SearchConfig) -> dict[str, float]:
    """Every kept candidate's fused score, as `fuse` computes it, without any explanation."""
    return scores_from_prepared(prepare(candidates, config), config)


def rank_ids(scores: Mapping[str, float], tie_values: Mapping[str, float] | None = None,
             limit: int | None = None) -> list[str]:
    """Doc ids by `order_key`: score descending, then the quality field, then id."""
    if tie_values:
        ranked = sorted(scores.items(), key=order_key(tie_values))
        ids = [doc_id for doc_id, _ in ranked]
    else:
        # Without tie values order_key is (−score, 1, −0.0, id): the same order as (−score, id),
        # compared in C rather than through a Python key function.
        ids = [doc_id for _, doc_id in sorted([(-score, doc_id) for doc_id, score in scores.items()])]
    return ids if limit is None else ids[:limit]


def fused_order(
    candidates: Mapping[str, SourceResult],
    config: SearchConfig,
    tie_values: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[str]:
    """Doc ids in `fuse(candidates, config, tie_values).ranked` order (every kept candidate, no
    fused-score threshold, no top-K), at most `limit` of them. Same formulas, same tie-breaks,
    no explanation objects: what a sweep over many configs runs."""
    return rank_ids(fused_scores(candidates, config), tie_values, limit)


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
    dropped_raw: dict[str, dict[str, Hit]] = {}
    for source in weights:
        result = candidates.get(source)
        if result is None:
            notes.append(f"{source}: no candidates were retrieved for this source")
            continue
        if result.error:
            notes.append(f"{source} failed and was left out: {result.error}")
        elif not result.hits:
            notes.append(f"{source} returned no candidates")
        notes.extend(f"{source}: {note}" for note in result.notes)
        all_ids.update(hit.doc_id for hit in result.hits)
        minimum = config.min_raw.get(source)
        if minimum is not None:
            dropped_raw[source] = {h.doc_id: h for h in result.hits if h.raw_score < minimum}
            removed[f"min raw {source}"] = len(dropped_raw[source])

    # The scores come from the one fusion path the sweep runs too (`prepare` → `scores_from_prepared`
    # → `rank_ids`); what follows only explains them. Normalised scores are prepared for RRF as
    # well, because every result shows them.
    kept = kept_hits(candidates, config)
    prepared = {source: prepare_source(hits, None, config.normalization) for source, hits in kept.items()}
    scores = scores_from_prepared(prepared, config)
    per_source: dict[str, dict[str, tuple[Hit, float]]] = {
        source: {h.doc_id: (h, n) for h, n in zip(kept[source], prepared[source].norms, strict=True)}
        for source in weights
    }
    rrf = config.fusion == "rrf"
    combination = config.combination
    if rrf:
        display_factor = rrf_display_factor(config.rrf_k, total_weight)
    else:
        display_factor = weighted_display_factor(combination, total_weight)

    ranked = []
    for rank, doc_id in enumerate(rank_ids(scores, tie_values), start=1):
        score = scores[doc_id]
        present = [(source, weight, per_source[source].get(doc_id)) for source, weight in weights.items()]
        if rrf:
            parts = [rrf_term(entry[0].rank, config.rrf_k, weight) for _, weight, entry in present if entry]
        else:
            parts = contribution_shares([(weight, entry[1]) for _, weight, entry in present if entry], score,
                                        combination)
        returned = iter(parts)
        contributions: dict[str, SourceContribution] = {}
        for source, _weight, entry in present:
            if entry is None:
                contributions[source] = _absent(source, doc_id, config, dropped_raw.get(source, {}))
                continue
            hit, norm = entry
            note = "" if rrf or enters_mean(norm, combination) else (
                f"normalised score {norm:.4g} ≤ 0: left out of the {combination} mean, contributes 0")
            contributions[source] = SourceContribution(source, hit.raw_score, norm, hit.rank, next(returned),
                                                       note, detail=hit.detail)
        ranked.append(FusedResult(doc_id, rank, score, score * display_factor, contributions,
                                  tie_values.get(doc_id)))

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
