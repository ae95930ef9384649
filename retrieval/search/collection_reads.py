"""What the core reads from a collection besides its sources' indexes, once per collection state:
its language, its metadata (for filters, tie-breaks and the filter controls), its titles (the
"why not?" picker) and its rows (what a result shows), all through the Workbench's caches
(`cache.Caches`), keyed by `Store.state_key`, so a write makes every reader read again."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from retrieval.cache import Caches
from retrieval.search.filters import allowed_ids, check_fields, parse_filters, value_kind
from retrieval.sources.lance_requests import RowIdMap
from retrieval.store import CollectionInfo, Store
from retrieval.types import RetrievalError

METADATA_VALUES_KEPT = 50  # per field, for the filter controls


def tie_value(metadata: Mapping[str, Any], field_name: str) -> float | None:
    """A document's tie-break value: its metadata field as a float when it is a number (not a bool)."""
    value = metadata.get(field_name)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def tie_values(documents: Mapping[str, Mapping[str, Any]], field_name: str | None) -> dict[str, float]:
    """The numeric metadata field used to break ties, for the rows that have it."""
    if not field_name:
        return {}
    values = {}
    for doc_id, row in documents.items():
        value = tie_value(row.get("metadata", {}), field_name)
        if value is not None:
            values[doc_id] = value
    return values


class CollectionReads:
    """Cached reads of collections at their current state (or a pinned `state`)."""

    def __init__(self, store: Store, caches: Caches):
        self.store, self.caches = store, caches

    def state(self, collection: str) -> tuple:
        """The collection's state key (`Store.state_key`): what every cache of its data keys on."""
        return self.store.state_key(collection)

    def info(self, collection: str, state: tuple | None = None) -> CollectionInfo:
        """The collection's catalogue entry, read once per collection state."""
        state = state if state is not None else self.state(collection)
        return self.caches.loaded.get_or_create((collection, state, "_info"), lambda: self.store.info(collection))

    def language(self, collection: str, state: tuple | None = None) -> str:
        return self.info(collection, state).language

    def require_documents(self, collection: str, state: tuple | None = None) -> None:
        """A clear error, not a source's failure, when the collection has no documents (a new
        collection's, or a cleared one's)."""
        info = self.info(collection, state)
        if info.doc_count == 0:
            raise RetrievalError(f"{info.label!r} has no documents — add some on the Corpus page, or with "
                                 f"`python -m retrieval ingest FILE --collection {info.name} --add`")

    def metadata(self, collection: str, state: tuple | None = None
                 ) -> tuple[list[tuple[str, dict]], dict[str, dict[str, Any]]]:
        """(id, metadata) of every document in storage order, and per field the kinds of its
        values and its `METADATA_VALUES_KEPT` most frequent values (`metadata_fields`)."""
        state = state if state is not None else self.state(collection)

        def read():
            table = self.store.column(collection, ["id", "metadata"])
            rows = [(i, json.loads(m or "{}")) for i, m in zip(table.column("id").to_pylist(),
                                                               table.column("metadata").to_pylist(), strict=True)]
            fields: dict[str, dict[str, Any]] = {}
            for _, metadata in rows:
                for key, value in metadata.items():
                    entry = fields.setdefault(key, {"kinds": set(), "values": Counter()})
                    entry["kinds"].add(value_kind(value))
                    for item in value if isinstance(value, list) else [value]:
                        if isinstance(item, (str, int, float)) and not isinstance(item, bool):
                            entry["values"][str(item)] += 1
            for entry in fields.values():  # ranked once per state, not on every slider move
                entry["values"] = entry["values"].most_common(METADATA_VALUES_KEPT)
            return rows, fields

        return self.caches.loaded.get_or_create((collection, state, "_metadata"), read)

    def metadata_fields(self, collection: str, state: tuple | None = None) -> dict[str, dict[str, Any]]:
        """Per metadata field: the kinds of its values ("string", "number", "date", "list") and
        its most frequent values as (value, count), most frequent first (lists count each item):
        what the filter controls offer."""
        return self.metadata(collection, state)[1]

    def size(self, collection: str, state: tuple | None = None) -> int:
        return len(self.metadata(collection, state)[0])

    def filtered_ids(self, collection: str, filters: list[str], state: tuple | None = None
                     ) -> tuple[frozenset[str], int]:
        """The ids passing every filter, and the collection's size; a clear error for an unknown
        field or a range on a field without numbers or dates. Cached per state and filters."""
        state = state if state is not None else self.state(collection)
        parsed = parse_filters(filters)

        def compute():
            rows, fields = self.metadata(collection, state)
            check_fields(parsed, {name: entry["kinds"] for name, entry in fields.items()})
            return allowed_ids(rows, parsed), len(rows)

        return self.caches.filters.get_or_create((collection, state, tuple(filters)), compute)

    def allowed(self, collection: str, filters: list[str], state: tuple
                ) -> tuple[frozenset[str] | None, tuple[int, int] | None]:
        """The ids `filters` allow and (allowed, collection size); (None, None) unfiltered."""
        if not filters:
            return None, None
        allowed, total = self.filtered_ids(collection, filters, state)
        return allowed, (len(allowed), total)

    def tie_values(self, collection: str, field_name: str | None, state: tuple | None = None) -> dict[str, float]:
        """`tie_values` over every document of the collection, from the metadata read once per
        state and kept per field: ties broken without reading candidates' rows."""
        if not field_name:
            return {}
        state = state if state is not None else self.state(collection)
        rows = self.metadata(collection, state)[0]  # outside `read`: one LRU's creations do not nest

        def read() -> dict[str, float]:
            return tie_values({doc_id: {"metadata": metadata} for doc_id, metadata in rows}, field_name)

        return self.caches.loaded.get_or_create((collection, state, "_ties", field_name), read)

    def doc_stats(self, collection: str, state: tuple | None = None):
        """Every document's number of analysed terms and its title's terms (a learned ranker's
        document features, `learned_ranker.DocumentStats`), read once per state."""
        from retrieval.search.learned_ranker import DocumentStats
        from retrieval.text.tokenize import tokenize

        state = state if state is not None else self.state(collection)

        def read():
            table = self.store.column(collection, ["id", "tokens", "title"])
            ids = table.column("id").to_pylist()
            lengths = {i: len(t.split()) for i, t in zip(ids, table.column("tokens").to_pylist(), strict=True)}
            titles = {i: frozenset(tokenize(t)) for i, t in zip(ids, table.column("title").to_pylist(), strict=True)
                      if t}
            return DocumentStats(lengths, titles)

        return self.caches.loaded.get_or_create((collection, state, "_doc_stats"), read)

    def find_documents(self, collection: str, text: str, limit: int = 20) -> list[tuple[str, str]]:
        """(id, title) of documents whose title or id contains `text` (case-insensitive), at most
        `limit`, in collection order: the why-not picker's title search. Titles read once per state."""
        state = self.state(collection)

        def read():
            table = self.store.column(collection, ["id", "title"])
            return list(zip(table.column("id").to_pylist(), table.column("title").to_pylist(), strict=True))

        needle = text.strip().casefold()
        if not needle:
            return []
        rows = self.caches.loaded.get_or_create((collection, state, "_titles"), read)
        found = [(i, t or "") for i, t in rows if needle in (t or "").casefold() or needle in i.casefold()]
        return found[:limit]

    def documents(self, collection: str, ids: Iterable[str], state: tuple | None = None,
                  row_ids: Mapping[str, int] | None = None) -> dict[str, dict[str, Any]]:
        """Rows of the given documents (no vectors), from the row cache kept per collection state;
        `row_ids` (id → LanceDB row id, as a source returned them) lets missing rows be taken
        by row id (`Store.documents`)."""
        state = state if state is not None else self.state(collection)
        ids = set(ids)
        rows = self.caches.documents.get_or_create((collection, state), dict)
        missing = [i for i in ids if i not in rows]
        if missing:
            rows.update(self.store.documents(collection, missing, row_ids, state))
        return {i: rows[i] for i in ids if i in rows}

    def row_id_map(self, collection: str, state: tuple) -> RowIdMap:
        """The document id of each LanceDB row id of the collection at `state`, read in the
        background once per state (`lance_requests.RowIdMap`), for every source that searches
        through LanceDB."""
        return self.caches.row_ids.get_or_create((collection, state),
                                                 lambda: RowIdMap(self.store.table_at(collection, state)))

    def cached_rows(self, collection: str, state: tuple, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The rows of `ids` already in the row cache (nothing read)."""
        rows = self.caches.documents.get((collection, state)) or {}
        return {i: rows[i] for i in ids if i in rows}
