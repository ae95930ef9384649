"""How to start the MCP server for a collection and a saved config: the shell command and the
JSON an MCP client puts in its configuration (what the Evaluate page shows). Nothing here imports
the server, so a front end can show the command without loading it."""

from __future__ import annotations

import shlex
import sys

from retrieval.paths import REPO_DIR


def serve_args(collection: str, config_name: str, db: str | None = None) -> list[str]:
    """`python` arguments that serve `collection` with the saved config (over stdio)."""
    default_db = str(REPO_DIR / "data" / "lancedb")
    db_args = ["--db", db] if db and str(db) != default_db else []
    return ["-m", "retrieval", *db_args, "serve", "--collection", collection, "--config", config_name]


def serve_command(collection: str, config_name: str, db: str | None = None) -> str:
    """The shell command, run from the repository."""
    return shlex.join([sys.executable, *serve_args(collection, config_name, db)])


def client_config(collection: str, config_name: str, db: str | None = None, name: str = "search-workbench") -> dict:
    """The JSON an MCP client (Claude Desktop, an IDE …) puts in its configuration."""
    return {"mcpServers": {name: {"command": sys.executable, "args": serve_args(collection, config_name, db),
                                  "cwd": str(REPO_DIR)}}}
