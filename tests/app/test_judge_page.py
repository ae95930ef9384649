"""The Judge page: a blind queue judged with the grade buttons (what each stores, under whose name),
"can't tell", skip and undo; the need and guidelines per query; agreement and adjudication; an
unconfigured LLM judge; and the Evaluate page counting an LLM rater only when asked. Values come
from the core on the very database the app uses."""

import pytest
from conftest import COLLECTION, QUERY, open_page, plain

from retrieval.judging.judgments import JudgmentStore
from retrieval.judging.raters import ADJUDICATED, Rating, agreement
from retrieval.store import Store

JUDGE = "pages/8_Judge.py"
SET = "judge-set"
QUERIES = {"j1": QUERY, "j2": "Who won Super Bowl 50?"}


@pytest.fixture
def judgments(app_db):
    store = JudgmentStore(Store(app_db.uri))
    store.save_query_set(COLLECTION, SET, QUERIES)  # replace: every test starts with no ratings
    return store


def saved_message(at) -> str:
    return next(plain(c.value) for c in at.caption if plain(c.value).startswith(("Saved", "Skipped", "Undone")))


def shown_doc(message: str) -> tuple[str, str]:
    """(doc id, query id) from 'Saved grade 2 for DOC (query Q). …'."""
    doc = message.split(" for ", 1)[1].split(" (query ", 1)
    return doc[0], doc[1].split(")", 1)[0]


def test_a_blind_judging_session_stores_grades_under_the_raters_name(judgments):
    at = open_page(JUDGE, set=SET, rater="ann")
    assert at.text_input(key="judge.rater").value == "ann"
    progress = list(at.get("progress"))
    assert progress and "0 of" in progress[0].proto.text
    assert not any("ranks config" in plain(c.value) for c in at.caption)  # blind: no rank, no score
    assert at.button(key="judge.undo").disabled

    at.button(key="judge.grade2").click().run()
    assert not at.exception
    first, query = shown_doc(saved_message(at))
    assert judgments.ratings_of(COLLECTION, SET, rater="ann") == [Rating(query, first, "ann", 2)]
    assert "1 of" in at.get("progress")[0].proto.text

    at.button(key="judge.cant").click().run()
    second, query2 = shown_doc(saved_message(at))
    assert second != first
    assert Rating(query2, second, "ann", None) in judgments.ratings_of(COLLECTION, SET, rater="ann")
    at.button(key="judge.undo").click().run()
    assert saved_message(at).startswith(f"Undone: {second}")
    assert judgments.ratings_of(COLLECTION, SET, rater="ann") == [Rating(query, first, "ann", 2)]

    at.button(key="judge.skip").click().run()
    assert saved_message(at).startswith(f"Skipped {second}")
    at.button(key="judge.grade0").click().run()
    third, query3 = shown_doc(saved_message(at))
    assert third != second  # the skipped one went to the end of the queue
    assert set(judgments.ratings_of(COLLECTION, SET, rater="ann")) == {Rating(query, first, "ann", 2),
                                                                        Rating(query3, third, "ann", 0)}
    assert judgments.raters(COLLECTION, SET) == ["ann"]


def test_need_and_guidelines_are_written_per_query_and_shown_to_every_rater(judgments):
    at = open_page(JUDGE, set=SET, rater="bo")
    form_areas = at.text_area
    form_areas[0].set_value("Fans asking how strong the defense was.")
    form_areas[1].set_value("A number of points is a 3.")
    at.button[[b.label for b in at.button].index("Save")].click().run()
    assert not at.exception
    notes = judgments.notes(COLLECTION, SET)
    shown = [q for q, (need, _) in notes.items() if need]
    assert len(shown) == 1 and notes[shown[0]] == ("Fans asking how strong the defense was.",
                                                    "A number of points is a 3.")
    # the label in bold (its asterisks not escaped into literal ones), the rater's text escaped
    assert any(m.value.startswith("**Information need:** ") and plain(m.value).endswith(
        "Fans asking how strong the defense was.") for m in at.markdown), [m.value for m in at.markdown]


def test_agreement_and_adjudication_on_the_raters_tab(judgments):
    grades = {("j1", "en-001"): 3, ("j1", "en-002"): 0, ("j1", "en-003"): 1, ("j2", "en-004"): 2}
    judgments.rate_many(COLLECTION, SET, grades, rater="ann")
    judgments.rate_many(COLLECTION, SET, {**grades, ("j1", "en-003"): 3}, rater="bo")
    at = open_page(JUDGE, set=SET)
    expected = agreement(judgments.ratings_of(COLLECTION, SET))
    table = at.dataframe[0].value
    assert list(table["raters"]) == ["ann vs bo"] and list(table["documents both graded"]) == [4]
    assert table["Cohen's κ"][0] == pytest.approx(expected.pairs[0].cohen_kappa)
    assert table["weighted κ (quadratic)"][0] == pytest.approx(expected.pairs[0].weighted_kappa)
    # en-003: {1, 3} → no majority, mean 2; adjudicated to 1 here
    assert judgments.qrels(COLLECTION, SET)["j1"]["en-003"] == 2
    assert next(s for s in at.selectbox if s.label == "Settle").value == 0  # the only disagreement
    at.radio(key="judge.adjudicated_grade").set_value(1)
    at.button[[b.label for b in at.button].index("Adjudicate")].click().run()
    assert not at.exception
    assert Rating("j1", "en-003", ADJUDICATED, 1) in judgments.ratings_of(COLLECTION, SET)
    assert judgments.qrels(COLLECTION, SET)["j1"]["en-003"] == 1


def test_the_llm_judge_is_off_until_configured(judgments):
    at = open_page(JUDGE, set=SET)
    infos = " ".join(plain(i.value) for i in at.info)
    assert "The LLM judge is not configured" in infos


def test_a_configured_llm_judge_offers_the_queue_it_would_judge(judgments, app_db):
    """The LLM tab orders its queue as the grading tab does (given the judgments so far) and offers
    to judge it; nothing is sent before the button is pressed (the address below never answers)."""
    from retrieval.judging.llm.settings import SETTINGS_ROW, LLMSettings, _settings_table, save_settings

    save_settings(Store(app_db.uri), LLMSettings(base_url="http://127.0.0.1:9/v1", model="stub-model"))
    try:
        judgments.rate_many(COLLECTION, SET, {("j1", "en-001"): 3}, rater="ann")
        at = open_page(JUDGE, set=SET)
        assert not at.exception and not at.error, [e.value for e in at.error]
        start = next(b for b in at.button if b.label == "Judge the queue with the LLM")
        assert not start.disabled
    finally:  # the app's database is shared: unconfigured again for the other tests
        _settings_table(Store(app_db.uri)).delete(SETTINGS_ROW)


def test_the_evaluate_page_counts_an_llm_rater_only_when_asked(judgments):
    judgments.rate_many(COLLECTION, SET, {("j1", "en-001"): 3}, rater="ann")
    judgments.rate_many(COLLECTION, SET, {("j1", "en-001"): 0, ("j2", "en-004"): 2}, rater="llm:tiny")
    at = open_page("pages/5_Evaluate.py", set=SET)
    toggle = at.toggle(key="eval.with_llm")
    assert toggle.value is False
    captions = " ".join(plain(c.value) for c in at.caption)
    assert "2 raters judged this set (ann, llm:tiny)" in captions
    assert "1 of them judged (1 judgment, 1 relevant)" in captions  # the people's only
    toggle.set_value(True).run()
    captions = " ".join(plain(c.value) for c in at.caption)
    assert "2 of them judged (2 judgments, 2 relevant)" in captions  # {3, 0} → mean 1.5 → 2; j2 en-004 2


def test_the_search_page_rates_as_the_rater_named_on_the_judge_page(judgments):
    at = open_page("pages/1_Search.py", q=QUERY, set=SET, rater="cy")  # the name the Judge page's link set
    assert any("as cy" in plain(c.value) for c in at.caption)
    doc = at.dataframe[0].value["id"][0]
    at.segmented_control[0].set_value(1).run()
    assert not at.exception and not at.error
    assert judgments.ratings(COLLECTION, SET, QUERY, rater="cy") == {doc: 1}
    assert judgments.ratings(COLLECTION, SET, QUERY) == {}  # not the unnamed rater's


def test_the_browser_cannot_point_the_llm_judge_at_a_metadata_address(judgments, app_db):
    from retrieval.judging.llm.settings import SETTINGS_ROW, LLMSettings, _settings_table, load_settings, save_settings

    store = Store(app_db.uri)
    # As the operator could have saved them through the API: a link-local server allowed.
    save_settings(store, LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", allow_link_local=True))
    try:
        at = open_page(JUDGE, set=SET)
        [url] = [t for t in at.text_input if t.label == "Base URL"]
        url.set_value("http://169.254.169.254/latest")
        [save] = [b for b in at.button if b.label == "Save settings"]
        save.click().run()
        errors = " ".join(plain(e.value) for e in at.error)
        assert "points at a link-local or cloud metadata address (169.254.169.254)" in errors, errors
        assert load_settings(store) == LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", allow_link_local=True)
    finally:
        _settings_table(store).delete(SETTINGS_ROW)



def test_what_to_judge_next_is_made_again_after_each_judgment(judgments, workbench):
    """The queue follows the judgments so far (`judging_queue.page_queue`, as the benchmark re-makes
    `next`). Here the configs rank j1 alike (every pair weighs 0) and differ on j2 only at ranks 4
    and 5 (en-007, en-005). Once en-007 is graded 3 and en-005 0, j2's DCGs differ, D = 3 ·
    (1/log2 5 − 1/log2 6) = 0.1315, and a relevant en-003 (rank 1 in both) would raise j2's ideal
    DCG from 3 to at most 3 + 3/log2 3 = 4.893, moving its term by |0.1315/4.893 − 0.1315/3| =
    0.017: the page asks for it next, where the order made once from no judgments went on to j1."""
    from retrieval.evaluation.judging_queue import page_queue, queue_rankings
    from retrieval.search.config import SearchConfig
    from ui.state import default_config_b

    rankings = queue_rankings(workbench, COLLECTION, SET, [SearchConfig(), default_config_b()])
    static = page_queue(rankings, {})
    assert [(c.query_id, c.doc_id) for c in static[:3]] == [("j2", "en-007"), ("j2", "en-005"), ("j1", "en-001")]
    at = open_page(JUDGE, set=SET, rater="di")
    at.toggle(key="judge.blind").set_value(False).run()  # the queue's own order, ranks and weights shown

    def shown() -> str:
        return next(plain(c.value) for c in at.caption if " · ranks config 1: " in plain(c.value))

    assert shown().startswith("en-007 · ranks config 1: 4, config 2: 5 · ")
    at.button(key="judge.grade3").click().run()
    assert shown().startswith("en-005 · ")
    at.button(key="judge.grade0").click().run()
    assert not at.exception
    assert shown() == "en-003 · ranks config 1: 1, config 2: 1 · weight 0.017"
    assert any(plain(c.value).startswith("Query j2 ") for c in at.caption)
    remade = page_queue(rankings, {"j2": {"en-007": 3, "en-005": 0}})
    assert [(c.query_id, c.doc_id) for c in remade[:3]] == [("j2", "en-007"), ("j2", "en-005"), ("j2", "en-003")]
    assert remade[2].weight == pytest.approx(abs(0.1315 / 4.8928 - 0.1315 / 3), abs=1e-4)
