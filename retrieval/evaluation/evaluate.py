"""Evaluation: runs from cached candidates, scored per query and on average.

The metrics (ndcg@k, mrr@k, recall@k, precision@k, map; trec_eval's definitions, linear gains
for nDCG) are `metrics.py`'s, each with its formula: a query with judgments but no retrieved
document scores 0 on every metric; queries without judgments are not evaluated. A run given as
scores (`QrelsEvaluator.evaluate`) is ranked by score, best first; rankings turned into runs
(`run_from_rankings`) get rank-derived scores (n − rank + 1), so that order is exactly theirs,
including our deterministic tie-breaks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from retrieval.evaluation.metrics import JudgedQueries
from retrieval.search.config import SearchConfig
from retrieval.search.plan import evaluation_config
from retrieval.types import RetrievalError, SourceResult

DEFAULT_METRICS = ("ndcg@10", "mrr@10", "recall@100", "precision@10", "map")
# How people read the metrics' names (the app, the CLI's report, the HTML report): one spelling.
METRIC_LABELS = {"ndcg@10": "nDCG@10", "mrr@10": "MRR@10", "mrr": "MRR", "recall@100": "Recall@100",
                 "precision@10": "P@10", "map": "MAP"}


def metric_label(metric: str) -> str:
    """'ndcg@10' → 'nDCG@10' (`METRIC_LABELS`; another name as it is)."""
    return METRIC_LABELS.get(metric, metric)
# Queries retrieved at once by evaluation and a sweep's candidate fetch: a query waits on numpy
# with the GIL released (and, through `Workbench.search`, on LanceDB), so a few threads overlap
# them (docs/experiments/scale.md). The Workbench, its caches and the analyser are thread-safe.
QUERY_THREADS = 4
# Queries retrieved per call by the lean path (`ranked_lean`) and the sweep: the in-memory vector
# source scores a batch with one matrix product, ~8× cheaper a query than one by one at 64.
QUERY_BATCH = 64
# Queries embedded ahead of their retrieval (`embedded_blocks`): well inside the Workbench's
# query-vector cache (8,192), so no vector is evicted before its query is searched.
EMBED_BLOCK = 2048
CLI_METRICS = ("ndcg@10", "mrr@10", "recall@100")

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]


def map_queries(fn: Callable, items: Sequence, threads: int | None = None):
    """`fn(item)` for each item, in order, `threads` at a time (1: in this thread; None:
    `QUERY_THREADS`); yields results as they complete in order, so a caller's progress counts up."""
    threads = QUERY_THREADS if threads is None else threads
    if threads <= 1 or len(items) <= 1:
        yield from map(fn, items)
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(threads, thread_name_prefix="queries")
    try:
        yield from pool.map(fn, items)
    finally:  # an error (or a caller that stops early) cancels the queries not started yet
        pool.shutdown(wait=True, cancel_futures=True)


def embedded_blocks(workbench, collection: str, texts: Sequence[str], configs: Sequence[SearchConfig],
                    size: int = EMBED_BLOCK) -> Iterator[range]:
    """The positions of `texts` in consecutive blocks of `size`, each given once its queries are
    embedded in batches (`Retriever.embed_queries`) for every config that embeds them. Embedding
    a whole large query set first would push the first queries' vectors out of the cache before
    they are searched, and each would then be embedded again on its own."""
    for start in range(0, len(texts), size):
        block = range(start, min(start + size, len(texts)))
        for config in configs:
            workbench.retriever.embed_queries(collection, [texts[i] for i in block], config)
        yield block


def run_from_rankings(rankings: Mapping[str, Iterable[str]]) -> Run:
    """{query: [doc ids best first]} -> {query: {doc id: n − rank + 1}}."""
    run: Run = {}
    for qid, doc_ids in rankings.items():
        ids = list(dict.fromkeys(doc_ids))
        run[qid] = {doc_id: float(len(ids) - i) for i, doc_id in enumerate(ids)}
    return run


class QrelsEvaluator:
    """The judged queries, prepared once to score many runs (a sweep scores 100+): queries in id
    order, their judgments as `metrics.JudgedQueries`."""

    def __init__(self, qrels: Qrels):
        self.judged = {q: dict(docs) for q, docs in qrels.items() if docs}
        if not self.judged:
            raise RetrievalError("No judged queries to evaluate")
        self.query_ids = sorted(self.judged)
        self._judged_queries = JudgedQueries([self.judged[q] for q in self.query_ids])

    def evaluate(self, run: Run, metrics: Iterable[str] = DEFAULT_METRICS
                 ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """Mean and per-query metric values; only judged queries count (see the module doc). Each
        query's documents are ranked by score, best first (equal scores: by id)."""
        return self.evaluate_rankings(
            {q: [d for d, _ in sorted(docs.items(), key=lambda item: (-item[1], item[0]))] for q, docs in run.items()},
            metrics)

    def evaluate_rankings(self, rankings: Mapping[str, Sequence[str]], metrics: Iterable[str] = DEFAULT_METRICS
                          ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """Mean and per-query values of `metrics` (`metrics.parse_metric`'s names) for
        {query id: [doc ids best first]} (a repeated id counts at its first rank); a judged query
        missing from `rankings` retrieved nothing."""
        metrics = list(metrics)
        values = self._judged_queries.score([list(dict.fromkeys(rankings.get(q, ()))) for q in self.query_ids],
                                            metrics)
        per_query = {q: {m: float(values[m][i]) for m in metrics} for i, q in enumerate(self.query_ids)}
        mean = {m: float(sum(v[m] for v in per_query.values()) / len(per_query)) for m in metrics}
        return mean, per_query


def worst_queries(per_query: Mapping[str, Mapping[str, float]], metric: str = "ndcg@10", n: int = 5) -> list[str]:
    """The `n` query ids with the lowest `metric` (ties by id), from one system's per-query values
    (the Evaluate page's and the MCP server's worst queries)."""
    return sorted(per_query, key=lambda q: (per_query[q].get(metric, 0.0), q))[:n]


def evaluate_run(qrels: Qrels, run: Run, metrics: Iterable[str] = DEFAULT_METRICS
                 ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Mean and per-query metric values; only queries with judgments count."""
    return QrelsEvaluator(qrels).evaluate(run, metrics)


def trec_run(run: Run, tag: str) -> str:
    """A run in TREC format, one line per retrieved document: `qid Q0 docid rank score tag`.

    Documents are listed best first (score descending, ties by doc id) with ranks from 1; queries
    in the run's order. Ids and the tag must not contain whitespace (the format splits on it).
    """
    _check_token(tag, "run tag")
    lines = []
    for qid, docs in run.items():
        _check_token(qid, "query id")
        ranked = sorted(docs.items(), key=lambda item: (-item[1], item[0]))
        for rank, (doc_id, score) in enumerate(ranked, start=1):
            _check_token(doc_id, "document id")
            lines.append(f"{qid} Q0 {doc_id} {rank} {score:.10g} {tag}")
    return "".join(line + "\n" for line in lines)


def _check_token(value: str, what: str) -> None:
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise RetrievalError(f"A {what} in a TREC run must be non-empty without whitespace, got {value!r}")


def metrics_csv(per_query: Mapping[str, Mapping[str, float]], metrics: Iterable[str], mean_row: bool = False) -> str:
    """Per-query metric values as CSV: header `query_id,<metric>,…`, one row per query (in the
    given order); with `mean_row`, a last row `mean` averaging each column over the queries. A
    query id or metric name that a spreadsheet would run as a formula gets a quote (`csv_text`)."""
    from retrieval.text.csv_cells import csv_text

    metrics = list(metrics)
    rows = [["query_id", *metrics]]
    rows += [[qid, *(float(values[m]) for m in metrics)] for qid, values in per_query.items()]
    if mean_row and per_query:
        rows.append(["mean", *(sum(float(v[m]) for v in per_query.values()) / len(per_query) for m in metrics)])
    return csv_text(rows)


@dataclass
class EvaluationReport:
    collection: str
    n_queries: int
    config: SearchConfig
    metrics: dict[str, dict[str, float]]  # system (bm25, dense, hybrid) -> metric -> mean
    per_query: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # system -> qid -> metric
    runs: dict[str, Run] = field(default_factory=dict)
    # source -> (queries it failed on, its first error): such a query counts as nothing retrieved
    # by it (an outside engine that timed out, was stopped, answered another shape …)
    errors: dict[str, tuple[int, str]] = field(default_factory=dict)

    def to_json_dict(self, metric_names: Iterable[str] = CLI_METRICS) -> dict:
        names = list(metric_names)
        out = {
            "n_queries": self.n_queries,
            "collection": self.collection,
            "config": self.config.to_dict(),
            "metrics": {system: {m: round(values[m], 6) for m in names if m in values}
                        for system, values in self.metrics.items()},
        }
        if self.errors:
            out["errors"] = {source: {"queries": n, "first": first} for source, (n, first) in self.errors.items()}
        return out


def evaluate_collection(
    workbench,
    collection: str,
    queries: Mapping[str, str],
    qrels: Qrels,
    config: SearchConfig,
    metrics: Iterable[str] = DEFAULT_METRICS,
    progress: Callable[[int, int], None] | None = None,
    explained: bool = False,
) -> EvaluationReport:
    """Run every judged query once (candidates cached), and score each source and the fusion.

    Each single source is evaluated on its own candidate list; 'hybrid' is the fused ranking cut
    at `config.depth` (rerank applied when the config asks for it), so all systems are judged on
    lists of the same length. `config.top_k` and thresholds other than the per-source minimums
    do not cut evaluation runs.

    The rankings come from the config's ranking plan run lean (`ranked_lean`: ids and scores, no
    explanation; rows read only for a reranked head); with `explained`, from `Workbench.search`
    per query, the plan run explained as a search in the UI runs it (tests/search/test_plan.py).
    """
    judged = [q for q in qrels if qrels[q] and q in queries]
    if not judged:
        raise RetrievalError("None of the judged queries has a query text")
    eval_config = evaluation_config(config)
    rankings: dict[str, dict[str, list[str]]] = {s: {} for s in (*config.sources, "hybrid")}
    texts = [queries[q] for q in judged]
    ranked = (ranked_explained if explained else ranked_lean)(workbench, collection, texts, eval_config)
    errors: dict[str, tuple[int, str]] = {}
    for i, (qid, (sources, fused)) in enumerate(zip(judged, ranked, strict=True), start=1):
        for source, source_result in sources.items():
            rankings[source][qid] = [h.doc_id for h in source_result.hits]
            if source_result.error:
                failed, first = errors.get(source, (0, source_result.error))
                errors[source] = (failed + 1, first)
        rankings["hybrid"][qid] = fused
        if progress:
            progress(i, len(judged))
    evaluator = QrelsEvaluator({q: qrels[q] for q in judged})
    report = EvaluationReport(collection, len(judged), config, {}, errors=errors)
    for system, ranking in rankings.items():
        mean, per_query = evaluator.evaluate_rankings(ranking, metrics)
        report.metrics[system], report.per_query[system] = mean, per_query
        report.runs[system] = run_from_rankings(ranking)
    return report


def fused_rankings(workbench, collection: str, queries: Mapping[str, str], config: SearchConfig
                   ) -> dict[str, list[str]]:
    """query id -> the fused ranking `evaluate_collection` scores as 'hybrid' (lean, cut at
    `config.depth`) of every query, judged or not: what the judging queue compares."""
    ids = list(queries)
    ranked = ranked_lean(workbench, collection, [queries[q] for q in ids], evaluation_config(config))
    return {q: fused for q, (_, fused) in zip(ids, ranked, strict=True)}


Ranked = tuple[dict[str, SourceResult], list[str]]  # each source's result, the fused ids best first


def ranked_lean(workbench, collection: str, texts: Sequence[str], config: SearchConfig,
                threads: int | None = None) -> Iterator[Ranked]:
    """For each query in order: each source's result and the fused ranking cut at `config.depth`,
    as `Workbench.search(...).final_ranking()` gives them, from ids and scores alone (rows are
    read only for a reranked head: `Workbench.rerank_scores`, the texts and caches a reranked
    search uses). Queries go in batches of `QUERY_BATCH` (`Workbench.source_results`: no rows
    read, a batched source searches a batch at once), `threads` batches at a time (None:
    `QUERY_THREADS`; 1 with rerank: a reranker model is not shared between threads); each is
    ranked by the config's plan (`RankingPlan.final_ids`, no explanation); the collection state
    is pinned once for the whole run."""
    state = workbench.state(collection)
    language = workbench.reads.language(collection, state)
    ties = workbench.reads.tie_values(collection, config.tie_field, state)
    plan = workbench.plan(collection, config, state)

    def rank(batch: Sequence[str]) -> list[Ranked]:
        results = workbench.source_results(collection, list(batch), config, state)
        return [(sources, plan.final_ids(sources, text, language, ties, partial(rerank, text)))
                for text, sources in zip(batch, results, strict=True)]

    def rerank(text: str, head: list[str]) -> dict[str, float]:
        return workbench.rerank_scores(collection, text, head, config.reranker, state)

    threads = 1 if config.rerank else threads
    for block in embedded_blocks(workbench, collection, texts, [config]):
        batches = [texts[i:min(i + QUERY_BATCH, block.stop)] for i in range(block.start, block.stop, QUERY_BATCH)]
        for ranked in map_queries(rank, batches, threads):
            yield from ranked


def ranked_explained(workbench, collection: str, texts: Sequence[str], config: SearchConfig) -> Iterator[Ranked]:
    """What `ranked_lean` gives, through `Workbench.search` per query (rows read, fusion explained,
    rerank applied when the config asks for it): what a search in the UI shows, cut at top-K."""
    for result in searched(workbench, collection, texts, config):
        yield result.candidates.sources, [fused.doc_id for fused, _ in result.final_ranking()]


def searched(workbench, collection: str, texts: Sequence[str], config: SearchConfig) -> Iterator:
    """`Workbench.search(collection, text, config)` for each text in order (a `SearchResult`),
    queries embedded ahead in blocks and searched on `QUERY_THREADS` threads."""
    # A reranker model is not shared between threads (its tokenizer is not thread-safe).
    threads = 1 if config.rerank else None
    for block in embedded_blocks(workbench, collection, texts, [config]):
        yield from map_queries(lambda text: workbench.search(collection, text, config), texts[block.start:block.stop],
                               threads)
