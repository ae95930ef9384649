r"""Metadata filters: seed 003's `filter_category`, generalised to any metadata field.

A filter is a string `FIELD OP VALUE` (what the CLI's `--filter`, the URL and a saved config hold):

    category=hair_problem        equality; on a list field (tags) the list contains the value;
                                 on a numeric field the number equals
    category=a|b|c               `in`: any of the values
    year>=2010   price<9.5       ranges on numbers, or on ISO dates (date>=2020-01-01)
    year>2010    year<=2020
    category=public\|secret     a backslash makes the next `|`, `\` or space part of the value
                                 (`escape_value` writes a value so; other backslashes are literal)

A document passes when every filter passes (AND). Filters are applied *before* ranking, in every
source (`allowed` ids: a mask over rank-bm25's scores, a LanceDB prefilter for the native index
and the vectors, the keyword scorer's records, the graph's scored events), so depth 100 means 100
matching documents. BM25's statistics (document frequencies, average length) stay those of the
whole collection, as in Elasticsearch and LanceDB's prefiltered full-text search.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from retrieval.types import RetrievalError

OPERATORS = (">=", "<=", "=", ">", "<")
_SPLIT = re.compile(r"^\s*([^=<>]+?)\s*(>=|<=|=|>|<)(.*)\Z", re.S)
FILTER_MAX_CHARS = 500
_ESCAPED = "|\\"  # what a backslash makes literal in a value (and any whitespace)


def escape_value(value: str) -> str:
    """`value` written so that `parse_filter` reads it back as one literal value: `\\` and `|`
    escaped, and spaces at either end (which are otherwise trimmed)."""
    body = value.replace("\\", "\\\\").replace("|", "\\|")
    start = len(body) - len(body.lstrip())
    end = len(body.rstrip())
    if end <= start:
        return "".join("\\" + c for c in body)
    return ("".join("\\" + c for c in body[:start]) + body[start:end]
            + "".join("\\" + c for c in body[end:]))


def _split_values(text: str) -> tuple[str, ...]:
    """The values of an equality filter: split at each `|` not escaped, spaces not escaped
    trimmed at either end, escapes removed."""
    values: list[list[tuple[str, bool]]] = [[]]
    chars = iter(text)
    for char in chars:
        if char == "\\":
            following = next(chars, None)
            if following is not None and (following in _ESCAPED or following.isspace()):
                values[-1].append((following, True))
                continue
            values[-1].append((char, False))
            if following is None:
                break
            char = following
        if char == "|":
            values.append([])
        else:
            values[-1].append((char, False))
    out = []
    for value in values:
        while value and not value[0][1] and value[0][0].isspace():
            value.pop(0)
        while value and not value[-1][1] and value[-1][0].isspace():
            value.pop()
        out.append("".join(c for c, _ in value))
    return tuple(out)


@dataclass(frozen=True)
class Filter:
    field: str
    op: str
    values: tuple[str, ...]  # one value, or several for `=` with `|`

    def __str__(self) -> str:
        return f"{self.field}{self.op}{'|'.join(map(escape_value, self.values)) if self.op == '=' else self.values[0]}"


def parse_filter(text: str) -> Filter:
    """'category=a|b' -> Filter('category', '=', ('a', 'b')); a clear error otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise RetrievalError(f"A filter looks like 'category=hair_problem' or 'year>=2010'; got {text!r}")
    if len(text) > FILTER_MAX_CHARS:
        raise RetrievalError(f"A filter is at most {FILTER_MAX_CHARS} characters")
    match = _SPLIT.match(text)
    if not match or not match.group(3):
        raise RetrievalError(f"Cannot read filter {text!r}: write FIELD=VALUE, FIELD=A|B, or FIELD>=, >, <=, < "
                             "a number or an ISO date")
    field, op, value = match.groups()
    if not value.strip():
        raise RetrievalError(f"Filter {text!r} has an empty value")
    values = _split_values(value) if op == "=" else (value.strip(),)
    if any(not v for v in values):
        raise RetrievalError(f"Filter {text!r} has an empty value")
    if op != "=" and _bound(value) is None:
        raise RetrievalError(f"Filter {text!r}: {op} needs a number or an ISO date (2020-01-31), got {value!r}")
    return Filter(field, op, values)


def parse_filters(texts: Iterable[str]) -> tuple[Filter, ...]:
    return tuple(parse_filter(t) for t in texts)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _date(value: Any) -> date | None:
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}(?:[T ].*)?", value.strip()):
        try:
            return date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    return None


def _bound(value: str) -> float | date | None:
    number = _number(value)
    return number if number is not None else _date(value)


def _compare(op: str, left: Any, right: Any) -> bool:
    return {">=": left >= right, "<=": left <= right, ">": left > right, "<": left < right}[op]


def matches(metadata: Mapping[str, Any], flt: Filter) -> bool:
    """Whether one document's metadata passes one filter (see the module docstring)."""
    if flt.field not in metadata:
        return False
    value = metadata[flt.field]
    if flt.op == "=":
        items = value if isinstance(value, list) else [value]
        for item in items:
            for wanted in flt.values:
                if isinstance(item, str) and item == wanted:
                    return True
                number = _number(wanted)
                if number is not None and _number(item) == number and not isinstance(item, str):
                    return True
        return False
    bound = _bound(flt.values[0])
    if isinstance(bound, float):
        number = _number(value) if not isinstance(value, str) else None
        return number is not None and _compare(flt.op, number, bound)
    day = _date(value)
    return day is not None and _compare(flt.op, day, bound)


def check_fields(filters: Iterable[Filter], field_kinds: Mapping[str, set[str]]) -> None:
    """Refuse filters on fields no document has, and ranges on fields with neither numbers nor
    dates (`field_kinds`: field -> kinds of its values: "number", "date", "string", "list")."""
    problems = []
    for flt in filters:
        kinds = field_kinds.get(flt.field)
        if kinds is None:
            known = ", ".join(sorted(field_kinds)) or "none"
            problems.append(f"unknown metadata field {flt.field!r} (fields: {known})")
        elif flt.op != "=":
            bound = _bound(flt.values[0])
            need = "number" if isinstance(bound, float) else "date"
            if need not in kinds:
                problems.append(f"{flt} compares {flt.field!r} as a {need}, but its values are "
                                f"{', '.join(sorted(kinds))}")
    if problems:
        raise RetrievalError("Bad filter: " + "; ".join(problems))


def value_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if _number(value) is not None and not isinstance(value, str):
        return "number"
    if _date(value) is not None:
        return "date"
    return "string"


def allowed_ids(rows: Iterable[tuple[str, Mapping[str, Any]]], filters: tuple[Filter, ...]) -> frozenset[str]:
    """The ids of the documents that pass every filter."""
    return frozenset(doc_id for doc_id, metadata in rows if all(matches(metadata, f) for f in filters))
