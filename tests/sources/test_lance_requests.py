"""LanceDB searches as `Query` objects run together (`sources/lance_requests.py`, `run_sources`):
each request returns exactly the rows LanceDB's sync builder returns for the same search —
full-text, exact vector scan, IVF_SQ with probes and refine, each with and without a prefilter —
and one failing request or source is reported as that source's error, the others unharmed. A
`RowIdMap` names every row of its table version by row id (rows in several fragments, some
deleted), and a source with one asks LanceDB for no `id` yet returns the same hits."""

from __future__ import annotations

from concurrent.futures import Future

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from retrieval.indexing.indexes import index_text
from retrieval.sources.base import ids_in, run_source, run_sources, top_hits
from retrieval.sources.bm25 import LanceFTSSource
from retrieval.sources.dense import DenseSource
from retrieval.sources.lance_requests import LanceRequest, RowIdMap, fts_query, start_request, vector_query
from retrieval.types import Hit

WORDS = "owl hawk mouse night river stone bread wheat salt moon sun field hunter seed".split()
DIM = 16
ROWS = 300


def corpus(rng: np.random.Generator) -> pa.Table:
    tokens = [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 12)))) for _ in range(ROWS)]
    vectors = rng.normal(size=(ROWS, DIM)).astype(np.float32)
    return pa.table({"id": [f"d{i:03d}" for i in range(ROWS)], "tokens": tokens,
                     "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM)})


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """Two tables of the same rows: 'exact' (no vector index) and 'indexed' (IVF_SQ, 4 partitions)."""
    db = lancedb.connect(str(tmp_path_factory.mktemp("requests")))
    data = corpus(np.random.default_rng(7))
    exact, indexed = db.create_table("exact", data), db.create_table("indexed", data)
    for table in (exact, indexed):
        index_text(table, "tokens")
    indexed.create_index(metric="cosine", index_type="IVF_SQ", num_partitions=4, vector_column_name="vector")
    return exact, indexed


QUERIES = ["owl night", "bread salt wheat", "moon", "hunter field seed stone", "river"]
ALLOWED = frozenset(f"d{i:03d}" for i in range(0, ROWS, 3))


def run(table, query) -> pa.Table:
    return LanceRequest(table, query, lambda rows: rows).run()


@pytest.mark.parametrize("allowed", [None, ALLOWED])
@pytest.mark.parametrize("text", QUERIES)
def test_a_full_text_request_returns_the_builder_s_rows(tables, text, allowed):
    table = tables[0]
    builder = table.search(text, query_type="fts", fts_columns="tokens")
    if allowed is not None:
        builder = builder.where(ids_in(allowed), prefilter=True)
    expected = builder.limit(20).select(["id"]).with_row_id(True).to_arrow()
    got = run(table, fts_query(text, "tokens", 20, ids_in(allowed) if allowed is not None else None))
    assert expected.num_rows > 0 and got.equals(expected)


@pytest.mark.parametrize("allowed", [None, ALLOWED])
@pytest.mark.parametrize("indexed", [False, True])
def test_a_vector_request_returns_the_builder_s_rows(tables, indexed, allowed):
    table = tables[indexed]
    rng = np.random.default_rng(11)
    for _ in range(5):
        vector = rng.normal(size=DIM).astype(np.float32)
        builder = table.search(vector, vector_column_name="vector").distance_type("cosine")
        if allowed is not None:
            builder = builder.where(ids_in(allowed), prefilter=True)
        nprobes, refine = (2, 3) if indexed else (None, None)
        if indexed:
            builder = builder.nprobes(nprobes).refine_factor(refine)
        expected = builder.limit(25).select(["id"]).with_row_id(True).to_arrow()
        got = run(table, vector_query(vector, "vector", 25, nprobes, refine,
                                      ids_in(allowed) if allowed is not None else None))
        assert expected.num_rows == 25 and got.equals(expected)


def test_requests_run_together_and_fail_alone(tables):
    exact, _ = tables
    good = LanceRequest(exact, fts_query("owl", "tokens", 5), lambda rows: rows)
    bad = LanceRequest(exact, fts_query("owl", "no_such_column", 5), lambda rows: rows)
    rows, failed = start_request(good), start_request(bad)  # side by side
    assert rows.result().num_rows == 5 and isinstance(failed.exception(), Exception)
    with pytest.raises(Exception, match="no_such_column"):
        bad.run()


class Broken:
    """A source whose LanceDB request cannot even be made."""

    name = "broken"

    def lance_request(self, query, depth, allowed=None):
        raise RuntimeError("cannot build the query")

    def search(self, query, depth, allowed=None):  # as the LanceDB sources do: through the request
        return self.lance_request(query, depth, allowed).run()


class InMemory:
    """A source without LanceDB: it searches in the caller's thread."""

    name = "memory"

    def search(self, query, depth, allowed=None):
        return [Hit("d001", 2.0, 1), Hit("d002", 1.0, 2)][:depth]


def test_run_sources_equals_run_source_per_source(tables):
    exact, indexed = tables
    vectors = {q: np.random.default_rng(len(q)).normal(size=DIM).astype(np.float32) for q in QUERIES}
    sources = {"bm25": LanceFTSSource(indexed),
               "dense": DenseSource(indexed, vectors.__getitem__, indexed.list_indices()[-1]),
               "exact": DenseSource(exact, vectors.__getitem__), "memory": InMemory(), "broken": Broken()}
    assert {i.index_type for i in indexed.list_indices()} == {"FTS", "IvfSq"}
    for allowed in (None, ALLOWED, frozenset()):
        for query in QUERIES:
            together = run_sources(sources, query, 10, allowed)
            assert list(together) == list(sources)
            for name, source in sources.items():
                assert together[name] == run_source(source, query, 10, allowed), (name, query)
            assert together["broken"].error == "RuntimeError: cannot build the query"
            assert together["bm25"].error is None and together["dense"].error is None
            if allowed is None:
                assert together["bm25"].hits and len(together["dense"].hits) == 10
                assert all(h.row_id is not None for h in together["dense"].hits)
    # a query without indexable terms asks LanceDB nothing and says why, as `run_source` does
    empty = run_sources({"bm25": LanceFTSSource(indexed)}, "!!", 10)["bm25"]
    assert empty.hits == () and empty.notes


@pytest.fixture(scope="module")
def fragmented(tmp_path_factory):
    """The rows written in three adds, three of them deleted, indexed: row ids are not positions
    (a fragment's rows are numbered from fragment id << 32)."""
    db = lancedb.connect(str(tmp_path_factory.mktemp("fragmented")))
    data = corpus(np.random.default_rng(5))
    table = db.create_table("fragmented", data.slice(0, 100))
    table.add(data.slice(100, 100))
    table.add(data.slice(200, 100))
    table.delete("id IN ('d005', 'd150', 'd299')")
    index_text(table, "tokens")
    table.create_index(metric="cosine", index_type="IVF_SQ", num_partitions=4, vector_column_name="vector")
    return table


def test_a_row_id_map_names_every_row_of_its_version(fragmented):
    rows = fragmented.search().select(["id"]).with_row_id(True).limit(None).to_arrow()
    row_ids, ids = rows.column("_rowid").to_pylist(), rows.column("id").to_pylist()
    assert len(ids) == ROWS - 3 and max(row_ids) >= 2 << 32  # the third fragment's
    named = RowIdMap(fragmented)
    assert named.wait(60) and named.ready()
    shuffled = np.random.default_rng(3).permutation(len(ids))
    assert named.ids(pa.array([row_ids[i] for i in shuffled], pa.uint64())) == [ids[i] for i in shuffled]
    assert named.ids(pa.array([], pa.uint64())) == []  # a search without hits
    # row 5 of the first fragment was d005, deleted: no row of this version, a clear error
    with pytest.raises(RuntimeError, match="not rows of the table version searched"):
        named.ids(pa.array([row_ids[0], 5], pa.uint64()))


def test_a_row_id_map_not_read_yet_takes_the_ids(fragmented):
    named = RowIdMap(fragmented)
    named._read = Future()  # a read still running
    assert not named.ready() and not named.wait(0)
    rows = fragmented.search().select(["id"]).with_row_id(True).limit(None).to_arrow()
    picked = [7, 150, 3, 296]
    wanted = pa.array([rows.column("_rowid")[i].as_py() for i in picked], pa.uint64())
    assert named.ids(wanted) == [rows.column("id")[i].as_py() for i in picked]


def test_sources_with_a_row_id_map_ask_for_no_id_and_return_the_same_hits(fragmented):
    named = RowIdMap(fragmented)
    assert named.wait(60)
    index = next(i for i in fragmented.list_indices() if i.index_type == "IvfSq")
    vectors = {q: np.random.default_rng(len(q) + 1).normal(size=DIM).astype(np.float32) for q in QUERIES}
    pairs = {"bm25": (LanceFTSSource(fragmented, lambda: named), LanceFTSSource(fragmented)),
             "dense": (DenseSource(fragmented, vectors.__getitem__, index, row_id_map=lambda: named),
                       DenseSource(fragmented, vectors.__getitem__, index))}
    for name, (mapped, plain) in pairs.items():
        for allowed in (None, ALLOWED):
            for query in QUERIES:
                assert mapped.lance_request(query, 20, allowed).query.columns == [
                    "_score" if name == "bm25" else "_distance"]
                assert plain.lance_request(query, 20, allowed).query.columns == ["id"]
                got, expected = mapped.search(query, 20, allowed), plain.search(query, 20, allowed)
                assert got and got == expected, (name, query)
                assert [h.row_id for h in got] == [h.row_id for h in expected]
                assert {"d005", "d150", "d299"}.isdisjoint(h.doc_id for h in got)


class GatedTable:
    """A table handle whose search (`_table._execute_query`, as LanceDB's async table has it)
    returns `rows` once `gate` is set (or after `wait` seconds): a slow search."""

    def __init__(self, rows: pa.Table, gate=None, wait: float = 0.0):
        self._table, self.rows, self.gate, self.wait = self, rows, gate, wait
        self.gate_was_set: bool | None = None

    async def _execute_query(self, query):
        import asyncio

        if self.gate is not None:
            self.gate_was_set = await asyncio.get_running_loop().run_in_executor(None, self.gate.wait, self.wait)
        rows = self.rows

        class Reader:
            schema = rows.schema

            async def read_all(self):
                return rows.to_batches()

        return Reader()


class GatedSource:
    def __init__(self, name: str, table: GatedTable, on_read=None):
        self.name, self.table, self.on_read = name, table, on_read

    def lance_request(self, query, depth, allowed=None):
        def read(rows):
            if self.on_read is not None:
                self.on_read()
            return top_hits(rows.column("id").to_pylist(), rows.column("_score").to_pylist(), depth)

        from lancedb.query import Query

        return LanceRequest(self.table, Query(), read)

    def search(self, query, depth, allowed=None):
        return self.lance_request(query, depth, allowed).run()


def test_each_search_is_read_as_soon_as_its_rows_arrive():
    """The faster search's rows become hits while the slower one still runs (its search here
    waits until the faster one's hits are read: with the reads left until both searches are
    done it would wait out its 10 s and see the gate unset)."""
    import threading

    read_first = threading.Event()
    rows = pa.table({"id": ["d001", "d002"], "_score": [2.0, 1.0]})
    slow = GatedTable(pa.table({"id": ["d003"], "_score": [0.5]}), gate=read_first, wait=10.0)
    sources = {"slow": GatedSource("slow", slow), "fast": GatedSource("fast", GatedTable(rows), read_first.set)}
    results = run_sources(sources, "q", 10)
    assert slow.gate_was_set is True
    assert list(results) == ["slow", "fast"]
    assert [(h.doc_id, h.raw_score, h.rank) for h in results["fast"].hits] == [("d001", 2.0, 1), ("d002", 1.0, 2)]
    assert [(h.doc_id, h.raw_score, h.rank) for h in results["slow"].hits] == [("d003", 0.5, 1)]
