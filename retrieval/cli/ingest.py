"""`ingest`: parse a file or folder and store it as a collection, streamed in batches."""

from __future__ import annotations

import time
from pathlib import Path

from retrieval import limits
from retrieval.cli.common import StageBars, at_least, collection_label, ingest_rate, log, open_workbench
from retrieval.indexing.readers.stream import STREAM_BATCH


def add_parser(sub) -> None:
    """The `ingest` command (`main.build_parser` calls this)."""
    p = sub.add_parser("ingest", help="parse a file or folder and store it as a collection")
    p.add_argument("path", type=Path)
    p.add_argument("--collection", required=True,
                   help="the collection's name, in any script (1–64 characters); a name that is not a–z, 0–9, "
                        "'_', '-' is kept as its display name and a safe table name is derived from it")
    p.add_argument("--model", help="embedding model alias, folder or id (default: by corpus language)")
    p.add_argument("--add", action="store_true", help="add to an existing collection")
    p.add_argument("--skip-invalid", dest="skip_invalid", action="store_true",
                   help="leave out records with a problem (neither a title nor a text, a repeated id …) and "
                        "load the rest, listing what was skipped (default: any problem loads nothing)")
    xl = p.add_mutually_exclusive_group()
    xl.add_argument("--cross-lingual", dest="cross_lingual", action="store_true", default=None,
                    help="also embed with multilingual-e5-small for questions in the other language "
                         "(default: for an English or Chinese collection whose model reads one language, "
                         "below 20,000 documents: ~3× the ingest time)")
    xl.add_argument("--no-cross-lingual", dest="cross_lingual", action="store_false",
                    help="one embedding model only")
    p.add_argument("--graph", choices=("auto", "on", "off"), default="auto",
                   help="a new collection's entity graph (the graph source): on extracts entities at ingest, off "
                        "leaves them until `collections graph NAME` or the Graph page builds them; auto (default): "
                        f"off for flat records (CSV, JSONL) of {limits.GRAPH_AUTO_FLAT_MAX:,} documents or more, "
                        "else on (docs/ingest.md)")
    p.add_argument("--id-column")
    p.add_argument("--title-column")
    p.add_argument("--text-column")
    p.add_argument("--text-mode", choices=("paragraphs", "file"), default="paragraphs")
    p.add_argument("--max-chunk-chars", type=at_least(1), default=1500)
    p.add_argument("--batch-size", type=at_least(1), default=STREAM_BATCH,
                   help="documents read, embedded and written per batch (memory holds one batch; default "
                        f"{STREAM_BATCH}); the whole ingest is still all or nothing")


def cmd_ingest(args) -> int:
    """Streaming ingest (indexing.pipeline.ingest_stream): files of any size, one batch in memory, all or
    nothing; tqdm bars on stderr show documents/s and the time left."""
    from retrieval.indexing.readers.options import ColumnMapping, ParseOptions
    from retrieval.indexing.readers.stream import open_stream

    options = ParseOptions(
        mapping=ColumnMapping(id=args.id_column, title=args.title_column, text=args.text_column),
        text_mode=args.text_mode, markdown_max_chars=args.max_chunk_chars, skip_invalid=args.skip_invalid,
    )
    if args.add and args.graph != "auto":
        log("error: --graph is chosen when a collection is created; an added batch follows the collection's "
            "setting (build an off graph with `collections graph NAME`)")
        return 2
    stream = open_stream(args.path, options, args.batch_size)
    log(f"found {stream.total} documents ({stream.format}, encoding {stream.encoding}); "
        f"ingesting in batches of {stream.batch_size}")
    for note in stream.notes:
        log(f"  note: {note}")
    shown = len(stream.notes)
    workbench = open_workbench(args)
    started = time.perf_counter()
    with StageBars() as bars:
        if args.add:
            result = workbench.ingest_stream(workbench.resolve(args.collection), stream, add=True, progress=bars)
        else:
            result = workbench.ingest_stream(args.collection, stream, model=args.model, progress=bars,
                                             cross_lingual=args.cross_lingual, graph=args.graph)
    seconds = time.perf_counter() - started
    for note in stream.notes[shown:]:  # decided while reading (columns of each file's first batch)
        log(f"  note: {note}")
    info = result.info
    xl = f", cross-lingual vectors {info.xl_model}" if info.xl_model else ""
    graph = {"off": ", entity graph off", "pending": ", entity graph pending"}.get(info.graph, "")
    log(f"collection {collection_label(info)}: {info.doc_count} documents, model {info.model} ({info.dim}-d){xl}"
        f"{graph}, language {info.language}; {ingest_rate(result.documents, seconds)}")
    if result.note:
        log(f"note: {result.note}")
    if stream.skipped:
        from retrieval.indexing.readers.parse import skipped_note

        log(f"note: {skipped_note(stream.skipped)}")
    return 0


COMMANDS = {"ingest": cmd_ingest}
