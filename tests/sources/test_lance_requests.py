"""LanceDB searches as `Query` objects run together (`sources/lance_requests.py`, `run_sources`):
each request returns exactly the rows LanceDB's sync builder returns for the same search —
full-text, exact vector scan, IVF_SQ with probes and refine, each with and without a prefilter —
and one failing request or source is reported as that source's error, the others unharmed."""

from __future__ import annotations

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from retrieval.indexing.indexes import index_text
from retrieval.sources.base import ids_in, run_source, run_sources
from retrieval.sources.bm25 import LanceFTSSource
from retrieval.sources.dense import DenseSource
from retrieval.sources.lance_requests import LanceRequest, fts_query, start_requests, vector_query
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
    rows, error = start_requests([good, bad]).result()
    assert rows.num_rows == 5 and isinstance(error, Exception)
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
