"""Search page with a failing third source: the page still shows the other sources' fusion and
names the failed source and why (seed 004)."""

import sys
import types

from conftest import QUERY, fused, open_page, plain

from retrieval.sources import SOURCE_MODULES

SEARCH = "pages/1_Search.py"


class _Crashing:
    name = "crashing"

    def search(self, query, depth):
        raise RuntimeError("graph store offline")


def test_a_crashing_source_is_named_and_the_others_are_fused(workbench, monkeypatch):
    module = types.ModuleType("workbench_test_crashing_source")
    module.LABEL, module.params = "crashing", (lambda config: ())
    module.build = lambda store, collection, config: _Crashing()
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(SOURCE_MODULES, "crashing", module.__name__)

    at = open_page(SEARCH, q=QUERY, weights="bm25=0.5,dense=0.5,crashing=0.5")
    warnings = [plain(w.value) for w in at.warning]
    assert "crashing failed and was left out: RuntimeError: graph store offline" in warnings
    _, two_sources = fused(workbench, weights={"bm25": 0.5, "dense": 0.5})
    assert list(at.dataframe[0].value["id"]) == [r.doc_id for r in two_sources.results]
    assert list(at.dataframe[0].value["fused score"]) == [r.score for r in two_sources.results]
