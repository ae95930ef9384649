"""examples/ray_embed.py without Ray (Ray is not a CI requirement, requirements-scale.txt): what
its workers receive and return makes the same collection as the single-process pipeline — the
documents survive the trip through a Ray Data row, per-batch entity rows merge into the rows of
the whole corpus, and a vector column in another Arrow type is cast back to the collection's."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from retrieval.chunking import chunk_markdown
from retrieval.ingest import parse_path
from retrieval.pipeline import graph_rows
from retrieval.store import collection_schema

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("ray_embed", REPO / "examples" / "ray_embed.py")
ray_embed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ray_embed)


def documents():
    history = (REPO / "sample_data" / "three_kingdoms" / "三国战役.md").read_text("utf-8")
    catalogue = parse_path(REPO / "sample_data" / "catalogue" / "records.json").documents[:8]
    return chunk_markdown(history, "history")[:12] + catalogue


def test_documents_survive_the_trip_through_a_ray_data_row():
    docs = documents()
    assert any(d.parent_id for d in docs) and any(d.metadata for d in docs)
    batch = pa.Table.from_pylist([ray_embed.to_record(d) for d in docs])
    assert ray_embed.from_batch(batch) == docs


def test_per_batch_entity_rows_merge_into_the_whole_corpus_rows():
    docs, when = documents(), datetime(2026, 1, 2, tzinfo=UTC)
    whole = graph_rows(docs, when)
    parts = [graph_rows(docs[i:i + 5], when) for i in range(0, len(docs), 5)]
    merged = ray_embed.merge_graphs(parts)
    assert merged["entities"] == sorted(whole["entities"], key=lambda r: r["id"])
    assert any(r["event_count"] > 1 for r in merged["entities"])  # counts added across batches
    for kind in ("event_entities", "event_times"):
        assert merged[kind] == whole[kind]


def test_a_vector_column_in_another_arrow_type_is_cast_to_the_collection_schema():
    schema = collection_schema(3)
    row = {"id": "a", "title": "", "text": "t", "tokens": "t", "n_tokens": 1, "language": "en",
           "metadata": "{}", "parent_id": None, "chunk_index": None, "start_line": None, "end_line": None}
    vector = pa.array([[0.5, 0.25, 1.0]], pa.list_(pa.float64()))  # variable-size, float64
    loose = pa.table({**{k: [v] for k, v in row.items()}, "vector": vector})
    cast = ray_embed._as_schema(loose, schema)
    assert cast.schema.equals(schema)
    np.testing.assert_array_equal(cast.column("vector").to_pylist()[0], [0.5, 0.25, 1.0])


def test_repeated_copies_have_distinct_ids():
    docs = documents()
    copies = ray_embed.repeated(docs, 3)
    assert len(copies) == 3 * len(docs) == len({d.id for d in copies})
    assert {d.parent_id for d in copies if d.parent_id} == {f"{d.parent_id}~{k}" for d in docs if d.parent_id
                                                             for k in range(3)}
