"""The MCP server's resources and its "tuning session" prompt (imported by `server.build_server`).

Resources (JSON, read-only; the same data as the listing tools):

    workbench://collections                          the served collections (list_knowledge_collections)
    workbench://configs                              saved and served configs (list_configs)
    workbench://collections/{collection}/query-sets  a collection's query sets (list_query_sets)
    workbench://snapshots                            the snapshots of the served collections (list_snapshots)

The prompt `tuning_session(collection, query_set)` gives an agent the workflow and its rules.
"""

from __future__ import annotations

import json
from typing import Any

from retrieval.serve.tuning import TuningService
from retrieval.types import RetrievalError

RESOURCES = ("workbench://collections", "workbench://configs", "workbench://snapshots")
QUERY_SETS_TEMPLATE = "workbench://collections/{collection}/query-sets"

TUNING_SESSION = """You are tuning the search of collection {collection!r} on its judged query set {query_set!r} \
with the search workbench's tools. Work in this order:

1. Measure: evaluate_config(query_set) on the served config. Note nDCG@10 with its 95 % CI, how many judged \
queries back it and judged@10 (the share of the top 10 that is judged).
2. Worst queries: read evaluate_config's worst_queries; for each, the relevant documents missing from the top 10.
3. Why not: why_not(query, doc_id) for a missing relevant document: the stage that dropped it and the smallest \
single change that brings it back. explain_result shows how a shown result got its score.
4. Try: sweep(query_set) over the fusion grid, or optimize(query_set) for a cross-validated search (both report \
progress; stop_run keeps the best so far). describe_config says what each parameter does.
5. Compare with significance: compare_configs(a=<served>, b=<candidate>, query_set) — Δ with its CI, the p-value \
and the trust check. For a learned config, quote optimize's held-out (cv) gain and its CI, not the in-sample score.
6. Propose: state the candidate config, its held-out gain with the CI and p-value, and the number of judged queries \
and judgments behind it. If judgments are thin (judged@10 low, or trust.warning set), propose next_to_judge first.

Rules:
- Never claim a gain without a significance test on held-out folds (optimize's cross-validated gain, or \
compare_configs with p < 0.05 on queries the config was not tuned on); an in-sample sweep best is not a gain.
- Always say how many judged queries and judgments back a number.
- Propose, do not apply: save_config, record_judgment and set_served_config change the workbench; use them only when \
the person asks (they are refused unless the server was started with --allow-write).
"""


def register_resources(server, tuning: TuningService) -> None:
    """Add the resources and the prompt above to `server` (an `MCPServer`)."""
    from mcp.server.mcpserver.exceptions import ResourceError

    def as_json(fn, *args) -> str:
        try:
            return json.dumps(fn(*args), ensure_ascii=False)
        except RetrievalError as exc:
            raise ResourceError(str(exc)) from exc

    @server.resource("workbench://collections", name="collections", mime_type="application/json",
                     description="The served collections: documents, model, language, served config.")
    def collections() -> str:
        return as_json(tuning.knowledge.list_collections)

    @server.resource("workbench://configs", name="configs", mime_type="application/json",
                     description="The saved configs, the config each collection is served with, the defaults.")
    def configs() -> str:
        return as_json(tuning.list_configs)

    @server.resource(QUERY_SETS_TEMPLATE, name="query-sets", mime_type="application/json",
                     description="A served collection's query sets: queries, judged queries, judgments.")
    def query_sets(collection: str) -> str:
        return as_json(tuning.list_query_sets, collection)

    @server.resource("workbench://snapshots", name="snapshots", mime_type="application/json",
                     description="The snapshots (named evaluations) of the served collections.")
    def snapshots() -> str:
        return as_json(tuning.list_snapshots)

    @server.prompt(name="tuning_session", title="tuning session",
                   description="Run a relevance-tuning session: measure, worst queries, why not, try, compare with "
                               "significance, propose.")
    def tuning_session(collection: str | None = None, query_set: str = "default") -> str:
        args: dict[str, Any] = {"collection": collection or tuning.knowledge.default, "query_set": query_set}
        return TUNING_SESSION.format(**args)
