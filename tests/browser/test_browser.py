"""The app in a real browser (chromium via Playwright): a slider move reorders the results, an
uploaded file becomes searchable, and Compare shows two rankings with rank-change labels.

Expected orders come from the retrieval API on the very collection the app serves, so the
tests check what the page shows against the core, not against numbers copied here.
"""

from __future__ import annotations

import harness
import pytest

from retrieval.evaluation.compare import rank_changes
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store

QUERY = "How many career sacks did Jared Allen have?"
UPLOAD_WORD = "zorblefrump"
UPLOAD_CSV = (
    "id,title,text\n"
    f"quokka-1,Island notes,The {UPLOAD_WORD} festival on Rottnest Island celebrates the quokka every spring.\n"
    "quokka-2,Marsupials,Quokkas are small marsupials that live on islands off Western Australia.\n"
).encode()


@pytest.fixture(scope="session")
def core(browser_db, ready_app):
    """The retrieval API on the app's own database (after the app ingested the sample)."""
    workbench = Workbench(Store(str(browser_db)))

    def ids(query: str, collection: str = harness.SAMPLE_COLLECTION, **config) -> list[str]:
        cfg = SearchConfig(**config)
        return [r.doc_id for r in workbench.rank(workbench.candidates(collection, query, cfg), cfg).outcome.results]

    return ids


def open_page(page, url: str, title: str) -> None:
    page.goto(url)
    page.get_by_role("heading", name=title).wait_for()
    harness.wait_idle(page)


def test_moving_the_rrf_k_slider_reorders_the_results(page, ready_app, core):
    rrf = {"fusion": "rrf", "weights": {"bm25": 0.5, "dense": 0.5}}
    before, after = core(QUERY, **rrf), core(QUERY, rrf_k=1.0, **rrf)
    assert before != after, "the premise: on the sample, k = 1 ranks differently from k = 60"

    open_page(page, f"{ready_app}/Search?fusion=rrf&weights=bm25%3D0.5%2Cdense%3D0.5", "Search")
    harness.search(page, QUERY)
    harness.wait_card_ids(page, before)  # cards may still be arriving when the script reads idle
    harness.wait_table_column(page, 0, "id", before)

    slider = page.locator('[data-testid="stSidebar"] input[type="range"][aria-label="RRF k"]')
    assert slider.get_attribute("aria-valuetext") == "60"
    slider.focus()
    page.keyboard.press("Home")  # k: 60 -> 1 (the slider's minimum)
    harness.wait_card_ids(page, after)
    harness.wait_table_column(page, 0, "id", after)
    assert slider.get_attribute("aria-valuetext") == "1"
    assert page.get_by_text("Candidates from cache: only fusion ran.").is_visible()
    assert "rrf_k=1.0" in page.url  # the address bar reproduces the view


def test_an_uploaded_file_is_ingested_and_found(page, ready_app):
    open_page(page, f"{ready_app}/Corpus", "Corpus")
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(
        files=[{"name": "quokka-notes.csv", "mimeType": "text/csv", "buffer": UPLOAD_CSV}])
    page.get_by_text("Preview of quokka-notes.csv").wait_for()
    name = page.get_by_role("textbox", name="New collection name", exact=True)
    name.fill("quokka-notes")
    name.press("Enter")
    page.get_by_role("button", name="Ingest", exact=True).click()
    page.get_by_text("Ingested 2 documents: collection 'quokka-notes' now holds 2").wait_for(timeout=120_000)
    harness.wait_idle(page)
    harness.wait_collection(page, "quokka-notes", timeout=10_000)  # the new collection is selected

    # same session: switch page in the sidebar, the View keeps the new collection
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Search").click()
    page.get_by_role("heading", name="Search").wait_for()
    harness.wait_idle(page)
    ids = harness.search(page, f"{UPLOAD_WORD} festival")
    assert ids[0] == "quokka-1"
    first = page.locator(".wb-card").first
    assert f"<mark>{UPLOAD_WORD}</mark>" in first.inner_html()
    assert "quokka-notes" in page.url


def test_compare_shows_both_rankings_with_rank_changes(page, ready_app, core):
    a = core(QUERY)
    b = core(QUERY, fusion="rrf", weights={"bm25": 0.5, "dense": 0.5})  # config B's defaults
    changes = rank_changes(a, b)
    labels = [c.label for c in changes if c.after is not None]
    dropped = [c for c in changes if c.status == "dropped"]
    assert {s[0] for s in labels} >= {"▲", "▼", "n"}, "the premise: B moves up, down and adds results"

    open_page(page, f"{ready_app}/Compare", "Compare rankings")
    page.get_by_text("Config A vs config B").click()
    page.get_by_role("heading", name="Config B").wait_for()
    harness.wait_idle(page)
    box = page.get_by_role("textbox", name="Query", exact=True)
    box.fill(QUERY)
    box.press("Enter")
    page.get_by_text("Config A", exact=True).wait_for()  # the left column's title
    harness.wait_table_column(page, 0, "id", a)
    harness.wait_table_column(page, 1, "id", b)
    harness.wait_table_column(page, 1, "change", labels)
    harness.wait_idle(page)
    assert harness.table_column(page, 0, "change") is None  # only the second ranking is labelled
    shown = harness.table_column(page, 1, "change")
    assert any(s.startswith("▲") for s in shown) and any(s.startswith("▼") for s in shown) and "new" in shown
    caption = page.get_by_text("Dropped:")
    assert all(f"{c.doc_id} (was #{c.before})" in caption.inner_text() for c in dropped)
    assert page.get_by_text("rank-biased overlap (p = 0.9)").is_visible()
