"""What the MCP server's read-only tuning tools do (`TuningService`), over the served collections of
a `KnowledgeService`; `tuning_tools.py` registers them. No `mcp` here, and no computation of its
own: each tool calls what the CLI command of the same step calls and shapes its JSON.

    list_query_sets(collection)                 `queryset list`
    list_configs()                              the saved configs and the served ones
    describe_config(config)                     `search.config_help` (the page's tooltips)
    evaluate_config(query_set, config, …)       `evaluate --queryset --json`, plus 95 % CIs, judged@10,
                                                the per-query table and the worst queries
    compare_configs(a, b, query_set, …)         the Evaluate page's A/B test: Δ with its CI, p-value,
                                                winners and losers, the holes' trust check
    explain_result(query, doc_id, …)            one result's `_meta` of `search --json`
    why_not(query, doc_id, …)                   `search --explain-doc ID --json`
    next_to_judge(query_set, configs, …)        `judge next --json`
    snapshot_diff(names, metric)                `snapshot diff A B --json`

A config is named by a call as null (the collection's served config), "defaults" (the default
`SearchConfig`), a saved config's name, or a config object (`SearchConfig.from_dict`); never a
file path. Per-call limits (`retrieval.limits`): judged queries, rows returned.
"""

from __future__ import annotations

from typing import Any

from retrieval.limits import MCP_MAX_QUERIES, MCP_MAX_ROWS
from retrieval.search.config import SearchConfig
from retrieval.serve.arguments import ToolProblem
from retrieval.serve.service import KnowledgeService, Served
from retrieval.types import RetrievalError

DEFAULTS = "defaults"  # the config name a call gives for the default SearchConfig
WORST = 5  # worst queries listed by evaluate_config
MOVERS = 5  # winners and losers listed by compare_configs


def whole(value: Any, what: str, low: int, high: int) -> int:
    """A whole number in [low, high], or a ToolProblem naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ToolProblem(f"{what} must be a whole number from {low} to {high}, got {value!r}")
    return value


class TuningService:
    """The tuning tools' work over the served collections (see the module docstring)."""

    def __init__(self, knowledge: KnowledgeService):
        self.knowledge = knowledge
        self.workbench = knowledge.workbench

    @property
    def allow_write(self) -> bool:
        return self.knowledge.allow_write

    # ---- arguments ---------------------------------------------------------------------------
    def served(self, collection_name: str | None) -> Served:
        return self.knowledge._served(collection_name)

    def config(self, spec: Any, served: Served) -> tuple[SearchConfig, str]:
        """The config a call names (see the module docstring) and how to say which it is."""
        if spec is None:
            return served.config, served.config_name
        if spec == DEFAULTS:
            return SearchConfig(), DEFAULTS
        if isinstance(spec, str):
            return self.workbench.configs.load(spec), f"saved config {spec!r}"
        if isinstance(spec, dict):
            try:
                return SearchConfig.from_dict(spec), "the given config"
            except RetrievalError:
                raise
            except (TypeError, ValueError, AttributeError) as exc:
                raise ToolProblem(f"Invalid search config: {exc}") from exc
        raise ToolProblem(f"A config is null (the served one), {DEFAULTS!r}, a saved config's name or a config "
                          f"object; got {type(spec).__name__}")

    def judged(self, served: Served, query_set: Any, max_queries: Any = None
               ) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        """The query set's queries and judged queries (`JudgmentStore.judged_queries`, as
        `evaluate --queryset` reads them), within the per-call limit."""
        if not isinstance(query_set, str) or not query_set:
            raise ToolProblem("query_set must be the name of one of the collection's query sets (list_query_sets)")
        if max_queries is not None:
            whole(max_queries, "max_queries", 1, MCP_MAX_QUERIES)
        queries, qrels = self.workbench.judgments.judged_queries(served.collection, query_set, max_queries)
        if len(qrels) > MCP_MAX_QUERIES:
            raise ToolProblem(f"Query set {query_set!r} has {len(qrels)} judged queries; one call evaluates at most "
                              f"{MCP_MAX_QUERIES}: give max_queries (the first N judged queries)")
        return queries, qrels

    # ---- listings ----------------------------------------------------------------------------
    def list_query_sets(self, collection_name: str | None = None) -> dict[str, Any]:
        served = self.served(collection_name)
        judgments = self.workbench.judgments
        sets = []
        for name in judgments.query_sets(served.collection):
            qrels = judgments.qrels(served.collection, name)
            sets.append({"name": name, "queries": len(judgments.queries(served.collection, name)),
                         "judged": sum(1 for d in qrels.values() if d),
                         "judgments": sum(len(d) for d in qrels.values())})
        said = ", ".join(f"{s['name']} ({s['judged']} judged of {s['queries']})" for s in sets) or "none"
        return {"collection": served.collection, "query_sets": sets,
                "summary": f"Query sets of {served.label}: {said}."}

    def list_configs(self) -> dict[str, Any]:
        configs = self.workbench.configs
        saved = [{"name": name, "config": configs.load(name).to_dict()} for name in configs.names()]
        served = [{"collection": s.collection, "config_name": s.config_name, "config": s.config.to_dict()}
                  for s in self.knowledge.served.values()]
        return {"saved": saved, "served": served, "defaults": SearchConfig().to_dict(),
                "summary": f"{len(saved)} saved config(s): {', '.join(c['name'] for c in saved) or 'none'}; "
                           + "; ".join(f"{s['collection']} is served with {s['config_name']}" for s in served) + "."}

    def describe_config(self, config: Any = None, collection_name: str | None = None) -> dict[str, Any]:
        from retrieval.search.config_help import describe_parameters

        served = self.served(collection_name)
        chosen, name = self.config(config, served)
        parameters = describe_parameters(chosen)
        used = [p for p in parameters if p["used"]]
        return {"config_name": name, "config": chosen.to_dict(), "parameters": parameters,
                "summary": f"{name}: {chosen.fusion} fusion of {', '.join(chosen.sources)}; {len(used)} of "
                           f"{len(parameters)} parameters take effect (used = true)."}

    # ---- evaluation --------------------------------------------------------------------------
    def evaluate(self, query_set: str, config: Any = None, collection_name: str | None = None,
                 max_queries: int | None = None, rows: int = 50) -> dict[str, Any]:
        """`evaluate COLLECTION --queryset SET --json`'s metrics (all of `DEFAULT_METRICS`), each
        with its 95 % bootstrap interval over queries (`optimize.mean_ci`), judged@10, nDCG'@10 and
        bpref (`trust.trust_metrics`), the worst queries with their relevant documents missing
        from the top 10, and the per-query table worst first (`rows` of them)."""
        from retrieval.evaluation.evaluate import DEFAULT_METRICS, evaluate_collection, worst_queries
        from retrieval.evaluation.optimize import mean_ci
        from retrieval.evaluation.trust import trust_metrics

        whole(rows, "rows", 0, MCP_MAX_ROWS)
        served = self.served(collection_name)
        chosen, name = self.config(config, served)
        queries, qrels = self.judged(served, query_set, max_queries)
        report = evaluate_collection(self.workbench, served.collection, queries, qrels, chosen)
        hybrid = report.per_query["hybrid"]
        rankings = {q: sorted(docs, key=docs.get, reverse=True) for q, docs in report.runs["hybrid"].items()}
        trust, trust_per_query = trust_metrics(rankings, qrels)

        def row(qid: str) -> dict[str, Any]:
            top = rankings.get(qid, [])[:10]
            relevant = sorted(d for d, g in qrels[qid].items() if g > 0)
            return {"query_id": qid, "query": queries.get(qid, ""), **hybrid[qid],
                    "judged@10": trust_per_query[qid]["judged@10"], "relevant": relevant,
                    "missing_from_top_10": [d for d in relevant if d not in top]}

        order = worst_queries(hybrid, "ndcg@10", len(hybrid))
        worst = [row(q) for q in order[:WORST]]
        out = {**report.to_json_dict(DEFAULT_METRICS), "query_set": query_set, "config_name": name,
               "ci95": {m: [round(x, 6) for x in mean_ci([v[m] for v in hybrid.values()])["ci95"]]
                        for m in DEFAULT_METRICS},
               "trust": {k: round(v, 6) for k, v in trust.items()},
               "worst_queries": worst, "per_query": [row(q) for q in order[:rows]]}
        ndcg, ci = out["metrics"]["hybrid"]["ndcg@10"], out["ci95"]["ndcg@10"]
        out["summary"] = (f"{name} on {report.n_queries} judged queries of {query_set!r}: nDCG@10 {ndcg:.4f} "
                          f"(95 % CI {ci[0]:.4f}–{ci[1]:.4f}), judged@10 {trust['judged@10']:.2f}; worst: "
                          + "; ".join(f"{w['query_id']} ({w['ndcg@10']:.3f})" for w in worst) + ".")
        return out

    def compare(self, a: Any, b: Any, query_set: str, collection_name: str | None = None, metric: str = "ndcg@10",
                test: str = "t-test", max_queries: int | None = None) -> dict[str, Any]:
        """The Evaluate page's A/B test of B against A (`abtest.compare` on both configs' runs of
        `evaluate_collection`), Δ's 95 % paired bootstrap interval (`ABResult.delta_ci`), the
        winners and losers, and the trust check (`trust.judgment_trust`)."""
        from retrieval.evaluation.abtest import compare, verdict
        from retrieval.evaluation.evaluate import DEFAULT_METRICS, evaluate_collection
        from retrieval.evaluation.trust import judgment_trust

        if metric not in DEFAULT_METRICS:
            raise ToolProblem(f"metric must be one of {', '.join(DEFAULT_METRICS)}, got {metric!r}")
        served = self.served(collection_name)
        (config_a, name_a), (config_b, name_b) = self.config(a, served), self.config(b, served)
        queries, qrels = self.judged(served, query_set, max_queries)
        runs = [evaluate_collection(self.workbench, served.collection, queries, qrels, c).runs["hybrid"]
                for c in (config_a, config_b)]
        judged = {q: d for q, d in qrels.items() if q in queries}
        result = compare(judged, runs[0], runs[1], metric=metric, test=test)
        trust = judgment_trust(runs[0], runs[1], judged, metric)
        flip = trust["flip"]
        judged_verdict = verdict(result, flip)  # the A/B page's one verdict: the test and the holes together
        order = sorted(result.deltas, key=lambda q: (-result.deltas[q], q))

        def mover(qid: str) -> dict[str, Any]:
            return {"query_id": qid, "query": queries.get(qid, ""), "a": result.per_query_a[qid],
                    "b": result.per_query_b[qid], "delta": result.deltas[qid]}

        low, high = result.delta_ci
        return {"a": {"config_name": name_a, "config": config_a.to_dict(), metric: result.mean_a},
                "b": {"config_name": name_b, "config": config_b.to_dict(), metric: result.mean_b},
                "metric": metric, "test": test, "n_queries": result.n_queries, "delta": result.mean_delta,
                "delta_ci95": [low, high], "p_value": result.p_value, "significant": result.significant,
                "verdict": {"answer": judged_verdict.answer, "sentence": judged_verdict.sentence,
                            "believed": judged_verdict.believed},
                "wins": result.wins, "ties": result.ties, "losses": result.losses,
                "winners": [mover(q) for q in order[:MOVERS] if result.deltas[q] > 0],
                "losers": [mover(q) for q in reversed(order[-MOVERS:]) if result.deltas[q] < 0],
                "trust": {"A": trust["A"], "B": trust["B"], "can_flip": flip.can_flip, "unjudged": flip.unjudged,
                          "delta_favouring_a": flip.delta_favouring_a, "delta_favouring_b": flip.delta_favouring_b,
                          "warning": flip.sentence() if flip.can_flip else None},
                "summary": f"{result.summary()} Δ 95 % CI {low:+.4f} … {high:+.4f}. Verdict: {judged_verdict.answer} "
                           f"({judged_verdict.sentence}). {flip.sentence()}"}

    # ---- diagnosis ---------------------------------------------------------------------------
    def explain_result(self, query: str, doc_id: str, config: Any = None, collection_name: str | None = None
                       ) -> dict[str, Any]:
        """One result of `search --json` (its `_meta`: per-source ranks, raw and normalised scores,
        contributions); a document not in the top-K is a ToolProblem pointing at why_not."""
        from retrieval.search.result_json import result_items

        served = self.served(collection_name)
        chosen, name = self.config(config, served)
        query = self.knowledge._text(query, "query")
        result = self.workbench.search(served.collection, query, chosen)
        for item in result_items(result):
            if item["id"] == doc_id:
                meta = item["_meta"]
                parts = ", ".join(f"{s} rank {meta.get(f'{s}_rank') or '-'}" for s in chosen.sources)
                return {**item, "config_name": name, "summary": f"{doc_id} is result {meta['rank']} (fused score "
                        f"{item['score']:.5f}, display {item['display_score']:.3f}): {parts}."}
        raise ToolProblem(f"{doc_id!r} is not in the top {chosen.top_k} for this query with {name}: ask why_not")

    def why_not(self, query: str, doc_id: str, config: Any = None, collection_name: str | None = None
                ) -> dict[str, Any]:
        """`search … --explain-doc ID --json` (`Workbench.explain_document`)."""
        served = self.served(collection_name)
        chosen, name = self.config(config, served)
        query = self.knowledge._text(query, "query")
        if not isinstance(doc_id, str) or not doc_id:
            raise ToolProblem("doc_id must be a document id")
        e = self.workbench.explain_document(served.collection, query, chosen, doc_id)
        said = f"{doc_id}: {e.stage}: {e.reason}"
        if e.stage != "shown":
            said += (f" Smallest change ({e.tried} tried): {e.best.describe()}." if e.best else
                     f" No single change of the {e.tried} tried brings it into the top {chosen.top_k}.")
        return {**e.to_json_dict(), "config_name": name, "summary": said}

    def next_to_judge(self, query_set: str, configs: Any, collection_name: str | None = None, budget: int = 20,
                      pool: bool = False) -> dict[str, Any]:
        """`judge next --json`: the unjudged pairs whose judgment can most change the comparison of
        the configs (`judging_queue.judging_queue`)."""
        from retrieval.evaluation.judging_queue import judging_queue

        whole(budget, "budget", 1, MCP_MAX_ROWS)
        served = self.served(collection_name)
        if not isinstance(configs, list) or not configs:
            raise ToolProblem("configs must be a list of one or more configs (two or more to compare)")
        chosen = [self.config(spec, served)[0] for spec in configs]
        queries = self.workbench.judgments.queries(served.collection, query_set)  # an unknown set: its error
        if len(queries) > MCP_MAX_QUERIES:  # every query of the set is ranked by every config
            raise ToolProblem(f"Query set {query_set!r} has {len(queries)} queries; one call ranks at most "
                              f"{MCP_MAX_QUERIES}: use `python -m retrieval judge next` for it")
        pairs = judging_queue(self.workbench, served.collection, query_set, chosen, budget=budget, pool=bool(pool))
        selection = "pool" if pool or len(chosen) < 2 else "next"
        return {"selection": selection, "pairs": [
            {"query_id": c.query_id, "doc_id": c.doc_id, "weight": c.weight, "priority": c.priority,
             "ranks": list(c.ranks), "query": queries.get(c.query_id, "")} for c in pairs],
            "summary": f"{len(pairs)} (query, document) pairs to judge next"
                       + (" (the depth-10 pool)." if selection == "pool" else
                          ", by how much one judgment can change the comparison.")}

    def snapshot_diff(self, names: Any, metric: str = "ndcg@10") -> dict[str, Any]:
        """`snapshot diff A B [C …] --json`: each later snapshot against the first, with the causes
        of the change split (`snapshot_diff.diff_many`)."""
        from retrieval.evaluation.snapshot_diff import diff_many, summary
        from retrieval.evaluation.snapshots import SnapshotStore, rerun_at

        if not isinstance(names, list) or len(names) < 2 or not all(isinstance(n, str) for n in names):
            raise ToolProblem("names must list two or more snapshot names (each later one is compared with the first)")
        snapshots = SnapshotStore(self.workbench.store)
        chosen = [snapshots.get(n) for n in names]
        for snap in chosen:
            self.served(snap.collection)  # only snapshots of served collections
        diffs = diff_many(chosen, metric, rerun=rerun_at(self.workbench, chosen[0].collection))
        return {"diffs": diffs, "summary": " ".join(summary(d if len(diffs) > 1 else
                                                            {k: v for k, v in d.items() if k != "p_holm"})
                                                    for d in diffs)}

    def list_snapshots(self, collection_name: str | None = None) -> dict[str, Any]:
        from retrieval.evaluation.snapshots import SnapshotStore

        collections = [self.served(collection_name).collection] if collection_name else list(self.knowledge.served)
        snaps = [s for c in collections for s in SnapshotStore(self.workbench.store).list(c)]
        return {"snapshots": [{"name": s.name, "collection": s.collection, "query_set": s.query_set,
                               "table_version": s.table_version, "queries": len(s.per_query), "created": s.created,
                               "mean": s.mean, "config": s.config.to_dict()} for s in snaps]}
