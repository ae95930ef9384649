"""The source interface, and the guard that keeps one failing source from breaking a search."""

from __future__ import annotations

import math
from typing import Protocol

from ..types import Hit, SourceResult


class Source(Protocol):
    name: str

    def search(self, query: str, depth: int) -> list[Hit]:
        """The `depth` best documents for `query`, best first, with ranks 1..n."""
        ...


def run_source(source: Source, query: str, depth: int) -> SourceResult:
    """Run a source; an exception becomes `error`, non-finite scores are dropped with a note.

    After dropping, the remaining hits are re-ranked 1..n in their original order, so ranks stay
    consecutive for RRF.
    """
    try:
        hits = source.search(query, depth)
    except Exception as exc:  # a source failing must not break the search: report it instead
        return SourceResult(source.name, (), error=f"{type(exc).__name__}: {exc}")
    finite = [h for h in hits if math.isfinite(h.raw_score)]
    notes: tuple[str, ...] = ()
    if len(finite) != len(hits):
        notes = (f"{len(hits) - len(finite)} hit(s) with NaN or infinite scores dropped",)
        finite = [Hit(h.doc_id, h.raw_score, rank, h.detail) for rank, h in enumerate(finite, start=1)]
    return SourceResult(source.name, tuple(finite), notes=notes)


def top_hits(ids: list[str], scores, depth: int, keep_zero: bool = False) -> list[Hit]:
    """Best `depth` (id, score) pairs, best first; ties by id so the order is deterministic."""
    import numpy as np

    scores = np.asarray(scores, dtype=np.float64)
    candidates = np.arange(len(scores)) if keep_zero else np.flatnonzero(scores > 0)
    if len(candidates) > depth:
        # Partition first (O(n)); the cut-off score may tie, so take every tied one then sort.
        cutoff = np.partition(scores[candidates], len(candidates) - depth)[len(candidates) - depth]
        candidates = candidates[scores[candidates] >= cutoff]
    order = sorted(candidates.tolist(), key=lambda i: (-scores[i], ids[i]))[:depth]
    return [Hit(ids[i], float(scores[i]), rank) for rank, i in enumerate(order, start=1)]
