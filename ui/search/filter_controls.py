"""A config's metadata filter controls: equality filters picked from the collection's metadata
values (each with how many documents have it), ranges typed as text. Bound to the session's View
(`state.bound`), like every config control."""

from __future__ import annotations

import streamlit as st

from retrieval.search.filters import escape_value, parse_filter
from retrieval.text.highlight import escape_markdown
from retrieval.types import RetrievalError
from ui import resources, state

FILTER_VALUES_SHOWN = 30  # most frequent values per field offered in the picker


def _split_filters(filters: list[str]) -> tuple[list[str], list[str]]:
    """Equality filters as one "field=value" entry per value (what the picker shows), and the
    rest (ranges) as written."""
    picked, other = [], []
    for text in filters:
        field, op, value = text.partition("=")
        try:
            values = parse_filter(text).values if op and not any(c in field for c in "<>") and value else None
        except RetrievalError:
            values = None
        if values is None:
            other.append(text)
        else:  # each value written back as the filter language reads it: `a\|b` is one value
            picked += [f"{field.strip()}={escape_value(v)}" for v in values]
    return picked, other


def _join_filters(picked: list[str], other: list[str]) -> list[str]:
    """Picked "field=value" entries, values of one field joined by | (any of them), then the rest."""
    by_field: dict[str, list[str]] = {}
    for entry in picked:
        field, _, value = entry.partition("=")
        by_field.setdefault(field, []).append(value)
    return [f"{field}={'|'.join(values)}" for field, values in by_field.items()] + other


def filter_controls(which: str) -> None:
    """Metadata filters for config `which`, from the current collection's metadata fields (each
    value with how many documents have it); ranges typed as text. Applied before ranking."""
    collection = state.view().collection
    try:
        fields = resources.workbench().reads.metadata_fields(collection) if collection else {}
    except Exception:  # no collection yet, or it cannot be read: the page says why elsewhere
        fields = {}
    config = state.view().config(which)
    with st.expander(f"Filters ({len(config.filters)})" if config.filters else "Filters"):
        counts = {f"{field}={escape_value(str(value))}": n for field, entry in sorted(fields.items())
                  for value, n in entry["values"][:FILTER_VALUES_SHOWN]}
        picked, _ = _split_filters(config.filters)
        options = list(dict.fromkeys([*counts, *picked]))

        def write_picked(values: list[str]) -> None:
            cfg = state.view().config(which)
            state.view().set_config(which, cfg.edited(filters=_join_filters(values, _split_filters(cfg.filters)[1])))

        def write_other(text: str) -> None:
            cfg = state.view().config(which)
            typed = [line.strip() for line in (text or "").splitlines() if line.strip()]
            state.view().set_config(which, cfg.edited(filters=_join_filters(_split_filters(cfg.filters)[0], typed)))

        state.bound(st.multiselect, "Metadata values", f"{which}.filter_values",
                    lambda: _split_filters(state.view().config(which).filters)[0], write_picked,
                    options=options, format_func=lambda o: f"{o} ({counts[o]})" if o in counts else o,
                    help="Keep only documents with these metadata values, before any source ranks: depth "
                         "then counts matching documents. Values of one field: any of them; different "
                         "fields: all. A list field (tags) matches when it contains the value. BM25 keeps "
                         "the whole collection's statistics.")
        state.bound(st.text_area, "Other filters (one per line)", f"{which}.filter_other",
                    lambda: "\n".join(_split_filters(state.view().config(which).filters)[1]), write_other,
                    placeholder="year>=2010\ndate<2024-01-01", height=68,
                    help="Ranges on numbers or ISO dates: FIELD>=, >, <=, < VALUE. Fields: "
                         + (escape_markdown(", ".join(f"{k} ({'/'.join(sorted(v['kinds']))})"
                                                      for k, v in sorted(fields.items())))  # metadata keys: user text
                            or "this collection has no metadata"))
