"""The fusion engine: per-source candidates → prepared sources → fused scores → ranked ids, and
the explanation of every result. Pure functions, no I/O, no models: a slider move costs
milliseconds. The formulas of each method live in `fusion/methods.py` (one registry); the order in
which a search applies them — language rule, depth, minimums, fusion, thresholds, top-K, rerank —
is the ranking plan's (`plan.py`), which every search, evaluation, sweep and "why not?" runs.

Every result carries, per source, its raw score, normalised score (shown for RRF too), rank and
contribution; contributions add up to the fused score (exactly for the additive methods, to
rounding for the harmonic and geometric means).

Bounds (`SearchConfig.validate`, numbers in `retrieval/limits.py`): each weight is 0 or in
[1e-6, 1000] and one is > 0; 1 ≤ k ≤ 1e6. Normalised scores are finite for finite raw scores
(`normalize.py`; 'none' clamps raw scores to ±1e100). So every term is finite — w/(k + rank) ≤
1000, |w·x| ≤ 1e103, display factors ≤ (1e6 + 1)/1e-6 — and, for any finite candidate scores,
fused and display scores are never NaN or infinite. tests/test_properties.py checks this over
random candidate lists, weights, k, normalisations, combinations and methods.

Ties are broken by the configured quality field (higher first, missing last), then by document id.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from retrieval.search.config import SearchConfig
from retrieval.search.fusion.methods import FusionMethod, method_of, rrf_display_factor, rrf_term
from retrieval.types import FusedResult, FusionOutcome, Hit, SourceContribution, SourceResult

__all__ = ["ExplainedRanking", "PreparedSource", "explain", "order_key", "passes_thresholds", "prepare_source",
           "rank_ids",
           "rrf_display_factor", "rrf_term", "scores_from_prepared", "top_norms"]

Normalizer = Callable[[Sequence[float]], list[float]]


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
    """One source's kept candidates for one query, ready to fuse: the kept hits' ids, ranks and
    normalised scores, in the source's order, and the hits it dropped under its minimum raw
    score. Depends only on the hits, the minimum and the normalisation, so a sweep prepares
    each once and fuses it under many configs."""

    ids: tuple[str, ...]
    ranks: tuple[int, ...]
    norms: tuple[float, ...] | None  # None when prepared for ranks only (RRF, not explained)
    hits: tuple[Hit, ...] = ()  # the kept hits (explanations read raw scores and details)
    dropped: tuple[Hit, ...] = ()  # the hits under the minimum raw score


def prepare_source(hits: Sequence[Hit], minimum: float | None, normalizer: Normalizer | None) -> PreparedSource:
    """Drop hits under `minimum` (the others keep their ranks), then normalise the rest's raw
    scores with `normalizer` (None: skip, for RRF)."""
    if minimum is None:
        kept, dropped = tuple(hits), ()
    else:
        kept = tuple(h for h in hits if h.raw_score >= minimum)
        dropped = tuple(h for h in hits if h.raw_score < minimum)
    norms = None if normalizer is None else tuple(normalizer([h.raw_score for h in kept]))
    return PreparedSource(tuple(h.doc_id for h in kept), tuple(h.rank for h in kept), norms, kept, dropped)


def top_norms(prepared: Mapping[str, PreparedSource]) -> dict[str, float]:
    """Each source's top normalised score over its kept candidates (the sources that kept any,
    prepared with normalised scores): what a score method's display factor needs."""
    return {source: max(entry.norms) for source, entry in prepared.items() if entry.norms}


def scores_from_prepared(prepared: Mapping[str, PreparedSource], config: SearchConfig,
                         method: FusionMethod | None = None) -> dict[str, float]:
    """Every kept candidate's fused score under `config` (its weights, in config order) and its
    method (`fusion.methods`): an additive method's terms are added in config order from 0.0 (so
    the floats are the same whatever path asks), a mean is taken per document."""
    method = method or method_of(config)
    scores: dict[str, float] = {}
    weights = config.weights
    if method.additive(config):
        # 0.0 + t == t, so a document's first term is stored as it is.
        for source, weight in weights.items():
            entry = prepared[source]
            if method.by_rank:
                terms = [rrf_term(rank, config.rrf_k, weight) for rank in entry.ranks]
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
    combine = method.combination(config).score
    return {doc_id: combine(doc_pairs) for doc_id, doc_pairs in pairs.items()}


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


def passes_thresholds(score: float, display_score: float, config: SearchConfig) -> bool:
    """Whether a fused result passes the minimum fused score and the minimum display score."""
    return ((config.min_score is None or score >= config.min_score)
            and (config.min_display_score is None or display_score >= config.min_display_score))


def explain(candidates: Mapping[str, SourceResult], config: SearchConfig, prepared: Mapping[str, PreparedSource],
            scores: Mapping[str, float], ranked_ids: Sequence[str], tie_values: Mapping[str, float],
            display_factor: float) -> FusionOutcome:
    """The explained outcome of a fusion already computed (`scores`, `ranked_ids` best first, from
    `prepared` with normalised scores for every source): per result and source its raw score,
    normalised score, rank and contribution; then the thresholds, in order — minimum fused
    score, minimum display score, top-K — each counted in `removed` with the per-source minimums."""
    method = method_of(config)
    combination = method.combination(config)
    notes: list[str] = []
    removed: dict[str, int] = {}
    all_ids: set[str] = set()
    for source in config.weights:
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
        if config.min_raw.get(source) is not None:
            removed[f"min raw {source}"] = len(prepared[source].dropped)

    per_source: dict[str, dict[str, tuple[Hit, float]]] = {
        source: {h.doc_id: (h, n) for h, n in zip(entry.hits, entry.norms, strict=True)}
        for source, entry in prepared.items()
    }
    dropped = {source: {h.doc_id: h for h in entry.dropped} for source, entry in prepared.items()}

    def result_at(rank: int, doc_id: str) -> FusedResult:
        score = scores[doc_id]
        present = [(source, weight, per_source[source].get(doc_id)) for source, weight in config.weights.items()]
        if method.by_rank:
            parts = [rrf_term(entry[0].rank, config.rrf_k, weight) for _, weight, entry in present if entry]
        else:
            parts = combination.shares([(weight, entry[1]) for _, weight, entry in present if entry], score)
        returned = iter(parts)
        contributions: dict[str, SourceContribution] = {}
        for source, _weight, entry in present:
            if entry is None:
                contributions[source] = _absent(source, doc_id, config, dropped.get(source, {}))
                continue
            hit, norm = entry
            note = "" if method.by_rank or combination.enters(norm) else (
                f"normalised score {norm:.4g} ≤ 0: left out of the {combination.name} mean, contributes 0")
            contributions[source] = SourceContribution(source, hit.raw_score, norm, hit.rank, next(returned),
                                                       note, detail=hit.detail)
        return FusedResult(doc_id, rank, score, score * display_factor, contributions, tie_values.get(doc_id))

    ranked = ExplainedRanking(ranked_ids, result_at)
    # The thresholds read the scores, not the explained results: each removes a tail of the order.
    kept = len(ranked_ids)
    if config.min_score is not None:
        passing = _prefix(ranked_ids, kept, lambda doc_id: scores[doc_id] >= config.min_score)
        removed["min fused score"], kept = kept - passing, passing
    if config.min_display_score is not None:
        passing = _prefix(ranked_ids, kept,
                          lambda doc_id: scores[doc_id] * display_factor >= config.min_display_score)
        removed["min display score"], kept = kept - passing, passing
    removed["top-k"] = max(0, kept - config.top_k)
    results = ranked[: min(kept, config.top_k)]
    return FusionOutcome(ranked, results, len(all_ids), removed, config.fusion, notes, display_factor)


class ExplainedRanking(Sequence):
    """Every fused candidate's explained result (`FusedResult`), best first, each built when it
    is first read and then kept. A search shows its top K of up to depth × sources candidates:
    the other candidates' explanations (per source raw score, normalised score, rank,
    contribution, notes) are built only when a view reads them (the score distribution, "why
    not?"), the same results whenever they are built. Compares equal to any sequence of the
    same results."""

    __slots__ = ("_ids", "_made", "_make")

    def __init__(self, ids: Sequence[str], make: Callable[[int, str], FusedResult]):
        """`ids` best first; `make(rank, doc_id)` builds the result at 1-based `rank`."""
        self._ids = tuple(ids)
        self._make = make
        self._made: list[FusedResult | None] = [None] * len(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> tuple[str, ...]:
        """The doc ids, best first (no result built)."""
        return self._ids

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._ids)))]
        n = len(self._ids)
        position = index + n if index < 0 else index
        if not 0 <= position < n:
            raise IndexError(f"ranking index {index} out of range ({n} results)")
        made = self._made[position]
        if made is None:  # two threads may both build it: the same result, either is kept
            made = self._made[position] = self._make(position + 1, self._ids[position])
        return made

    def __iter__(self):
        return (self[i] for i in range(len(self._ids)))

    def __eq__(self, other) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # equal to lists, which are unhashable

    def __repr__(self) -> str:
        return f"ExplainedRanking({len(self._ids)} results)"


def _prefix(ids: Sequence[str], n: int, keep: Callable[[str], bool]) -> int:
    """How many of the first `n` of `ids` pass `keep` before the first that does not."""
    i = 0
    while i < n and keep(ids[i]):
        i += 1
    return i


def _absent(source: str, doc_id: str, config: SearchConfig, dropped: Mapping[str, Hit]) -> SourceContribution:
    """Explain a zero contribution: either under the source's minimum, or not retrieved at all."""
    hit = dropped.get(doc_id)
    if hit is not None:
        note = f"raw score {hit.raw_score:.4g} is below the {source} minimum {config.min_raw[source]:g}: contributes 0"
        return SourceContribution(source, hit.raw_score, None, hit.rank, 0.0, note, hit.detail)
    note = f"not in {source}'s top {config.depth} candidates: contributes 0"
    return SourceContribution(source, None, None, None, 0.0, note)
