"""Candidates fetched once, any config ranked from them: what a sweep ranks every variant from
and the optimiser every trial.

`retrieval_plan` gives the fewest fetches that cover every config: each (source, source
parameters) once, at the largest depth any config asks for. `fetch_candidates` fetches them once
per query (`Workbench.source_results`, in batches of `evaluate.QUERY_BATCH` through the
workbench's candidate cache: ids and scores, no rows; a tie field's values come from
`CollectionReads.tie_values`). `CandidateRanker` runs a config's ranking plan lean on each
query's cached candidates, a source's preparation shared between the configs that prepare it
alike (the plan's `memo`), and keeps the reranker's scores per query, taken once for the union of
the heads asked for (`Workbench.rerank_scores`). `estimate_seconds`: how long fetching a query
set's candidates will take, timed on a few of its queries, said before the work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from retrieval.evaluation.evaluate import QUERY_BATCH, embedded_blocks, map_queries
from retrieval.search.config import SearchConfig
from retrieval.search.fusion.fuse import PreparedSource
from retrieval.search.plan import RankingPlan, evaluation_config
from retrieval.sources import source_params
from retrieval.types import RetrievalError, SourceResult


def retrieval_plan(configs: Sequence[SearchConfig]) -> list[SearchConfig]:
    """The fewest `workbench.candidates` calls that give every config its candidates: each
    (source, source parameters) once, at the largest depth any config needs, sources sharing a
    call when one config can state all their parameters (the usual case: one call per query)."""
    needs: dict[tuple, tuple[str, SearchConfig, int]] = {}
    for wanted in configs:
        for source in wanted.sources:
            key = source_params(source, wanted)
            depth = max(wanted.depth, needs[key][2] if key in needs else 0)
            needs[key] = (source, wanted, depth)
    # Each group: the config of its first source (it states the group's parameters) and, per
    # source, the depth to fetch.
    groups: list[tuple[SearchConfig, dict[str, int]]] = []
    for key, (source, config, depth) in needs.items():
        for group_config, depths in groups:
            if source not in depths and source_params(source, group_config) == key:
                depths[source] = depth
                break
        else:
            groups.append((config, {source: depth}))
    return [SearchConfig.from_dict({**config.to_dict(), "depth": max(depths.values()),
                                    "weights": dict.fromkeys(depths, 1.0)})
            for config, depths in groups]


def fetch_candidates(workbench, collection: str, queries: Mapping[str, str], query_ids: Sequence[str],
                     fetch_configs: Sequence[SearchConfig], state: tuple | None = None,
                     progress: Callable[[int], None] | None = None) -> dict[str, dict[tuple, SourceResult]]:
    """Every query's candidates, fetched once: query id -> (source, source parameters) -> its
    `SourceResult`, one `workbench.source_results` call per batch of `evaluate.QUERY_BATCH`
    queries and fetch config (`retrieval_plan`), through the workbench's candidate cache. What
    a sweep and the optimiser rank every variant or trial from. A source that failed on a query
    is an error: a variant scored without it would be scored wrong. `progress(done)` after each
    query."""
    state = state if state is not None else workbench.state(collection)
    fetched: dict[str, dict[tuple, SourceResult]] = {}
    query_ids = list(query_ids)

    def fetch(batch: list[str]) -> list[list[dict[str, SourceResult]]]:
        return [workbench.source_results(collection, [queries[q] for q in batch], config, state)
                for config in fetch_configs]

    done = 0
    for block in embedded_blocks(workbench, collection, [queries[q] for q in query_ids], fetch_configs):
        batches = [query_ids[i:min(i + QUERY_BATCH, block.stop)] for i in range(block.start, block.stop, QUERY_BATCH)]
        for batch, fetched_sets in zip(batches, map_queries(fetch, batches), strict=True):
            for position, qid in enumerate(batch):
                per_key: dict[tuple, SourceResult] = {}
                for config, results in zip(fetch_configs, fetched_sets, strict=True):
                    for source, result in results[position].items():
                        if result.error:
                            raise RetrievalError(f"{source} failed on query {qid!r}: {result.error}")
                        per_key[source_params(source, config)] = result
                fetched[qid] = per_key
                done += 1
                if progress:
                    progress(done)
    return fetched


class CandidateRanker:
    """Any config's evaluation ranking of a query, from candidates fetched once
    (`fetch_candidates`): the plan's lean `final_ids`, with each source's preparation memoised
    per query (`RankingPlan.prepare`'s memo: shared by the variants or trials that cut,
    threshold and normalise a source alike) and the reranker's scores kept per query."""

    MEMO_LIMIT = 200_000  # preparations kept; trials with continuous thresholds would grow it forever

    def __init__(self, workbench, collection: str, queries: Mapping[str, str],
                 fetched: Mapping[str, Mapping[tuple, SourceResult]], state: tuple):
        self.workbench, self.collection, self.queries, self.fetched, self.state = (
            workbench, collection, queries, fetched, state)
        self.language = workbench.reads.language(collection, state)
        self.memo: dict[tuple, PreparedSource] = {}
        self.rerank_scores: dict[tuple[str, str], dict[str, float]] = {}  # (query id, reranker) -> doc -> score
        self._ties: dict[str, Mapping[str, float]] = {}

    def plan(self, config: SearchConfig) -> RankingPlan:
        """`config`'s plan, its learned ranker loaded (`Workbench.plan`) at the fetch's state."""
        return self.workbench.plan(self.collection, config, self.state)

    def ties(self, config: SearchConfig) -> Mapping[str, float] | None:
        if not config.tie_field:
            return None
        if config.tie_field not in self._ties:
            self._ties[config.tie_field] = self.workbench.reads.tie_values(self.collection, config.tie_field,
                                                                           self.state)
        return self._ties[config.tie_field]

    def sources(self, qid: str, plan: RankingPlan) -> dict[str, SourceResult]:
        return {s: self.fetched[qid][source_params(s, plan.config)] for s in plan.config.weights}

    def head(self, qid: str, plan: RankingPlan) -> list[str]:
        """The first stage's top-N (`rerank_top_n`) of a reranking plan for query `qid`."""
        config = plan.config
        return plan.first_stage(self.sources(qid, plan), self.queries[qid], self.language, self.ties(config),
                                config.rerank_top_n, self.memo, qid)[0]

    def score_heads(self, qid: str, plans: Sequence[RankingPlan]) -> None:
        """The reranker's scores of every document in the heads of `plans` not scored yet for
        `qid`, one model call per reranker (what makes a rerank variant cost more than a fusion)."""
        wanted: dict[str, list[str]] = {}
        for plan in plans:
            name = plan.config.reranker
            scored = self.rerank_scores.setdefault((qid, name), {})
            seen = set(wanted.setdefault(name, []))
            wanted[name].extend(d for d in self.head(qid, plan) if d not in seen and d not in scored)
        for name, doc_ids in wanted.items():
            if doc_ids:
                self.rerank_scores[(qid, name)].update(self.workbench.rerank_scores(
                    self.collection, self.queries[qid], doc_ids, name, self.state))

    def ranking(self, plan: RankingPlan, qid: str) -> list[str]:
        """What `plan` shows for query `qid`, as ids (a reranking plan's heads must be scored)."""
        if len(self.memo) > self.MEMO_LIMIT:
            self.memo.clear()
        scored = self.rerank_scores.get((qid, plan.config.reranker), {})
        return plan.final_ids(self.sources(qid, plan), self.queries[qid], self.language, self.ties(plan.config),
                              lambda head: scored, self.memo, qid)

    def rankings(self, plan: RankingPlan, query_ids: Iterable[str]) -> dict[str, list[str]]:
        return {qid: self.ranking(plan, qid) for qid in query_ids}


ESTIMATE_SAMPLE = 16  # queries `estimate_seconds` times


def estimate_seconds(workbench, collection: str, texts: Sequence[str], config: SearchConfig,
                     sample: int = ESTIMATE_SAMPLE) -> float:
    """About how many seconds `evaluate_collection` takes for `texts` on this machine, measured:
    the first query is embedded and retrieved (loading the encoders and sources, not counted),
    then the next `sample` are timed and the time scaled to all. Nothing is wasted: their
    vectors and candidates are cached for the run."""
    import time

    eval_config = evaluation_config(config)
    texts = list(dict.fromkeys(texts))
    if len(texts) <= 1:
        return 0.0
    workbench.retriever.embed_queries(collection, texts[:1], eval_config)
    workbench.source_results(collection, texts[:1], eval_config)
    timed = texts[1:1 + sample]
    started = time.perf_counter()
    workbench.retriever.embed_queries(collection, timed, eval_config)
    workbench.source_results(collection, timed, eval_config)
    return (time.perf_counter() - started) / len(timed) * (len(texts) - 1)


def about(seconds: float) -> str:
    """'about 40 s', 'about 3 min': an estimate in words."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    return f"about {round(seconds / 60)} min"
