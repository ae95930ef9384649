"""`serve`: serve collections with their saved configs to agents over MCP (`retrieval.serve`)."""

from __future__ import annotations

from retrieval.cli.common import open_workbench
from retrieval.serve.server import TOKEN_ENV, run


def add_parser(sub) -> None:
    """The `serve` command and its options (`main.build_parser` calls this; `serve.server.run`
    reads them)."""
    parser = sub.add_parser("serve", help="serve collections with their saved configs to agents (MCP: stdio or HTTP)")
    parser.add_argument("--collection", action="append", dest="collections", metavar="NAME", required=True,
                        help="a collection to serve (repeat for more; the first is the default)")
    parser.add_argument("--config", action="append", dest="configs", metavar="NAME|FILE.json",
                        help="the config to serve with: a config saved on the Evaluate page or a JSON file; "
                             "once for every collection, or once per --collection in the same order "
                             "(default: the default SearchConfig)")
    parser.add_argument("--default", help="the collection used when a call names none (default: the first)")
    parser.add_argument("--records", help="the records collection search_datasources searches "
                                          "(default: sample-catalogue when served, else the default collection)")
    parser.add_argument("--http", metavar="[HOST:]PORT",
                        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST 127.0.0.1; "
                             f"another host needs a bearer token in ${TOKEN_ENV})")
    parser.add_argument("--allow-write", action="store_true", help="enable add_knowledge and clear_collection")
    parser.add_argument("--qa-score", default="similarity",
                        help="the score kb_qa's has_knowledge reads: similarity (fused display score), rerank, "
                             "or a source name for its raw score (dense: cosine similarity)")
    parser.add_argument("--qa-min-score", type=float, default=0.0,
                        help="kb_qa: results below this score are not knowledge (default 0)")
    parser.add_argument("--name", default="search-workbench", help="the server name clients see")


def cmd_serve(args) -> int:
    return run(args, open_workbench(args))


COMMANDS = {"serve": cmd_serve}
