"""Evaluation: runs from cached candidates, metrics from ranx (per query and mean).

Metrics (ranx names; trec_eval semantics, linear gains for nDCG):
- ndcg@k: DCG@k / IDCG@k with DCG = Σ_{i ≤ k} rel_i / log2(i + 1);
- mrr@k: 1 / rank of the first relevant document within k (0 if none);
- recall@k: relevant retrieved within k / all relevant;
- precision@k: relevant retrieved within k / k;
- map: mean over relevant documents of precision at their rank (unretrieved ones add 0).
A query with judgments but no retrieved document scores 0 on every metric (ranx
`make_comparable`); queries without judgments are not evaluated.

Runs are given to ranx with rank-derived scores (n − rank + 1), so its ordering is exactly ours,
including our deterministic tie-breaks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

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


_metrics_ready = False  # ranx's metric functions compiled in this process (`prepare_metrics`)
_warm_up: threading.Thread | None = None  # `warm_up_metrics`' thread, once per process
_warm_up_lock = threading.Lock()


def metrics_ready() -> bool:
    """Whether this process has compiled ranx's metric functions yet (a first evaluation waits for
    importing ranx and numba's compilation: 7 s on a warm machine, about 30 s on a loaded one)."""
    return _metrics_ready


def warm_up_metrics() -> None:
    """Start importing ranx and compiling its metric functions in a background thread (once per
    process) while a front end waits for its user: the Evaluate page starts it when opened, so a
    first evaluation does not wait for it (on the bundled sample about a third of one). Not run
    beside the work itself: on two cores the compilation, holding the GIL, slowed the query loop
    more than it saved (16 s → 20 s of CPU). Start it once LanceDB and pandas are imported
    (opening a Store does): two threads importing the same packages could wait on each other."""
    global _warm_up
    with _warm_up_lock:
        if _metrics_ready or _warm_up is not None:
            return
        _warm_up = threading.Thread(target=_compile_metrics, name="metrics-warm-up", daemon=True)
        _warm_up.start()


def prepare_metrics() -> None:
    """Have ranx's metric functions compiled, waiting for `warm_up_metrics`' thread (started
    here if need be), so a front end can say "first run: compiling" while it waits instead of
    stalling silently. A warm-up that failed is done again here, its error raised."""
    warm_up_metrics()
    _wait_for_warm_up()
    if not _metrics_ready:
        _compile_metrics()


def _wait_for_warm_up() -> None:
    if _warm_up is not None and _warm_up is not threading.current_thread():
        _warm_up.join()


def _compile_metrics() -> None:
    """A one-query evaluation of every default metric: ranx imported, its functions compiled."""
    global _metrics_ready
    QrelsEvaluator({"q": {"d": 1}}).evaluate({"q": {"d": 1.0, "e": 0.5}}, DEFAULT_METRICS + ("mrr",))
    _metrics_ready = True


class QrelsEvaluator:
    """The judged queries as a ranx `Qrels`, built once to score many runs (a sweep scores 100+)."""

    def __init__(self, qrels: Qrels):
        _wait_for_warm_up()  # one compilation of the metric functions, not two side by side
        from ranx import Qrels as RanxQrels

        self.judged = {q: dict(docs) for q, docs in qrels.items() if docs}
        if not self.judged:
            raise RetrievalError("No judged queries to evaluate")
        self.ranx_qrels = RanxQrels(self.judged)
        self.query_ids = list(self.ranx_qrels.keys())
        self._doc_numbers: dict[str, float] = {}
        self._typed_qrels = None

    def evaluate(self, run: Run, metrics: Iterable[str] = DEFAULT_METRICS
                 ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """Mean and per-query metric values; only judged queries count (see the module doc)."""
        from ranx import Run as RanxRun
        from ranx import evaluate

        metrics = list(metrics)
        # ranx refuses empty per-query dicts; a query with no results simply scores 0 via make_comparable.
        nonempty = {q: docs for q, docs in run.items() if docs and q in self.judged}
        if not nonempty:
            return dict.fromkeys(metrics, 0.0), {q: dict.fromkeys(metrics, 0.0) for q in self.judged}
        per_metric = evaluate(self.ranx_qrels, RanxRun(nonempty), _asked(metrics), return_mean=False,
                              make_comparable=True, save_results_in_run=False)
        per_query = {q: {m: float(per_metric[m][i]) for m in metrics} for i, q in enumerate(self.query_ids)}
        mean = {m: float(sum(v[m] for v in per_query.values()) / len(per_query)) for m in metrics}
        return mean, per_query

    def evaluate_rankings(self, rankings: Mapping[str, Sequence[str]], metrics: Iterable[str] = DEFAULT_METRICS
                          ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """`evaluate(run_from_rankings(rankings), metrics)`, several times faster: the rankings go to ranx's
        metric functions as the arrays ranx itself builds (one row per document: an id number, a score),
        without building a ranx `Run` (what dominates a sweep's cost). Doc ids are numbered by this
        evaluator (exact in float64), where ranx would hash them; scores are n − rank + 1 as in
        `run_from_rankings`, so the arrays are already sorted."""
        import numpy as np
        from numba.typed import List as TypedList
        from ranx import evaluate

        metrics = list(metrics)
        if self._typed_qrels is None:
            self._typed_qrels = TypedList([self._qrels_array(q) for q in self.query_ids])
        numbers = self._doc_numbers
        arrays = []
        for qid in self.query_ids:
            ids = list(dict.fromkeys(rankings.get(qid, ())))
            column = [numbers.get(doc_id) for doc_id in ids]
            if None in column:
                column = [self._number(doc_id) for doc_id in ids]
            array = np.empty((len(ids), 2), dtype=np.float64)
            array[:, 0] = column
            array[:, 1] = np.arange(len(ids), 0, -1)
            arrays.append(array)
        per_metric = evaluate(self._typed_qrels, TypedList(arrays), _asked(metrics), return_mean=False)
        per_query = {q: {m: float(per_metric[m][i]) for m in metrics} for i, q in enumerate(self.query_ids)}
        mean = {m: float(sum(v[m] for v in per_query.values()) / len(per_query)) for m in metrics}
        return mean, per_query

    def _number(self, doc_id: str) -> float:
        number = self._doc_numbers.get(doc_id)
        if number is None:
            number = self._doc_numbers[doc_id] = float(len(self._doc_numbers))
        return number

    def _qrels_array(self, qid: str):
        """[id number, grade] rows, grade descending (ranx's order: its ideal DCG reads them so)."""
        import numpy as np

        rows = sorted(self.judged[qid].items(), key=lambda item: (-item[1], item[0]))
        return np.array([(self._number(d), float(g)) for d, g in rows], dtype=np.float64).reshape(len(rows), 2)


def worst_queries(per_query: Mapping[str, Mapping[str, float]], metric: str = "ndcg@10", n: int = 5) -> list[str]:
    """The `n` query ids with the lowest `metric` (ties by id), from one system's per-query values
    (the Evaluate page's and the MCP server's worst queries)."""
    return sorted(per_query, key=lambda q: (per_query[q].get(metric, 0.0), q))[:n]


def _asked(metrics: list[str]) -> list[str]:
    """The metric list to give ranx: asked for one metric without saving into a `Run`, ranx 0.3
    keys its values wrongly (the base name, 'ndcg'), so a lone metric gets a cheap companion."""
    if len(metrics) > 1:
        return metrics
    return metrics + (["precision@1"] if metrics[0] != "precision@1" else ["recall@1"])


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
