"""Real-browser tests: the app served by `streamlit run` on a free loopback port, driven by
Playwright for Python with Debian's chromium (never a browser Playwright downloads).

The app runs on its own LanceDB folder and a tiny sample (`WORKBENCH_SAMPLE`: 20 English XQuAD
paragraphs), so the first-run ingest takes seconds. Every request that leaves the app's own
server is aborted and recorded; a test that caused one fails. test_browser_scale.py starts a
second app of its own, on a collection it builds large enough for the scaled backends (their
threshold lowered for that app and its test process; its module fixtures).
Screenshots go to tests/browser/screenshots/ (git-ignored). The shared pieces are in harness.py
(also used by benchmarks/bench_ui.py).
"""

from __future__ import annotations

from pathlib import Path

import harness
import pytest

REPO = harness.REPO
CHROMIUM = harness.CHROMIUM
CHROMIUM_ARGS = harness.CHROMIUM_ARGS
SCREENSHOTS = REPO / "tests" / "browser" / "screenshots"


@pytest.fixture(scope="session")
def browser_db(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("browser-db")


@pytest.fixture(scope="session")
def browser_sample(tmp_path_factory) -> Path:
    return harness.make_sample(tmp_path_factory.mktemp("browser-sample"))


@pytest.fixture(scope="session")
def app_url(browser_db, browser_sample):
    """Start the app once per session on its own LanceDB folder; the sample is ingested on first load."""
    with harness.served_app(browser_db, browser_sample, browser_db.parent / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (./run.sh test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def ready_app(browser, app_url):
    """The app after its first-run sample ingest (done once, in a throwaway session), so that
    every test starts from the same state and none pays the ingest."""
    context = browser.new_context(viewport=harness.VIEWPORT)
    outside = harness.guard_requests(context, app_url)
    page = context.new_page()
    page.goto(app_url)
    harness.wait_collection(page, harness.SAMPLE_COLLECTION, timeout=180_000)
    harness.wait_idle(page)
    context.close()
    assert not outside, f"requests left the app's server: {outside}"
    return app_url


@pytest.fixture
def page(browser, ready_app, request):
    """A fresh page that aborts (and records) every request not addressed to the app's server."""
    with harness.browser_page(browser, ready_app, SCREENSHOTS / f"{request.node.name}.png") as page:
        yield page
