"""Writes that hold across processes and crashes (docs/reliability.md), with real processes:

- two writers started at the same moment (a file barrier), for every pair of create / add / rate /
  clear, asserting row counts, unique ids, catalogue counts, and that every process that reported
  success has its rows; `RELIABILITY_RUNS` (default 1) repeats each pair;
- `kill -9` of a writer stopped at each step of each write, then recovery by the next process that
  opens the collection: the collection is exactly as before (or, for clear and delete, exactly as
  after), it can be deleted, and ingesting again works.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from writer import documents as writer_documents  # the documents a writer writes
from writer import forked, write  # the writer's own code, run in this process for setup and re-ingest

from retrieval.judging.judgments import JudgmentStore
from retrieval.store import GRAPH_KINDS, Store, aux_table_name

RUNS = int(os.environ.get("RELIABILITY_RUNS", "1"))
# Writers are forked from one server process that has imported writer.py (and so numpy, pyarrow,
# lancedb) once (conftest.py starts it): each is still a process of its own, killed with kill -9,
# minus ~2 s of imports.
FORKS = multiprocessing.get_context("forkserver")


class Writer:
    """A writer process (writer.forked; or a reader: `program="reader"`) and the files its stdout
    and stderr go to."""

    def __init__(self, db: Path, args: tuple[str, ...], env: dict | None, program: str = "writer"):
        stem = Path(os.environ["WORKBENCH_LOCK_DIR"]) / f"writer-{time.monotonic_ns()}"
        self.out, self.err = stem.with_suffix(".out"), stem.with_suffix(".err")
        self.process = FORKS.Process(target=forked, args=([str(db), *args], {**os.environ, **(env or {})},
                                                         str(self.out), str(self.err), program))
        # multiprocessing has a child run the parent's __main__ again (by its path or name); in a
        # test process that may be app.py, left there by a test that ran the app: a bare one.
        with pytest.MonkeyPatch.context() as patch:
            patch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
            self.process.start()
        self.pid = self.process.pid

    def ended(self) -> bool:
        return self.process.exitcode is not None

    def outputs(self) -> tuple[str, str]:
        return tuple(p.read_text(encoding="utf-8") if p.exists() else "" for p in (self.out, self.err))


def start(db: Path, *args: str, env: dict | None = None) -> Writer:
    return Writer(db, args, env)


def prepare(db: Path, op: str, name: str, start_: int = 0, count: int = 0, real: bool = False) -> dict:
    """A write done in this process (setup and re-ingest: no process start or model load to pay for)."""
    return {"ok": True, **write(Store(str(db)), op, name, start_, count, real=real)}


def result(writer: Writer) -> dict:
    writer.process.join(timeout=180)
    out, err = writer.outputs()
    assert writer.process.exitcode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


def together(db: Path, tmp: Path, *writers: tuple[str, ...]) -> list[dict]:
    """Start the writers, wait until each is ready, then let them go at the same moment."""
    go = tmp / f"go-{time.monotonic_ns()}"
    processes = [start(db, *args, "--wait", str(go)) for args in writers]
    deadline = time.monotonic() + 120
    while len(list(tmp.glob(f"{go.name}.ready-*"))) < len(processes):
        assert time.monotonic() < deadline, "writers never got ready"
        time.sleep(0.01)
    go.write_text("go")
    return [result(p) for p in processes]


def ids_of(store: Store, name: str) -> list[str]:
    return store.column(name, ["id"]).column("id").to_pylist()


def check_consistent(store: Store, name: str) -> list[str]:
    """Unique ids; catalogue count = rows; graph tables hold exactly the collection's chunks."""
    ids = ids_of(store, name)
    assert len(ids) == len(set(ids)), "duplicate ids"
    assert store.info(name).doc_count == len(ids)
    tables = store.graph_tables(name)
    if ids:
        assert tables is not None
        assert {r["event_id"] for r in tables["event_times"].to_pylist()} == set(ids)
        assert {r["event_id"] for r in tables["event_entities"].to_pylist()} <= set(ids)
    return ids


def docs(start_: int, count: int) -> set[str]:
    return {f"d{i}" for i in range(start_, start_ + count)}


@pytest.mark.parametrize("run", range(RUNS))
def test_two_creates_of_one_name_one_wins_the_other_is_told(tmp_path, run):
    db = tmp_path / "db"
    a, b = together(db, tmp_path, ("create", "c", "0", "20"), ("create", "c", "100", "20"))
    assert sorted([a["ok"], b["ok"]]) == [False, True]
    loser = a if not a["ok"] else b
    # told after the winner's commit, or during it (the display name is claimed until the commit)
    busy = "NameBeingCreated: A collection named 'c' is being created by another writer right now"
    assert "RetrievalError: Collection 'c' already exists" in loser["error"] or busy in loser["error"]
    ids = check_consistent(Store(str(db)), "c")
    assert set(ids) in (docs(0, 20), docs(100, 20))


@pytest.mark.parametrize("run", range(RUNS))
def test_two_adds_of_different_documents_both_land(tmp_path, run):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 3)["ok"]
    a, b = together(db, tmp_path, ("add", "c", "100", "20"), ("add", "c", "200", "20"))
    assert a["ok"] and b["ok"], (a, b)
    assert set(check_consistent(Store(str(db)), "c")) == docs(0, 3) | docs(100, 20) | docs(200, 20)


@pytest.mark.parametrize("run", range(RUNS))
def test_the_same_file_added_twice_lands_once(tmp_path, run):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 3)["ok"]
    a, b = together(db, tmp_path, ("add", "c", "100", "30"), ("add", "c", "100", "30"))
    assert sorted([a["ok"], b["ok"]]) == [False, True]
    loser = a if not a["ok"] else b
    assert "30 document id(s) already exist in 'c'; nothing was added" in loser["error"]
    assert set(check_consistent(Store(str(db)), "c")) == docs(0, 3) | docs(100, 30)


@pytest.mark.parametrize("run", range(RUNS))
def test_concurrent_ratings_keep_every_query_and_unique_positions(tmp_path, run):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 3)["ok"]
    a, b = together(db, tmp_path, ("rate", "c", "0", "15"), ("rate", "c", "100", "15"))
    assert a["ok"] and b["ok"], (a, b)
    store = Store(str(db))
    judgments = JudgmentStore(store)
    queries = judgments.queries("c", "default")
    assert set(queries) == set(a["query_ids"]) | set(b["query_ids"]) and len(queries) == 30
    positions = [r["position"] for r in store.db.open_table(aux_table_name("c", "queries")).to_arrow().to_pylist()]
    assert sorted(positions) == list(range(30))
    assert sum(len(d) for d in judgments.qrels("c", "default").values()) == 30


@pytest.mark.parametrize("run", range(RUNS))
def test_add_and_clear_at_once_end_in_one_of_the_two_orders(tmp_path, run):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 10)["ok"]
    added, cleared = together(db, tmp_path, ("add", "c", "100", "10"), ("clear", "c"))
    assert added["ok"] and cleared["ok"], (added, cleared)
    ids = set(check_consistent(Store(str(db)), "c"))
    # clear then add: the added ten remain; add then clear: nothing remains
    assert ids in (docs(100, 10), set())
    assert (ids == set()) == (added["doc_count"] == 20)


def query_count(store: Store, name: str) -> int:
    return len(JudgmentStore(store).queries(name, "default")) if "default" in JudgmentStore(store).query_sets(
        name) else 0


@pytest.mark.parametrize("run", range(RUNS))
@pytest.mark.parametrize("first,second", [("create", "add"), ("create", "rate"), ("create", "clear"),
                                          ("add", "rate"), ("rate", "clear"), ("clear", "clear")])
def test_every_other_pair_ends_consistent(tmp_path, first, second, run):
    """The remaining pairs of create / add / rate / clear. A write that ran before the collection
    existed is refused with a readable message; every write that reported success is in the end
    state (clear removes documents, never query sets)."""
    db = tmp_path / "db"
    if first != "create":
        assert prepare(db, "create", "c", 0, 10)["ok"]
    args = {"create": ("create", "c", "0", "10"), "add": ("add", "c", "100", "10"),
            "rate": ("rate", "c", "0", "15"), "clear": ("clear", "c")}
    a, b = together(db, tmp_path, args[first], args[second])
    assert a["ok"], a
    # Only a write racing the collection's creation may find no collection yet, and then says so.
    assert b["ok"] or (first == "create" and "No collection named 'c'" in b["error"]), b
    store = Store(str(db))
    ids = set(check_consistent(store, "c"))
    expected = {
        ("create", "add"): docs(0, 10) | (docs(100, 10) if b["ok"] else set()),
        ("create", "rate"): docs(0, 10),
        ("create", "clear"): set() if b["ok"] else docs(0, 10),
        ("add", "rate"): docs(0, 10) | docs(100, 10),
        ("rate", "clear"): set(),
        ("clear", "clear"): set(),
    }[(first, second)]
    assert ids == expected
    rated = [r for r, name in ((a, first), (b, second)) if name == "rate" and r["ok"]]
    assert query_count(store, "c") == 15 * len(rated)  # clear keeps query sets


def test_two_real_ingests_through_the_pipeline_both_land(tmp_path):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 3, real=True)["ok"]
    a, b = together(db, tmp_path, ("add", "c", "100", "20", "--real"), ("add", "c", "200", "20", "--real"))
    assert a["ok"] and b["ok"], (a, b)
    assert set(check_consistent(Store(str(db)), "c")) == docs(0, 3) | docs(100, 20) | docs(200, 20)


# ---- kill -9 at each step ------------------------------------------------------------------------
def killed_at(db: Path, tmp: Path, step: str, *args: str) -> None:
    """Run a writer that stops at `step`, and kill -9 it there."""
    marker = tmp / f"paused-{time.monotonic_ns()}"
    writer = start(db, *args, env={"WORKBENCH_PAUSE_AT": step, "WORKBENCH_PAUSE_FILE": str(marker)})
    deadline = time.monotonic() + 120
    while not marker.exists():
        if writer.ended():
            raise AssertionError(f"writer ended before {step}: {writer.outputs()}")
        assert time.monotonic() < deadline, f"writer never reached {step}"
        time.sleep(0.01)
    os.kill(writer.pid, signal.SIGKILL)
    writer.process.join(timeout=30)
    assert writer.process.exitcode == -signal.SIGKILL


def snapshot(store: Store, name: str) -> tuple:
    if not store.exists(name):
        return ("absent", sorted(n for n in store.table_names() if n == name or n.endswith(f"__{name}")))
    tables = store.graph_tables(name)
    events = sorted(r["event_id"] for r in tables["event_times"].to_pylist()) if tables else None
    return (store.info(name).doc_count, sorted(ids_of(store, name)), events)


def then_recovers(db: Path, name: str, expected: tuple) -> None:
    """A new process (here: a new Store) sees the collection as `expected`, can delete it and
    ingest it again."""
    store = Store(str(db))
    names = store.collection_names()  # recovers (nobody holds the lock any more)
    assert (name in names) == (expected[0] != "absent")
    assert snapshot(store, name) == expected
    if expected[0] != "absent":
        check_consistent(store, name)
        store.delete(name)
    assert not [n for n in store.table_names() if n == name or n.endswith(f"__{name}")]
    assert prepare(db, "create", name, 500, 4)["ok"]
    assert set(check_consistent(Store(str(db)), name)) == docs(500, 4)


CREATE_STEPS = ["create:journal", "create:batch-1", "create:index", "create:graph", "create:catalogue"]
ADD_STEPS = ["add:journal", "add:batch-1", "add:index", "add:graph", "add:catalogue"]


@pytest.mark.parametrize("step", CREATE_STEPS)
def test_kill_during_create_leaves_no_trace(tmp_path, step):
    db = tmp_path / "db"
    killed_at(db, tmp_path, step, "create", "c", "0", "10")
    then_recovers(db, "c", ("absent", []))


@pytest.mark.parametrize("step", ADD_STEPS)
def test_kill_during_add_leaves_the_collection_as_before(tmp_path, step):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 10)["ok"]
    before = snapshot(Store(str(db)), "c")
    killed_at(db, tmp_path, step, "add", "c", "100", "10")
    then_recovers(db, "c", before)


@pytest.mark.parametrize("step", ["clear:journal", "clear:rows"])
def test_kill_during_clear_is_finished_on_recovery(tmp_path, step):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 10)["ok"]
    killed_at(db, tmp_path, step, "clear", "c")
    then_recovers(db, "c", (0, [], None))  # a clear that started is finished: it cannot be half undone


@pytest.mark.parametrize("step", ["delete:journal", "delete:aux", "delete:table"])
def test_kill_during_delete_is_finished_on_recovery(tmp_path, step):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 10)["ok"]
    killed_at(db, tmp_path, step, "delete", "c")
    then_recovers(db, "c", ("absent", []))


def test_kill_during_a_rating_rolls_both_tables_back(tmp_path):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 3)["ok"]
    assert prepare(db, "rate", "c", 0, 2)["ok"]
    store = Store(str(db))
    before = (JudgmentStore(store).queries("c", "default"), JudgmentStore(store).qrels("c", "default"))
    killed_at(db, tmp_path, "ratings:queries", "rate", "c", "100", "1")
    store = Store(str(db))
    with store.writer_lock("c"):  # taking the lock recovers
        pass
    judgments = JudgmentStore(store)
    assert (judgments.queries("c", "default"), judgments.qrels("c", "default")) == before


def test_graph_kinds_are_what_the_checks_read():
    assert GRAPH_KINDS == ("entities", "event_entities", "event_times")


# ---- kill -9 of a real streaming CLI ingest (python -m retrieval ingest) --------------------------
def stream_file(tmp: Path, start_: int, count: int) -> Path:
    """`count` documents d<start>… as JSONL: with --batch-size 3, several batches."""
    path = tmp / f"stream-{start_}.jsonl"
    path.write_text("".join(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in
                            writer_documents(start_, count)), encoding="utf-8")
    return path


def killed_cli_at(db: Path, tmp: Path, step: str, *args: str) -> set[str]:
    """A real `python -m retrieval ingest … --batch-size 3` stopped at `step`, killed -9 there.
    Returns the ids the collection's table held while it was paused (a reader leaves a live
    writer's rows alone; after the kill, the next read recovers)."""
    marker = tmp / f"paused-{time.monotonic_ns()}"
    env = {**os.environ, "WORKBENCH_PAUSE_AT": step, "WORKBENCH_PAUSE_FILE": str(marker), "OMP_WAIT_POLICY": "PASSIVE"}
    process = subprocess.Popen([sys.executable, "-m", "retrieval", "--db", str(db), "ingest", *args,
                                "--batch-size", "3"], cwd=Path(__file__).resolve().parents[2],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 300
    while not marker.exists():
        if process.poll() is not None:
            raise AssertionError(f"ingest ended before {step}: {process.communicate()}")
        assert time.monotonic() < deadline, f"ingest never reached {step}"
        time.sleep(0.05)
    paused = Store(str(db))
    written = set(paused.db.open_table("c").to_arrow().column("id").to_pylist()) if paused._has_table("c") else set()
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    return written


@pytest.mark.parametrize("step", ["create:batch-2", "create:catalogue"])
def test_kill_during_a_streaming_cli_create_leaves_no_trace(tmp_path, step):
    db = tmp_path / "db"
    written = killed_cli_at(db, tmp_path, step, str(stream_file(tmp_path, 0, 10)), "--collection", "c",
                            "--model", "all-MiniLM-L6-v2")
    assert written  # the killed ingest had written rows
    then_recovers(db, "c", ("absent", []))


@pytest.mark.parametrize("step", ["add:batch-2", "add:catalogue"])
def test_kill_during_a_streaming_cli_add_leaves_the_collection_as_before(tmp_path, step):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 10)["ok"]
    before = snapshot(Store(str(db)), "c")
    written = killed_cli_at(db, tmp_path, step, str(stream_file(tmp_path, 100, 10)), "--collection", "c",
                            "--add") - docs(0, 10)  # what the killed ingest had committed
    assert written == (docs(100, 6) if step == "add:batch-2" else docs(100, 10))
    then_recovers(db, "c", before)
