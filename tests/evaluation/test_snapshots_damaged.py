"""Snapshots whose row or table is damaged, or whose name two rows share (written around the
workbench: an old version, a copied table, a disk fault): a clear message naming the snapshot,
never a traceback; the rest stay usable and a damaged one can be deleted. No model is loaded:
the snapshots are made here, not evaluated."""

from __future__ import annotations

import shutil

import pytest

from retrieval.cli.main import main as cli
from retrieval.evaluation.snapshots import SNAPSHOTS_TABLE, Snapshot, SnapshotStore
from retrieval.search.config import SearchConfig
from retrieval.store import Store
from retrieval.types import RetrievalError


def snapshot(name: str) -> Snapshot:
    return Snapshot(name=name, collection="c", created=f"2026-01-01T00:00:0{len(name) % 10}", table_version=3,
                    doc_count=2, config=SearchConfig(), query_set="default", queries={"q1": "tea"},
                    qrels={"q1": {"d1": 1}}, judgments_key="k", run={"q1": [("d1", 0.5)]},
                    per_query={"q1": {"ndcg@10": 1.0, "precision@10": 0.1, "recall@100": 1.0, "mrr": 1.0,
                                      "judged@10": 0.1}})


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "db"
    SnapshotStore(Store(str(path))).add(snapshot("good"))
    return path


def raw_add(db, row: dict) -> None:
    """A row written around `SnapshotStore.add` (no check, no validation)."""
    SnapshotStore(Store(str(db))).table.add(row)


def run(capsys, db, *argv: str) -> tuple[int, str, str]:
    code = cli(["--db", str(db), "snapshot", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("column,value,why", [
    ("run", "{not json", "its run is not valid JSON"),
    ("config", '{"depth": "ten"}', "its config is not valid: Invalid search config: depth"),
    ("per_query", '{"q1": 3}', "its per_query is not {query id: {metric: number}}"),
])
def test_a_damaged_row_is_named_and_the_others_stay_usable(db, capsys, column, value, why):
    raw_add(db, {**snapshot("bad").to_row(), column: value})
    store = SnapshotStore(Store(str(db)))
    with pytest.raises(RetrievalError, match=rf"^Snapshot 'bad' is damaged \({why}.*\): delete it "
                                             r"\(snapshot delete bad\)"):
        store.get("bad")
    assert [s.name for s in store.list()] == ["good"]
    code, out, err = run(capsys, db, "list")
    assert code == 0 and out.startswith("good\tc\tv3") and "bad" not in out
    assert f"warning: Snapshot 'bad' is damaged ({why}" in err
    code, _, err = run(capsys, db, "export", "bad")
    assert code == 2 and err.startswith("error: Snapshot 'bad' is damaged") and "Traceback" not in err
    assert run(capsys, db, "delete", "bad")[0] == 0
    assert run(capsys, db, "list")[2] == ""


def test_a_damaged_table_is_a_message(db, capsys):
    shutil.rmtree(db / f"{SNAPSHOTS_TABLE}.lance" / "data")
    for argv in (("list",), ("export", "good"), ("delete", "good")):
        code, _, err = run(capsys, db, *argv)
        assert code == 2, argv
        assert err.startswith("error: The table _snapshots cannot be read (lance error: "), err
        assert "restore the database folder from a backup, or delete its _snapshots.lance folder to start it " \
               "again empty" in err


def test_a_metric_that_is_not_a_number_is_named_with_its_query(db, capsys):
    raw_add(db, {**snapshot("odd").to_row(), "per_query": '{"q1": {"ndcg@10": "0.5"}}'})
    with pytest.raises(RetrievalError, match=r"^Snapshot 'odd' is damaged: its ndcg@10 of query 'q1' is '0\.5', not "
                                             r"a number between 0 and 1; delete it \(snapshot delete odd\)$"):
        SnapshotStore(Store(str(db))).get("odd")
    code, out, err = run(capsys, db, "list")
    assert code == 0 and out.startswith("good\t") and "warning: Snapshot 'odd' is damaged: its ndcg@10" in err


def test_two_rows_of_one_name_are_detected_and_refused(db, capsys):
    raw_add(db, snapshot("twin").to_row())
    raw_add(db, {**snapshot("twin").to_row(), "created": "2026-02-02T00:00:00"})
    store = SnapshotStore(Store(str(db)))
    refused = (r"^2 snapshots are named 'twin' \(created 2026-01-01T00:00:04, 2026-02-02T00:00:00\): "
               r"'snapshot delete twin' deletes both")
    with pytest.raises(RetrievalError, match=refused):
        store.get("twin")
    with pytest.raises(RetrievalError, match=refused):
        store.rename("twin", "other")
    with pytest.raises(RetrievalError, match="A snapshot named 'twin' already exists"):
        store.add(snapshot("twin"))
    code, out, err = run(capsys, db, "list")
    assert code == 0 and [line.split("\t")[0] for line in out.splitlines()] == ["good"]
    assert "warning: 2 snapshots are named 'twin'" in err
    assert run(capsys, db, "delete", "twin")[0] == 0
    assert store.names() == ["good"]
