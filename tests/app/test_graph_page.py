"""Graph page: the activation network for a query, hop by hop, as the core computes it."""

import json

import pytest
from conftest import all_widgets, nullable, open_page, plain

from retrieval.indexing.pipeline import create_collection
from retrieval.search.config import SearchConfig
from retrieval.sources.activation import GraphSettings, activate
from retrieval.sources.graph import load_index
from retrieval.store import Store
from retrieval.text.chunking import chunk_markdown
from retrieval.types import ParsedCorpus

COLLECTION = "graph-mini"
MINI = """## 官渡
公元200年，曹操在官渡击败袁绍。

## 赤壁
公元208年，曹操在赤壁败给周瑜。

## 巴丘
公元210年，周瑜在巴丘病逝。

## 五丈原
公元234年，诸葛亮在渭南病逝。<b>不是标记</b>
"""


@pytest.fixture(scope="module")
def graph_collection(app_db):
    store = Store(app_db.uri)
    if not store.exists(COLLECTION):
        create_collection(store, COLLECTION, ParsedCorpus(chunk_markdown(MINI, "mini")))
    return store


def core_events(store, **graph):
    """The activated chunks the core computes for query 袁绍 with these graph parameters."""
    index = load_index(store, COLLECTION)
    query, _ = index.query_entities("袁绍")
    settings = GraphSettings.from_config(SearchConfig(graph=graph))
    return activate(query, index.entities, settings, index.positions, index.events_of).events


def chart_event_ids(at) -> set[str]:
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    return {c for trace in spec["data"] for c in trace.get("customdata") or [] if c}


def test_graph_page_shows_the_activation_and_depth_changes_it(graph_collection):
    at = open_page("pages/6_Graph.py", collection=COLLECTION, q="袁绍", graph="threshold=0.08")
    assert not at.error
    assert at.slider(key="a.graph.depth").value == 2 and at.slider(key="a.graph.threshold").value == 0.08
    expected = core_events(graph_collection, threshold=0.08)
    assert set(expected) == {"mini#0", "mini#1", "mini#2"}
    frame = at.dataframe[0].value
    assert set(frame["id"]) == set(expected)
    assert dict(zip(frame["id"], frame["hop"], strict=True)) == {e: a.hop for e, a in expected.items()}
    assert chart_event_ids(at) == set(expected)
    assert plain(at.markdown[0].value).endswith("(known to this collection): person: 袁绍")

    at.select_slider(key="graph.hop").set_value(0).run()
    assert chart_event_ids(at) == {"mini#0"}  # hop by hop

    at.slider(key="a.graph.depth").set_value(1).run()
    assert set(at.dataframe[0].value["id"]) == set(core_events(graph_collection, threshold=0.08, depth=1)) \
        == {"mini#0", "mini#1"}
    assert "depth=1," in at.query_params["graph"]  # mirrored in the link

    at.slider(key="a.graph.threshold").set_value(0.1).run()
    assert set(at.dataframe[0].value["id"]) == {"mini#0"}
    assert any("closest had relevance 0.087" in plain(i.value) for i in at.info)


def test_selected_chunk_text_is_shown_escaped(graph_collection):
    at = open_page("pages/6_Graph.py", collection=COLLECTION, q="诸葛亮")
    assert at.selectbox(key="graph.event").value == "mini#3"
    shown = at.get("html")[0].proto.body
    assert "&lt;b&gt;不是标记&lt;/b&gt;" in shown and "<b>不是标记" not in shown
    assert "hop 0, from the query through person: 诸葛亮" in shown


def test_every_graph_control_has_help_and_empty_states(graph_collection):
    at = open_page("pages/6_Graph.py", collection=COLLECTION, q="袁绍", graph="threshold=0.08")
    assert [getattr(w, "key", None) or w.label for w in all_widgets(at) if not (w.help or "").strip()] == []
    at = open_page("pages/6_Graph.py", collection=COLLECTION, q="孙权")
    assert not at.error and any("No chunk shares an entity" in i.value for i in at.info)
    assert "孙权" in at.caption[-1].value or any("孙权" in c.value for c in at.caption)


def test_search_page_fuses_the_graph_with_bm25_and_vectors(graph_collection, workbench):
    at = open_page("pages/1_Search.py", collection=COLLECTION, q="袁绍", weights="bm25=0.5,dense=0.5,graph=0.5",
                   graph="threshold=0.08", fusion="rrf")
    assert not at.error
    assert at.multiselect(key="a.extra_sources").value == ["graph"]
    assert at.slider(key="a.graph.threshold").value == 0.08  # the same slider as on the Graph page
    frame = at.dataframe[0].value
    config = SearchConfig(fusion="rrf", weights={"bm25": 0.5, "dense": 0.5, "graph": 0.5}, graph={"threshold": 0.08})
    outcome = workbench.rank(workbench.candidates(COLLECTION, "袁绍", config), config).outcome
    assert list(frame["id"]) == [r.doc_id for r in outcome.results]
    graph_rank = {r.doc_id: r.sources["graph"].rank for r in outcome.results}
    assert nullable(frame["entity graph rank"]) == [graph_rank[i] for i in frame["id"]]
    top = outcome.results[0].sources["graph"]
    assert top.contribution == pytest.approx(0.5 / (60 + top.rank))


def test_a_pending_graph_is_said_on_the_graph_search_and_corpus_pages(app_db, workbench, monkeypatch):
    """A collection at or above `limits.GRAPH_INLINE_MAX` documents gets its graph after the
    ingest (retrieval/indexing/graph.py): the pages say so instead of blocking the search."""
    from retrieval import limits

    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 2)
    monkeypatch.setattr(workbench.graph, "in_background", False)
    store = Store(app_db.uri)
    create_collection(store, "graph-pending", ParsedCorpus(chunk_markdown(MINI, "mini")))
    try:
        note = ("graph index: pending (4 documents; entity extraction runs after an ingest of 2 documents or more, "
                "in the background in the app, or with the Graph page's “Build the entity graph” or `collections "
                "graph NAME`); the graph source joins when it is built")
        at = open_page("pages/6_Graph.py", collection="graph-pending", q="袁绍")
        assert not at.error
        assert [plain(i.value) for i in at.info] == [plain(note)]
        at = open_page("pages/1_Search.py", collection="graph-pending", q="袁绍",
                       weights="bm25=1,graph=1")
        assert not at.error
        assert any(plain(note) in plain(w.value) for w in at.warning)
        at = open_page("pages/4_Corpus.py")
        frame = at.dataframe[0].value
        assert frame.set_index("table").loc["graph-pending", "graph index"] == "pending"
        assert frame.set_index("table").loc[app_db.collection, "graph index"] == "built"
        assert any(plain(f"graph-pending: {note}") in plain(c.value) for c in at.caption)
        assert workbench.graph.status("graph-pending").state == "pending"  # no page, no search built it
        at = open_page("pages/6_Graph.py", collection="graph-pending", q="袁绍")
        at.button(key="graph.build").click().run()
        assert not at.error
        workbench.graph.wait("graph-pending")
        assert workbench.graph.status("graph-pending").state == "current"
        assert store.info("graph-pending").graph == ""
        at = open_page("pages/6_Graph.py", collection="graph-pending", q="袁绍")
        assert not at.error and plain(note) not in [plain(i.value) for i in at.info]  # built
    finally:
        store.delete("graph-pending")


def test_a_graph_left_off_at_upload_is_built_from_the_graph_page(app_db, workbench, monkeypatch):
    """A collection created with the entity graph setting off (retrieval/indexing/graph.py
    `graph_setting`) extracts nothing at ingest; the Graph page says so, its button builds the
    graph, and the tables are those an inline ingest writes."""
    monkeypatch.setattr(workbench.graph, "in_background", True)  # the app's: an off graph is still not started
    store = Store(app_db.uri)
    documents = ParsedCorpus(chunk_markdown(MINI, "mini"))
    workbench.create("graph-off", documents, graph="off")  # the app's write
    create_collection(store, "graph-on", documents, graph="on")
    try:
        assert store.info("graph-off").graph == "off" and not store.has_graph_tables("graph-off")
        at = open_page("pages/6_Graph.py", collection="graph-off", q="袁绍")
        assert not at.error
        assert [plain(i.value) for i in at.info] == [plain(
            "graph index: off (4 documents; chosen at upload, so no entities were extracted); build it with the "
            "Graph page's “Build the entity graph” or `collections graph NAME`; the graph source joins when it "
            "is built")]
        assert workbench.graph.status("graph-off").state == "off"  # no page built it
        at.button(key="graph.build").click().run()
        assert not at.error
        workbench.graph.wait("graph-off")
        assert store.info("graph-off").graph == "" and workbench.graph.status("graph-off").state == "current"
        built, inline = store.graph_tables("graph-off"), store.graph_tables("graph-on")
        assert {k: sorted(map(str, t.to_pylist())) for k, t in built.items()} == {
            k: sorted(map(str, t.to_pylist())) for k, t in inline.items()}
    finally:
        store.delete("graph-off")
        store.delete("graph-on")
