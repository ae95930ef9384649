"""The entity extractor gives exactly the entities it gave before it was made faster, in the same
order (insertion order decides an entity's first surface form and the order of the graph's rows):
tests/data/entities/sample_extractions.json froze the earlier extractor's output on every document
of the bundled samples and on hand-written texts with every English sentence-start case."""

import json
import re
from pathlib import Path

import pytest

from retrieval.indexing.readers.parse import parse_path
from retrieval.text.entities import EntityConfig, EntityExtractor, opens_sentence

REPO = Path(__file__).resolve().parents[2]
FROZEN = json.loads((REPO / "tests/data/entities/sample_extractions.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def extractor() -> EntityExtractor:
    return EntityExtractor(EntityConfig(synonyms=dict(FROZEN["synonyms"])))


def frozen_texts() -> dict[str, tuple[str, str]]:
    texts = {}
    for name in FROZEN["samples"]:
        for doc in parse_path(REPO / "sample_data" / name).documents:
            texts[f"{name}|{doc.id}"] = (doc.title or "", doc.text)
    return {**texts, **{key: tuple(pair) for key, pair in FROZEN["tricky"].items()}}


def test_every_frozen_document_is_still_a_sample():
    assert set(frozen_texts()) == set(FROZEN["extractions"])
    assert len(FROZEN["extractions"]) == 171


def test_the_extractor_gives_the_frozen_entities_in_the_frozen_order(extractor):
    differing = []
    for key, (title, text) in frozen_texts().items():
        found = {kind: [list(pair) for pair in names.items()] for kind, names in extractor.extract(text, title).items()}
        if found != FROZEN["extractions"][key]:
            differing.append(key)
    assert differing == []


def test_the_frozen_output_is_not_empty():
    # A fixture of empty extractions would make the comparison above vacuous.
    kinds = {kind for found in FROZEN["extractions"].values() for kind, names in found.items() if names}
    assert kinds == {"time", "location", "person", "topic", "action", "tag"}


# The rule `opens_sentence` replaced, kept as its definition.
SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|[\"'(]\s*)$")


@pytest.mark.parametrize("prefix", [
    "", "\n", " \n", "  ", "\t", "a", "a ", "a.", "a. ", "a.\n", "a\n", "a \n ", "a\n b", "a;", "a:  ", "a?\u3000",
    "\"", "(", "'", "x (", "x ' ", "a,", "a-", "a.b", "\u3000", "\n\n", "a.\nb ", "end!", "x\r\n", "x\r",
])
def test_opens_sentence_says_what_the_regex_searched_in_the_prefix_says(prefix):
    text = prefix + "Paris"
    assert opens_sentence(text, len(prefix)) == bool(SENTENCE_START.search(text[:len(prefix)]))


def test_opens_sentence_agrees_with_the_regex_at_every_capital_of_the_samples():
    positions = 0
    for _, text in frozen_texts().values():
        for match in re.finditer(r"[A-Z]", text):
            assert opens_sentence(text, match.start()) == bool(SENTENCE_START.search(text[:match.start()]))
            positions += 1
    assert positions > 1000
