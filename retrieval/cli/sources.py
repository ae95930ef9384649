"""`sources`: register, list and remove outside engines (an HTTP search API, an MCP search tool)
by their JSON descriptors (`retrieval/sources/external/`, docs/sources.md); a registered name is
then a source like `bm25` (`--weights bm25=1,NAME=1`)."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval.cli.common import log, open_workbench


def add_parser(sub) -> None:
    """The `sources` command (`main.build_parser` calls this)."""
    p = sub.add_parser("sources", help="register (add FILE), list or remove outside search engines used as sources")
    p.add_argument("action", choices=("add", "list", "remove"), nargs="?", default="list")
    p.add_argument("target", nargs="?", metavar="FILE|NAME", help="add: a descriptor (JSON); remove: a source's name")
    p.add_argument("--replace", action="store_true", help="add: replace a registered source of the same name")
    p.add_argument("--json", action="store_true", help="list: one JSON list")


def cmd_sources(args) -> int:
    from retrieval.sources.external import read_descriptor
    from retrieval.types import RetrievalError

    registry = open_workbench(args).outside_sources()
    if args.action == "list":
        rows = registry.rows()
        if args.json:
            print(json.dumps(rows, ensure_ascii=False))
        for row in [] if args.json else rows:
            print(f"{row['name']}\t{row['kind']}\t{row['label']}\t{row['where']}\t{row['added']}")
        return 0
    if not args.target:
        raise RetrievalError(f"'sources {args.action}' needs a {'descriptor file' if args.action == 'add' else 'name'}")
    if args.action == "add":
        descriptor = read_descriptor(Path(args.target))
        registry.add(descriptor, replace=args.replace)
        log(f"registered {descriptor.kind} source {descriptor.name!r}: use it as --weights bm25=1,{descriptor.name}=1")
    else:
        registry.remove(args.target)
        log(f"removed source {args.target!r}")
    return 0


COMMANDS = {"sources": cmd_sources}
