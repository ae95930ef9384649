"""Search page with a failing third source: the page still shows the other sources' fusion and
names the failed source and why (seed 004)."""

from conftest import QUERY, fused, open_page, plain

from retrieval.sources import SOURCES, SourceSpec

SEARCH = "pages/1_Search.py"


class _Crashing:
    name = "crashing"

    def search(self, query, depth):
        raise RuntimeError("graph store offline")


def test_a_crashing_source_is_named_and_the_others_are_fused(workbench, monkeypatch):
    monkeypatch.setitem(SOURCES, "crashing", SourceSpec(name="crashing", label="crashing",
                                                        load=lambda context, collection: None,
                                                        build=lambda loaded, config: _Crashing()))

    at = open_page(SEARCH, q=QUERY, weights="bm25=0.5,dense=0.5,crashing=0.5")
    warnings = [plain(w.value) for w in at.warning]
    assert "crashing failed and was left out: RuntimeError: graph store offline" in warnings
    _, two_sources = fused(workbench, weights={"bm25": 0.5, "dense": 0.5})
    assert list(at.dataframe[0].value["id"]) == [r.doc_id for r in two_sources.results]
    assert list(at.dataframe[0].value["fused score"]) == [r.score for r in two_sources.results]


def test_the_failure_traceback_goes_to_the_log_not_the_page(workbench, monkeypatch, caplog):
    monkeypatch.setitem(SOURCES, "crashing", SourceSpec(name="crashing", label="crashing",
                                                        load=lambda context, collection: None,
                                                        build=lambda loaded, config: _Crashing()))
    with caplog.at_level("WARNING", logger="retrieval"):
        at = open_page(SEARCH, q=QUERY + " (log)", weights="bm25=0.5,dense=0.5,crashing=0.5")
    logged = [r for r in caplog.records if r.name == "retrieval.sources.base" and r.exc_info]
    assert logged and "source crashing failed" in logged[0].getMessage()
    assert logged[0].exc_info[0] is RuntimeError
    page_text = " ".join(plain(e.value) for e in [*at.warning, *at.error, *at.markdown])
    assert "Traceback" not in page_text and "graph store offline" in page_text
