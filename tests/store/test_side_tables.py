"""Keyed side tables (retrieval/store/side_tables.py): made on the first write, one commit per write
under the table's lock, merge-insert vs add, column migrations, reads before any write."""

import threading

import pyarrow as pa
import pytest

from retrieval.store import Store
from retrieval.store.side_tables import KeyedTable

SCHEMA = pa.schema([
    pa.field("name", pa.string(), nullable=False),
    pa.field("value", pa.string(), nullable=False),
    pa.field("note", pa.string(), nullable=True),
])


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path / "db"))


@pytest.fixture
def table(store):
    return KeyedTable(store, "_things", SCHEMA, "name")


def version(store: Store) -> int:
    return store.db.open_table("_things").version


def test_before_the_first_write_every_read_finds_nothing_and_no_table_is_made(store, table):
    assert table.rows() == [] and table.keys() == [] and table.get("a") is None and not table.has("a")
    table.delete("a")
    table.rename("a", "b")
    assert "_things" not in store.table_names()


def test_put_makes_the_table_and_replaces_the_row_of_its_key(store, table):
    table.put({"name": "a", "value": "1", "note": "first"})
    assert "_things" in store.table_names() and store.collection_names() == []  # '_': never a collection
    table.put({"name": "b", "value": "2", "note": None})
    before = version(store)
    table.put({"name": "a", "value": "3", "note": None})
    assert version(store) == before + 1  # one commit
    assert table.get("a") == {"name": "a", "value": "3", "note": None}
    assert table.get("b", ["value"]) == {"value": "2"}
    assert sorted(table.keys()) == ["a", "b"] and table.has("b") and not table.has("c")
    assert sorted((r["name"], r["value"]) for r in table.rows()) == [("a", "3"), ("b", "2")]
    assert table.rows("value = '2'", ["name"]) == [{"name": "b"}]


def test_add_appends_rename_and_delete_change_one_row_each_one_commit(store, table):
    table.add({"name": "a", "value": "1", "note": None})
    before = version(store)
    table.add({"name": "b", "value": "2", "note": None})
    assert version(store) == before + 1
    table.rename("a", "c")
    assert version(store) == before + 2
    assert table.get("a") is None and table.get("c") == {"name": "c", "value": "1", "note": None}
    table.delete("c")
    assert version(store) == before + 3
    assert table.keys() == ["b"]
    table.add({"name": "b", "value": "again", "note": None})  # an add never merges: the caller checks first
    assert sorted(r["value"] for r in table.rows()) == ["2", "again"]


def test_a_table_written_before_a_column_existed_gains_it_on_the_next_write(store, table):
    old = pa.schema([f for f in SCHEMA if f.name != "note"])
    store.db.create_table("_things", pa.Table.from_pylist([{"name": "old", "value": "0"}], schema=old))
    assert table.get("old") == {"name": "old", "value": "0"}
    table.put({"name": "new", "value": "1", "note": "n"})
    assert store.db.open_table("_things").schema.names == ["name", "value", "note"]
    assert table.get("old") == {"name": "old", "value": "0", "note": None}
    assert table.get("new") == {"name": "new", "value": "1", "note": "n"}


def test_another_store_on_the_database_reads_each_write_at_once(store, table, tmp_path):
    other = KeyedTable(Store(str(tmp_path / "db")), "_things", SCHEMA, "name")
    table.put({"name": "a", "value": "1", "note": None})
    assert other.get("a") == {"name": "a", "value": "1", "note": None}
    table.delete("a")
    assert other.keys() == []


def test_a_check_and_the_write_it_decides_are_one_step_under_the_lock(table, tmp_path):
    """A second writer (another Store: its own file lock, as another process has) that checks a
    key while the first holds the lock waits, then sees the first's row: one row, never two."""
    other = KeyedTable(Store(str(tmp_path / "db")), "_things", SCHEMA, "name")
    outcome: list[str] = []

    def second():
        with other.lock():
            if other.has("k"):
                outcome.append("taken")
            else:
                other.add({"name": "k", "value": "second", "note": None})
                outcome.append("added")

    with table.lock():
        assert not table.has("k")
        racer = threading.Thread(target=second)
        racer.start()
        racer.join(0.5)
        assert racer.is_alive() and outcome == []  # waiting for the lock
        table.add({"name": "k", "value": "first", "note": None})
    racer.join(30)
    assert outcome == ["taken"]
    assert table.rows() == [{"name": "k", "value": "first", "note": None}]


def test_a_side_table_is_named_with_a_leading_underscore_and_keyed_on_one_of_its_columns(store):
    with pytest.raises(ValueError, match="starts with '_'"):
        KeyedTable(store, "things", SCHEMA, "name")
    with pytest.raises(ValueError, match="key 'id' is not a column"):
        KeyedTable(store, "_things", SCHEMA, "id")
