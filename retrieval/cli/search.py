"""`search`: search a collection and explain each result, or with `--explain-doc ID` why a
document is not shown."""

from __future__ import annotations

import json

from retrieval.cli.common import add_config_options, config_from_args, log, open_workbench
from retrieval.search.config import SearchConfig
from retrieval.search.result_json import search_json


def add_parser(sub) -> None:
    """The `search` command (`main.build_parser` calls this)."""
    p = sub.add_parser("search", help="search a collection and explain each result")
    p.add_argument("collection", help="its table name or display name")
    p.add_argument("query")
    p.add_argument("--json", action="store_true")
    p.add_argument("--explain-doc", dest="explain_doc", metavar="ID",
                   help="why not this document: per source its score and whole-collection rank, the first "
                        "stage that dropped it, and the smallest single config change that brings it into the top-K")
    p.add_argument("--at-version", dest="at_version", type=int, metavar="N",
                   help="search the collection as it was at table version N (read-only; "
                        "'collections versions NAME' lists them)")
    add_config_options(p)


def cmd_search(args) -> int:
    config = config_from_args(args)
    if args.explain_doc is not None:
        return explain_doc(args, config)
    workbench, collection = _searched(args)
    result = workbench.search(collection, args.query, config)
    data = search_json(result)
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return 0
    for note in data["notes"]:
        log(f"note: {note}")
    why = " (no query text)" if not args.query.strip() else ""
    print(f"{data['n_candidates']} candidates{why}; removed: "
          + ", ".join(f"{k} {v}" for k, v in data["removed"].items()))
    for item in data["results"]:
        meta = item["_meta"]
        parts = [f"{s}#{meta[f'{s}_rank'] or '-'}" for s in config.sources]
        print(f"{meta['rank']:>3}. {item['display_score']:.3f} ({item['score']:.5f}) [{' '.join(parts)}] "
              f"{item['id']}  {(item['title'] or item['text'])[:70]}")
        if meta.get("rules"):
            print(f"       rules: {'; '.join(meta['rules'])}")
    return 0


def _searched(args):
    """The Workbench a search runs on (at `--at-version N` when given) and the collection's table name."""
    workbench = open_workbench(args)
    collection = workbench.resolve(args.collection)
    if args.at_version is not None:
        workbench = workbench.at_version(collection, args.at_version)
        log(f"searching {collection!r} as it was at version {args.at_version} (read-only)")
    return workbench, collection


def explain_doc(args, config: SearchConfig) -> int:
    """`search … --explain-doc ID`: the why-not report (`Workbench.explain_document`)."""
    from retrieval.search.whynot.standing import standing_cells

    workbench, collection = _searched(args)
    e = workbench.explain_document(collection, args.query, config, args.explain_doc)
    if args.json:
        print(json.dumps(e.to_json_dict(), ensure_ascii=False, indent=2))
        return 0
    print(f"document {e.doc_id}" + (f"  {e.title[:70]}" if e.title else ""))
    if e.over_whole_collection:
        print("(the filters remove it: scores and ranks below are over the whole collection)")
    rows = [standing_cells(s, config.depth) for s in e.standings]
    columns = list(rows[0]) if rows else []
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns if c != "note"}
    print("  ".join(c.ljust(widths[c]) for c in widths))
    for row in rows:
        print("  ".join(row[c].ljust(widths[c]) for c in widths) + (f"  {row['note']}" if row["note"] else ""))
    print("rank: 1 + documents the source scores strictly higher (ties: others with the same score); "
          "position: its place in the source's order, what the depth cuts")
    print(f"stage: {e.stage}: {e.reason}")
    if e.stage == "shown":
        return 0
    if e.best is None:
        print(f"no single change of the {e.tried} tried brings it into the top {config.top_k}")
        return 0
    print(f"smallest change ({e.tried} tried): {e.best.describe()}")
    for change in e.changes[1:]:
        print(f"  also: {change.describe()}")
    return 0


COMMANDS = {"search": cmd_search}
