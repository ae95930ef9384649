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

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .config import SearchConfig
from .store import Store
from .types import ParsedCorpus, RetrievalError

DEFAULT_METRICS = ("ndcg@10", "mrr@10", "recall@100", "precision@10", "map")
CLI_METRICS = ("ndcg@10", "mrr@10", "recall@100")

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]


def run_from_rankings(rankings: Mapping[str, Iterable[str]]) -> Run:
    """{query: [doc ids best first]} -> {query: {doc id: n − rank + 1}}."""
    run: Run = {}
    for qid, doc_ids in rankings.items():
        ids = list(dict.fromkeys(doc_ids))
        run[qid] = {doc_id: float(len(ids) - i) for i, doc_id in enumerate(ids)}
    return run


def evaluate_run(qrels: Qrels, run: Run, metrics: Iterable[str] = DEFAULT_METRICS) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Mean and per-query metric values; only queries with judgments count."""
    from ranx import Qrels as RanxQrels
    from ranx import Run as RanxRun
    from ranx import evaluate

    metrics = list(metrics)
    judged = {q: docs for q, docs in qrels.items() if docs}
    if not judged:
        raise RetrievalError("No judged queries to evaluate")
    # ranx refuses empty per-query dicts; a query with no results simply scores 0 via make_comparable.
    nonempty = {q: docs for q, docs in run.items() if docs and q in judged}
    if not nonempty:
        return {m: 0.0 for m in metrics}, {q: {m: 0.0 for m in metrics} for q in judged}
    ranx_qrels = RanxQrels(judged)
    ranx_run = RanxRun(nonempty)
    per_metric = evaluate(ranx_qrels, ranx_run, metrics, return_mean=False, make_comparable=True)
    if len(metrics) == 1:
        per_metric = {metrics[0]: per_metric}
    query_ids = list(ranx_qrels.keys())
    per_query = {q: {m: float(per_metric[m][i]) for m in metrics} for i, q in enumerate(query_ids)}
    mean = {m: float(sum(v[m] for v in per_query.values()) / len(per_query)) for m in metrics}
    return mean, per_query


@dataclass
class EvaluationReport:
    collection: str
    n_queries: int
    config: SearchConfig
    metrics: dict[str, dict[str, float]]  # system (bm25, dense, hybrid) -> metric -> mean
    per_query: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # system -> qid -> metric
    runs: dict[str, Run] = field(default_factory=dict)

    def to_json_dict(self, metric_names: Iterable[str] = CLI_METRICS) -> dict:
        names = list(metric_names)
        return {
            "n_queries": self.n_queries,
            "collection": self.collection,
            "config": self.config.to_dict(),
            "metrics": {system: {m: round(values[m], 6) for m in names if m in values}
                        for system, values in self.metrics.items()},
        }


def evaluate_collection(
    workbench,
    collection: str,
    queries: Mapping[str, str],
    qrels: Qrels,
    config: SearchConfig,
    metrics: Iterable[str] = DEFAULT_METRICS,
    progress: Callable[[int, int], None] | None = None,
) -> EvaluationReport:
    """Run every judged query once (candidates cached), and score each source and the fusion.

    Each single source is evaluated on its own candidate list; 'hybrid' is the fused ranking cut
    at `config.depth` (rerank applied when the config asks for it), so all systems are judged on
    lists of the same length. `config.top_k` and thresholds other than the per-source minimums
    do not cut evaluation runs.
    """
    judged = [q for q in qrels if qrels[q] and q in queries]
    if not judged:
        raise RetrievalError("None of the judged queries has a query text")
    eval_config = SearchConfig.from_dict({**config.to_dict(), "top_k": config.depth, "min_score": None,
                                          "min_display_score": None})
    rankings: dict[str, dict[str, list[str]]] = {s: {} for s in (*config.sources, "hybrid")}
    for i, qid in enumerate(judged, start=1):
        result = workbench.search(collection, queries[qid], eval_config)
        for source, source_result in result.candidates.sources.items():
            rankings[source][qid] = [h.doc_id for h in source_result.hits]
        rankings["hybrid"][qid] = [fused.doc_id for fused, _ in result.final_ranking()]
        if progress:
            progress(i, len(judged))
    judged_qrels = {q: qrels[q] for q in judged}
    report = EvaluationReport(collection, len(judged), config, {})
    for system, ranking in rankings.items():
        run = run_from_rankings(ranking)
        mean, per_query = evaluate_run(judged_qrels, run, metrics)
        report.metrics[system], report.per_query[system], report.runs[system] = mean, per_query, run
    return report


def beir_collection_name(folder: Path, model: str | None) -> str:
    """A cache collection name for a BEIR folder: its name plus a hash of path, corpus and model.

    The hash changes when the corpus file changes (size or modification time) or the model does,
    so a stale cache is never reused.
    """
    corpus = folder / "corpus.jsonl"
    stat = corpus.stat()
    digest = hashlib.sha1(f"{folder.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{model}".encode()).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9]+", "-", folder.name.lower()).strip("-")[:40] or "beir"
    return f"eval-{slug}-{digest}"


def ensure_beir_collection(
    store: Store,
    folder: str | Path,
    model: str | None = None,
    log: Callable[[str], None] = lambda message: None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[str, ParsedCorpus]:
    """Parse a BEIR folder; ingest it into a cache collection unless one exists already."""
    from .ingest import parse_path

    folder = Path(folder)
    if not (folder / "corpus.jsonl").is_file():
        raise RetrievalError(f"{folder} is not a BEIR folder: no corpus.jsonl")
    corpus = parse_path(folder)
    if not corpus.qrels:
        raise RetrievalError(f"{folder} has no qrels/*.tsv judgments")
    name = beir_collection_name(folder, model)
    if store.exists(name):
        log(f"reusing cached collection {name}")
    else:
        log(f"ingesting {len(corpus.documents)} documents into {name} …")
        store.create(name, corpus, model=model, description=f"BEIR cache of {folder}", progress=progress)
    return name, corpus
