"""examples/ray_embed.py on a real local Ray (ray[data] is in requirements-dev.txt): only the
embedding step runs on Ray workers, so a collection it writes is the collection the CLI writes
from the same file — the same columns (the cross-lingual `vector_xl` included), the same indexes
(by size: here from 6 documents, so the scaled ones too), the same catalogue entry, rows, entity
graph and search results."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from corpora import ANIMALS

from retrieval import limits
from retrieval.cli import main as cli
from retrieval.indexing.derive import collection_rows, document_records, documents_of
from retrieval.indexing.readers.parse import parse_path
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import GRAPH_KINDS, XL_COLUMN, Store, collection_schema
from retrieval.text.chunking import chunk_markdown

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("ray_embed", REPO / "examples" / "ray_embed.py")
ray_embed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ray_embed)

QUERIES = ["night hunters mice", "honey", "哪些动物在夜里捕捉老鼠"]  # the last crosses languages: vector_xl
CONFIGS = [SearchConfig(depth=6), SearchConfig(depth=6, weights={"bm25": 0.4, "dense": 0.6, "keyword": 0.3,
                                                                 "graph": 0.3})]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """The animals file ingested twice into one store: by the CLI (`by-cli`) and by the Ray example
    (`by-ray`, one worker, Ray Data batches of 4), with the scaled indexes from 6 documents."""
    folder = tmp_path_factory.mktemp("ray")
    source = folder / "animals.csv"
    source.write_text(ANIMALS, encoding="utf-8")
    db = str(folder / "db")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(limits, "SCALE_DOCS", 6)
        assert cli.main(["--db", db, "ingest", str(source), "--collection", "by-cli"]) == 0
        report = ray_embed.main(["by-ray", "--source", str(source), "--db", db, "--workers", "1",
                                 "--batch-size", "4"])
    assert report["documents"] == 6 and report["xl_model"]
    return Store(db)


def test_the_ray_collection_has_the_cli_collections_columns_indexes_and_catalogue_entry(both):
    cli_table, ray_table = both.table("by-cli"), both.table("by-ray")
    assert ray_table.schema == cli_table.schema and XL_COLUMN in ray_table.schema.names
    indexes = [sorted((i.index_type, tuple(i.columns)) for i in t.list_indices()) for t in (cli_table, ray_table)]
    assert indexes[0] == indexes[1] == sorted([("FTS", ("tokens",)), ("IvfRq", ("vector",)),
                                                ("IvfRq", (XL_COLUMN,)), ("BTree", ("id",))])
    apart = {"name", "display_name", "created", "updated"}
    cli_info, ray_info = both.info("by-cli"), both.info("by-ray")
    assert {k: v for k, v in vars(ray_info).items() if k not in apart} == \
           {k: v for k, v in vars(cli_info).items() if k not in apart}
    assert (ray_info.doc_count, ray_info.truncated, ray_info.graph) == (6, 0, "")


def test_the_ray_collection_holds_the_cli_collections_rows_and_entity_graph(both):
    cli_rows = both.table("by-cli").to_arrow().to_pylist()
    ray_rows = both.table("by-ray").to_arrow().to_pylist()
    assert [r["id"] for r in ray_rows] == [r["id"] for r in cli_rows]  # same storage order
    for a, b in zip(cli_rows, ray_rows, strict=True):
        for column in ("vector", XL_COLUMN):  # same models; torch thread counts differ (1 on the worker)
            np.testing.assert_allclose(a.pop(column), b.pop(column), atol=1e-5)
        assert a == b
    for kind in GRAPH_KINDS:
        tables = [sorted(json.dumps(r, sort_keys=True) for r in both.graph_tables(c)[kind].to_pylist())
                  for c in ("by-cli", "by-ray")]
        assert tables[0] == tables[1] and tables[0]


@pytest.mark.parametrize("config", CONFIGS, ids=["default", "all-sources"])
def test_the_ray_collection_gives_the_cli_collections_search_results(both, config):
    wb = Workbench(both)
    for query in QUERIES:
        cli_result, ray_result = (wb.search(c, query, config) for c in ("by-cli", "by-ray"))
        cli_ranking = [(f.doc_id, f.score) for f, _ in cli_result.final_ranking()]
        ray_ranking = [(f.doc_id, f.score) for f, _ in ray_result.final_ranking()]
        assert cli_ranking and [d for d, _ in ray_ranking] == [d for d, _ in cli_ranking], query
        assert [s for _, s in ray_ranking] == pytest.approx([s for _, s in cli_ranking], abs=1e-5)
        for name, source in cli_result.candidates.sources.items():
            assert ray_result.candidates.sources[name].backend == source.backend


def documents():
    history = (REPO / "sample_data" / "three_kingdoms" / "三国战役.md").read_text("utf-8")
    catalogue = parse_path(REPO / "sample_data" / "catalogue" / "records.json").documents[:8]
    return chunk_markdown(history, "history")[:12] + catalogue


def test_documents_survive_the_trip_through_a_ray_data_row():
    docs = documents()
    assert any(d.parent_id for d in docs) and any(d.metadata for d in docs)
    assert documents_of(document_records(docs)) == docs


def test_a_vector_column_in_another_arrow_type_is_cast_to_the_collection_schema():
    schema = collection_schema(3)
    row = {"id": "a", "title": "", "text": "t", "tokens": "t", "n_tokens": 1, "language": "en",
           "metadata": "{}", "parent_id": None, "chunk_index": None, "start_line": None, "end_line": None}
    vector = pa.array([[0.5, 0.25, 1.0]], pa.list_(pa.float64()))  # variable-size, float64
    loose = pa.table({**{k: [v] for k, v in row.items()}, "vector": vector})
    cast = collection_rows(loose, 3)
    assert cast.schema.equals(schema)
    np.testing.assert_array_equal(cast.column("vector").to_pylist()[0], [0.5, 0.25, 1.0])


def test_repeated_copies_have_distinct_ids():
    docs = documents()
    copies = ray_embed.repeated(docs, 3)
    assert len(copies) == 3 * len(docs) == len({d.id for d in copies})
    assert {d.parent_id for d in copies if d.parent_id} == {f"{d.parent_id}~{k}" for d in docs if d.parent_id
                                                             for k in range(3)}
