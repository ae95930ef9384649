"""Command line: `python -m retrieval
{ingest,search,evaluate,sweep,optimize,rules,collections,sources,snapshot,queryset,judge,serve,prepare} …`
(`judge`: judge.py).

Results and JSON go to stdout; progress and messages go to stderr. search, evaluate, sweep,
optimize and snapshot take the fusion config as options (or a saved config with `--config
FILE.json` or `--config NAME`); serve takes `--config` per collection.
"""

from __future__ import annotations

import argparse
import logging
import sys

from retrieval.cli import (
    collections,
    evaluate,
    ingest,
    judge,
    prepare,
    queryset,
    rules,
    search,
    serve,
    snapshot,
    sources,
)
from retrieval.cli.common import log
from retrieval.types import RetrievalError

# The command groups in the order `--help` lists them: each module adds its commands' subparsers
# (`add_parser(sub)`) and maps each command to its function (`COMMANDS`): a new group is one module
# of this package and one entry of this tuple.
GROUPS = (ingest, search, evaluate, rules, snapshot, collections, sources, queryset, judge, serve, prepare)
COMMANDS = {name: command for group in GROUPS for name, command in group.COMMANDS.items()}
# After a refusal whose problems are records that --skip-invalid would leave out (`IngestError.skippable`).
SKIP_INVALID_HINT = "add --skip-invalid to leave out the records with a problem (each is listed) and load the rest"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m retrieval", description=__doc__)
    parser.add_argument("--db", help="LanceDB location: a folder or s3://bucket/path (default $WORKBENCH_DB or "
                        "./data/lancedb; object storage options from $WORKBENCH_STORAGE_OPTIONS, docs/scale.md)")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_parser(sub)
    return parser


def console() -> None:
    """The `retrieval` console script (pyproject.toml): `python -m retrieval` under another name."""
    sys.exit(main())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Warnings and tracebacks of the core's module loggers (a failing source …) go to stderr.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except RetrievalError as exc:
        log(f"error: {exc}")
        if getattr(exc, "skippable", False) and getattr(args, "skip_invalid", None) is False:
            log(SKIP_INVALID_HINT)
        return 2
    except OSError as exc:  # a file named on the command line that cannot be read or written
        if exc.filename is None:
            raise
        log(f"error: {exc.filename}: {exc.strerror or exc}")
        return 2
