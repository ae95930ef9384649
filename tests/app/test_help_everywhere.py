"""Every control on every page has a help tooltip."""

import pytest
from conftest import QUERY, all_widgets, open_page

PAGES = [
    (None, {}),
    ("pages/1_Search.py", {"q": QUERY}),
    ("pages/2_Compare.py", {"q": QUERY, "mode": "configs"}),
    ("pages/3_Distributions.py", {"q": QUERY}),
    ("pages/4_Corpus.py", {}),
]


@pytest.mark.parametrize("page,params", PAGES, ids=lambda p: str(p))
def test_every_control_has_help(page, params):
    at = open_page(page, **params)
    if page == "pages/4_Corpus.py":  # the mapping controls appear once a table is uploaded
        at.file_uploader(key="corpus.files").set_value([("t.csv", b"id,text\n1,hello\n", "text/csv")]).run()
        at.radio(key="corpus.target").set_value("new collection").run()
        at.selectbox(key="corpus.model").set_value("local folder…").run()
    widgets = all_widgets(at)
    assert widgets
    assert [getattr(w, "key", None) or w.label for w in widgets if not (w.help or "").strip()] == []
