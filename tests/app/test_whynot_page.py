"""Search page's "Why not this document?" and the Evaluate page's recall gaps.

Expected values are the core's `Workbench.explain_document` on the very Workbench the app uses.
"""

from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import COLLECTION, QUERY, open_page, plain

from retrieval.judging.judgments import JudgmentStore
from retrieval.search.config import SearchConfig
from retrieval.search.whynot.standing import TOP_K, standing_cells
from retrieval.text.highlight import escape_markdown
from ui.state import VIEW_KEY

SEARCH = "pages/1_Search.py"
EVALUATE = "pages/5_Evaluate.py"
SET = "why-set"


@pytest.fixture(scope="module")
def fifth(app_db):
    """The document at fused rank 5 of QUERY under the default config: outside a top 3."""
    from ui.resources import workbench

    result = workbench().search(COLLECTION, QUERY, SearchConfig())
    return result.outcome.ranked[4].doc_id


def shown_ids(at) -> list[str]:
    return list(at.dataframe[0].value["id"])


def test_a_link_opens_why_not_with_the_core_values_and_apply_brings_it_in(workbench, fifth):
    at = open_page(SEARCH, q=QUERY, top_k="3", why=fifth)
    expected = workbench.explain_document(COLLECTION, QUERY, SearchConfig(top_k=3), fifth)
    assert expected.stage == TOP_K and fifth not in shown_ids(at)
    assert any(plain(w.value) == f"First stage that dropped it: the top-K cut. {expected.reason}" for w in at.warning)
    table = at.dataframe[1].value
    assert table.to_dict("records") == [standing_cells(s, 100) for s in expected.standings]
    best = expected.best
    assert any(plain(m.value).endswith(best.describe()) for m in at.markdown)
    at.button(key="why.apply").click().run()
    assert not at.exception
    view = at.session_state[VIEW_KEY]
    assert view.config_a.to_dict() == best.config.to_dict()
    assert fifth in shown_ids(at)[: view.config_a.top_k]
    assert shown_ids(at).index(fifth) + 1 == best.rank
    assert any(plain(s.value) == f"It is shown: rank {best.rank} of the top {view.config_a.top_k}." for s in at.success)
    assert at.query_params["why"] == fifth


def test_an_unknown_document_id_is_a_clear_error(app_db):
    at = open_page(SEARCH, q=QUERY, why="no-such-doc")
    assert any(plain(e.value) == f"Unknown document id 'no-such-doc' in collection '{COLLECTION}'" for e in at.error)


def test_pick_by_title_and_from_the_judged_relevant_documents(app_db, workbench, fifth):
    at = open_page(SEARCH, q=QUERY, top_k="3")
    at.radio(key="why.mode").set_value("title").run()
    at.text_input(key="why.title").set_value("Markup").run()
    assert at.selectbox(key="why.title_pick").options == ["unsafe-1 — <b>Markup</b> **title**"]
    at.selectbox(key="why.title_pick").set_value("unsafe-1").run()
    assert at.session_state[VIEW_KEY].why == "unsafe-1"
    title = "<b>Markup</b> **title**"
    expected = f"**{escape_markdown('unsafe-1')}** — {escape_markdown(title)}"
    assert any(m.value == expected for m in at.markdown)  # user text escaped
    assert at.query_params["why"] == "unsafe-1"

    JudgmentStore(workbench.store).save_query_set(COLLECTION, SET, {"q1": QUERY}, {"q1": {fifth: 2, "en-001": 0}})
    at = open_page(SEARCH, q=QUERY, top_k="3", set=SET)
    at.radio(key="why.mode").set_value("judged").run()
    picker = at.selectbox(key="why.judged_pick")
    assert [o.split(" — ")[0] for o in picker.options] == [fifth]  # grade 0 is not relevant
    picker.set_value(fifth).run()
    assert at.session_state[VIEW_KEY].why == fifth
    assert any("First stage that dropped it: the top-K cut." in plain(w.value) for w in at.warning)


def test_recall_gaps_link_to_why_not(app_db, workbench, fifth):
    JudgmentStore(workbench.store).save_query_set(COLLECTION, SET, {"q1": QUERY}, {"q1": {fifth: 2}})
    # A depth just short of its best position in any source: no source returns it.
    full = workbench.candidates(COLLECTION, QUERY, SearchConfig()).sources
    best_position = min(h.rank for r in full.values() for h in r.hits if h.doc_id == fifth)
    assert best_position > 1
    depth = str(best_position - 1)
    at = open_page(EVALUATE, set=SET, depth=depth)
    at.button(key="eval.run").click().run()
    assert not at.exception
    gaps = next(d.value for d in at.dataframe if "why not" in d.value.columns)
    assert len(gaps) == 1
    row = gaps.to_dict("records")[0]
    assert (row["query id"], row["document"], row["grade"]) == ("q1", fifth, 2)
    assert row["where"] == "no source returned it within the depth"
    link = row["why not"]
    params = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    assert link.startswith("Search?") and params["why"] == fifth and params["q"] == QUERY
    assert params["depth"] == depth and params["set"] == SET
