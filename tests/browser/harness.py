"""What the browser tests (conftest.py, test_browser.py) and benchmarks/bench_ui.py share: a tiny
BEIR sample, starting `streamlit run app.py`, the no-outside-requests guard, and waits on the
page's state (never fixed sleeps).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

REPO = Path(__file__).resolve().parents[2]
XQUAD = REPO / "sample_data" / "xquad" / "corpus.jsonl"  # the bundled sample: en-001 … en-060, zh-001 …

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 1000}
SAMPLE_DOCS = 20
SAMPLE_COLLECTION = "sample-xquad"  # ui.resources.SAMPLE_COLLECTION

# The app root carries Streamlit's own run state (what Streamlit's e2e tests wait on).
APP_IDLE = '[data-testid="stApp"][data-test-connection-state="CONNECTED"][data-test-script-state="notRunning"]'
CARD_IDS_JS = """() => Array.from(document.querySelectorAll('.wb-card'))
    .map(card => card.querySelector('span').textContent.split(' · ')[0])"""


def make_sample(folder: Path, n: int = SAMPLE_DOCS) -> Path:
    """A BEIR folder (corpus.jsonl) with the bundled sample's first `n` English paragraphs
    (en-001…): small enough that the app's first-run ingest takes seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [line for line in XQUAD.read_text(encoding="utf-8").splitlines() if '"_id": "en-' in line][:n]
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for i, line in enumerate(lines, start=1):
            doc = json.loads(line)
            out.write(json.dumps({"_id": f"en-{i:03d}", "title": doc.get("title") or "", "text": doc["text"]},
                                 ensure_ascii=False) + "\n")
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(db: Path, sample: Path | None, log_path: Path, timeout: float = 60,
              extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py` on a free loopback port with its own database and sample; returns
    (process, url) once /_stcore/health answers. Raises RuntimeError (with the log) otherwise.
    `sample` None: the bundled sample; `env`: more environment variables for the server (e.g. a
    `retrieval.limits` setting)."""
    port = free_port()
    env = {**os.environ, "WORKBENCH_DB": str(db), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "LANCEDB_LOG": "error", "OMP_WAIT_POLICY": "PASSIVE", **(env or {})}
    env.pop("WORKBENCH_SAMPLE", None)
    if sample is not None:
        env["WORKBENCH_SAMPLE"] = str(sample)
    log = open(log_path, "w")  # noqa: SIM115 - the server writes to it until it is stopped
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none", *extra_args],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    log.close()  # the child holds its own descriptor
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if server.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return server, url
        except OSError:
            pass
        time.sleep(0.3)
    stop_app(server)
    raise RuntimeError(f"streamlit did not start; log:\n{Path(log_path).read_text()[-3000:]}")


def stop_app(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=10)


@contextmanager
def served_app(db: Path, sample: Path | None, log_path: Path, env: dict[str, str] | None = None):
    """The app's URL while it runs on `db` (`start_app`, with `env`; a failed start fails the test), then stopped."""
    import pytest

    try:
        server, url = start_app(db, sample, log_path, env=env)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield url
    finally:
        stop_app(server)


def guard_requests(context, app_url: str) -> list[str]:
    """Abort every request of `context` not addressed to the app's own server (same scheme, host
    and port; data:/blob:/about: are local); return the list the aborted URLs are added to."""
    own = urlsplit(app_url).netloc
    outside: list[str] = []

    def guard(route):
        url = route.request.url
        parts = urlsplit(url)
        if (parts.scheme in ("http", "https", "ws", "wss") and parts.netloc == own) or \
                parts.scheme in ("data", "blob", "about"):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    context.route("**/*", guard)
    return outside


@contextmanager
def guarded_page(app_url: str, timeout_ms: float = 120_000):
    """A chromium page whose requests off the app's server are aborted; yields (page, outside),
    `outside` listing the aborted URLs for the caller to check."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport=VIEWPORT)
        outside = guard_requests(context, app_url)
        page = context.new_page()
        page.set_default_timeout(timeout_ms)
        try:
            yield page, outside
        finally:
            context.close()
            browser.close()


@contextmanager
def browser_page(browser, app_url: str, screenshot: Path | None = None, timeout_ms: float = 60_000):
    """A fresh page of `browser` (its own context) that aborts every request not addressed to
    `app_url`'s server; on exit (a failed test's too) a screenshot to `screenshot` when given, the
    context closed, then an AssertionError listing the aborted requests, if any."""
    context = browser.new_context(viewport=VIEWPORT)
    outside = guard_requests(context, app_url)
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    try:
        yield page
    finally:
        try:
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot))
        finally:
            context.close()
    assert not outside, f"requests left the app's server: {outside}"


def wait_idle(page, timeout: float = 120_000) -> None:
    """Connected, and no script run in progress. Call it after a change is visible: right after
    an input the frontend may not have sent the rerun yet, so it can still read idle."""
    page.wait_for_selector(APP_IDLE, state="attached", timeout=timeout)
    page.locator('[data-testid="stStatusWidget"]').filter(has_text="Running").wait_for(state="detached",
                                                                                         timeout=timeout)


def choose_option(page, picker, option, type_filter: str = "", attempts: int = 5) -> None:
    """Open the selectbox `picker`, type `type_filter` (a long list renders only the options that
    match what is typed), and click `option` (a locator of one of its options). A rerun
    that lands while the list is open (a late one from the previous input, on a loaded machine)
    closes the list and detaches its options, so a click that does not land within a few seconds
    opens the list again."""
    for attempt in range(attempts):
        wait_idle(page)
        picker.click()
        if type_filter:
            page.keyboard.type(type_filter)
        try:
            option.click(timeout=15_000)
            return
        except PlaywrightTimeoutError:
            if attempt == attempts - 1:
                raise
            page.keyboard.press("Escape")


def card_ids(page) -> list[str]:
    """The doc ids of the result cards, in the order shown."""
    return page.evaluate(CARD_IDS_JS)


def wait_card_ids(page, expected: list[str], timeout: float = 60_000) -> None:
    """Wait until the result cards show exactly `expected` (in order) and the app is idle."""
    page.wait_for_function(f"expected => JSON.stringify(({CARD_IDS_JS})()) === JSON.stringify(expected)",
                           arg=expected, timeout=timeout, polling="raf")
    wait_idle(page, timeout)


def search(page, query: str, timeout: float = 120_000) -> list[str]:
    """Type `query` in the Query box, press Enter, wait for the cards; return their ids."""
    box = page.get_by_role("textbox", name="Query", exact=True)
    box.fill(query)
    box.press("Enter")
    page.get_by_text("shown", exact=False).first.wait_for(timeout=timeout)  # the summary caption
    wait_idle(page, timeout)
    page.locator(".wb-card").first.wait_for(timeout=timeout)
    return card_ids(page)


# st.dataframe draws on a canvas; glide-data-grid mirrors the visible cells in an accessibility
# <table role="grid"> inside it, refreshed 200 ms (debounced) after the data changes.
GRID_JS = """el => {
    const table = el.querySelector('table[role="grid"]');
    if (!table) return null;
    const heads = Array.from(table.querySelectorAll('thead th')).map(th => th.textContent);
    const rows = Array.from(table.querySelectorAll('tbody tr'))
        .map(tr => Array.from(tr.querySelectorAll('td')).map(td => td.textContent));
    return {heads, rows};
}"""
COLUMN_JS = f"""([el, name]) => {{
    const grid = ({GRID_JS})(el);
    if (!grid) return null;
    const i = grid.heads.indexOf(name);
    return i < 0 ? null : grid.rows.map(r => r[i]);
}}"""


DATAFRAMES = '[data-testid="stMain"] [data-testid="stDataFrame"]'
NTH_COLUMN_JS = f"""([n, name]) => {{
    const all = Array.from(document.querySelectorAll({json.dumps(DATAFRAMES)}));
    const el = typeof n === 'number' ? all[n] : all.find(e => e.textContent.includes(n));
    return el ? ({COLUMN_JS})([el, name]) : null;
}}"""


def table_column(page, n: int | str, name: str) -> list[str] | None:
    """The visible cells of column `name` of the main area's `n`-th dataframe, or of the first
    one showing text `n` (None: not shown). Looked up afresh each time: a rerun may replace the element."""
    return page.evaluate(NTH_COLUMN_JS, [n, name])


def wait_table_column(page, n: int | str, name: str, expected: list[str], timeout: float = 30_000) -> None:
    """Wait until column `name` of the main area's `n`-th dataframe (or the first one showing
    text `n`) shows exactly `expected`."""
    page.wait_for_function(f"([n, name, expected]) => JSON.stringify(({NTH_COLUMN_JS})([n, name])) "
                           "=== JSON.stringify(expected)", arg=[n, name, expected], timeout=timeout)


COLLECTION_PICKER = '[data-testid="stSidebar"] input[role="combobox"][aria-label="Collection"]'


def wait_collection(page, name: str, timeout: float = 180_000) -> None:
    """Wait until the sidebar's collection picker (a combobox input) shows `name`."""
    page.wait_for_function(f"name => document.querySelector('{COLLECTION_PICKER}')?.value === name",
                           arg=name, timeout=timeout)


# The selected cell of a dataframe (its accessibility table marks it) and how far the grid is
# scrolled sideways.
SELECTED_COLUMN_JS = """el => {
    const table = el.querySelector('table[role="grid"]');
    const scroller = el.querySelector('.dvn-scroller');
    if (!table || !scroller) return null;
    const heads = Array.from(table.querySelectorAll('thead th')).map(th => th.textContent);
    const cell = table.querySelector('td[aria-selected="true"]');
    return {column: cell ? heads[cell.cellIndex] : null, scrolled: scroller.scrollLeft};
}"""


def columns_in_sight(page, table, last: str, timeout: float = 15_000) -> list[str]:
    """The columns of dataframe `table` (a locator) up to `last`, after checking that they are all
    in sight without scrolling: the first row's first cell is selected, then the arrow key moves
    the selection to column `last`, and the grid scrolls sideways only when the selected cell is
    not wholly in sight (the columns before it are, as the grid is not scrolled). An
    AssertionError if it scrolled, or if the table reaches past the window's right edge."""
    table.scroll_into_view_if_needed()
    box = table.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"], box
    handle = table.element_handle()
    page.wait_for_function(f"el => ({GRID_JS})(el)?.heads.length > 0", arg=handle, timeout=timeout)
    heads = handle.evaluate(GRID_JS)["heads"]
    assert last in heads, f"no column {last!r} in sight: {heads}"
    shown = heads[: heads.index(last) + 1]
    page.mouse.click(box["x"] + 10, box["y"] + 52)  # below the 35-pixel header: the first row's first cell
    page.wait_for_function(f"([el, first]) => ({SELECTED_COLUMN_JS})(el)?.column === first", arg=[handle, heads[0]],
                           timeout=timeout)
    for _ in shown[1:]:
        page.keyboard.press("ArrowRight")
    page.wait_for_function(f"([el, last]) => ({SELECTED_COLUMN_JS})(el)?.column === last", arg=[handle, last],
                           timeout=timeout)
    scrolled = handle.evaluate(SELECTED_COLUMN_JS)["scrolled"]
    assert scrolled == 0, f"the table scrolled sideways by {scrolled} px to show {last!r}"
    return shown


# Text cut short (not a table's canvas): a box wider text does not fit in, which ends it with an
# ellipsis (a button's label: the ellipsis is on its Markdown container), hides the rest of its
# own text (overflow hidden or clipped), or a select box's value (its combobox input) cut off.
TRUNCATED_JS = """() => Array.from(document.querySelectorAll('[data-testid="stApp"] *')).filter(el => {
    if (el.offsetParent === null || el.closest('[data-testid="stDataFrame"]')) return false;
    if (el.getBoundingClientRect().width <= 2) return false;  // visually hidden (the skip link)
    if (el.scrollWidth <= el.clientWidth + 1) return false;
    if (el.matches('input[role="combobox"]')) return el.value.trim() !== '';
    const style = getComputedStyle(el);
    const own = Array.from(el.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
    return (style.textOverflow === 'ellipsis' && el.textContent.trim() !== '') ||
        (own && ['hidden', 'clip'].includes(style.overflowX));
}).map(el => (el.matches('input') ? el.value : el.textContent).trim())"""


def truncated_texts(page) -> list[str]:
    """The texts on the page cut short by their box (`TRUNCATED_JS`)."""
    return page.evaluate(TRUNCATED_JS)
