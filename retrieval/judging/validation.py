"""What a query set may hold: set names, query and document ids, query texts and grades, each
checked before anything is written; and the id a query typed on the Search page gets.

Set names follow the collection-name rule; ids are non-empty single tokens (no whitespace: TREC
files split on it) of at most 200 characters; query texts are non-empty, at most 2,000
characters; grades are integers, 0–3 when rated (`RATING_GRADES`) and −2–4 when imported.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from retrieval.store import validate_collection_name
from retrieval.types import RetrievalError

RATING_GRADES = (0, 1, 2, 3)  # what `rate` accepts
# Imported files may use TREC's wider scale: −2 spam, −1/0 not relevant … 4 navigational.
MIN_IMPORTED_GRADE, MAX_IMPORTED_GRADE = -2, 4
MAX_ID_CHARS = 200
_ID_RE = re.compile(r"\S+")  # fullmatch: no trailing newline
MAX_QUERY_CHARS = 2000


def validate_set_name(name: str) -> str:
    """Set names follow the collection-name rule: 1–64 of a–z, 0–9, '_' and '-', starting with a
    letter or digit."""
    return validate_collection_name(name, what="query set name")


def validate_id(value: str, what: str) -> str:
    """A query or document id: a non-empty string of at most 200 characters without whitespace."""
    if not isinstance(value, str) or not _ID_RE.fullmatch(value) or len(value) > MAX_ID_CHARS:
        raise RetrievalError(
            f"Invalid {what} id {value!r}: use 1–{MAX_ID_CHARS} characters without spaces, tabs or line breaks"
        )
    return value


def validate_grade(grade: int, allowed: range | tuple[int, ...] = RATING_GRADES) -> int:
    """An integer grade within `allowed` (bool and float are refused, 2.0 included)."""
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in allowed:
        shown = f"{allowed[0]}–{allowed[-1]}"
        raise RetrievalError(f"Grade must be an integer from {shown}, got {grade!r}")
    return grade


def validate_query_text(text: str) -> str:
    """Query text, stripped: non-empty, at most 2,000 characters."""
    if not isinstance(text, str) or not text.strip():
        raise RetrievalError("Query text is empty")
    text = text.strip()
    if len(text) > MAX_QUERY_CHARS:
        raise RetrievalError(f"Query text is {len(text)} characters long; the limit is {MAX_QUERY_CHARS}")
    return text


def ui_query_id(text: str, taken: Mapping[str, str] | None = None) -> str:
    """'ui-' + the first 8 hex digits of sha1(text); longer if that id names another text."""
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()
    taken = taken or {}
    for length in range(8, len(digest) + 1):
        candidate = f"ui-{digest[:length]}"
        if taken.get(candidate, text) == text:
            return candidate
    raise RetrievalError("Could not make a query id for this text")  # 2^-160: never in practice


def validate_qrels(qrels: Mapping[str, Mapping[str, int]], known_ids: set[str]) -> dict[str, dict[str, int]]:
    """Judgments (query id -> doc id -> grade) as plain dicts, checked: valid ids, integer grades
    from −2 to 4, and every query id among `known_ids` (the unknown ones named in the error)."""
    allowed = range(MIN_IMPORTED_GRADE, MAX_IMPORTED_GRADE + 1)
    clean: dict[str, dict[str, int]] = {}
    unknown = []
    for query_id, docs in qrels.items():
        validate_id(query_id, "query")
        if query_id not in known_ids:
            unknown.append(query_id)
            continue
        for doc_id, grade in docs.items():
            validate_id(doc_id, "document")
            clean.setdefault(query_id, {})[doc_id] = validate_grade(grade, allowed)
    if unknown:
        shown = ", ".join(repr(q) for q in sorted(unknown)[:10])
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        raise RetrievalError(f"Judgments name {len(unknown)} query id(s) that are not in the query set: "
                             f"{shown}{more}")
    return clean
