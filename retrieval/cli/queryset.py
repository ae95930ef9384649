"""`queryset`: a collection's query sets: list them, export one (queries and judgments in one JSONL
file), import one."""

from __future__ import annotations

from pathlib import Path

from retrieval.cli.common import log, open_workbench
from retrieval.types import RetrievalError


def add_parser(sub) -> None:
    """The `queryset` command (`main.build_parser` calls this)."""
    p = sub.add_parser("queryset", help="a collection's query sets: list them, export one (queries and judgments "
                                        "in one JSONL file), import one")
    p.add_argument("action", choices=("list", "export", "import"))
    p.add_argument("collection", help="its table name or display name")
    p.add_argument("name", nargs="?", help="the query set")
    p.add_argument("file", nargs="?", type=Path, help="import: a queries file (JSONL, TSV or CSV); a query set "
                                                        "exported here carries its judgments")
    p.add_argument("--qrels", type=Path, help="import: a judgments file (TREC, BEIR tsv or CSV)")
    p.add_argument("--replace", action="store_true", help="import: replace a query set of the same name")


def cmd_queryset(args) -> int:
    """`queryset list|export|import`: what the Evaluate page's query set section does."""
    workbench = open_workbench(args)
    collection = workbench.resolve(args.collection)
    judgments = workbench.judgments
    if args.action == "list":
        for name in judgments.query_sets(collection):
            qrels = judgments.qrels(collection, name)
            print(f"{name}\t{len(judgments.queries(collection, name))} queries\t{sum(1 for d in qrels.values() if d)} "
                  f"judged\t{sum(len(d) for d in qrels.values())} judgments")
        return 0
    if not args.name:
        raise RetrievalError(f"'queryset {args.action}' needs the query set's name")
    if args.action == "export":
        print(judgments.export_query_set(collection, args.name), end="")
        return 0
    if args.file is None:
        raise RetrievalError("'queryset import' needs a queries file")
    if args.name in judgments.query_sets(collection) and not args.replace:
        raise RetrievalError(f"Query set {args.name!r} exists: add --replace to overwrite it, or pick another name")
    try:
        data = args.file.read_bytes()
        qrels = args.qrels.read_bytes() if args.qrels else None
    except OSError as exc:
        raise RetrievalError(f"Cannot read {exc.filename}: {exc.strerror}") from exc
    n_queries, n_judgments = judgments.import_files(collection, args.name, data, args.file.name, qrels,
                                                    qrels_filename=args.qrels.name if args.qrels else "qrels")
    log(f"query set {args.name!r} of {collection!r}: {n_queries} queries, {n_judgments} judgments")
    return 0


COMMANDS = {"queryset": cmd_queryset}
