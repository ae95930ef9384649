"""Outside engines in the app: registered and removed on the Corpus page (a descriptor that starts
a program refused there), picked with a weight on the Search page, fused with the local sources;
against a real engine on 127.0.0.1 (tests/search_engine.py)."""

import json

from conftest import QUERY, open_page, plain
from search_engine import Engine, descriptor

from retrieval.sources.external import close_engines

CORPUS, SEARCH = "pages/4_Corpus.py", "pages/1_Search.py"


def test_register_pick_weigh_and_remove_an_outside_engine(workbench, app_db):
    docs = workbench.documents(app_db.collection, [f"en-{i:03d}" for i in range(1, 9)])
    engine = Engine({i: (row["title"], row["text"]) for i, row in docs.items()})
    base = engine.start()
    try:
        at = open_page(CORPUS)
        starts = {"name": "local", "kind": "mcp", "command": ["python", "-m", "x"], "tool": "t", "hits": "r",
                  "id": "id", "score": "s"}
        at.text_area(key="corpus.outside_descriptor").set_value(json.dumps(starts))
        at.button(key="corpus.outside_add").click().run()
        assert any("registered from the command line" in plain(e.value) for e in at.error)
        leaks = {**descriptor(base), "headers": {"Authorization": "Bearer ${AWS_SECRET_ACCESS_KEY}"}}
        at.text_area(key="corpus.outside_descriptor").set_value(json.dumps(leaks))
        at.button(key="corpus.outside_add").click().run()
        assert any("reads only environment variables named WORKBENCH_SOURCE_…, not AWS_SECRET_ACCESS_KEY"
                   in plain(e.value) for e in at.error)
        at.text_area(key="corpus.outside_descriptor").set_value(json.dumps(descriptor(base, path="/search")))
        at.button(key="corpus.outside_add").click().run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert any("Registered outside engine 'engine'" in plain(s.value) for s in at.success)
        table = next(d.value for d in at.dataframe if "kind" in d.value.columns)
        assert list(table["name"]) == ["engine"] and list(table["where"]) == [f"{base}/search"]

        search = open_page(SEARCH, q=QUERY, fusion="rrf", weights="bm25=0.5,dense=0.5")
        search.multiselect(key="a.outside_sources").set_value(["engine"]).run()
        assert not search.exception and not search.error, [e.value for e in search.error]
        assert search.slider(key="a.w_engine").value == 0.5
        search.slider(key="a.w_engine").set_value(0.8).run()
        assert search.query_params["weights"] == "bm25=0.5,dense=0.5,engine=0.8"
        calls = engine.calls
        assert calls >= 1  # asked once for the query; the slider move used the cached answer
        search.slider(key="a.w_engine").set_value(0.3).run()
        assert engine.calls == calls

        at = open_page(CORPUS)
        at.selectbox(key="corpus.outside_name").set_value("engine")
        at.button(key="corpus.outside_remove").click().run()
        assert any("Removed outside engine 'engine'" in plain(s.value) for s in at.success)
        assert workbench.outside_sources().names() == []
    finally:
        if "engine" in workbench.outside_sources().names():
            workbench.outside_sources().remove("engine")
        engine.stop()
        close_engines()
