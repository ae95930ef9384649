"""`python -m retrieval serve`: the workbench as an MCP server, so agents search what was tuned.

    python -m retrieval serve --collection sample-xquad --config tuned             # stdio
    python -m retrieval serve --collection kb --config tuned.json --http 8765      # streamable HTTP

The tools, with their argument types, over one `KnowledgeService` (`service.py`: what each tool
does); stdio or streamable HTTP; `run`, which reads the `serve` command's options
(`retrieval/cli/serve.py`).

Safety: write tools are refused unless the server was started with `--allow-write`. Over HTTP the
server binds 127.0.0.1; a non-loopback host is refused unless a bearer token is configured in
`WORKBENCH_MCP_TOKEN`, and with a token every request must carry `Authorization: Bearer <token>`.
Every problem with a tool's arguments comes back as a tool error (`is_error`) with a readable
message. In stdio mode nothing is printed to stdout (the JSON-RPC stream): messages and logs go to
stderr. `mcp` is imported only when a server is built, so the rest of the CLI does not pay for it.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import logging
import os
import sys
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from retrieval.addresses import is_loopback
from retrieval.serve.service import DEFAULT_LIMIT, DEFAULT_TOP_K, MAX_TOP_K, QA_SCORES, KnowledgeService, Served
from retrieval.types import RetrievalError

log = logging.getLogger(__name__)

TOKEN_ENV = "WORKBENCH_MCP_TOKEN"
MIN_TOKEN_CHARS = 16


# ---- MCP --------------------------------------------------------------------------------------
# The tools' argument types (module level: the SDK resolves the annotations in this module).
class KnowledgeEntry(BaseModel):
    """Seed 003's entry."""

    model_config = ConfigDict(extra="forbid")
    question: str = Field(description="The question (required).")
    answer: str = Field(description="The answer (required).")
    category: str | None = Field(None, description="A category, kept in the metadata.")
    metadata: dict[str, Any] | None = Field(None, description="Other metadata (plain JSON).")


Collection = Annotated[str | None, Field(description="A served collection, by name or display name (default: the "
                                                     "server's default one; "
                                                     "see list_knowledge_collections).")]
TopK = Annotated[int, Field(description=f"How many results, 1–{MAX_TOP_K}.")]
Rerank = Annotated[bool | None, Field(description="Rerank the top results; default: as the served config says.")]
MinScore = Annotated[float | None, Field(description="Minimum score for a result to count as knowledge (default: "
                                                     "the server's --qa-min-score).")]
Limit = Annotated[int, Field(description="How many records, 1–50.")]


def build_server(service: KnowledgeService, name: str = "search-workbench", token: str | None = None,
                 host: str = "127.0.0.1", port: int = 8000):
    """The `MCPServer` with the tools above; `token` makes every HTTP request need it."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    auth_kwargs: dict[str, Any] = {}
    if token:
        from mcp.server.auth.provider import AccessToken
        from mcp.server.auth.settings import AuthSettings

        class StaticToken:
            """Accepts exactly the configured token (compared in constant time)."""

            async def verify_token(self, presented: str) -> AccessToken | None:
                if hmac.compare_digest(presented.encode(), token.encode()):
                    return AccessToken(token=presented, client_id="workbench", scopes=[])
                return None

        # issuer_url is required by the SDK but unused: no OAuth routes without a resource URL.
        auth_kwargs = {"token_verifier": StaticToken(),
                       "auth": AuthSettings(issuer_url=f"http://{url_host(host)}:{port}", resource_server_url=None)}

    served = ", ".join(f"{s.label} ({s.config_name})" for s in service.served.values())
    server = MCPServer(name, instructions=f"Search relevance workbench: hybrid search over {served}; default "
                       f"collection {service.default}. Results are ranked exactly as the tuned config ranks them.",
                       log_level="WARNING", **auth_kwargs)

    def call(fn, *args, **kwargs) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)
        except RetrievalError as exc:  # bad arguments, unknown collection, rejected entries …
            raise ToolError(str(exc)) from exc

    write_note = "" if service.allow_write else " Refused: this server was started without --allow-write."

    @server.tool()
    def retrieve_knowledge(query: str, top_k: TopK = DEFAULT_TOP_K, use_rerank: Rerank = None,
                           collection_name: Collection = None, filter_category: str | None = None,
                           filters: dict[str, Any] | list[str] | None = None) -> dict[str, Any]:
        """Hybrid search (BM25 + vectors, and whatever sources the tuned config fuses) of a knowledge
        collection, ranked exactly as the workbench ranks it with the served config. Each result: id,
        content, metadata, similarity (the fused display score), score (the fused score), rerank_score
        and _meta (per-source ranks, raw and normalised scores, contributions, as `python -m retrieval
        search --json` gives them). search_info names the config, fusion, weights and backends.
        filter_category keeps documents whose metadata category equals it; filters maps a metadata field
        to a value, a list of values (any of them) or a range {gte, lte, gt, lt} on numbers or ISO dates
        (or is a list of strings like "year>=2010"). Filters apply before ranking in every source and
        add to the served config's own; search_info.filters lists them all."""
        return call(service.retrieve, query, top_k, use_rerank, collection_name, filter_category, filters)

    @server.tool()
    def kb_qa(question: str, report: str | None = None, top_k: TopK = DEFAULT_TOP_K, use_rerank: Rerank = None,
              collection_name: Collection = None,
              min_score: MinScore = None) -> dict[str, Any]:
        """Knowledge-base question answering WITHOUT a language model: retrieves with the served config
        and returns the assembled context (answer = the question, the optional report and the numbered
        passages to answer from), the sources (id, similarity, question, answer) and has_knowledge:
        true when at least one result's score reaches the minimum. You write the final answer."""
        return call(service.qa, question, report, top_k, use_rerank, collection_name, min_score)

    @server.tool(description="Add knowledge entries ({question, answer, category?, metadata?}) to a served "
                 "collection, embedded with the collection's model; all or nothing. Ids come from the content, so "
                 "an entry already present is refused." + write_note)
    def add_knowledge(entries: list[KnowledgeEntry], collection_name: Collection = None) -> dict[str, Any]:
        return call(service.add, [e.model_dump(exclude_none=True) for e in entries], collection_name)

    @server.tool()
    def list_knowledge_collections() -> dict[str, Any]:
        """The served collections: documents, model, language, the config each is searched with,
        which one is the default and whether write tools are enabled."""
        return call(service.list_collections)

    @server.tool()
    def get_knowledge_stats(collection_name: Collection = None) -> dict[str, Any]:
        """Statistics of a served collection (documents, tokens, languages, metadata fields, version)
        and the search config it is served with."""
        return call(service.stats, collection_name)

    @server.tool(description="Remove every document of a served collection (it keeps its model and history)."
                 + write_note)
    def clear_collection(collection_name: Collection = None) -> dict[str, Any]:
        return call(service.clear, collection_name)

    @server.tool()
    def search_datasources(query: str, limit: Limit = DEFAULT_LIMIT) -> dict[str, Any]:
        """Seed 000's data-source search: the field-weighted keyword scorer alone over the records
        collection (query terms matched as substrings, OR; name, description, tags, domains,
        organisation and content points), with the served config's keyword points. Each result gives
        relevance_score, quality_score and the points of every field."""
        return call(service.search_datasources, query, limit)

    from retrieval.serve.resources import register_resources
    from retrieval.serve.tuning import TuningService
    from retrieval.serve.tuning_tools import register_tuning_tools

    tuning = TuningService(service)  # the tuning tools, their resources and prompt: tuning_tools.py, resources.py
    register_tuning_tools(server, tuning)
    register_resources(server, tuning)
    return server


# ---- serving ----------------------------------------------------------------------------------
def parse_http(spec: str) -> tuple[str, int]:
    """'8765' -> ('127.0.0.1', 8765); 'HOST:PORT' and '[::1]:PORT' as written."""
    host, sep, port_text = spec.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise RetrievalError(f"--http takes [HOST:]PORT, e.g. 8765 or 127.0.0.1:8765; got {spec!r}") from None
    if not 0 < port < 65536:
        raise RetrievalError(f"--http port must be 1–65535, got {port}")
    return host, port


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def http_token(host: str) -> str | None:
    """The bearer token from the environment; refuse a non-loopback bind without one."""
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise RetrievalError(f"${TOKEN_ENV} is too short: use at least {MIN_TOKEN_CHARS} characters")
    if token is None and not is_loopback(host):
        raise RetrievalError(f"Refusing to serve on {host} without a bearer token: set ${TOKEN_ENV} (clients then "
                             "send 'Authorization: Bearer <token>'), or bind 127.0.0.1")
    return token


def transport_security(host: str):
    """The Host and Origin check against DNS rebinding for a loopback bind, which serves without a
    token: the SDK turns it on by itself only for the names 127.0.0.1, localhost and ::1, so
    127.0.0.2 or 0:0:0:0:0:0:0:1 would have had neither. None elsewhere (a token is required)."""
    if not is_loopback(host):
        return None
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = sorted({url_host(host), "127.0.0.1", "localhost", "[::1]"})
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=[f"{h}:*" for h in hosts],
                                     allowed_origins=[f"http://{h}:*" for h in hosts])


def build_service(workbench, args: argparse.Namespace) -> KnowledgeService:
    names = args.collections
    configs = args.configs or []
    if len(configs) not in (0, 1, len(names)):
        raise RetrievalError(f"Give --config once for every collection or once per --collection: "
                             f"{len(names)} collections, {len(configs)} configs")
    served = []
    for i, given in enumerate(names):
        name = workbench.resolve(given)  # a table or display name; unknown: a readable error, before serving
        info = workbench.info(name)
        spec = configs[i] if len(configs) == len(names) else (configs[0] if configs else None)
        config, label = workbench.configs.resolve(spec)
        served.append(Served(name, config, label, info.model, info.label))
    if args.qa_score not in QA_SCORES and not any(args.qa_score in s.config.sources for s in served):
        raise RetrievalError(f"--qa-score must be one of {', '.join(QA_SCORES)} or a served source name, "
                             f"got {args.qa_score!r}")
    default, records = (workbench.resolve(n) if n else None for n in (args.default, args.records))
    return KnowledgeService(workbench, served, default, args.allow_write, records,
                            args.qa_min_score, args.qa_score)


def warm_up(service: KnowledgeService) -> None:
    """One search per served collection: models loaded and sources built before the first call."""
    for served in service.served.values():
        try:
            service.workbench.search(served.collection, "warm up", served.config)
        except RetrievalError as exc:  # e.g. no documents yet: said once, each call says it again
            log.warning("not warmed up: %s", exc)
        except Exception:  # the call itself will report it; serving goes on
            log.warning("warm-up search on %s failed", served.collection, exc_info=True)


def run(args: argparse.Namespace, workbench) -> int:
    """Validate everything, warm up, then serve until stopped. Messages go to stderr only."""
    host, port = parse_http(args.http) if args.http else (None, None)
    token = http_token(host) if host else None
    # A long-running server: a write tool that leaves a large collection's entity graph pending
    # starts its build in the background (a search never does), as the app does.
    workbench.graph.in_background = True
    with contextlib.redirect_stdout(sys.stderr):  # nothing may reach stdout before stdio serving
        service = build_service(workbench, args)
        server = build_server(service, args.name, token, host or "127.0.0.1", port or 8000)
        warm_up(service)
    where = f"http://{url_host(host)}:{port}/mcp" + (" (bearer token required)" if token else "") if host else "stdio"
    print(f"serving {', '.join(s.label for s in service.served.values())} on {where}; write tools "
          f"{'enabled' if service.allow_write else 'disabled'}", file=sys.stderr, flush=True)
    try:
        if host:
            server.run("streamable-http", host=host, port=port, transport_security=transport_security(host))
        else:
            server.run()
    except KeyboardInterrupt:  # Ctrl-C: a quiet stop, no traceback
        print("stopped", file=sys.stderr)
    return 0
