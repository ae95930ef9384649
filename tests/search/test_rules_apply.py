"""Query rules applied: what each instruction does to the query, the candidates, the scores and
the order, and the explanation each affected result carries (search, lean path, JSON)."""

from __future__ import annotations

import pytest
from corpora import ANIMALS_WITH_CATEGORY

from retrieval.evaluation.evaluate import ranked_lean
from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.search.config import SearchConfig
from retrieval.search.filters import Filter
from retrieval.search.plan import evaluation_config
from retrieval.search.result_json import result_items
from retrieval.search.rules import boosted_scores, parse_rules, pinned_order, query_rules
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.types import RetrievalError

ANIMALS = ANIMALS_WITH_CATEGORY.encode()
BM25 = {"weights": {"bm25": 1.0}, "depth": 10, "top_k": 5}


@pytest.fixture(scope="module")
def workbench(tmp_path_factory):
    wb = Workbench(Store(str(tmp_path_factory.mktemp("rules"))))
    create_collection(wb.store, "animals", parse_bytes(ANIMALS, "animals.csv"))
    return wb


def ids(result):
    return [fused.doc_id for fused, _ in result.final_ranking()]


# ---- what the rules do to one query (by hand) ------------------------------------------------------
def test_synonyms_and_deletes_rewrite_the_lexical_text_and_deletes_alone_the_vector_text():
    rules = parse_rules("job =>\n  SYNONYM: employment\nold job =>\n  DELETE: old\n")
    fired = query_rules(rules, "Old job offers")
    assert [m.rule.number for m in fired.matches] == [1, 2]
    assert fired.lexical == "job offers employment"
    assert fired.vector == "job offers"
    assert query_rules(rules, "job").vector == "job"  # a synonym leaves the vector text as asked
    assert query_rules(rules, "cats") is None


def test_a_weighted_synonym_is_applied_by_repetition_in_quarters():
    assert query_rules(parse_rules("job =>\n  SYNONYM(0.5): employment\n"), "job").lexical == "job job employment"
    # 4 × job, round(4 × 0.75) = 3 × work, round(4 × 0.5) = 2 × career; common divisor 1
    both = query_rules(parse_rules("job =>\n  SYNONYM(0.75): work\n  SYNONYM(0.5): career\n"), "job")
    assert both.lexical == "job job job job work work work career career"


def test_deleting_every_term_leaves_the_synonyms_lexically_and_the_query_for_the_vector():
    fired = query_rules(parse_rules('"notebook" =>\n  SYNONYM: laptop\n  DELETE\n'), "notebook")
    assert (fired.lexical, fired.vector) == ("laptop", "notebook")


def test_up_and_down_move_the_score_by_w_display_units():
    fired = query_rules(parse_rules("mice =>\n  UP(1.5): * category:wild\n  DOWN(0.5): * category:pet\n"), "mice")
    members = {Filter("category", "=", ("wild",)): frozenset({"fox", "owl"}),
               Filter("category", "=", ("pet",)): frozenset({"cat", "dog"})}
    # unit 0.2: the fused score of a document first everywhere is 0.2 (display factor 5)
    scores, effects = boosted_scores({"cat": 0.18, "fox": 0.1}, fired, 0.2, members.__getitem__)
    assert scores == pytest.approx({"cat": 0.18 - 0.5 * 0.2, "fox": 0.1 + 1.5 * 0.2})
    assert effects == {"fox": ["UP 1.5 by rule 1: category=wild"], "cat": ["DOWN 0.5 by rule 1: category=pet"]}


def test_pins_go_first_in_rule_order_and_hides_win():
    fired = query_rules(parse_rules("a =>\n  PIN: x, y\n  HIDE: y, c\nb =>\n  PIN: z, x\n"), "a b")
    order, effects = pinned_order(["c", "d", "z", "e"], fired)
    assert order == ["x", "z", "d", "e"]
    assert effects == {"x": ["pinned at 1 by rule 1"], "z": ["pinned at 2 by rule 2"]}
    assert pinned_order(["c", "d"], fired, exists=lambda d: d != "x")[0] == ["z", "d"]


# ---- in a search, explained, and in the lean path --------------------------------------------------
def test_a_synonym_finds_what_the_query_alone_cannot_and_says_so(workbench):
    plain = workbench.search("animals", "kitten", SearchConfig(**BM25))
    assert ids(plain) == []
    config = SearchConfig(**BM25, rules="kitten =>\n  SYNONYM: cats\n")
    result = workbench.search("animals", "kitten", config)
    assert ids(result) == ["cat"]
    assert "rules fired: 1 (kitten)" in result.outcome.notes
    assert "lexical sources searched 'kitten cats'" in result.outcome.notes
    assert "vector text unchanged" in result.outcome.notes


def test_a_rule_change_never_serves_stale_candidates_and_a_weight_change_never_requeries(workbench):
    cats = SearchConfig(**BM25, rules="kitten =>\n  SYNONYM: cats\n")
    owls = cats.replace(rules="kitten =>\n  SYNONYM: owls\n")
    assert ids(workbench.search("animals", "kitten", cats)) == ["cat"]
    moved = workbench.candidates("animals", "kitten", owls)
    assert not moved.from_cache and [h.doc_id for h in moved.sources["bm25"].hits] == ["owl"]
    # an UP rule added does not change what is retrieved: the candidates come from the cache
    boosted = owls.replace(rules=owls.rules + "  UP(2): * category:wild\n")
    assert workbench.candidates("animals", "kitten", boosted).from_cache
    assert workbench.candidates("animals", "kitten", owls.replace(weights={"bm25": 0.5})).from_cache


def test_up_raises_a_filtered_document_by_its_weight_on_the_display_score(workbench):
    before = workbench.search("animals", "mice", SearchConfig(**BM25))
    assert set(ids(before)) == {"cat", "fox"}
    shown = {f.doc_id: f for f, _ in before.final_ranking()}
    config = SearchConfig(**BM25, rules="mice =>\n  UP(5): * category:wild\n")
    result = workbench.search("animals", "mice", config)
    top, second = (f for f, _ in result.final_ranking())
    assert (top.doc_id, top.rules) == ("fox", ("UP 5 by rule 1: category=wild",))
    assert top.display_score == pytest.approx(shown["fox"].display_score + 5)
    assert second.rules == () and second.display_score == pytest.approx(shown["cat"].display_score)
    # its parts are still the fusion's: they add up to the score without the boost
    assert sum(c.contribution for c in top.sources.values()) == pytest.approx(shown["fox"].score)
    assert result_items(result)[0]["_meta"]["rules"] == ["UP 5 by rule 1: category=wild"]


def test_a_rule_filter_joins_the_metadata_filters(workbench):
    result = workbench.search("animals", "mice", SearchConfig(**BM25, rules="mice =>\n  FILTER: * category:pet\n"))
    assert ids(result) == ["cat"]
    assert result.outcome.notes[0].startswith("filter category=pet left 2 of 6 documents")
    assert "FILTER category=pet by rule 1" in result.outcome.notes


def test_pin_and_hide_act_last_and_each_says_which_rule(workbench):
    config = SearchConfig(**BM25, rules="# nav\nmice =>\n  PIN: cow, nowhere\n  HIDE: cat\n")
    result = workbench.search("animals", "mice", config)
    assert ids(result) == ["cow", "fox"]  # 'nowhere' is no document: not pinned
    cow = result.final_ranking()[0][0]
    assert (cow.rules, cow.score) == (("pinned at 1 by rule 1",), 0.0)
    assert result_items(result)[0]["_meta"]["rules"] == ["pinned at 1 by rule 1"]


def test_the_lean_path_ranks_as_the_search_shows(workbench):
    rules = ("mice =>\n  UP(5): * category:wild\n  PIN: cow\nkitten =>\n  SYNONYM: cats\n  HIDE: fox\n"
             "night =>\n  FILTER: * category:wild\n  DOWN(1): * category:wild\n")
    config = evaluation_config(SearchConfig(**BM25, rules=rules))
    queries = ["mice", "kitten mice", "night", "honey"]
    lean = [fused for _, fused in ranked_lean(workbench, "animals", queries, config, threads=1)]
    assert lean == [ids(workbench.search("animals", q, config)) for q in queries]
    assert lean[0][:2] == ["cow", "fox"] and "fox" not in lean[1] and lean[2] == ["owl"]


def test_bad_rules_in_a_config_are_refused_with_their_line():
    with pytest.raises(RetrievalError, match=r"Invalid search config: Bad rules: line 2: unknown instruction 'FOO'"):
        SearchConfig(rules="x =>\n  FOO: y\n")


def test_rules_travel_with_the_config():
    config = SearchConfig(rules="job =>\n  SYNONYM: employment\n")
    assert SearchConfig.from_json(config.to_json()) == config
    assert SearchConfig.from_query_params(config.to_query_params()) == config
    assert "rules" not in SearchConfig().to_query_params()


def test_why_not_names_a_rule_filter_or_a_hide_as_the_stage_that_dropped_it(workbench):
    filtered = SearchConfig(**BM25, rules="mice =>\n  FILTER: * category:pet\n")
    why = workbench.explain_document("animals", "mice", filtered, "fox")
    assert (why.stage, why.reason) == ("rule filter", "The query rules' FILTER category=pet of rule 1 remove it "
                                                      "for this query before any source ranks.")
    hidden = SearchConfig(**BM25, rules="mice =>\n  HIDE: fox\n")
    why = workbench.explain_document("animals", "mice", hidden, "fox")
    assert (why.stage, why.reason) == ("rule hide", "HIDE of rule 1 removes it from this query's results "
                                                    "(rules act last).")
