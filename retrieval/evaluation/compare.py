"""Comparing two rankings: per-document rank changes, overlap@k and rank-biased overlap.

Pure functions over lists of document ids (best first, no duplicates); no I/O.

Rank-biased overlap (Webber, Moffat and Zobel, "A similarity measure for indefinite rankings",
ACM TOIS 28(4), 2010). With A_d = X_d / d the agreement at depth d, X_d = |S[:d] ∩ L[:d]| the
overlap of the two prefixes, and p the persistence (the weight of depth d falls as p^(d−1)):

    RBO(S, L, p) = (1 − p) Σ_{d≥1} p^(d−1) A_d                         (needs infinite lists)

Rankings shown on screen are finite, so `rbo` computes the extrapolated point estimate RBO_ext
(their eq. 32), which assumes the agreement seen at the end of the lists continues below them.
With s = |S| ≤ l = |L| (S the shorter list) and X_d counted against S's whole list once d > s:

    RBO_ext = (1 − p)/p · [ Σ_{d=1..l} (X_d / d) p^d  +  Σ_{d=s+1..l} X_s (d − s) / (s d) · p^d ]
              + [ (X_l − X_s) / l  +  X_s / s ] · p^l

For two lists of equal length k this is (1 − p)/p · Σ_{d=1..k} (X_d/d) p^d + (X_k/k) p^k; it is
1 for identical lists and 0 for disjoint ones. p = 0.9 puts about 86% of the weight on the top
10 ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RankChange:
    """Where one document sits in the `before` and `after` rankings (1-based; None: absent)."""

    doc_id: str
    before: int | None
    after: int | None

    @property
    def delta(self) -> int | None:
        """Places moved up (positive) or down (negative); None when absent from either list."""
        if self.before is None or self.after is None:
            return None
        return self.before - self.after

    @property
    def status(self) -> str:
        """'up', 'down', 'same', 'new' (only in `after`) or 'dropped' (only in `before`)."""
        if self.before is None:
            return "new"
        if self.after is None:
            return "dropped"
        if self.before > self.after:
            return "up"
        if self.before < self.after:
            return "down"
        return "same"

    @property
    def label(self) -> str:
        """'▲3', '▼2', '=', 'new' or 'dropped'."""
        status = self.status
        if status == "up":
            return f"▲{self.delta}"
        if status == "down":
            return f"▼{-self.delta}"
        return "=" if status == "same" else status


def _check(ranking: Sequence[str], name: str) -> None:
    if len(set(ranking)) != len(ranking):
        seen: set[str] = set()
        dupes = sorted({d for d in ranking if d in seen or seen.add(d)})
        raise ValueError(f"{name} ranking lists a document more than once: {', '.join(dupes[:5])}")


def rank_changes(before: Sequence[str], after: Sequence[str]) -> list[RankChange]:
    """One entry per document of `after`, in `after` order, then one per document of `before`
    that `after` lacks (status 'dropped'), in `before` order."""
    _check(before, "before")
    _check(after, "after")
    before_rank = {doc_id: rank for rank, doc_id in enumerate(before, start=1)}
    after_rank = {doc_id: rank for rank, doc_id in enumerate(after, start=1)}
    changes = [RankChange(doc_id, before_rank.get(doc_id), rank) for doc_id, rank in after_rank.items()]
    changes += [RankChange(doc_id, rank, None) for doc_id, rank in before_rank.items() if doc_id not in after_rank]
    return changes


def overlap_at_k(a: Sequence[str], b: Sequence[str], k: int) -> float:
    """Jaccard similarity of the two top-k sets: |A_k ∩ B_k| / |A_k ∪ B_k| (1.0 when both are empty)."""
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k}")
    _check(a, "first")
    _check(b, "second")
    top_a, top_b = set(a[:k]), set(b[:k])
    union = top_a | top_b
    return len(top_a & top_b) / len(union) if union else 1.0


def rbo(a: Sequence[str], b: Sequence[str], p: float = 0.9) -> float:
    """Extrapolated rank-biased overlap RBO_ext of two rankings (see the module docstring).

    Lists may differ in length. Two empty lists give 1.0 (nothing disagrees); one empty list
    against a non-empty one gives 0.0.
    """
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    _check(a, "first")
    _check(b, "second")
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, n_long = len(short), len(long_)
    if n_long == 0:
        return 1.0
    if s == 0:
        return 0.0
    seen_short: set[str] = set()
    seen_long: set[str] = set()
    overlap = 0
    x = [0] * (n_long + 1)  # x[d] = X_d, the overlap of the depth-d prefixes (short list capped at s)
    for d in range(1, n_long + 1):
        item_long = long_[d - 1]
        if d <= s:
            item_short = short[d - 1]
            if item_short == item_long:
                overlap += 1
            else:
                overlap += (item_short in seen_long) + (item_long in seen_short)
            seen_short.add(item_short)
        else:
            overlap += item_long in seen_short
        seen_long.add(item_long)
        x[d] = overlap
    total = sum(x[d] / d * p**d for d in range(1, n_long + 1))
    total += sum(x[s] * (d - s) / (s * d) * p**d for d in range(s + 1, n_long + 1))
    return (1 - p) / p * total + ((x[n_long] - x[s]) / n_long + x[s] / s) * p**n_long
