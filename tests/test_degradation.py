"""A source that returns nothing, returns NaN or infinite scores, raises, or cannot be built never
breaks a search: the other sources are fused as if it were absent, and a note names the source
and the reason (seed 004's failure cases, with real BM25 and vector sources beside them)."""

import pytest
from corpora import ANIMALS_WITH_QUALITY

from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.sources import SOURCES, SourceSpec
from retrieval.store import Store
from retrieval.types import Hit


class _Faulty:
    def __init__(self, name: str, behaviour: str):
        self.name, self.behaviour = name, behaviour

    def search(self, query, depth):
        if self.behaviour == "raises":
            raise RuntimeError("graph store offline")
        if self.behaviour == "empty":
            return []
        # cow is the best match for "milk"; NaN and inf hits must be dropped, the rest re-ranked.
        return [Hit("dog", float("nan"), 1), Hit("cow", 2.0, 2), Hit("cat", float("inf"), 3), Hit("owl", 1.0, 4)]


def _register(monkeypatch, behaviour: str) -> str:
    """A source named after `behaviour`, registered like any real source (a `SourceSpec`)."""
    name = f"faulty_{behaviour}"
    if behaviour == "unbuildable":
        def build(loaded, config):
            raise OSError("entity tables missing")
    else:
        def build(loaded, config):
            return _Faulty(name, behaviour)
    monkeypatch.setitem(SOURCES, name, SourceSpec(name=name, label=name, load=lambda context, collection: None,
                                                  build=build))
    return name


@pytest.fixture(scope="module")
def workbench(tmp_path_factory):
    wb = Workbench(Store(str(tmp_path_factory.mktemp("lancedb"))))
    create_collection(wb.store, "animals", parse_bytes(ANIMALS_WITH_QUALITY.encode(), "animals.csv"))
    return wb


def _two_source_scores(workbench):
    result = workbench.search("animals", "milk", SearchConfig(weights={"bm25": 0.5, "dense": 0.5}))
    return [(r.doc_id, r.score) for r in result.outcome.results]


@pytest.mark.parametrize("behaviour, note", [
    ("empty", "faulty_empty returned no candidates"),
    ("raises", "faulty_raises failed and was left out: RuntimeError: graph store offline"),
    ("unbuildable", "faulty_unbuildable failed and was left out: OSError: entity tables missing"),
])
def test_a_source_without_hits_adds_nothing_and_is_named(workbench, monkeypatch, behaviour, note):
    name = _register(monkeypatch, behaviour)
    result = workbench.search("animals", "milk", SearchConfig(weights={"bm25": 0.5, "dense": 0.5, name: 0.5}))
    assert note in result.outcome.notes
    # The other two are fused exactly as without the third source.
    assert [(r.doc_id, r.score) for r in result.outcome.results] == _two_source_scores(workbench)
    assert all(r.sources[name].contribution == 0.0 for r in result.outcome.results)


def test_non_finite_scores_are_dropped_with_a_note_and_the_rest_fused(workbench, monkeypatch):
    name = _register(monkeypatch, "nonfinite")
    config = SearchConfig(fusion="rrf", weights={"bm25": 0.5, "dense": 0.5, name: 0.5}, rrf_k=60)
    result = workbench.search("animals", "milk", config)
    assert f"{name}: 2 hit(s) with NaN or infinite scores dropped" in result.outcome.notes
    hits = result.candidates.sources[name].hits
    assert [(h.doc_id, h.raw_score, h.rank) for h in hits] == [("cow", 2.0, 1), ("owl", 1.0, 2)]
    by_id = {r.doc_id: r for r in result.outcome.ranked}
    assert by_id["cow"].sources[name].contribution == pytest.approx(0.5 / 61)
    assert by_id["owl"].sources[name].contribution == pytest.approx(0.5 / 62)
    assert by_id["dog"].sources[name].contribution == 0.0 and by_id["dog"].sources[name].rank is None
