"""The judging queue of a query set: what the Judge page and `judge next` show.

Each config's fused ranking of every query of the set, as Evaluate scores it
(`evaluate.fused_rankings`), pooled by `judge_next` (which stays pure: rankings and judgments in,
a queue out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval.evaluation.evaluate import fused_rankings
from retrieval.judging.judge_next import Candidate, depth_pool, next_to_judge


def judging_queue(workbench, collection: str, set_name: str, configs: Sequence, budget: int | None = None,
                  pool: bool = False, qrels: Mapping[str, Mapping[str, int]] | None = None) -> list[Candidate]:
    """The judging queue of a query set: each config's fused ranking of every query of the set
    (`evaluate.fused_rankings`, what Evaluate scores), then `next_to_judge` over them (two or more
    configs) or `depth_pool` (`pool`, or a single config). `qrels`: the judgments to leave out
    (None: the set's consensus; {}: none, the page filters per rater itself)."""
    queries = workbench.judgments.queries(collection, set_name)
    if qrels is None:
        qrels = workbench.judgments.qrels(collection, set_name)
    rankings = [fused_rankings(workbench, collection, queries, config) for config in configs]
    if pool or len(rankings) < 2:
        return depth_pool(rankings, qrels, budget=budget)
    return next_to_judge(rankings, qrels, budget=budget)
