"""One reader process for the reliability tests: what the CLI's readers show of a collection, as
one JSON line.

    python reader.py DB NAME [--no-search] [--delete]

The tests fork it as writer.py is forked (`writer.forked(..., program="reader")`): a new process
that has not paid for its imports.

Runs `collections list`, `collections stats NAME` and a BM25-only `search` (no model to load)
through the CLI's own entry point (one process: one interpreter start), then counts the rows a
search reads (the table at the collection's `state_key`, as `Store.table_at` gives it to the
sources). `--no-search` leaves the search out (the entity graph source reads its index under the
writer lock, so a search waits for a live writer). `--delete` then runs
`collections delete NAME`. Nothing here takes a lock or recovers by itself: whatever it sees is
what the store's reads give a reader.
"""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout

from retrieval.cli.main import main as cli
from retrieval.store import Store
from retrieval.types import RetrievalError


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli(list(argv))
    return code, out.getvalue(), err.getvalue()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    db, name = argv[:2]
    _, listed, _ = run("--db", db, "collections", "list")
    stats_code, stats, stats_err = run("--db", db, "collections", "stats", name)
    searched = None
    if "--no-search" not in argv:
        code, found, err = run("--db", db, "search", name, "document", "--weights",
                               "bm25=1,dense=0,keyword=0,graph=0", "--top-k", "100", "--json")
        searched = sorted(r["id"] for r in json.loads(found)["results"]) if code == 0 else err.strip()
    store = Store(db)
    try:
        rows = store.column(name, ["id"], state=store.state_key(name)).num_rows
    except RetrievalError:
        rows = None
    out = {"list": [line.split("\t")[1:3] for line in listed.splitlines()],
           "stats": json.loads(stats)["doc_count"] if stats_code == 0 else stats_err.strip(),
           "search": searched,
           "rows": rows}
    if "--delete" in argv:
        code, _, err = run("--db", db, "collections", "delete", name)
        out["delete"] = [code, err.strip()]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
