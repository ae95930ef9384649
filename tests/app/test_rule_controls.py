"""Query rules in the sidebar: typed, applied to the search, mirrored in the link, and a bad line
named with its number."""

from conftest import QUERY, open_page, plain

SEARCH = "pages/1_Search.py"


def test_typed_rules_pin_a_document_and_a_bad_line_is_named(app_db):
    at = open_page(SEARCH, q=QUERY)
    at.text_area(key="a.rules").input("panthers =>\n  PIN: unsafe-1\n").run()
    assert list(at.dataframe[0].value["id"])[:1] == ["unsafe-1"]
    assert at.query_params["rules"] == "panthers =>\n  PIN: unsafe-1\n"
    assert any("rules fired: 1 (panthers)" in plain(w.value) for w in [*at.warning, *at.caption, *at.info])
    at.text_area(key="a.rules").input("panthers =>\n  BOOST: x\n").run()
    errors = [plain(e.value) for e in at.error]
    assert any("line 2: unknown instruction 'BOOST'" in e for e in errors), errors
