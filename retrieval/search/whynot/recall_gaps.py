"""Recall gaps of an evaluation: the judged-relevant documents an evaluated query did not rank in
its first `cutoff`, retrieved by no source or ranked below the cutoff (the Evaluate page's table).
"""

from __future__ import annotations

from dataclasses import dataclass


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
