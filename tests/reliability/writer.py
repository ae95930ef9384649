"""One writer process for the reliability tests: does one write to a store and prints one JSON line.

    python writer.py DB OP NAME [START COUNT] [--wait GO_FILE] [--real]

The tests start it as `forked(argv, env, out, err)` in a process forked from a server that has
imported this module once (multiprocessing's forkserver): a process of its own (own pid, file locks,
LanceDB connection; killed with `kill -9`) without paying ~2 s of imports (numpy, pyarrow, lancedb)
per writer. It runs `main` with the test's environment and argv, its stdout and stderr in files.

OP: create | add | clear | delete | rate. Documents are `d<i>` for i in START…START+COUNT−1. By
default rows are built without a model (deterministic vectors of the MiniLM dimension, real tokens)
and written through the store, which is what the protocol under test is; `--real` ingests through
the pipeline with the real encoder. `--wait GO_FILE` creates `GO_FILE.ready-<pid>` and waits for
GO_FILE, so the test can start several writers at the same moment (a barrier).
With WORKBENCH_PAUSE_AT / WORKBENCH_PAUSE_FILE set, the store stops at that step to be killed.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

import lancedb  # noqa: E402, F401  (the Store imports it when it opens a database: here, so a forkserver preloads it)
import pandas  # noqa: E402, F401  (as lancedb, imported by a write)
from model_free import FixedEncoder, new_info  # noqa: E402  (tests/: on PYTHONPATH, conftest.py)

from retrieval.indexing.derive import document_rows, graph_rows  # noqa: E402
from retrieval.indexing.pipeline import add_documents, create_collection  # noqa: E402
from retrieval.indexing.writer import Batch, write_batches  # noqa: E402
from retrieval.store import Store  # noqa: E402
from retrieval.types import Document, ParsedCorpus  # noqa: E402

WORDS = "apple river mountain castle bridge garden ocean forest valley desert".split()


def documents(start: int, count: int) -> list[Document]:
    return [Document(f"d{i}", f"document {i} about the {WORDS[i % len(WORDS)]} near the {WORDS[(i * 7) % len(WORDS)]}",
                     metadata={"n": i}) for i in range(start, start + count)]


def write(store: Store, op: str, name: str, start: int, count: int, real: bool) -> dict:
    docs = documents(start, count)
    if op == "create":
        if real:
            info = create_collection(store, name, ParsedCorpus(docs), model="all-MiniLM-L6-v2").info
        else:
            info = new_info(name)
            batch = Batch(document_rows(docs, FixedEncoder()), graph_rows(docs, datetime.now(UTC)))
            info = write_batches(store, info, True, [batch])
        return {"doc_count": info.doc_count}
    if op == "add":
        if real:
            info = add_documents(store, name, ParsedCorpus(docs)).info
        else:
            batch = Batch(document_rows(docs, FixedEncoder()), graph_rows(docs, datetime.now(UTC)))
            info = write_batches(store, store.info(name), False, [batch])
        return {"doc_count": info.doc_count}
    if op == "clear":
        return {"doc_count": store.clear(name).doc_count}
    if op == "delete":
        store.delete(name)
        return {}
    if op == "rate":
        from retrieval.judging.judgments import JudgmentStore

        judgments = JudgmentStore(store)
        ids = [judgments.rate(name, "default", f"query {i}", f"d{i % 3}", 1) for i in range(start, start + count)]
        return {"query_ids": ids}
    raise SystemExit(f"unknown op {op}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = [a for a in argv if not a.startswith("--")]
    db, op, name = args[:3]
    start, count = (int(args[3]), int(args[4])) if len(args) > 4 else (0, 0)
    real = "--real" in argv
    store = Store(db)
    if "--wait" in argv:
        go = Path(argv[argv.index("--wait") + 1])
        Path(f"{go}.ready-{os.getpid()}").write_text("ready")
        while not go.exists():
            time.sleep(0.005)
    try:
        out = {"ok": True, **write(store, op, name, start, count, real)}
    except Exception as exc:  # reported, as a user would see it
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out), flush=True)


def forked(argv: list[str], env: dict[str, str], out: str, err: str, program: str = "writer") -> None:
    """`program.main(argv)` (this module's, or reader.py's) in a forked process, as if started
    with environment `env`, stdout to file `out` and stderr to file `err` (file descriptors 1 and
    2, so that native code's output lands there too)."""
    os.environ.clear()
    os.environ.update(env)
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    importlib.import_module(program).main(argv)


if __name__ == "__main__":
    main()
