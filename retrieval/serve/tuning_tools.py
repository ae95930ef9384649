"""The tuning tools on the MCP server: their argument types and descriptions over `TuningService`
(`tuning.py`: read tools), `runs.py` (`sweep`, `optimize`: progress notifications, stop and
cancel) and `writes.py` (refused without `--allow-write`). Every problem is a `ToolError` with a
readable message. Imported by `server.build_server` only (this module imports `mcp`).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from retrieval.serve import runs as long_runs
from retrieval.serve import writes
from retrieval.serve.tuning import TuningService
from retrieval.types import RetrievalError

log = logging.getLogger(__name__)

READ_TOOLS = ("list_query_sets", "list_configs", "describe_config", "evaluate_config", "compare_configs",
              "explain_result", "why_not", "next_to_judge", "snapshot_diff", "list_snapshots", "sweep", "optimize",
              "stop_run", "run_result")
WRITE_TOOLS = ("save_config", "record_judgment", "set_served_config", "snapshot_create")
TUNING_TOOLS = READ_TOOLS + WRITE_TOOLS

Collection = Annotated[str | None, Field(description="A served collection (default: the server's default one).")]
Config = Annotated[str | dict[str, Any] | None, Field(
    description="null: the collection's served config; 'defaults': the default config; a saved config's name "
                "(list_configs); or a config object (the fields of describe_config's 'config').")]
QuerySet = Annotated[str, Field(description="One of the collection's query sets (list_query_sets).")]
MaxQueries = Annotated[int | None, Field(description="Judge only the first N judged queries (a per-call limit "
                                                     "applies: a larger set must give this).")]
Metric = Annotated[str, Field(description="ndcg@10, mrr@10, recall@100, precision@10 or map.")]
RunId = Annotated[str | None, Field(description="A name for this run (letters, digits, '_', '-'); default: one is "
                                                "made. stop_run and run_result take it.")]


def register_tuning_tools(server, tuning: TuningService) -> None:
    """Add the tuning tools to `server` (an `MCPServer`)."""
    runs = long_runs.Runs()
    refused = "" if tuning.allow_write else " Refused: this server was started without --allow-write."

    def call(fn, *args, **kwargs) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)
        except RetrievalError as exc:
            raise ToolError(str(exc)) from exc

    async def long_run(ctx: Context, kind: str, run_id: str | None, work, **kwargs) -> dict[str, Any]:
        run = call(runs.start, kind, run_id)

        async def report(done: float, total: float, message: str) -> None:
            await ctx.report_progress(done, total, message)

        def progress(done: float, total: float, message: str) -> None:
            if run.stop.is_set():
                return
            try:
                anyio.from_thread.run(report, done, total, message)
            except Exception:  # the request was cancelled or the client left: the run goes on
                log.debug("progress not sent", exc_info=True)

        def execute() -> None:
            try:
                run.result = work(tuning, run, progress, **kwargs)
            except RetrievalError as exc:
                run.error = str(exc)
            except Exception as exc:  # logged on stderr; the client reads one line
                log.exception("%s %s failed", kind, run.id)
                run.error = f"{kind} failed: {type(exc).__name__}: {exc}"

        try:
            await anyio.to_thread.run_sync(execute, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            run.stop.set()  # a cancelled request: the run ends after its current step; run_result has it
            raise
        if run.error:
            raise ToolError(run.error)
        return run.result

    @server.tool()
    def list_query_sets(collection_name: Collection = None) -> dict[str, Any]:
        """The collection's query sets: queries, judged queries and judgments in each."""
        return call(tuning.list_query_sets, collection_name)

    @server.tool()
    def list_configs() -> dict[str, Any]:
        """The saved configs (name and fields), the config each collection is served with, and the defaults."""
        return call(tuning.list_configs)

    @server.tool()
    def describe_config(config: Config = None, collection_name: Collection = None) -> dict[str, Any]:
        """What every parameter of a config does (the Search page's help texts), its value and whether
        it takes effect with this fusion method and these sources."""
        return call(tuning.describe_config, config, collection_name)

    @server.tool()
    def evaluate_config(query_set: QuerySet, config: Config = None, collection_name: Collection = None,
                        max_queries: MaxQueries = None,
                        rows: Annotated[int, Field(description="Per-query rows returned, worst first.")] = 50,
                        ) -> dict[str, Any]:
        """Evaluate a config on a judged query set, as `python -m retrieval evaluate --queryset` does:
        every metric per system (each source alone and the fused 'hybrid'), the fused metrics' 95 %
        bootstrap intervals, judged@10 / nDCG'@10 / bpref (how complete the judgments are), the worst
        queries with their relevant documents missing from the top 10, and the per-query table."""
        return call(tuning.evaluate, query_set, config, collection_name, max_queries, rows)

    @server.tool()
    def compare_configs(a: Config, b: Config, query_set: QuerySet, collection_name: Collection = None,
                        metric: Metric = "ndcg@10",
                        test: Annotated[str, Field(description="'t-test' (paired) or 'randomization'.")] = "t-test",
                        max_queries: MaxQueries = None) -> dict[str, Any]:
        """A/B test of config B against A on a judged query set: Δ of the metric with its 95 % paired
        bootstrap interval, the p-value, wins/ties/losses, the queries that gained and lost most, and
        the trust check: whether judging the unjudged documents of the two top 10s could reverse
        the result (trust.warning). Never claim B is better without p < 0.05 and no such warning."""
        return call(tuning.compare, a, b, query_set, collection_name, metric, test, max_queries)

    @server.tool()
    def explain_result(query: str, doc_id: str, config: Config = None,
                       collection_name: Collection = None) -> dict[str, Any]:
        """One result of a search: its rank, fused and display score and per-source parts (each
        source's rank, raw and normalised score and contribution), as `search --json` gives it."""
        return call(tuning.explain_result, query, doc_id, config, collection_name)

    @server.tool()
    def why_not(query: str, doc_id: str, config: Config = None, collection_name: Collection = None) -> dict[str, Any]:
        """Why a document is not in the results: per source its score and whole-collection rank, the
        first stage that dropped it, and the smallest single config change that brings it into the
        top-K (as the Search page and `search --explain-doc ID --json` give it)."""
        return call(tuning.why_not, query, doc_id, config, collection_name)

    @server.tool()
    def next_to_judge(query_set: QuerySet, configs: Annotated[list[str | dict[str, Any]], Field(
                          description="The configs to compare (two or more; one: its depth-10 pool).")],
                      collection_name: Collection = None,
                      budget: Annotated[int, Field(description="How many pairs.")] = 20,
                      pool: bool = False) -> dict[str, Any]:
        """The unjudged (query, document) pairs whose judgment can most change the comparison of the
        configs (as `judge next --json`), or the plain depth-10 pool."""
        return call(tuning.next_to_judge, query_set, configs, collection_name, budget, pool)

    @server.tool()
    def list_snapshots(collection_name: Collection = None) -> dict[str, Any]:
        """The kept snapshots (named evaluations) of the served collections: query set, version, means."""
        return call(tuning.list_snapshots, collection_name)

    @server.tool()
    def snapshot_diff(names: Annotated[list[str], Field(description="Two or more snapshot names; each later one "
                                                                    "is compared with the first.")],
                      metric: Metric = "ndcg@10") -> dict[str, Any]:
        """The diff of snapshots (as `snapshot diff A B --json`): Δ with its CI and p-value, the causes
        of the change split (config, judgments, collection, …), the queries that lost most."""
        return call(tuning.snapshot_diff, names, metric)

    @server.tool()
    async def sweep(query_set: QuerySet, ctx: Context, config: Config = None, collection_name: Collection = None,
                    sources: Annotated[str, Field(description="The two sources the grid splits weight between.")]
                    = "bm25,dense", max_queries: MaxQueries = None,
                    top: Annotated[int, Field(description="Rows returned, best first.")] = 10,
                    seconds: Annotated[float, Field(description="Stop after this many seconds.")] = 120.0,
                    run_id: RunId = None) -> dict[str, Any]:
        """Judge the fusion grid (every method × 11 weight splits) around a config on a query set, as
        `sweep --queryset --json`: rows best first, the headline (current vs best, paired p) and the
        held-out estimate of taking the best. Long-running: progress notifications; stop_run(run_id)
        or cancelling ends it with the variants judged so far (run_result after a cancel)."""
        return await long_run(ctx, "sweep", run_id, long_runs.sweep, query_set=query_set, config=config,
                              collection_name=collection_name, sources=sources, max_queries=max_queries, top=top,
                              seconds=seconds)

    @server.tool()
    async def optimize(query_set: QuerySet, ctx: Context, config: Config = None, collection_name: Collection = None,
                       method: Annotated[str, Field(description="'bayes' or 'query-dependent'.")] = "bayes",
                       trials: Annotated[int, Field(description="Trials per study (folds + 1 studies).")] = 20,
                       folds: int = 5, seed: int = 0,
                       seconds: Annotated[float, Field(description="Stop after this many seconds in all.")] = 120.0,
                       metric: Metric = "ndcg@10",
                       sources: Annotated[str | None, Field(description="Sources weighed (default: the config's).")]
                       = None, max_queries: MaxQueries = None, run_id: RunId = None) -> dict[str, Any]:
        """Search the fusion parameters (Optuna TPE), cross-validated over query folds, as `optimize
        --queryset --json`: the held-out (cv) score with its CI, in-sample, the base config's, the gain
        and whether it is inside the noise, and the learned config (proposed, not saved).
        Long-running: progress notifications; stop_run(run_id) or cancelling keeps the best so far."""
        return await long_run(ctx, "optimize", run_id, long_runs.optimize, query_set=query_set, config=config,
                              collection_name=collection_name, method=method, trials=trials, folds=folds, seed=seed,
                              seconds=seconds, metric=metric, sources=sources, max_queries=max_queries)

    @server.tool()
    def stop_run(run_id: str) -> dict[str, Any]:
        """Stop a sweep or optimize run after its current step: the running call returns the best so far."""
        run = call(runs.get, run_id)
        run.stop.set()
        return runs.status(run)

    @server.tool()
    def run_result(run_id: str) -> dict[str, Any]:
        """A sweep or optimize run's state and, once it has ended (finished, stopped or cancelled), its result."""
        return runs.status(call(runs.get, run_id))

    @server.tool(description="Save a config under a name (as the Evaluate page does; the name rule and the config's "
                 "validation apply); overwrite replaces one of that name." + refused)
    def save_config(name: str, config: Config, overwrite: bool = False) -> dict[str, Any]:
        return call(writes.save_config, tuning, name, config, overwrite)

    @server.tool(description="Record a relevance grade (0–3) of a document for a query in a query set, as the Search "
                 "page's rating does (the query is added to the set when new)." + refused)
    def record_judgment(query_set: QuerySet, query: str, doc_id: str, grade: int, rater: str | None = None,
                        collection_name: Collection = None) -> dict[str, Any]:
        return call(writes.record_judgment, tuning, query_set, query, doc_id, grade, rater, collection_name)

    @server.tool(description="Serve a collection's search tools with another config from now on (this server process "
                 "only; propose it first: never apply a config without a significant held-out gain)." + refused)
    def set_served_config(config: Config, collection_name: Collection = None) -> dict[str, Any]:
        return call(writes.set_served_config, tuning, config, collection_name)

    @server.tool(description="Evaluate a config on a query set now and keep it as a named snapshot (for "
                 "snapshot_diff)." + refused)
    def snapshot_create(name: str, config: Config = None, query_set: QuerySet = "default",
                        collection_name: Collection = None) -> dict[str, Any]:
        return call(writes.snapshot_create, tuning, name, config, query_set, collection_name)
