"""The entity graph tables' rows (retrieval/text/entity_tables.py): event times, entity rows
counted per event, merged counts; real text with the real jieba."""

from datetime import UTC, datetime

from retrieval.text.entity_tables import entity_rows, event_time, merge_entities
from retrieval.types import Document


def test_event_time_from_metadata_else_ingest():
    ingested = datetime(2026, 1, 2, 10, 0, tzinfo=UTC)
    assert event_time({"date": "2024-03-01"}, ingested) == ("2024-03-01", "metadata:date")
    assert event_time({"created": "2024/05/06 12:00"}, ingested) == ("2024-05-06", "metadata:created")
    assert event_time({"date": "yesterday"}, ingested) == ("2026-01-02", "ingest")
    assert event_time({}, ingested) == ("2026-01-02", "ingest")


def test_rows_count_events_per_entity_and_merge_adds_counts():
    docs = [Document("a", "曹操在官渡击败袁绍。"), Document("b", "曹操在赤壁败给周瑜。")]
    entities, links, times = entity_rows(docs, datetime(2026, 1, 1, tzinfo=UTC))
    by_id = {r["id"]: r for r in entities}
    assert by_id["person:曹操"]["event_count"] == 2 and by_id["person:袁绍"]["event_count"] == 1
    assert {"event_id": "b", "entity_id": "person:周瑜"} in links
    assert times == [{"event_id": "a", "date": "2026-01-01", "date_source": "ingest"},
                     {"event_id": "b", "date": "2026-01-01", "date_source": "ingest"}]
    merged = {r["id"]: r for r in merge_entities(entities, [dict(by_id["person:曹操"])])}
    assert merged["person:曹操"]["event_count"] == 4 and merged["person:周瑜"]["event_count"] == 1
