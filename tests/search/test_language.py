"""Language-aware fusion (`retrieval.search.language`): word-matching sources leave the fusion when the
query's script differs from the collection's."""

import pytest
from corpora import ANIMALS

from retrieval.evaluation.evaluate import evaluate_collection
from retrieval.evaluation.sweep import Variant, run_sweep
from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.search.config import SearchConfig
from retrieval.search.language import crosses_languages, language_rule, query_language
from retrieval.search.workbench import Workbench
from retrieval.store import Store

# Han characters outnumber a quarter of the Latin letters: a Chinese query, though it contains an
# English word BM25 can match ("mice" is in cat and fox).
CROSSING = "mice 哪些动物会捕捉老鼠"


@pytest.fixture(scope="module")
def workbench(tmp_path_factory):
    wb = Workbench(Store(str(tmp_path_factory.mktemp("lancedb"))))
    create_collection(wb.store, "animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    return wb


def test_query_language_and_crossing():
    assert query_language(CROSSING) == "zh"
    assert query_language("which animals hunt mice") == "en"
    assert crosses_languages(CROSSING, "en")
    assert not crosses_languages(CROSSING, "zh")
    assert not crosses_languages("which animals hunt mice", "en")
    assert crosses_languages("which animals hunt mice", "zh")
    assert not crosses_languages(CROSSING, "mixed")  # a mixed collection is never crossed
    assert not crosses_languages("  ", "en")


def test_rule_drops_lexical_weights_and_says_so():
    config = SearchConfig(weights={"bm25": 0.5, "dense": 0.5, "keyword": 0.2})
    fused, note = language_rule(config, CROSSING, "en")
    assert fused.weights == {"dense": 0.5}
    assert note == ("query looks Chinese, collection is English: weight of BM25 0.5, keyword 0.2 → 0 "
                    "(language-aware fusion: words cannot match across languages; switch it off to count them)")
    assert config.weights == {"bm25": 0.5, "dense": 0.5, "keyword": 0.2}  # the user's config is untouched

    kept, note = language_rule(SearchConfig(weights={"bm25": 0.5, "dense": 0.5}, language_aware=False),
                               CROSSING, "en")
    assert kept.weights == {"bm25": 0.5, "dense": 0.5}
    assert "language-aware fusion is off" in note

    alone, note = language_rule(SearchConfig(weights={"bm25": 1.0}), CROSSING, "en")
    assert alone.weights == {"bm25": 1.0} and "only weighted source" in note

    same, note = language_rule(config, "which animals hunt mice", "en")
    assert same is config and note is None


def test_crossing_hybrid_equals_the_dense_ranking(workbench):
    config = SearchConfig(fusion="rrf", weights={"bm25": 0.5, "dense": 0.5}, top_k=6)
    result = workbench.search("animals", CROSSING, config)
    dense = [h.doc_id for h in result.candidates.sources["dense"].hits]
    assert [r.doc_id for r in result.outcome.results] == dense
    # RRF with the dense weight alone: 0.5 / (60 + dense rank)
    assert [r.score for r in result.outcome.results] == [0.5 / (60 + rank) for rank in range(1, len(dense) + 1)]
    assert result.outcome.notes[0].startswith("query looks Chinese, collection is English: weight of BM25 0.5 → 0")
    # BM25 is still retrieved and shown: it matched "mice"
    assert {h.doc_id for h in result.candidates.sources["bm25"].hits} == {"cat", "fox"}
    # the shipped default (weighted sum) crosses the same way: the dense order
    default = workbench.search("animals", CROSSING, SearchConfig(top_k=6))
    assert [r.doc_id for r in default.outcome.results] == dense
    assert default.outcome.notes[0].startswith("query looks Chinese, collection is English: weight of BM25 0.4 → 0")

    off = workbench.search("animals", CROSSING, SearchConfig(fusion="rrf", weights={"bm25": 0.5, "dense": 0.5},
                                                             top_k=6, language_aware=False))
    assert any(r.sources["bm25"].rank is not None for r in off.outcome.results)
    assert [r.score for r in off.outcome.results] != [r.score for r in result.outcome.results]


def test_sweep_applies_the_rule_as_search_does(workbench):
    queries = {"q1": CROSSING, "q2": "which animals hunt mice"}
    qrels = {"q1": {"fox": 1}, "q2": {"fox": 1}}
    for aware in (True, False):
        config = SearchConfig(language_aware=aware)
        swept = run_sweep(workbench, "animals", queries, qrels, [Variant("v", config)], metrics=("ndcg@10",))
        evaluated = evaluate_collection(workbench, "animals", queries, qrels, config, metrics=("ndcg@10",),
                                        explained=True)  # through Workbench.search, as a search does
        assert swept.per_query["v"] == evaluated.per_query["hybrid"]
