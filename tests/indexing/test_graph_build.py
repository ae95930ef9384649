"""The entity graph of a large collection is built after its ingest (issue 9, item 2;
retrieval/indexing/graph.py). With `limits.GRAPH_INLINE_MAX` set small: every ingest path leaves the
graph pending (no graph tables), search works with the other sources and the graph source says so;
`build_graph` then writes exactly the tables an inline ingest of the same documents writes; an add
marks it pending again and a rebuild includes the new documents; a failed build leaves the
collection as before. Below the limit nothing changes. Real LanceDB, real models."""

from __future__ import annotations

import pytest
from corpora import GRAPH_CONFIG as CONFIG
from corpora import GRAPH_QUERY as QUERY
from corpora import THREE_KINGDOMS as SAMPLE
from corpora import graph_tables_as_json as graph

from retrieval import limits
from retrieval.cli import main as cli
from retrieval.indexing import writer as writer_module
from retrieval.indexing.graph import build_graph
from retrieval.indexing.pipeline import add_documents, create_collection, ingest_stream
from retrieval.indexing.readers.parse import parse_path
from retrieval.indexing.readers.stream import open_stream
from retrieval.search.workbench import Workbench
from retrieval.store import GRAPH_KINDS, Store
from retrieval.types import ParsedCorpus


@pytest.fixture(scope="module")
def documents():
    docs = parse_path(SAMPLE).documents
    assert len(docs) >= 8
    return docs


@pytest.fixture(scope="module")
def inline(tmp_path_factory, documents):
    """Today's behaviour: the first documents created, the rest added, graph tables at ingest."""
    store = Store(str(tmp_path_factory.mktemp("inline")))
    create_collection(store, "whole", ParsedCorpus(documents))
    create_collection(store, "first", ParsedCorpus(documents[:-3]))
    add_documents(store, "first", ParsedCorpus(documents[-3:]))
    return store


def test_below_the_limit_every_ingest_writes_the_graph(inline, documents):
    assert limits.GRAPH_INLINE_MAX == limits.SCALE_DOCS == 50_000
    for name in ("whole", "first"):
        assert inline.info(name).graph == "" and inline.has_graph_tables(name)
        assert len(graph(inline, name)["event_times"]) == len(documents)
    wb = Workbench(inline)
    assert wb.graph.status("whole").note == "graph index: built"
    assert wb.search("whole", QUERY, CONFIG).candidates.sources["graph"].hits


def test_a_large_create_defers_the_graph_and_the_build_writes_the_inline_tables(tmp_path, monkeypatch, inline,
                                                                                documents):
    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 5)
    store = Store(str(tmp_path))
    create_collection(store, "big", ParsedCorpus(documents))
    assert store.info("big").graph == "pending" and graph(store, "big") is None
    assert not any(t.endswith("__big") for t in store.table_names())
    wb = Workbench(store)
    wb.graph.in_background = False
    result = wb.search("big", QUERY, CONFIG)
    assert result.candidates.sources["bm25"].hits  # the other sources search as always
    pending = result.candidates.sources["graph"]
    assert pending.hits == () and pending.error is None
    assert pending.notes == (f"graph index: pending ({len(documents):,} documents; entity extraction runs after "
                             "an ingest of 5 documents or more, in the background in the app, or with the Graph "
                             "page's “Build the entity graph” or `collections graph NAME`); the graph source joins "
                             "when it is built",)
    assert wb.graph.status("big").state == "pending"
    assert result.outcome.results  # fused from BM25 alone

    reports = []
    state = store.state_key("big")
    info = wb.graph.build("big", progress=lambda *r: reports.append(r))
    assert info.graph == "" and store.info("big").graph == ""
    assert reports[0] == ("finding entities", 0, len(documents))
    assert reports[-1] == ("finding entities", len(documents), len(documents))
    assert graph(store, "big") == graph(inline, "whole")
    assert store.state_key("big") != state  # caches keyed on the state read the built graph
    status = wb.graph.status("big")
    assert (status.state, status.done, status.total) == ("current", len(documents), len(documents))
    built = wb.search("big", QUERY, CONFIG).candidates.sources["graph"]
    assert built.hits == inline_hits(inline, "whole") and built.notes == ()
    assert not list(store.lock_dir.glob("*.journal.json"))


def inline_hits(store: Store, name: str):
    return Workbench(store).search(name, QUERY, CONFIG).candidates.sources["graph"].hits


def test_batches_of_any_size_build_the_same_tables(tmp_path, monkeypatch, inline, documents):
    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 5)
    store = Store(str(tmp_path))
    create_collection(store, "big", ParsedCorpus(documents))
    reports = []
    build_graph(store, "big", lambda *r: reports.append(r), batch_size=3)
    n = len(documents)
    assert reports == [("finding entities", d, n) for d in [0, *range(3, n, 3), n]]
    assert graph(store, "big") == graph(inline, "whole")


def test_an_add_marks_the_graph_pending_and_a_rebuild_includes_the_new_documents(tmp_path, monkeypatch, inline,
                                                                                  documents):
    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 5)
    store = Store(str(tmp_path))
    create_collection(store, "big", ParsedCorpus(documents[:-3]))
    Workbench(store).graph.build("big")
    before = graph(store, "big")
    add_documents(store, "big", ParsedCorpus(documents[-3:]))
    assert store.info("big").graph == "pending" and store.info("big").doc_count == len(documents)
    assert graph(store, "big") == before  # the old tables stay, out of date, until the rebuild
    wb = Workbench(store)
    wb.graph.in_background = False
    assert wb.search("big", QUERY, CONFIG).candidates.sources["graph"].hits == ()
    wb.graph.build("big")
    assert graph(store, "big") == graph(inline, "first") == graph(inline, "whole")
    # An add below the limit to a pending graph leaves it pending (its rows alone would be incomplete).
    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 1000)
    store.clear("big")
    assert store.info("big").graph == ""  # nothing to build
    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 5)
    create_collection(store, "p", ParsedCorpus(documents[:6]))
    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 1000)
    add_documents(store, "p", ParsedCorpus(documents[6:7]))
    assert store.info("p").graph == "pending" and graph(store, "p") is None


def test_a_streamed_ingest_defers_the_graph_too(tmp_path, monkeypatch, inline, documents):
    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 5)
    store = Store(str(tmp_path))
    ingest_stream(store, "big", open_stream(SAMPLE, batch_size=4))
    assert store.info("big").graph == "pending" and graph(store, "big") is None
    assert store.info("big").doc_count == len(documents)
    build_graph(store, "big")
    assert graph(store, "big") == graph(inline, "whole")


def test_a_failed_build_leaves_the_collection_as_before(tmp_path, monkeypatch, documents):
    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 5)
    store = Store(str(tmp_path))
    create_collection(store, "big", ParsedCorpus(documents))
    version, info = store.version("big"), store.info("big")

    def crash(step):
        if step == "graph:catalogue":
            raise RuntimeError("killed at graph:catalogue")
    monkeypatch.setattr(writer_module, "crash_point", crash)
    wb = Workbench(store)
    with pytest.raises(RuntimeError, match="killed at graph:catalogue"):
        wb.graph.build("big")
    assert graph(store, "big") is None and store.info("big") == info
    assert store.table("big").version > version  # restored: a new version equal to the old one
    assert store.table("big").count_rows() == len(documents)
    assert not list(store.lock_dir.glob("*.journal.json"))
    status = wb.graph.status("big")
    assert status.state == "failed" and status.note == ("graph index: the build failed (RuntimeError: killed at "
                                                        "graph:catalogue); build it again with the Graph page's "
                                                        "“Build the entity graph” or `collections graph NAME`")


def test_a_graph_built_for_a_collection_deleted_and_created_again_is_not_written(tmp_path, monkeypatch, documents):
    """A build reads the collection at a version; if another process deletes it and creates it
    again meanwhile, LanceDB's versions start over and can reach that number again: the graph of
    the old documents must not be written into the new collection, and the retry builds the new."""
    from retrieval.indexing.graph import _build_once
    from retrieval.indexing.writer import GraphOutdated

    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 5)
    store = Store(str(tmp_path))
    create_collection(store, "big", ParsedCorpus(documents))
    real_write = writer_module.write_graph

    def recreate_then_write(store_, name, version, tables, created=None, incarnation=None):
        store.delete("big")
        create_collection(store, "big", ParsedCorpus(documents[:-1]))
        assert store.version("big") == version  # the same number again
        return real_write(store_, name, version, tables, created=created, incarnation=incarnation)

    monkeypatch.setattr("retrieval.indexing.graph.write_graph", recreate_then_write)
    with pytest.raises(GraphOutdated, match="changed while its entity graph was built"):
        _build_once(store, "big", None, 1000)
    assert store.info("big").graph == "pending" and graph(store, "big") is None


def test_a_search_never_builds_the_graph_the_apps_write_starts_it(tmp_path, monkeypatch, inline, documents):
    """A search only reads: on a pending graph it says so and starts nothing, even on a Workbench
    that builds graphs in the background (the app's); the Workbench's own write that leaves the
    graph pending starts the build, and the built graph joins the next search."""
    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 5)
    store = Store(str(tmp_path))
    create_collection(store, "big", ParsedCorpus(documents))  # around the Workbench: nothing started
    wb = Workbench(store)
    wb.graph.in_background = True
    first = wb.search("big", QUERY, CONFIG).candidates.sources["graph"]
    assert first.hits == () and first.notes[0].startswith("graph index: ")
    assert first.notes[0].endswith("the graph source joins when it is built")
    wb.graph.wait("big")
    assert wb.graph.status("big").state == "pending" and store.info("big").graph == "pending"
    assert wb.search("big", QUERY, CONFIG).candidates.sources["graph"].hits == ()

    wb.create("big2", ParsedCorpus(documents))  # the app's ingest: its graph is built in the background
    wb.graph.wait("big2")
    assert wb.graph.status("big2").state == "current" and store.info("big2").graph == ""
    assert wb.search("big2", QUERY, CONFIG).candidates.sources["graph"].hits == inline_hits(inline, "whole")
    assert wb.graph.start("big")  # the Graph page's button
    wb.graph.wait("big")
    assert wb.search("big", QUERY, CONFIG).candidates.sources["graph"].hits == inline_hits(inline, "whole")

    quiet = Workbench(store)  # the CLI's and scripts' Workbench: a write leaves the graph pending
    quiet.create("big3", ParsedCorpus(documents))
    quiet.graph.wait("big3")
    assert quiet.graph.status("big3").state == "pending"


def test_the_building_note_says_how_far(tmp_path):
    from retrieval.sources.graph_status import GraphStatus

    assert GraphStatus("building", 12_000, 30_000).note == (
        "graph index: building 40 % (12,000 of 30,000 documents); the graph source joins when it is built")


def test_the_cli_builds_the_graph_with_a_progress_bar(tmp_path, monkeypatch, capsys, inline, documents):
    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 5)
    db = str(tmp_path / "db")
    create_collection(Store(db), "big", ParsedCorpus(documents))
    assert cli.main(["--db", db, "collections"]) == 0
    assert capsys.readouterr().out.rstrip("\n").split("\t")[-1] == "graph pending"
    assert cli.main(["--db", db, "collections", "graph", "big"]) == 0
    err = capsys.readouterr().err
    assert "finding entities: 100%" in err and f"{len(documents)}/{len(documents)}" in err
    assert f"built the entity graph of big: {len(documents)} documents" in err
    assert graph(Store(db), "big") == graph(inline, "whole")
    assert set(GRAPH_KINDS) == set(graph(Store(db), "big"))
