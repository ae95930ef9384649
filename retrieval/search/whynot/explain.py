"""The walk of 'why not this document?' over a Workbench: the document's standings, the stage
that dropped it and, unless it is shown, every single-knob change that works (`trials.py`), in an
`Explanation`, which is also what `search --explain-doc ID --json` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from retrieval.search.config import SearchConfig
from retrieval.search.whynot.standing import SHOWN, SourceStanding, final_ids, first_dropping_stage, standing
from retrieval.search.whynot.trials import RAISE_TOP_K, REQUERY, Change, best_changes, run_trial, trial_changes
from retrieval.types import RetrievalError


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
    rule_filters = base.candidates.rules.filter_texts if base.candidates.rules is not None else []
    rule_allowed = (workbench.reads.filtered_ids(collection, config.filters + rule_filters)[0]
                    if rule_filters else None)
    stage, reason = first_dropping_stage(base, doc_id, allowed, rule_allowed)
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
