"""'Why not this document?' in a real browser: search, pick a judged-relevant document outside
the top 10 from the query set, apply the suggested change, see it enter the top 10.

The bundled XQuAD judgments rank their relevant paragraph first for every judged query (on the
browser's 20-paragraph sample and on the whole 120-paragraph sample, with the default config),
so the test judges a document itself, as a user rating results would: the first one below the
top 10 whose smallest change is a fusion change (weights, k, thresholds). Expected values are the
core's, on the app's own database."""

from __future__ import annotations

import harness

from retrieval.judging.judgments import JudgmentStore
from retrieval.search.config import SearchConfig
from retrieval.search.whynot.trials import FUSION_ONLY
from retrieval.search.workbench import Workbench
from retrieval.store import Store

QUERY = "How many points did the Panthers defense surrender?"
SET = "browser-whynot"


def test_apply_the_smallest_change_brings_a_judged_document_into_the_top_10(page, ready_app, browser_db):
    store = Store(str(browser_db))
    workbench = Workbench(store)
    config = SearchConfig()
    result = workbench.search(harness.SAMPLE_COLLECTION, QUERY, config)
    below = [r.doc_id for r in result.outcome.ranked[10:]]
    explained = [workbench.explain_document(harness.SAMPLE_COLLECTION, QUERY, config, d) for d in below]
    target = next(e for e in explained if e.best is not None and e.best.kind == FUSION_ONLY)
    assert target.stage == "top-k" and target.best.rank <= 10
    JudgmentStore(store).save_query_set(harness.SAMPLE_COLLECTION, SET, {"q1": QUERY}, {"q1": {target.doc_id: 2}})

    page.goto(f"{ready_app}/Search?set={SET}")
    page.get_by_role("heading", name="Search").wait_for()
    harness.wait_idle(page)
    harness.search(page, QUERY)
    # cards can still be arriving when the script reads idle: wait until they are all there
    harness.wait_card_ids(page, [r.doc_id for r in result.outcome.results])
    assert target.doc_id not in harness.card_ids(page)

    page.get_by_text("Why not this document?", exact=True).click()
    page.get_by_text("Judged relevant", exact=True).click()
    harness.wait_idle(page)
    harness.choose_option(page, page.get_by_role("combobox", name="Document", exact=True),
                          page.get_by_role("option").filter(has_text=target.doc_id).first,
                          type_filter=target.doc_id)
    page.get_by_text("First stage that dropped it: the top-K cut.", exact=False).wait_for()
    page.get_by_text(target.best.describe(), exact=False).wait_for()
    harness.wait_idle(page)

    page.get_by_role("button", name="Apply", exact=True).click()
    page.wait_for_function(f"doc => ({harness.CARD_IDS_JS})().slice(0, 10).includes(doc)", arg=target.doc_id,
                           timeout=60_000)
    harness.wait_idle(page)
    after = workbench.search(harness.SAMPLE_COLLECTION, QUERY, target.best.config)
    assert harness.card_ids(page) == [f.doc_id for f, _ in after.final_ranking()]
    assert harness.card_ids(page).index(target.doc_id) + 1 == target.best.rank
    page.get_by_text(f"It is shown: rank {target.best.rank} of the top 10.", exact=False).wait_for()
