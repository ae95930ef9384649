"""Ingest throughput against the encoder alone on the same texts (issue 42); prints a table, or
with --json one object.

    nice -n 19 .venv/bin/python benchmarks/bench_ingest.py ../shared/eval/vaswani --docs 5000
    nice -n 19 .venv/bin/python benchmarks/bench_ingest.py corpus.jsonl --docs 20000 --encoder NAME --json
    ... --graph off          # the entity graph deferred (a collection with the graph setting off)
    ... --profile out.prof   # cProfile of the ingest (read with `python -m pstats out.prof`)

FILE is a BEIR `corpus.jsonl` (`_id`, `title`, `text`), DIR a folder holding one. Its documents
are repeated, each repeat with new ids (`<id>~<n>`), until there are --docs of them, written to a
temporary JSONL, and ingested the way `python -m retrieval ingest` does (`open_stream` +
`ingest_stream`, batches of `STREAM_BATCH`, one transaction, indexes by size) into a fresh
database, with the encoder named (default all-MiniLM-L6-v2) and no cross-lingual vectors (one
encoder, so `encoder_docs_per_s` is what the ingest could reach). Then, in the same process, the
encoder alone embeds the same texts (`embedding_text`, after a warm-up). Keys of --json:

- `ingest_docs_per_s`, `encoder_docs_per_s`, their `ratio` (ingest / encoder: 1 means the work
  around the model costs nothing);
- `peak_rss_mb` (ru_maxrss of this process, after the ingest: the encoder pass holds only the texts);
- `stages`: wall seconds of the ingest spent in each step, timed by wrapping the pipeline's own
  step functions from here (the pipeline itself is unchanged): `read` (the stream's batches,
  parsing included; also its language pass when the model is not given), `tokenise`
  (`document_records`), `embed` (`EmbedBatches`), `truncation` (`count_truncated`), `entities`
  (`graph_rows`), `write` (`CollectionWriter.append`), `indexes` (`index_for_size`), `other`
  (the rest: checks, the commit, catalogue);
- `device` (`embed.device()`), `encoder`, `backend`, `docs`, `chars_per_doc`, `graph`.

On a shared machine compare the ratio and the stages of one run, not seconds across runs.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import json
import resource
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

STAGES = ("read", "tokenise", "embed", "truncation", "entities", "write", "indexes", "other")


def source_rows(path: Path) -> list[dict]:
    """The documents of a BEIR corpus.jsonl (or a folder holding one), as its JSON rows."""
    path = path / "corpus.jsonl" if path.is_dir() else path
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        raise SystemExit(f"{path} holds no documents")
    return rows


def repeated(rows: list[dict], docs: int) -> Iterator[dict]:
    """`docs` rows: `rows` in order, again and again, the n-th repeat's ids suffixed `~n` (the
    first repeat keeps them), so every id is unique and the texts are real."""
    for i in range(docs):
        row = rows[i % len(rows)]
        n = i // len(rows)
        yield {"_id": f"{row['_id']}~{n}" if n else str(row["_id"]), "title": row.get("title") or "",
               "text": row["text"]}


class StageTimer:
    """Wall seconds per stage, from functions wrapped in place (`wrap`) and restored by `restore`.
    A wrapped call nested in another wrapped call is charged to the inner stage only."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self._stack: list[list] = []  # [stage, start, child seconds]
        self._patched: list[tuple[object, str, object]] = []

    def timed(self, stage: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            frame = [stage, time.perf_counter(), 0.0]
            self._stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                self._stack.pop()
                spent = time.perf_counter() - frame[1]
                self.seconds[stage] += spent - frame[2]
                if self._stack:
                    self._stack[-1][2] += spent
        return wrapper

    def wrap(self, owner, name: str, stage: str) -> None:
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        self._patched.append((owner, name, original))
        setattr(owner, name, self.timed(stage, original))

    def timed_iterator(self, stage: str, iterator: Iterator) -> Iterator:
        step = self.timed(stage, lambda: next(iterator, StopIteration))
        while (item := step()) is not StopIteration:
            yield item

    def restore(self) -> None:
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)
        self._patched.clear()


@contextlib.contextmanager
def timed_pipeline(timer: StageTimer):
    """The pipeline's steps wrapped by `timer` for the duration of the block."""
    from retrieval.indexing import derive, pipeline, writer
    from retrieval.indexing.readers.stream import DocumentStream

    batches = DocumentStream.__dict__["batches"]
    timer.wrap(pipeline, "document_records", "tokenise")
    timer.wrap(derive.EmbedBatches, "__call__", "embed")
    timer.wrap(pipeline, "count_truncated", "truncation")
    timer.wrap(pipeline, "graph_rows", "entities")
    timer.wrap(writer.CollectionWriter, "append", "write")
    timer.wrap(pipeline, "index_for_size", "indexes")
    DocumentStream.batches = lambda self: timer.timed_iterator("read", batches(self))
    try:
        yield timer
    finally:
        DocumentStream.batches = batches
        timer.restore()


def run(source: Path, docs: int, encoder_name: str, graph: str = "auto", profile: Path | None = None) -> dict:
    """Ingest `docs` documents made from `source` into a fresh database, then the encoder alone on
    the same texts; the figures of the module doc."""
    from retrieval.indexing.pipeline import ingest_stream
    from retrieval.indexing.readers.stream import open_stream
    from retrieval.models import embed
    from retrieval.store import Store
    from retrieval.text.passages import embedding_text
    from retrieval.types import Document

    rows = list(repeated(source_rows(source), docs))
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        encoder = embed.load_encoder(encoder_name)
        encoder.encode_passages(["warm up"] * 8)
        timer = StageTimer()
        profiler = cProfile.Profile() if profile else None
        kwargs = {"graph": graph} if graph != "auto" else {}
        with timed_pipeline(timer):
            started = time.perf_counter()
            if profiler:
                profiler.enable()
            result = ingest_stream(Store(str(Path(tmp) / "db")), "bench", open_stream(corpus), model=encoder_name,
                                   cross_lingual=False, **kwargs)
            if profiler:
                profiler.disable()
            ingest_s = time.perf_counter() - started
        if profiler:
            profiler.dump_stats(str(profile))
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    texts = [embedding_text(Document(id=r["_id"], text=r["text"], title=r["title"])) for r in rows]
    started = time.perf_counter()
    encoder.encode_passages(texts)
    encoder_s = time.perf_counter() - started
    stages = {stage: round(timer.seconds.get(stage, 0.0), 3) for stage in STAGES[:-1]}
    stages["other"] = round(max(0.0, ingest_s - sum(stages.values())), 3)
    return {
        "docs": result.documents, "encoder": encoder.spec.name, "backend": encoder.backend, "device": embed.device(),
        "graph": result.info.graph or "current", "chars_per_doc": round(sum(map(len, texts)) / len(texts), 1),
        "ingest_s": round(ingest_s, 3), "encoder_s": round(encoder_s, 3),
        "ingest_docs_per_s": round(len(texts) / ingest_s, 1), "encoder_docs_per_s": round(len(texts) / encoder_s, 1),
        "ratio": round(encoder_s / ingest_s, 3), "peak_rss_mb": round(peak_mb, 1), "stages": stages,
    }


def table(result: dict) -> str:
    lines = [f"{result['docs']:,} documents ({result['chars_per_doc']:.0f} chars each) · encoder {result['encoder']} "
             f"({result['backend']}, {result['device']}) · graph {result['graph']}",
             f"ingest   {result['ingest_docs_per_s']:>10,.1f} docs/s   ({result['ingest_s']:.1f} s)",
             f"encoder  {result['encoder_docs_per_s']:>10,.1f} docs/s  ({result['encoder_s']:.1f} s alone)",
             f"ratio    {result['ratio']:>10.3f}          (ingest / encoder)",
             f"peak RSS {result['peak_rss_mb']:>10,.0f} MB", "", "| stage | s | share |", "| --- | ---: | ---: |"]
    total = result["ingest_s"] or 1.0
    lines += [f"| {stage} | {seconds:.2f} | {seconds / total:.0%} |" for stage, seconds in result["stages"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a BEIR corpus.jsonl, or a folder holding one")
    parser.add_argument("--docs", type=int, default=5000, help="documents to ingest (the source repeated)")
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2", help="the collection's model")
    parser.add_argument("--graph", choices=("auto", "on", "off"), default="auto", help="the graph setting")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the ingest here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.docs < 1:
        parser.error("--docs must be at least 1")
    if not args.source.exists():
        parser.error(f"{args.source} does not exist")
    result = run(args.source, args.docs, args.encoder, args.graph, args.profile)
    print(json.dumps(result) if args.json else table(result))


if __name__ == "__main__":
    main()
