"""Readers after a writer was killed (docs/reliability.md, "Readers after a crash"): a reader in
another process — the CLI's `collections list` and `stats`, the rows a search reads — sees the
last committed state, never a dead write, without any writer having run since; and never rolls
back a writer that is alive."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from test_writers import Writer, docs, killed_at, prepare, start

from retrieval.store import Store


def read(db: Path, name: str, *flags: str) -> dict:
    """What a reader in a new process sees (reader.py, forked as the writers are)."""
    reader = Writer(db, (name, *flags), None, program="reader")
    reader.process.join(timeout=300)
    out, err = reader.outputs()
    assert reader.process.exitcode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("step", ["add:batch-1", "add:catalogue"])
def test_a_reader_after_a_killed_add_sees_the_collection_as_before(tmp_path, step):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 10)["ok"]
    killed_at(db, tmp_path, step, "add", "c", "100", "10")
    seen = read(db, "c")
    assert seen == {"list": [["c", "10 docs"]], "stats": 10, "rows": 10, "search": sorted(docs(0, 10))}


@pytest.mark.parametrize("step", ["clear:journal", "clear:rows"])
def test_a_reader_after_a_killed_clear_sees_it_finished(tmp_path, step):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 10)["ok"]
    killed_at(db, tmp_path, step, "clear", "c")
    # a clear that started is finished (docs/reliability.md): listed, empty, everywhere alike
    assert read(db, "c") == {"list": [["c", "0 docs"]], "stats": 0, "rows": 0,
                             "search": "error: 'c' has no documents — add some on the Corpus page, or with "
                                       "`python -m retrieval ingest FILE --collection c --add`"}


@pytest.mark.parametrize("step", ["delete:aux"])
def test_after_a_killed_delete_list_and_delete_agree(tmp_path, step):
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 10)["ok"]
    assert prepare(db, "create", "kept", 0, 3)["ok"]
    killed_at(db, tmp_path, step, "delete", "c")
    seen = read(db, "c", "--delete")
    assert seen["list"] == [["kept", "3 docs"]]
    assert seen["stats"].startswith("error: No collection named 'c'") and seen["rows"] is None
    assert seen["search"].startswith("error: No collection named 'c'")
    assert seen["delete"] == [2, "error: No collection named 'c' (collections: kept)"]


def test_a_reader_never_rolls_back_a_writer_that_is_alive(tmp_path):
    """A writer paused in the middle of its add holds the lock: the reader leaves its journal and
    its rows alone (it may see the add in progress); once the writer is killed, the next reader
    sees the collection as before."""
    db = tmp_path / "db"
    assert prepare(db, "create", "c", 0, 10)["ok"]
    marker = tmp_path / "paused"
    writer = start(db, "add", "c", "100", "10", env={"WORKBENCH_PAUSE_AT": "add:batch-1",
                                                      "WORKBENCH_PAUSE_FILE": str(marker)})
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert not writer.ended() and time.monotonic() < deadline, "writer never paused"
            time.sleep(0.01)
        version = Store(str(db)).db.open_table("c").version
        seen = read(db, "c", "--no-search")
        assert seen["rows"] == 20  # the live add's rows: in progress, not rolled back
        assert (db / "_workbench_locks" / "c.journal.json").exists()
        assert Store(str(db)).db.open_table("c").version == version
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.process.join(timeout=30)
    assert read(db, "c") == {"list": [["c", "10 docs"]], "stats": 10, "rows": 10, "search": sorted(docs(0, 10))}
