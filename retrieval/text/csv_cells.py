"""CSV written for spreadsheets: a cell that a spreadsheet would run as a formula is made text.

OWASP's rule against CSV (formula) injection (owasp.org/www-community/attacks/CSV_Injection; ASVS
1.2.10): a text cell starting with `=`, `+`, `-`, `@`, a tab, a carriage return or NUL
(`FORMULA_STARTS`) gets a leading single quote, which Excel, LibreOffice and Google Sheets show as
text (`=HYPERLINK(…)` as a document id no longer becomes a live link). Numbers stay numbers (a
grade of -1 is a number, not a formula). Every CSV the product writes goes through `csv_text`.

Reading back (`restore_cell`) removes that one quote. So the mapping stays exact, a text that
starts with quotes followed by a formula start (`'=x`) gets one more quote too: `safe_cell` and
`restore_cell` are inverse on every string. Quepid's files use Quepid's own prefix, a space
(`prefix=" "`), which Quepid's importer strips (rating_formats.py).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\0")


def _starts_a_formula(text: str) -> bool:
    return text.lstrip("'").startswith(FORMULA_STARTS) if text.startswith("'") else text.startswith(FORMULA_STARTS)


def safe_cell(value: Any, prefix: str = "'") -> Any:
    """`value` as a spreadsheet shows it as text: `prefix` + a string that starts a formula (or
    quotes before one); any other value unchanged."""
    return prefix + value if isinstance(value, str) and _starts_a_formula(value) else value


def restore_cell(text: str) -> str:
    """The string `safe_cell` was given: one leading quote removed where `safe_cell` added it."""
    return text[1:] if text.startswith("'") and _starts_a_formula(text[1:]) else text


def csv_text(rows: Iterable[Iterable[Any]], prefix: str = "'") -> str:
    """CSV (comma, minimal quoting, '\\n' line ends) of `rows`, every cell through `safe_cell`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        writer.writerow([safe_cell(cell, prefix) for cell in row])
    return out.getvalue()
