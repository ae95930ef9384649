"""The JSON a front end gives for one search: `python -m retrieval search --json` and the MCP
server's `retrieve_knowledge` share it, so a result reads the same wherever it comes from.

Formatting only: every score is read from the `SearchResult`, none is computed here.
"""

from __future__ import annotations

from typing import Any


def result_items(result) -> list[dict[str, Any]]:
    """Per result, best first: id, title, text, the fused and display scores and a `_meta` object
    with overall rank, per-source rank, raw, normalised score, contribution and detail, the RRF k,
    (when reranked) the rerank score (seed 001 §4.4) and what query rules did to it (`rules`)."""
    config = result.config
    items = []
    for position, (fused_result, reranked) in enumerate(result.final_ranking(), start=1):
        row = result.documents.get(fused_result.doc_id, {})
        meta = {"rank": position, "fused_rank": fused_result.rank, "rrf_k": config.rrf_k}
        for source, c in fused_result.sources.items():
            meta[f"{source}_rank"] = c.rank
            meta[f"{source}_score"] = c.raw_score
            meta[f"{source}_normalized"] = c.normalized
            meta[f"{source}_contribution"] = c.contribution
            if c.detail:
                meta[f"{source}_detail"] = c.detail
        if fused_result.rules:  # what query rules did to it ("UP 1.5 by rule 7: category=guide")
            meta["rules"] = list(fused_result.rules)
        if result.reranked is not None:
            meta["rerank_score"] = reranked.rerank_score if reranked else None
            if reranked:  # final = λ·first_stage_norm + (1 − λ)·rerank_norm (`rerank.interpolate`)
                meta.update(rerank_lambda=reranked.first_stage_weight, first_stage_norm=reranked.first_stage_norm,
                            rerank_norm=reranked.rerank_norm, final_score=reranked.final_score)
        items.append({"id": fused_result.doc_id, "title": row.get("title", ""), "text": row.get("text", ""),
                      "score": fused_result.score, "display_score": fused_result.display_score, "_meta": meta})
    return items


def search_json(result) -> dict[str, Any]:
    """The CLI's JSON for one search: the query, collection, config, candidate and threshold
    counts, notes, the reranker and `result_items`."""
    return {
        "query": result.query,
        "collection": result.candidates.collection,
        "config": result.config.to_dict(),
        "n_candidates": result.outcome.n_candidates,
        "removed": result.outcome.removed,
        "notes": result.outcome.notes,
        "backends": {name: r.backend for name, r in result.candidates.sources.items()},
        "reranker": result.reranker_kind,
        "results": result_items(result),
    }
