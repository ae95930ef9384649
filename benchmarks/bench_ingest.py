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
- `peak_rss_mb` (ru_maxrss of this process, after the ingest; the benchmark itself holds only
  the source's rows, never the repeated corpus: the JSONL is written and the encoder fed lazily,
  so the figure at 1M documents is the ingest's);
- `stream_peak_rss_mb`: the same high-water mark when `index_for_size` began — the stream's and
  the write's own (its full-text index); the rest of `peak_rss_mb` is LanceDB's index steps for a
  large collection (`benchmarks/bench_index_memory.py`);
- `stages`: wall seconds of the ingest spent in each step, timed by wrapping the pipeline's own
  step functions from here (the pipeline itself is unchanged): `read` (the stream's batches,
  parsing included; also its language pass when the model is not given), `tokenise`
  (`document_records`), `embed` (`EmbedBatches`), `truncation` (`count_truncated`), `entities`
  (`graph_rows`), `write` (`CollectionWriter.append`), `indexes` (`index_for_size`), `wait` (the
  writing thread waiting for the next tokenised batch), `other` (the rest of the writing thread's
  time: checks, the commit, catalogue). With the overlap on (`--ahead` ≥ 1, the default
  `pipeline.AHEAD`) `read` and `tokenise` run in their own thread, beside the others: the
  stages then add up to more than `ingest_s`, and `wait` says how long the writing thread
  waited for them; `--ahead 0` runs every step in one thread, one after the other;
- `device` (`embed.device()`), `encoder`, `backend`, `docs`, `chars_per_doc`, `graph`, `ahead`,
  `encoder_docs` (how many of the texts the encoder alone embedded: `--encoder-docs`, default all;
  at 1M documents with MiniLM a sample of 100,000 gives its rate in a fraction of the time).

The database is opened (LanceDB imported, ~1–10 s) before the clock starts: a one-off per process,
not the ingest's throughput. On a shared machine compare the ratio and the stages of one run, not
seconds across runs.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import json
import resource
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

STAGES = ("read", "tokenise", "embed", "truncation", "entities", "write", "indexes", "wait", "other")
ENCODER_CHUNK = 4096  # texts per call of the encoder-alone pass (it sorts each chunk by length)


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


def peak_rss_mb() -> float:
    """This process's peak RSS so far (ru_maxrss, KiB on Linux), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class StageTimer:
    """Wall seconds per stage, from functions wrapped in place (`wrap`) and restored by `restore`.
    A wrapped call nested in another wrapped call (in the same thread) is charged to the inner
    stage only; `main_seconds` is what the calling thread's stages took (the others run beside it)."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.main_seconds = 0.0
        self._local = threading.local()  # .stack: [stage, start, child seconds] of this thread
        self._patched: list[tuple[object, str, object]] = []
        self._lock = threading.Lock()
        self.peak_mb_at_start: dict[str, float] = {}  # ru_maxrss (MB) when a stage first began

    def timed(self, stage: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            stack = self._local.__dict__.setdefault("stack", [])
            if stage not in self.peak_mb_at_start:
                self.peak_mb_at_start[stage] = peak_rss_mb()
            frame = [stage, time.perf_counter(), 0.0]
            stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                stack.pop()
                spent = time.perf_counter() - frame[1]
                with self._lock:
                    self.seconds[stage] += spent - frame[2]
                    if threading.current_thread() is threading.main_thread():
                        self.main_seconds += spent - frame[2]
                if stack:
                    stack[-1][2] += spent
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
    from retrieval.indexing import derive, overlap, pipeline, writer
    from retrieval.indexing.readers.stream import DocumentStream

    batches = DocumentStream.__dict__["batches"]
    timer.wrap(pipeline, "document_records", "tokenise")
    timer.wrap(derive.EmbedBatches, "__call__", "embed")
    timer.wrap(pipeline, "count_truncated", "truncation")
    timer.wrap(pipeline, "graph_rows", "entities")
    timer.wrap(writer.CollectionWriter, "append", "write")
    timer.wrap(pipeline, "index_for_size", "indexes")
    timer.wrap(overlap.Ahead, "__next__", "wait")
    DocumentStream.batches = lambda self: timer.timed_iterator("read", batches(self))
    try:
        yield timer
    finally:
        DocumentStream.batches = batches
        timer.restore()


def run(source: Path, docs: int, encoder_name: str, graph: str = "auto", profile: Path | None = None,
        ahead: int | None = None, encoder_docs: int | None = None) -> dict:
    """Ingest `docs` documents made from `source` into a fresh database, then the encoder alone on
    the first `encoder_docs` (default all) of the same texts; the figures of the module doc.
    `ahead`: `pipeline.AHEAD` for this run (None: the default)."""
    from retrieval.indexing import pipeline
    from retrieval.indexing.pipeline import ingest_stream
    from retrieval.indexing.readers.stream import open_stream
    from retrieval.models import embed
    from retrieval.store import Store
    from retrieval.text.passages import embedding_text
    from retrieval.types import Document

    source_docs = source_rows(source)
    ahead = pipeline.AHEAD if ahead is None else ahead
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        with corpus.open("w", encoding="utf-8") as out:
            for row in repeated(source_docs, docs):
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        encoder = embed.load_encoder(encoder_name)
        encoder.encode_passages(["warm up"] * 8)
        store = Store(str(Path(tmp) / "db"))  # LanceDB imported here, before the clock
        timer = StageTimer()
        profiler = cProfile.Profile() if profile else None
        kwargs = {"graph": graph} if graph != "auto" else {}
        default_ahead, pipeline.AHEAD = pipeline.AHEAD, ahead
        try:
            with timed_pipeline(timer):
                started = time.perf_counter()
                if profiler:
                    profiler.enable()
                result = ingest_stream(store, "bench", open_stream(corpus), model=encoder_name,
                                       cross_lingual=False, **kwargs)
                if profiler:
                    profiler.disable()
                ingest_s = time.perf_counter() - started
        finally:
            pipeline.AHEAD = default_ahead
        if profiler:
            profiler.dump_stats(str(profile))
        peak_mb = peak_rss_mb()
    encoder_docs = min(docs, encoder_docs or docs)
    texts = (embedding_text(Document(id=r["_id"], text=r["text"], title=r["title"]))
             for r in repeated(source_docs, encoder_docs))
    chars, encoder_s = 0, 0.0
    while chunk := [t for _, t in zip(range(ENCODER_CHUNK), texts, strict=False)]:
        chars += sum(map(len, chunk))
        started = time.perf_counter()
        encoder.encode_passages(chunk)
        encoder_s += time.perf_counter() - started
    stages = {stage: round(timer.seconds.get(stage, 0.0), 3) for stage in STAGES[:-1]}
    stages["other"] = round(max(0.0, ingest_s - timer.main_seconds), 3)
    return {
        "docs": result.documents, "encoder": encoder.spec.name, "backend": encoder.backend, "device": embed.device(),
        "graph": result.info.graph or "current", "ahead": ahead, "chars_per_doc": round(chars / encoder_docs, 1),
        "ingest_s": round(ingest_s, 3), "encoder_s": round(encoder_s, 3), "encoder_docs": encoder_docs,
        "ingest_docs_per_s": round(docs / ingest_s, 1), "encoder_docs_per_s": round(encoder_docs / encoder_s, 1),
        "ratio": round(encoder_s / encoder_docs * docs / ingest_s, 3), "peak_rss_mb": round(peak_mb, 1),
        "stream_peak_rss_mb": round(timer.peak_mb_at_start.get("indexes", peak_mb), 1),
        "stages": stages,
    }


def table(result: dict) -> str:
    lines = [f"{result['docs']:,} documents ({result['chars_per_doc']:.0f} chars each) · encoder {result['encoder']} "
             f"({result['backend']}, {result['device']}) · graph {result['graph']} · ahead {result['ahead']}",
             f"ingest   {result['ingest_docs_per_s']:>10,.1f} docs/s   ({result['ingest_s']:.1f} s)",
             f"encoder  {result['encoder_docs_per_s']:>10,.1f} docs/s  ({result['encoder_s']:.1f} s alone, "
             f"{result['encoder_docs']:,} texts)",
             f"ratio    {result['ratio']:>10.3f}          (ingest / encoder)",
             f"peak RSS {result['peak_rss_mb']:>10,.0f} MB   ({result['stream_peak_rss_mb']:,.0f} MB before the "
             "index steps)", "", "| stage | s | share |", "| --- | ---: | ---: |"]
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
    parser.add_argument("--ahead", type=int, help="batches tokenised ahead (pipeline.AHEAD; 0: no overlap)")
    parser.add_argument("--encoder-docs", type=int, help="texts the encoder alone embeds (default: all --docs)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.docs < 1:
        parser.error("--docs must be at least 1")
    if not args.source.exists():
        parser.error(f"{args.source} does not exist")
    if args.ahead is not None and args.ahead < 0:
        parser.error("--ahead must be 0 or more")
    result = run(args.source, args.docs, args.encoder, args.graph, args.profile, args.ahead, args.encoder_docs)
    print(json.dumps(result) if args.json else table(result))


if __name__ == "__main__":
    main()
