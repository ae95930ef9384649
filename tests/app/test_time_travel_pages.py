"""Search and Compare on an earlier version of a collection: the page shows what the core returns
at that version (`Workbench.at_version`), beside today's on Compare; a version the collection
does not keep, and a switch of collection, fall back to today's with a word."""

import pytest
from conftest import open_page
from corpora import ANIMALS

from retrieval.indexing.pipeline import add_documents, create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.search.config import SearchConfig
from retrieval.store import Store
from ui.search.view_controls import TODAY

SEARCH, COMPARE = "pages/1_Search.py", "pages/2_Compare.py"
TRAVEL = "travel"
QUERY = "hunt at night"
MORE = (b"id,title,text\n"
        b"bat,Bats,\"Bats hunt insects at night with echoes and sleep all day.\"\n"
        b"moth,Moths,\"Moths fly at night and are hunted by bats and owls.\"\n")


@pytest.fixture(scope="module")
def travel(app_db):
    """Collection 'travel': the six animals (with the app collection's model: no new model to load),
    then two night hunters added. Returns the version before the add."""
    store = Store(app_db.uri)
    create_collection(store, TRAVEL, parse_bytes(ANIMALS.encode(), "animals.csv"), model=store.info("small").model)
    version = store.version(TRAVEL)
    add_documents(store, TRAVEL, parse_bytes(MORE, "more.csv"))
    return version


def ids(workbench, query: str) -> list[str]:
    """The default config's result ids, as the page (config A at its defaults) shows them."""
    return [r.doc_id for r in workbench.search(TRAVEL, query, SearchConfig()).outcome.results]


def test_search_shows_an_earlier_version_read_only(workbench, travel):
    at = open_page(SEARCH, collection=TRAVEL, q=QUERY, version=str(travel))
    then = ids(workbench.at_version(TRAVEL, travel), QUERY)
    assert list(at.dataframe[0].value["id"]) == then
    assert "bat" in ids(workbench, QUERY) and "bat" not in then  # today's differs
    assert any(c.value.startswith(f"Read-only: the collection as it was at version {travel} (6 documents)")
               for c in at.caption)
    assert at.selectbox(key="view.version").value == travel
    assert at.query_params["version"] == str(travel)
    at.selectbox(key="view.version").set_value(TODAY).run()  # back to today's
    assert at.selectbox(key="view.version").index == 0  # shown as "today (…)", not "Choose an option"
    assert list(at.dataframe[0].value["id"]) == ids(workbench, QUERY)
    assert "version" not in at.query_params


def test_compare_puts_an_earlier_version_beside_today(workbench, travel):
    at = open_page(COMPARE, collection=TRAVEL, q=QUERY, mode="versions")
    # no version in the link: the one before today's is picked
    latest = workbench.store.version(TRAVEL)
    chosen = at.selectbox(key="view.version").value
    assert chosen < latest and TODAY not in at.selectbox(key="view.version").options
    at.selectbox(key="view.version").set_value(travel).run()
    left, right = at.dataframe[0].value, at.dataframe[1].value
    assert list(left["id"]) == ids(workbench.at_version(TRAVEL, travel), QUERY)
    assert list(right["id"]) == ids(workbench, QUERY)
    assert "new" in list(right["change"])  # the bat (and the moth) were not there then
    assert at.query_params["mode"] == "versions" and at.query_params["version"] == str(travel)


def test_a_version_the_collection_does_not_keep_falls_back_to_today(workbench, travel):
    at = open_page(SEARCH, collection=TRAVEL, q=QUERY, version="999")
    assert any("Version 999 of this collection is not kept" in w.value for w in at.warning)
    assert at.selectbox(key="view.version").value == TODAY and at.selectbox(key="view.version").index == 0
    assert list(at.dataframe[0].value["id"]) == ids(workbench, QUERY)
    at = open_page(SEARCH, collection=TRAVEL, q=QUERY, version="v2")
    assert any("version 'v2' is not a version number" in w.value for w in at.warning)


def test_switching_collection_drops_the_version_and_the_why_not_document(workbench, travel):
    at = open_page(SEARCH, collection=TRAVEL, q=QUERY, version=str(travel), why="cat")
    at.sidebar.selectbox(key="view.collection").set_value("small").run()
    assert not at.exception
    assert "version" not in at.query_params and "why" not in at.query_params
    assert not any("Unknown document id" in e.value for e in at.error)
