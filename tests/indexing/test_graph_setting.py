"""A collection's entity graph setting, chosen at upload (retrieval/indexing/graph.py
`graph_setting`): "off" extracts no entities at any ingest, records the graph "off" (the graph
source says so and the app starts no build), and the Graph page's build (`GraphBuilds.start`, the
same `build_graph`) then writes exactly the tables an inline ingest writes; "auto" is off for a
large flat corpus and on for chunks of files. Real LanceDB, real models."""

from __future__ import annotations

import pytest
from corpora import GRAPH_CONFIG as CONFIG
from corpora import GRAPH_QUERY as QUERY
from corpora import THREE_KINGDOMS as SAMPLE
from corpora import graph_tables_as_json as graph

from retrieval import limits
from retrieval.cli import main as cli
from retrieval.indexing.graph import graph_setting
from retrieval.indexing.pipeline import add_documents, create_collection
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.text.entities import EntityExtractor
from retrieval.types import Document, ParsedCorpus, RetrievalError


@pytest.fixture(scope="module")
def documents():
    from retrieval.indexing.readers.parse import parse_path

    docs = parse_path(SAMPLE).documents
    assert len(docs) >= 8 and all(d.parent_id for d in docs)  # chunks of one Markdown file
    return docs


@pytest.fixture(scope="module")
def inline(tmp_path_factory, documents):
    store = Store(str(tmp_path_factory.mktemp("inline")))
    create_collection(store, "whole", ParsedCorpus(documents), graph="on")
    return store


@pytest.fixture
def no_extraction(monkeypatch):
    def refuse(self, text, title=""):
        raise AssertionError("entities were extracted")
    monkeypatch.setattr(EntityExtractor, "extract", refuse)
    return monkeypatch


def test_auto_is_off_for_a_large_flat_corpus_only(monkeypatch):
    assert limits.GRAPH_AUTO_FLAT_MAX == 10_000
    assert graph_setting("auto", 9_999, chunked=False) == "on"
    assert graph_setting("auto", 10_000, chunked=False) == "off"
    assert graph_setting("auto", 1_000_000, chunked=True) == "on"
    assert graph_setting("on", 1_000_000, chunked=False) == "on"
    assert graph_setting("off", 3, chunked=True) == "off"
    with pytest.raises(RetrievalError, match="Unknown entity graph setting 'yes'; choose one of auto, on, off"):
        graph_setting("yes", 3, chunked=True)


def test_off_extracts_nothing_and_the_graph_pages_build_writes_the_inline_tables(tmp_path, inline, documents,
                                                                                 no_extraction):
    store = Store(str(tmp_path))
    wb = Workbench(store)
    wb.graph.in_background = True  # the app's: a pending graph would start building now; an off one does not
    result = wb.create("off", ParsedCorpus(documents[:-3]), graph="off")
    assert result.info.graph == "off" and store.info("off").graph == "off"
    assert store.clear("off").graph == "off"  # the setting outlives a clear
    add_documents(store, "off", ParsedCorpus(documents[:-3]))
    add_documents(store, "off", ParsedCorpus(documents[-3:]))  # an add follows the collection's setting
    assert graph(store, "off") is None and store.info("off").doc_count == len(documents)
    status = wb.graph.status("off")
    assert (status.state, status.total) == ("off", len(documents))
    searched = wb.search("off", QUERY, CONFIG)
    assert searched.candidates.sources["bm25"].hits and searched.outcome.results
    assert searched.candidates.sources["graph"].hits == ()
    assert searched.candidates.sources["graph"].notes == (
        f"graph index: off ({len(documents):,} documents; chosen at upload, so no entities were extracted); build "
        "it with the Graph page's “Build the entity graph” or `collections graph NAME`; the graph source joins "
        "when it is built",)

    no_extraction.undo()  # the user asks: the Graph page's button
    assert wb.graph.start("off")
    wb.graph.wait("off", timeout=120)
    assert store.info("off").graph == "" and wb.graph.status("off").state == "current"
    assert graph(store, "off") == graph(inline, "whole")
    assert (wb.search("off", QUERY, CONFIG).candidates.sources["graph"].hits
            == Workbench(inline).search("whole", QUERY, CONFIG).candidates.sources["graph"].hits)


def test_auto_leaves_a_large_flat_corpus_off_and_chunks_of_files_on(tmp_path, monkeypatch, documents):
    monkeypatch.setattr(limits, "GRAPH_AUTO_FLAT_MAX", 5)
    store = Store(str(tmp_path))
    flat = [Document(id=f"r{i}", text=d.text, title=d.title) for i, d in enumerate(documents)]
    assert create_collection(store, "flat", ParsedCorpus(flat)).info.graph == "off"
    assert create_collection(store, "small", ParsedCorpus(flat[:4])).info.graph == ""
    assert create_collection(store, "chunks", ParsedCorpus(documents)).info.graph == ""
    assert store.has_graph_tables("chunks") and not store.has_graph_tables("flat")


def test_the_cli_ingests_with_the_graph_off_and_builds_it_later(tmp_path, capsys, inline, documents, no_extraction):
    db = str(tmp_path / "db")
    assert cli.main(["--db", db, "ingest", str(SAMPLE), "--collection", "k", "--graph", "off",
                     "--no-cross-lingual"]) == 0
    assert ", entity graph off," in capsys.readouterr().err
    assert Store(db).info("k").graph == "off"
    assert cli.main(["--db", db, "collections"]) == 0
    assert capsys.readouterr().out.rstrip("\n").split("\t")[-1] == "graph off"
    assert cli.main(["--db", db, "ingest", str(SAMPLE), "--collection", "k", "--add", "--graph", "on"]) == 2
    assert "--graph is chosen when a collection is created" in capsys.readouterr().err
    no_extraction.undo()
    assert cli.main(["--db", db, "collections", "graph", "k"]) == 0
    assert Store(db).info("k").graph == ""
    assert graph(Store(db), "k") == graph(inline, "whole")
