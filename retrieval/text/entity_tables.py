"""The entity graph's tables for a batch of chunks (each chunk is one event, its entities found by
`entities.py`), by `store.AUX_KINDS` kind:

    entities        one row per entity: id, type, name (first surface form), normalized_name, event_count
    event_entities  one row per event–entity link: event_id, entity_id
    event_times     one row per event: its date for the time decay and where it came from (`event_time`)

An entity's id is `f"{type}:{normalized_name}"` (`entity_id`). Counts cover the batch's documents
only; `merge_entities` adds them to a collection's existing rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime

from retrieval.text.entities import ENTITY_TYPES, EntityExtractor, default_extractor

# ---- event time ------------------------------------------------------------------------------
DATE_FIELDS = ("date", "created", "created_time", "published", "time")


def event_time(metadata: Mapping, ingested: datetime) -> tuple[str, str]:
    """(ISO date, where it came from) of a chunk, for the time decay.

    The first of `DATE_FIELDS` in the document metadata that parses as an ISO date or datetime
    (`2024-03-01`, `2024-03-01T12:00:00`, `2024/03/01`) wins (source "metadata:<field>");
    otherwise the ingest time (source "ingest").
    """
    for name in DATE_FIELDS:
        value = metadata.get(name) if metadata else None
        if isinstance(value, str):
            parsed = parse_date(value)
            if parsed is not None:
                return parsed.isoformat(), f"metadata:{name}"
    return ingested.astimezone(UTC).date().isoformat(), "ingest"


def parse_date(value: str) -> date | None:
    text = value.strip().replace("/", "-")
    try:
        return datetime.fromisoformat(text).date()
    except ValueError:
        try:
            return date.fromisoformat(text[:10])
        except ValueError:
            return None


# ---- auxiliary table rows --------------------------------------------------------------------
def entity_id(kind: str, normalized: str) -> str:
    return f"{kind}:{normalized}"


def entity_rows(documents: Iterable, ingested: datetime, extractor: EntityExtractor | None = None
                ) -> tuple[list[dict], list[dict], list[dict]]:
    """Rows for the three auxiliary tables, for `documents` (objects with id, title, text, metadata):

    entities (id, type, name, normalized_name, event_count), event–entity links (event_id,
    entity_id) and event times (event_id, date, date_source). Counts cover these documents only;
    `merge_entities` adds them to a collection's existing rows.
    """
    extractor = extractor or default_extractor()
    entities: dict[str, dict] = {}
    links: list[dict] = []
    times: list[dict] = []
    for doc in documents:
        found = extractor.extract(doc.text, doc.title or "")
        for kind in ENTITY_TYPES:
            for normalized, name in found[kind].items():
                key = entity_id(kind, normalized)
                row = entities.setdefault(key, {"id": key, "type": kind, "name": name,
                                                "normalized_name": normalized, "event_count": 0})
                row["event_count"] += 1
                links.append({"event_id": doc.id, "entity_id": key})
        when, source = event_time(doc.metadata or {}, ingested)
        times.append({"event_id": doc.id, "date": when, "date_source": source})
    return list(entities.values()), links, times


def merge_entities(existing: Iterable[dict], new: Iterable[dict]) -> list[dict]:
    """Entity rows of both, one per id: event counts added, the first name kept."""
    merged: dict[str, dict] = {row["id"]: dict(row) for row in existing}
    for row in new:
        if row["id"] in merged:
            merged[row["id"]]["event_count"] += row["event_count"]
        else:
            merged[row["id"]] = dict(row)
    return sorted(merged.values(), key=lambda r: r["id"])


def graph_schemas():
    """Arrow schemas of the three auxiliary tables, by `store.AUX_KINDS` kind."""
    import pyarrow as pa

    return {
        "entities": pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("type", pa.string()),
                               pa.field("name", pa.string()), pa.field("normalized_name", pa.string()),
                               pa.field("event_count", pa.int64())]),
        "event_entities": pa.schema([pa.field("event_id", pa.string(), nullable=False),
                                     pa.field("entity_id", pa.string(), nullable=False)]),
        "event_times": pa.schema([pa.field("event_id", pa.string(), nullable=False), pa.field("date", pa.string()),
                                  pa.field("date_source", pa.string())]),
    }


def graph_table_rows(documents: Iterable, ingested: datetime, extractor: EntityExtractor | None = None
                     ) -> dict[str, list[dict]]:
    """`entity_rows` keyed by auxiliary table kind."""
    entities, links, times = entity_rows(documents, ingested, extractor)
    return {"entities": entities, "event_entities": links, "event_times": times}
