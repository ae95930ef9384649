"""An implicit list saved as the judgment source `implicit:<model>`: matched by query text, never in
the raters' consensus, read alone by name, replaced alone; its agreement with the explicit grades."""

import pytest

from retrieval.judging.implicit.grading import ImplicitJudgment, ImplicitList
from retrieval.judging.implicit.source import agreement_with_explicit, coverage, save_implicit
from retrieval.judging.judgments import CONSENSUS, JudgmentStore
from retrieval.judging.raters import Rating, disagreements
from retrieval.store import Store
from retrieval.types import RetrievalError


def implicit(model, grades):
    return ImplicitList(model, "examination", {0: 1.0}, (0.1, 0.3, 0.6),
                        [ImplicitJudgment(q, d, g / 3, g, 1, 10, 0) for (q, d), g in grades.items()])


@pytest.fixture
def judgments(tmp_path):
    store = JudgmentStore(Store(str(tmp_path / "db")))
    store.save_query_set("docs", "s", {"q1": "red dress", "q2": "shoes"},
                         {"q1": {"a": 3, "b": 0, "c": 1}, "q2": {"x": 2}})
    return store


def test_saved_by_query_text_and_kept_out_of_the_consensus(judgments):
    saved = save_implicit(judgments, "docs", "s", implicit("pbm", {
        ("red dress", "a"): 3, ("red dress", "b"): 1, (" shoes", "x"): 2, ("boots", "z"): 3}))
    # " shoes" is not the text "shoes" (log texts are stripped by the readers); boots is not in the set.
    assert saved.to_json() == {"rater": "implicit:pbm", "saved": 2, "queries_matched": 1, "queries_not_in_set": 2,
                               "queries_added": 0}
    assert judgments.qrels("docs", "s") == {"q1": {"a": 3, "b": 0, "c": 1}, "q2": {"x": 2}}  # consensus unchanged
    assert judgments.qrels("docs", "s", source="implicit:pbm") == {"q1": {"a": 3, "b": 1}}
    assert judgments.qrels("docs", "s", source=CONSENSUS) == judgments.qrels("docs", "s")
    assert judgments.sources("docs", "s") == [CONSENSUS, "implicit:pbm"]
    with pytest.raises(RetrievalError, match="no judgments from 'implicit:coec'"):
        judgments.qrels("docs", "s", source="implicit:coec")


def test_a_new_list_replaces_only_its_own_source(judgments):
    save_implicit(judgments, "docs", "s", implicit("pbm", {("red dress", "a"): 3, ("red dress", "b"): 1}))
    save_implicit(judgments, "docs", "s", implicit("coec", {("red dress", "c"): 2}))
    save_implicit(judgments, "docs", "s", implicit("pbm", {("red dress", "c"): 0}))
    assert judgments.qrels("docs", "s", source="implicit:pbm") == {"q1": {"c": 0}}
    assert judgments.qrels("docs", "s", source="implicit:coec") == {"q1": {"c": 2}}
    assert judgments.qrels("docs", "s")["q1"] == {"a": 3, "b": 0, "c": 1}


def test_a_new_set_is_made_from_the_log_queries(judgments):
    saved = save_implicit(judgments, "docs", "logs", implicit("coec", {("boots", "z"): 3, ("hat", "h"): 1}))
    assert saved.queries_added == 2
    assert sorted(judgments.queries("docs", "logs").values()) == ["boots", "hat"]
    assert judgments.qrels("docs", "logs") == {}  # no explicit judgments: the consensus is empty
    assert sum(len(d) for d in judgments.qrels("docs", "logs", source="implicit:coec").values()) == 2


def test_agreement_and_coverage(judgments):
    save_implicit(judgments, "docs", "s", implicit("pbm", {
        ("red dress", "a"): 3, ("red dress", "b"): 0, ("red dress", "c"): 3, ("shoes", "x"): 2}))
    ratings = judgments.ratings_of("docs", "s")
    result = agreement_with_explicit(ratings, "implicit:pbm")
    (pair,) = result.pairs
    # explicit 3 0 1 2 against implicit 3 0 3 2: labels 0–3, one disagreement (1 vs 3).
    assert pair.raters == ("explicit", "implicit:pbm") and pair.n == 4
    # κ by hand: p_o = 3/4; marginals explicit {0,1,2,3} ¼ each, implicit {0: ¼, 2: ¼, 3: ½}:
    # p_e = ¼·¼ + ¼·0 + ¼·¼ + ¼·½ = 1/4 → κ = (3/4 − 1/4) / (1 − 1/4) = 2/3.
    assert pair.cohen_kappa == pytest.approx(2 / 3)
    assert coverage(ratings) == {"explicit": 4, "implicit:pbm": 4}
    assert disagreements(ratings) == []  # a click model's grade is no rater's to adjudicate
    assert agreement_with_explicit([Rating("q", "d", "implicit:pbm", 1)], "implicit:pbm").pairs == ()
