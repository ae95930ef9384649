"""Relevance tuning in a real browser: rate a result on the Search page, evaluate on the Evaluate
page, rate another, evaluate again and see the metric change; the values are the core's.

Uses the session's app and fixtures from conftest.py (its own database and tiny sample)."""

from __future__ import annotations

import harness

from retrieval.evaluation.evaluate import evaluate_collection
from retrieval.judging.judgments import JudgmentStore
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from ui.judging.rating import widget_key

QUERY = "How many career sacks did Jared Allen have?"
SET = "browser-tuning"


def rate(page, doc_id: str, label: str) -> None:
    """Click grade `label` (e.g. '3 · perfect') of result `doc_id`'s rating widget (found by its
    widget key, which Streamlit puts in the element's class)."""
    key = widget_key(harness.SAMPLE_COLLECTION, SET, QUERY, doc_id)
    widget = page.locator(f'[data-testid="stMain"] [class~="st-key-{key}"]')
    widget.get_by_role("radio", name=label, exact=True).click()
    page.wait_for_function(
        """key => document.querySelector(`[class~="st-key-${key}"] [role="radio"][aria-checked="true"]`)""",
        arg=key)


def wait_ratings(judgments: JudgmentStore, expected: dict[str, int], timeout_s: float = 30) -> None:
    """Poll the store until the saved grades for QUERY are `expected` (the rating writes at once)."""
    import time

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if SET in judgments.query_sets(harness.SAMPLE_COLLECTION) and \
                judgments.ratings(harness.SAMPLE_COLLECTION, SET, QUERY) == expected:
            return
        time.sleep(0.2)
    raise AssertionError(f"ratings never became {expected}: "
                         f"{judgments.ratings(harness.SAMPLE_COLLECTION, SET, QUERY)}")


def fused_ndcg(page) -> str:
    """The fused nDCG@10 metric as shown on the Evaluate page."""
    metric = page.locator('[data-testid="stMetric"]').filter(has_text="nDCG@10").first
    return metric.locator('[data-testid="stMetricValue"]').inner_text().strip()


def evaluate(page, expected: str) -> None:
    page.get_by_role("button", name="Evaluate config A", exact=True).click()
    page.wait_for_function(
        """expected => Array.from(document.querySelectorAll('[data-testid="stMetric"]'))
            .some(m => m.textContent.includes('nDCG@10') && m.textContent.includes(expected))""",
        arg=expected, timeout=120_000)
    harness.wait_idle(page)


def expected_ndcg(workbench: Workbench, judgments: JudgmentStore) -> str:
    report = evaluate_collection(workbench, harness.SAMPLE_COLLECTION,
                                 judgments.queries(harness.SAMPLE_COLLECTION, SET),
                                 judgments.qrels(harness.SAMPLE_COLLECTION, SET), SearchConfig())
    return f"{report.metrics['hybrid']['ndcg@10']:.4f}"


def go(page, name: str, heading: str) -> None:
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=name).click()
    page.get_by_role("heading", name=heading).wait_for()
    harness.wait_idle(page)


def test_rating_a_result_changes_the_evaluated_metric(page, ready_app, browser_db):
    store = Store(str(browser_db))
    workbench, judgments = Workbench(store), JudgmentStore(store)
    config = SearchConfig()
    candidates = workbench.candidates(harness.SAMPLE_COLLECTION, QUERY, config)
    ids = [r.doc_id for r in workbench.rank(candidates, config).outcome.results]

    page.goto(f"{ready_app}/Search?set={SET}")  # a link naming the query set ratings go to
    page.get_by_role("heading", name="Search").wait_for()
    harness.wait_idle(page)
    harness.search(page, QUERY)
    harness.wait_card_ids(page, ids)  # cards may still be arriving when the script reads idle
    # at 1400 px the results table shows every source's columns before the long text, no label is cut short
    table = page.locator('[data-testid="stMain"] [data-testid="stDataFrame"]').first
    assert harness.columns_in_sight(page, table, "vector score")[-4:] == ["BM25 rank", "BM25 score", "vector rank",
                                                                         "vector score"]
    assert harness.truncated_texts(page) == []
    page.get_by_text(f"ratings go to query set '{SET}'", exact=False).wait_for()

    # the second result is the perfect answer: fused nDCG@10 = 1 / log2(3)
    rate(page, ids[1], "3 · perfect")
    wait_ratings(judgments, {ids[1]: 3})
    harness.wait_idle(page)
    go(page, "Evaluate", "Evaluate")
    first = expected_ndcg(workbench, judgments)
    assert first == "0.6309"
    evaluate(page, first)
    assert fused_ndcg(page) == first

    # back on Search (same session): the first result is rated perfect too, and the metric moves
    go(page, "Search", "Search")
    page.locator(".wb-card").first.wait_for()
    rate(page, ids[0], "3 · perfect")
    wait_ratings(judgments, {ids[0]: 3, ids[1]: 3})
    harness.wait_idle(page)
    go(page, "Evaluate", "Evaluate")
    second = expected_ndcg(workbench, judgments)
    assert second == "1.0000" and second != first
    evaluate(page, second)
    assert fused_ndcg(page) == second
