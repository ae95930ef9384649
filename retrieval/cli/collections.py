"""`collections`: list collections, show one's stats or versions, build its vector index or entity
graph, delete or clear it."""

from __future__ import annotations

import json
import time

from retrieval import limits
from retrieval.cli.common import StageBars, collection_label, ingest_rate, log, open_workbench
from retrieval.types import RetrievalError


def add_parser(sub) -> None:
    """The `collections` command (`main.build_parser` calls this)."""
    p = sub.add_parser("collections", help="list, show stats or versions, build a vector index or the entity graph, "
                                           "delete or clear collections")
    p.add_argument("action", choices=("list", "stats", "versions", "index", "graph", "delete", "clear"), nargs="?",
                   default="list")
    p.add_argument("name", nargs="?", help="the collection's table name or display name")


def cmd_collections(args) -> int:
    workbench = open_workbench(args)
    if args.action == "list":
        for info in workbench.collections():
            truncated = "truncated not counted" if info.truncated is None else f"{info.truncated} truncated"
            graph = f"graph {info.graph}" if info.graph in ("pending", "off") else "graph built"
            backend = f" ({info.encoder_backend})" if info.encoder_backend else ""
            print(f"{info.label}\t{info.name}\t{info.doc_count} docs\t{truncated}\t{info.model}{backend}\t"
                  f"{info.language}\t{info.created}\t{graph}")
        return 0
    if not args.name:
        raise RetrievalError(f"'collections {args.action}' needs a collection name")
    name = workbench.resolve(args.name)
    shown = collection_label(workbench.info(name)) if workbench.exists(name) else name
    if args.action == "stats":
        stats = workbench.stats(name)
        print(json.dumps({"info": stats.info.__dict__, **{k: v for k, v in stats.__dict__.items() if k != "info"},
                          "backends": workbench.backends(name)}, ensure_ascii=False, indent=2))
        note = workbench.truncation_note(stats.info)
        if note:
            log(f"note: {note}")
    elif args.action == "versions":
        from retrieval.store.versions import collection_versions

        for v in collection_versions(workbench.store, name):
            print(f"v{v.version}\t{v.timestamp}\t{v.documents} documents\t{v.summary}")
    elif args.action == "index":
        workbench.build_vector_index(name)
        extra = (" and, at this size, the id index and a compaction"
                 if workbench.info(name).doc_count >= limits.SCALE_DOCS else "")
        log(f"built an {limits.ANN_INDEX} vector index on {shown}{extra} (searches refine to exact similarities)")
    elif args.action == "graph":
        started = time.perf_counter()
        with StageBars() as bars:
            info = workbench.graph.build(name, progress=bars)
        log(f"built the entity graph of {shown}: {ingest_rate(info.doc_count, time.perf_counter() - started)}")
    elif args.action == "delete":
        workbench.delete(name)
        log(f"deleted {shown}")
    else:
        workbench.clear(name)
        log(f"cleared {shown}")
    return 0


COMMANDS = {"collections": cmd_collections}
