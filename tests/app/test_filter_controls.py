"""Filter controls in the sidebar: built from the collection's metadata fields with value counts,
applied before ranking, mirrored in the URL, and a bad filter says why."""

from conftest import QUERY, open_page, plain

SEARCH = "pages/1_Search.py"


def test_a_picked_value_filters_every_source_and_goes_into_the_link(app_db, workbench):
    at = open_page(SEARCH, q=QUERY)
    picker = at.multiselect(key="a.filter_values")
    assert {"source=test (1)", "quality=3 (1)", "lang=en (8)", "lang=zh (8)"} <= set(picker.options)
    picker.select("source=test").run()
    assert list(at.dataframe[0].value["id"]) == ["unsafe-1"]
    notes = [plain(w.value) for w in at.warning]
    assert any(n.startswith(f"filter source=test left 1 of {app_db.n_docs} documents") for n in notes), notes
    assert at.query_params["filters"] == '["source=test"]'


def test_a_link_with_filters_opens_with_them_and_a_range_is_typed(app_db):
    at = open_page(SEARCH, q=QUERY, filters='["quality>=3"]')
    assert at.text_area(key="a.filter_other").value == "quality>=3"
    assert list(at.dataframe[0].value["id"]) == ["unsafe-1"]


def test_a_bad_filter_says_what_is_wrong(app_db):
    at = open_page(SEARCH, q=QUERY)
    at.text_area(key="a.filter_other").input("colour>=3").run()
    errors = [plain(e.value) for e in at.error]
    assert any("unknown metadata field 'colour'" in e for e in errors), errors
