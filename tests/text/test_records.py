"""Catalogue records (`retrieval.text.records`) and their ingest from JSON / JSONL (`retrieval.indexing.readers`)."""

import json
from pathlib import Path

import pytest

from retrieval.indexing.readers.options import ColumnMapping, ParseOptions
from retrieval.indexing.readers.parse import parse_bytes, parse_path
from retrieval.text.records import record_problems, record_quality, record_text, record_title
from retrieval.types import Document, IngestError

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "catalogue" / "records.json"

LABOUR = {
    "id": "lfs",
    "name": {"en": "Labour Force Survey", "zh": "劳动力调查"},
    "description": {"en": "Quarterly survey of employment.", "zh": "季度就业调查。"},
    "tags": ["unemployment", "survey"],
    "coverage": {"domains": ["labour"]},
    "organization": {"name": "Statistics Office"},
    "data_content": {"en": ["unemployment rate", "hours worked"], "zh": ["失业率"]},
    "quality": {"authority": 5, "methodology": 4, "timeliness": 3},
}
PRICES = {"id": 7, "name": {"zh": "物价指数"}, "description": "Monthly consumer prices.", "tags": []}


def problems_of(data: bytes, filename: str) -> list[str]:
    with pytest.raises(IngestError) as caught:
        parse_bytes(data, filename)
    return caught.value.problems


def test_json_array_of_records_becomes_documents_with_the_whole_record_as_metadata():
    corpus = parse_bytes(json.dumps([LABOUR, PRICES], ensure_ascii=False).encode(), "catalogue.json")
    assert corpus.format == "json"
    assert corpus.documents == [
        Document(
            id="lfs",
            title="Labour Force Survey / 劳动力调查",
            text="Quarterly survey of employment.\n季度就业调查。\nunemployment, survey\nlabour\nStatistics Office\n"
                 "unemployment rate; hours worked; 失业率",
            metadata=LABOUR,
        ),
        # an integer id is read as text; a description may be a plain string; empty lists add nothing
        Document(id="7", title="物价指数", text="Monthly consumer prices.", metadata=PRICES),
    ]
    assert any(note.startswith("catalogue records") for note in corpus.notes)


def test_jsonl_records_are_read_the_same_way():
    lines = "\n".join(json.dumps(r, ensure_ascii=False) for r in (LABOUR, PRICES)) + "\n"
    corpus = parse_bytes(lines.encode(), "catalogue.jsonl")
    assert [(d.id, d.title) for d in corpus.documents] == [("lfs", "Labour Force Survey / 劳动力调查"),
                                                           ("7", "物价指数")]
    assert corpus.documents[0].metadata == LABOUR


def test_every_bad_record_is_reported_by_item_and_nothing_is_loaded():
    records = [
        LABOUR,
        {**LABOUR, "id": "b", "tags": "unemployment"},
        {**LABOUR, "id": "", "name": {"en": 5}},
        {**LABOUR, "id": "d", "name": "Plain name"},  # not the record shape, in a file of records
        {**LABOUR, "id": "e", "quality": {"authority": "high"}, "coverage": {"domains": [1]}},
        {**LABOUR, "id": "lfs"},
        {"id": "g", "name": {"en": "Only a name"}},
    ]
    assert problems_of(json.dumps(records).encode(), "bad.json") == [
        "item 2: tags must be an array of strings",
        "item 3: id is missing or not a non-empty string or integer",
        "item 3: name.en must be a string",
        "item 4: name must be an {en, zh} object",
        "item 5: coverage.domains must be an array of strings",
        "item 5: quality.authority must be a finite number",
        "item 7: nothing to index besides the name: no description, tags, domains, organisation or content",
        "id 'lfs' appears in items 1 and 6",
    ]


def test_unreadable_jsonl_lines_are_reported_with_the_record_problems():
    lines = json.dumps(LABOUR) + "\n{not json\n" + json.dumps({**LABOUR, "id": "x", "tags": [1]}) + "\n"
    problems = problems_of(lines.encode(), "bad.jsonl")
    assert problems[0].startswith("line 2: ")
    assert problems[1:] == ["line 3: tags must be an array of strings"]


def test_an_explicit_column_mapping_reads_the_file_as_plain_documents():
    # the user chose the columns: no record detection, so a name object is a title that is no text
    options = ParseOptions(mapping=ColumnMapping(id="id", text="tags"))
    data = json.dumps([{"id": "a", "name": {"en": "X"}, "tags": "t1"}]).encode()
    with pytest.raises(IngestError) as caught:
        parse_bytes(data, "plain.json", options)
    assert caught.value.problems == ["item 1 (id 'a'): title is not a string or number"]  # named by its id too
    corpus = parse_bytes(data, "plain.json", ParseOptions(mapping=ColumnMapping(id="id", title="id", text="tags")))
    assert corpus.documents == [Document(id="a", text="t1", title="a", metadata={"name": {"en": "X"}})]


def test_quality_is_the_mean_of_the_dimensions_present():
    assert record_quality(LABOUR) == pytest.approx((5 + 4 + 3) / 3)
    seed_names = {"quality": {"authority_level": 5, "citation_count": 2, "unrelated": 100}}
    assert record_quality(seed_names) == pytest.approx(3.5)  # only known dimensions count
    assert record_quality({"quality": 4.5}) == 4.5
    assert record_quality({"quality": {}}) is None and record_quality({}) is None


def test_title_and_text_helpers_on_partial_records():
    assert record_title({"name": {"en": "Same", "zh": "Same"}}) == "Same"  # no "Same / Same"
    assert record_text({"organization": "Plain org", "data_content": ["a", "b"]}) == "Plain org\na; b"
    assert record_problems({"id": "x", "name": {"en": " "}, "tags": ["t"]}) == [
        "name has neither an English nor a Chinese text"]


def test_the_bundled_catalogue_is_valid_bilingual_and_shows_the_seed_weaknesses():
    corpus = parse_path(SAMPLE)
    records = [d.metadata for d in corpus.documents]
    assert 30 <= len(records) <= 40
    assert all(record_problems(r) == [] for r in records)
    assert all(set(r["name"]) == {"en", "zh"} and set(r["description"]) == {"en", "zh"} for r in records)
    assert all(len(r["quality"]) == 6 and all(1 <= v <= 5 for v in r["quality"].values()) for r in records)
    text = SAMPLE.read_text(encoding="utf-8").lower()
    assert "job" not in text  # so "job" can only reach the employment records through meaning
    names = {r["name"]["en"] for r in records}
    assert "Machine Learning Benchmarks" in names and "Employment Situation Report" in names
