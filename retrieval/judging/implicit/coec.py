"""Click-through rate and COEC (clicks over expected clicks), computed as OpenSearch's Search
Relevance Workbench computes COEC, so a team moving from SRW gets the same numbers.

From SRW's source (github.com/opensearch-project/search-relevance, `judgments/clickmodel/coec/
CoecClickModel.java` and `model/ClickthroughRate.java`), over the UBI events with
`ordinal <= max_rank` (`counts.ClickCounts`' event counts):

    rank-aggregated CTR, for each position p = 0, 1, …, max_rank − 1:
        CTR(p) = (click events at p) / (impression events at p), 0 when p had no impression
    per (user query text, object id):
        clicks = its click events, impressions = its impression events,
        p_min  = the lowest position it was seen at: the smallest ordinal of its clicks and
                 impressions (`ClickthroughRate.logRank` keeps the minimum)
        COEC   = clicks / (CTR(p_min) × impressions), and 0 when that expected number is 0
                 (no impression, a position without clicks, or p_min = max_rank, which has no CTR)

SRW writes the rating with `String.format("%.3f")` (half up on the exact value), as `srw_round`
does. Two SRW details are not copied: its date range filter (a log file is read whole), and its
position terms aggregation of size max_rank (which can drop a bucket when the events carry
max_rank + 1 distinct positions; positions 0 … max_rank − 1 are counted here in every case).

CTR of a pair (`ctr_scores`): clicks / impressions of the same event counts (0 without an
impression). Both are the "clicks over expected clicks" family of Chuklin, Markov & de Rijke,
"Click Models for Web Search" (2015), §3.1 (CTR models): the position's CTR stands in for the
examination probability.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from retrieval.judging.implicit.counts import ClickCounts

Pair = tuple[str, str]


def position_ctr(counts: ClickCounts) -> dict[int, float]:
    """CTR(p) for p = 0 … max_rank − 1 (module docstring)."""
    return {p: (counts.position_clicks[p] / counts.position_impressions[p]
                if counts.position_impressions[p] > 0 else 0.0)
            for p in range(counts.max_rank)}


def srw_round(value: float) -> float:
    """`value` to 3 decimals half up on its exact binary value, as Java's `%.3f` writes it."""
    return float(Decimal(value).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def coec_scores(counts: ClickCounts) -> dict[Pair, float]:
    """(query, doc) -> COEC, SRW's rating (module docstring), rounded as SRW writes it."""
    ctr = position_ctr(counts)
    scores = {}
    for pair, (clicks, impressions, lowest) in counts.pairs.items():
        expected = ctr.get(lowest, 0.0) * impressions
        scores[pair] = srw_round(clicks / expected) if expected > 0 else 0.0
    return scores


def ctr_scores(counts: ClickCounts) -> dict[Pair, float]:
    """(query, doc) -> clicks / impressions of its events (0 without an impression)."""
    return {pair: clicks / impressions if impressions else 0.0
            for pair, (clicks, impressions, _) in counts.pairs.items()}
