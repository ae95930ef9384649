"""Backends chosen by collection size (`limits.SCALE_DOCS`): below it rank-bm25 and an exact
vector scan, from it on LanceDB's native BM25 index and an IVF_RQ index re-scored exactly."""

import re
from pathlib import Path

import pytest
from corpora import ANIMALS

from retrieval import limits
from retrieval.indexing.indexes import build_vector_index
from retrieval.indexing.pipeline import add_documents, create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.sources.bm25 import resolved_backend
from retrieval.store import Store

MORE = """id,title,text
hen,Hens,"Hens lay eggs and scratch the ground for seeds at night and by day."
"""


def test_auto_backend_switches_at_the_threshold():
    assert resolved_backend("auto", limits.SCALE_DOCS - 1) == "rank_bm25"
    assert resolved_backend("auto", limits.SCALE_DOCS) == "lancedb"
    assert resolved_backend("rank_bm25", 10 ** 9) == "rank_bm25"
    assert resolved_backend("lancedb", 1) == "lancedb"
    assert SearchConfig().bm25_backend == "auto"


def test_small_collection_keeps_rank_bm25_and_exact_vectors(tmp_path):
    wb = Workbench(Store(str(tmp_path / "db")))
    create_collection(wb.store, "zoo", parse_bytes(ANIMALS.encode(), "animals.csv"))
    assert wb.backends("zoo") == {"bm25": "BM25 in memory (rank-bm25's scores, k1 0.9, b 0.4)",
                                  "dense": "exact scan (in memory, cosine)"}
    auto = wb.search("zoo", "night hunters mice", SearchConfig())
    explicit = wb.search("zoo", "night hunters mice", SearchConfig(bm25_backend="rank_bm25"))
    assert auto.candidates.sources["bm25"].hits == explicit.candidates.sources["bm25"].hits
    assert auto.candidates.sources["bm25"].backend == "BM25 in memory (rank-bm25's scores, k1 0.9, b 0.4)"


def test_large_collection_uses_the_scaled_backends_with_exact_scores(tmp_path, monkeypatch):
    small = Workbench(Store(str(tmp_path / "small")))
    create_collection(small.store, "zoo", parse_bytes(ANIMALS.encode(), "animals.csv"))
    monkeypatch.setattr(limits, "SCALE_DOCS", 6)
    wb = Workbench(Store(str(tmp_path / "large")))
    create_collection(wb.store, "zoo", parse_bytes(ANIMALS.encode(), "animals.csv"))
    indices = {i.columns[0]: i.index_type for i in wb.store.table("zoo").list_indices()}
    # the cross-lingual column is indexed like the own one; ids get a BTREE for reading rows
    assert indices == {"tokens": "FTS", "vector": "IvfRq", "vector_xl": "IvfRq", "id": "BTree"}
    assert wb.backends("zoo") == {
        "bm25": "LanceDB native BM25 index (k1 1.2, b 0.75 fixed) (auto: 6 documents ≥ 6)",
        "dense": ("LanceDB IvfRq ANN index (100 partitions probed), shortlist re-scored exactly "
                  "(refine ×1 at depth 100)")}
    query = "night hunters mice"
    result = wb.search("zoo", query, SearchConfig(depth=6))
    # BM25 from the native index: exactly what the explicit lancedb backend gives below the threshold
    native = small.search("zoo", query, SearchConfig(depth=6, bm25_backend="lancedb"))
    assert result.candidates.sources["bm25"].hits == native.candidates.sources["bm25"].hits
    # Vector similarities stay exact: equal to the exact scan of the same documents
    exact_hits = small.search("zoo", query, SearchConfig(depth=6)).candidates.sources["dense"].hits
    exact = {h.doc_id: h.raw_score for h in exact_hits}
    indexed = result.candidates.sources["dense"].hits
    assert [h.doc_id for h in indexed] == sorted(exact, key=lambda d: -exact[d])
    assert [h.raw_score for h in indexed] == pytest.approx([exact[h.doc_id] for h in indexed], abs=1e-6)
    assert result.candidates.sources["dense"].backend.startswith("LanceDB IvfRq ANN index")

    # Both scaled sources give LanceDB's row ids, and the shown rows are taken by them: the same
    # rows as looked up by id, also when a row id is stale (another row's, or none at all)
    hits = [h for s in ("bm25", "dense") for h in result.candidates.sources[s].hits]
    assert hits and all(h.row_id is not None for h in hits)
    row_ids = {h.doc_id: h.row_id for h in hits}
    ids = sorted(row_ids)
    by_id = wb.store.documents("zoo", ids)
    assert wb.store.documents("zoo", ids, row_ids) == by_id and len(by_id) == len(ids)
    swapped = dict(zip(ids, [row_ids[i] for i in ids[1:] + ids[:1]], strict=True))
    assert wb.store.documents("zoo", ids[:2], swapped) == {i: by_id[i] for i in ids[:2]}
    assert wb.store.documents("zoo", ids[:2], dict.fromkeys(ids, 10**12)) == {i: by_id[i] for i in ids[:2]}
    assert result.documents == {i: by_id[i] for i in result.documents}

    # An add of 1 row next to 6 indexed (1 ≤ 0.2 × 6) keeps the index and adds the row to it
    # (a second segment), and the new document is found with its exact similarity
    def vector_index():
        return next(i for i in wb.store.table("zoo").list_indices() if i.columns == ["vector"])

    def segments():
        stats = wb.store.table("zoo").index_stats(vector_index().name)
        return stats.num_indexed_rows, stats.num_unindexed_rows, stats.num_indices

    trained = vector_index().index_uuid
    assert segments() == (6, 0, 1)
    add_documents(wb.store, "zoo", parse_bytes(MORE.encode(), "more.csv"))
    assert vector_index().index_uuid == trained
    assert segments() == (7, 0, 2)
    # LanceDB merges only files the same index segments cover: one data file per segment
    assert wb.store.table("zoo").stats()["fragment_stats"]["num_fragments"] == 2
    found = wb.search("zoo", "hens lay eggs", SearchConfig(depth=3)).candidates.sources["dense"].hits
    assert found[0].doc_id == "hen"
    small_more = add_documents(small.store, "zoo", parse_bytes(MORE.encode(), "more.csv"))
    assert small_more.documents == 1
    exact = {h.doc_id: h.raw_score for h in small.search("zoo", "hens lay eggs", SearchConfig(depth=3))
             .candidates.sources["dense"].hits}
    assert [h.raw_score for h in found] == pytest.approx([exact[h.doc_id] for h in found], abs=1e-6)
    # 2 rows next to 7 (2 > 0.2 × 7): the index is trained anew over all 9, one segment
    two = "id,title,text\nox,Oxen,Oxen pull ploughs across the field.\nyak,Yaks,Yaks carry loads high in the hills.\n"
    add_documents(wb.store, "zoo", parse_bytes(two.encode(), "two.csv"))
    assert vector_index().index_uuid != trained
    assert segments() == (9, 0, 1)
    # every file under the one new index, so merged into one (`indexing.indexes.compact`)
    assert wb.store.table("zoo").stats()["fragment_stats"]["num_fragments"] == 1
    # `collections index` always trains anew
    retrained = vector_index().index_uuid
    wb.build_vector_index("zoo")
    assert vector_index().index_uuid != retrained and segments() == (9, 0, 1)


def test_an_index_takes_adds_until_it_has_max_segments(tmp_path, monkeypatch):
    """Each small add is one more segment of the kept index; the add that would make the
    `limits.ANN_MAX_SEGMENTS`-th trains it anew (one segment)."""
    from retrieval.indexing.indexes import needs_training

    monkeypatch.setattr(limits, "SCALE_DOCS", 6)
    wb = Workbench(Store(str(tmp_path / "db")))
    create_collection(wb.store, "zoo", parse_bytes(ANIMALS.encode(), "animals.csv"))
    table = lambda: wb.store.table("zoo")  # noqa: E731
    name = next(i.name for i in table().list_indices() if i.columns == ["vector"])
    assert not needs_training(table(), "vector")
    for n in range(1, limits.ANN_MAX_SEGMENTS):
        add_documents(wb.store, "zoo", parse_bytes(f"id,text\nextra{n},Extra animal number {n} eats.\n".encode(),
                                                   "one.csv"))
        stats = table().index_stats(name)
        assert (stats.num_indexed_rows, stats.num_unindexed_rows, stats.num_indices) == (6 + n, 0, 1 + n)
        assert table().stats()["fragment_stats"]["num_fragments"] == 1 + n  # a data file per segment
    assert limits.ANN_MAX_SEGMENTS == 5 and needs_training(table(), "vector")
    add_documents(wb.store, "zoo", parse_bytes(b"id,text\nlast,The last animal sleeps.\n", "last.csv"))
    stats = table().index_stats(next(i.name for i in table().list_indices() if i.columns == ["vector"]))
    assert (stats.num_indexed_rows, stats.num_unindexed_rows, stats.num_indices) == (11, 0, 1)
    assert table().stats()["fragment_stats"]["num_fragments"] == 1
    assert needs_training(table(), "vector_missing")  # no index on a column: train one


def test_small_collection_vector_search_in_memory_equals_lancedb_exact_scan(tmp_path):
    from retrieval.sources.dense import DenseSource

    wb = Workbench(Store(str(tmp_path / "db")))
    create_collection(wb.store, "zoo", parse_bytes(ANIMALS.encode(), "animals.csv"))
    query = "animals awake at night"
    memory = wb.search("zoo", query, SearchConfig(weights={"dense": 1.0})).candidates.sources["dense"].hits
    embed = lambda q: wb.retriever.query_vector(wb.info("zoo").model, q)  # noqa: E731
    lance = DenseSource(wb.store.table("zoo"), embed).search(query, 10)
    assert [h.doc_id for h in memory] == [h.doc_id for h in lance]
    assert [h.raw_score for h in memory] == pytest.approx([h.raw_score for h in lance], abs=1e-6)
    add_documents(wb.store, "zoo", parse_bytes(MORE.encode(), "more.csv"))  # a new state reads the vectors again
    assert wb.search("zoo", "hens lay eggs", SearchConfig(weights={"dense": 1.0})).outcome.results[0].doc_id == "hen"


def test_refine_factor_by_index_type_and_depth():
    from retrieval.sources.dense import refine_factor_for

    # scalar-quantised (or unquantised) indexes: at least 100 candidates re-scored, ⌈100 / depth⌉ × depth
    assert [refine_factor_for("IvfSq", d) for d in (1, 10, 30, 99, 100, 101, 500)] == [100, 10, 4, 2, 1, 1, 1]
    # RaBitQ (the shipped IVF_RQ) likewise
    assert [refine_factor_for("IvfRq", d) for d in (1, 10, 30, 99, 100, 101, 500)] == [100, 10, 4, 2, 1, 1, 1]
    assert refine_factor_for("IvfFlat", 50) == refine_factor_for("IvfHnswSq", 50) == 2
    # product quantisation: ×10 at every depth
    assert [refine_factor_for("IvfPq", d) for d in (1, 100, 500)] == [10, 10, 10]


def test_sources_search_the_state_they_were_built_for(tmp_path, monkeypatch):
    """A source built for a collection state searches that table version (`Store.table_at`), so
    its hits, the row ids they carry and the row-id map naming them are of one version, also
    when a write lands between the state check and the search."""
    monkeypatch.setattr(limits, "SCALE_DOCS", 6)
    wb = Workbench(Store(str(tmp_path / "db")))
    create_collection(wb.store, "zoo", parse_bytes(ANIMALS.encode(), "animals.csv"))
    state = wb.store.state_key("zoo")
    config = SearchConfig(depth=10)
    built = {name: wb.retriever.source("zoo", name, config, state) for name in ("bm25", "dense")}
    assert wb.retriever.reads.row_id_map("zoo", state).wait(60)
    add_documents(wb.store, "zoo", parse_bytes(MORE.encode(), "more.csv"))
    assert wb.store.state_key("zoo") != state
    assert "hen" not in {h.doc_id for h in built["bm25"].search("hens lay eggs", 10)}
    assert "hen" not in {h.doc_id for h in built["dense"].search("hens lay eggs", 10)}
    now = wb.search("zoo", "hens lay eggs", config).candidates.sources
    assert now["bm25"].hits[0].doc_id == "hen" and "hen" in {h.doc_id for h in now["dense"].hits}


def test_an_index_step_failing_after_the_commit_keeps_the_documents_and_says_how_to_finish(tmp_path, monkeypatch):
    """The indexes by size are built after the write commits, outside its transaction: when that
    step fails, the documents are written, the ingest succeeds with a note naming the failure and
    the command, and that command builds what is missing."""
    from retrieval.indexing import pipeline

    monkeypatch.setattr(limits, "SCALE_DOCS", 6)
    wb = Workbench(Store(str(tmp_path / "db")))

    def fails(store, info):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pipeline, "index_for_size", fails)
    result = create_collection(wb.store, "zoo", parse_bytes(ANIMALS.encode(), "animals.csv"))
    assert result.documents == wb.info("zoo").doc_count == 6
    assert result.index_error == "OSError: [Errno 28] No space left on device"
    assert result.note == ("the documents are written, but building the collection's indexes failed (OSError: "
                           "[Errno 28] No space left on device): searches read it without them (slower) until "
                           "`python -m retrieval collections index zoo` builds them")
    assert {i.columns[0] for i in wb.store.table("zoo").list_indices()} == {"tokens"}
    wb.build_vector_index("zoo")  # what `collections index zoo` runs
    assert {i.columns[0]: i.index_type for i in wb.store.table("zoo").list_indices()} == {
        "tokens": "FTS", "vector": "IvfRq", "vector_xl": "IvfRq", "id": "BTree"}


def test_probes_by_index_type(monkeypatch):
    """IVF_RQ (the shipped index) is probed in 100 partitions; an IVF_SQ index built before it
    became the default keeps the 25 it was measured with; WORKBENCH_ANN_NPROBES sets both."""
    assert limits.ANN_INDEX == "IVF_RQ" and limits.ANN_NPROBES == 100
    assert [limits.ann_nprobes(t) for t in ("IvfRq", "IvfSq", "IvfPq", None)] == [100, 25, 100, 100]
    monkeypatch.setattr(limits, "_ANN_NPROBES_SET", 40)
    assert [limits.ann_nprobes(t) for t in ("IvfRq", "IvfSq")] == [40, 40]


def rabitq_bits(store: Store, name: str) -> list[int]:
    """Bits per dimension of every RaBitQ codebook in the collection's index files, as LanceDB
    writes them into each IVF_RQ index's metadata (`"num_bits":N` in auxiliary.idx, beside its
    `_rabit_codes`; an IVF_SQ index names its bits the same way)."""
    files = sorted((Path(store.uri) / f"{name}.lance" / "_indices").glob("*/auxiliary.idx"))
    return sorted(int(m) for f in files if b"_rabit_codes" in (data := f.read_bytes())
                  for m in re.findall(rb'\\"num_bits\\":(\d+)', data))


def test_an_index_of_before_keeps_its_probes_until_rebuilt(tmp_path, monkeypatch):
    """A collection whose vectors carry an IVF_SQ index (as every large one did before IVF_RQ) is
    searched with IVF_SQ's probes, exactly; rebuilding its index (`collections index`) gives it
    the shipped IVF_RQ, and the same exact similarities."""
    monkeypatch.setattr(limits, "SCALE_DOCS", 6)
    wb = Workbench(Store(str(tmp_path / "db")))
    create_collection(wb.store, "zoo", parse_bytes(ANIMALS.encode(), "animals.csv"))
    query = "night hunters mice"
    config = SearchConfig(depth=6)
    now = wb.search("zoo", query, config).candidates.sources["dense"].hits
    build_vector_index(wb.store, "zoo", index_type="IVF_SQ", column="vector")
    wb = Workbench(wb.store)
    assert wb.backends("zoo")["dense"] == ("LanceDB IvfSq ANN index (25 partitions probed), shortlist re-scored "
                                           "exactly (refine ×1 at depth 100)")
    before = wb.search("zoo", query, config).candidates.sources["dense"].hits
    assert [(h.doc_id, h.rank) for h in before] == [(h.doc_id, h.rank) for h in now]
    assert [h.raw_score for h in before] == pytest.approx([h.raw_score for h in now], abs=1e-6)
    assert rabitq_bits(wb.store, "zoo") == [4, 4]  # the ingest's IVF_RQ of `vector` and `vector_xl`
    wb.build_vector_index("zoo")
    assert {i.columns[0]: i.index_type for i in wb.store.table("zoo").list_indices()}["vector"] == "IvfRq"
    # 4-bit codes (`limits.ANN_RQ_BITS`), not the 8 LanceDB's create_index(metric=…) passes: 3.9×
    # faster to build, the same recall (docs/experiments/ingest.md). The rebuild makes both
    # columns' anew; the replaced indexes' files remain.
    assert rabitq_bits(wb.store, "zoo") == [4, 4, 4, 4]
    assert wb.backends("zoo")["dense"].startswith("LanceDB IvfRq ANN index (100 partitions probed)")
    after = wb.search("zoo", query, config).candidates.sources["dense"].hits
    assert [(h.doc_id, h.rank) for h in after] == [(h.doc_id, h.rank) for h in now]
    assert [h.raw_score for h in after] == pytest.approx([h.raw_score for h in now], abs=1e-6)
