"""The judging queue of a query set: what the Judge page and `judge next` show.

Each config's fused ranking of every query of the set, as Evaluate scores it
(`evaluate.fused_rankings`), pooled by `judge_next` (which stays pure: rankings and judgments in,
a queue out). The Judge page ranks once (`queue_rankings`) and re-orders after every judgment
(`page_queue`): what to judge next depends on the judgments so far."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval.evaluation.evaluate import fused_rankings
from retrieval.judging.judge_next import Candidate, Rankings, depth_pool, next_to_judge, unjudged_pairs


def queue_rankings(workbench, collection: str, set_name: str, configs: Sequence) -> list[dict[str, list[str]]]:
    """Each config's fused ranking of every query of the set (`evaluate.fused_rankings`, what
    Evaluate scores), in config order."""
    queries = workbench.judgments.queries(collection, set_name)
    return [fused_rankings(workbench, collection, queries, config) for config in configs]


def order_pairs(rankings: Rankings, qrels: Mapping[str, Mapping[str, int]], budget: int | None = None,
                pool: bool = False, memo: dict | None = None) -> list[Candidate]:
    """`next_to_judge` over the rankings (two or more configs) or `depth_pool` (`pool`, or a
    single config), given the judgments `qrels`; `memo` as in `judge_next.unjudged_pairs`."""
    if pool or len(rankings) < 2:
        return depth_pool(rankings, qrels, budget=budget, memo=memo)
    return next_to_judge(rankings, qrels, budget=budget, memo=memo)


def judging_queue(workbench, collection: str, set_name: str, configs: Sequence, budget: int | None = None,
                  pool: bool = False, qrels: Mapping[str, Mapping[str, int]] | None = None) -> list[Candidate]:
    """The judging queue of a query set: `queue_rankings`, then `order_pairs` given `qrels`, the
    judgments to leave out and weigh by (None: the set's consensus)."""
    if qrels is None:
        qrels = workbench.judgments.qrels(collection, set_name)
    return order_pairs(queue_rankings(workbench, collection, set_name, configs), qrels, budget, pool)


def page_queue(rankings: Rankings, qrels: Mapping[str, Mapping[str, int]], pool: bool = False,
               memo: dict | None = None) -> list[Candidate]:
    """The Judge page's whole queue, every pair of the configs' top 10s: first the pairs `qrels`
    judges (the consensus: the page counts them as done, or asks them again for an agreement
    study), in pool order, then the unjudged ones in `order_pairs`' order given `qrels` — made
    again after every judgment, so what to judge next follows the judgments so far. With a
    `memo` kept beside the rankings only the queries whose judgments changed are weighed again."""
    judged = [c for c in unjudged_pairs(rankings, {}, memo=memo, queries=qrels) if c.doc_id in qrels[c.query_id]]
    return judged + order_pairs(rankings, qrels, pool=pool, memo=memo)
