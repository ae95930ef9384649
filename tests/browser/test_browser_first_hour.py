"""A newcomer's first hour, in a real browser: the sidebar's first entry reads "Home", its page
icons are drawn from the bundled Material Symbols font (no emoji font needed), no developer
toolbar, missing per-source ranks read "—", Chinese renders with the bundled font, and two tabs
ingesting at once both complete without duplicates and see each other's collections.

Uses the session's app and fixtures from conftest.py (its own database and tiny sample); every
request that leaves the app's server fails the test.
"""

from __future__ import annotations

import urllib.request
from urllib.parse import quote_plus

import harness
import pytest

from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from ui.page import PAGES
from ui.resources import GRAPH_COLLECTION

SPARSE_QUERY = "Kawann Short sacks"  # BM25 finds few of the sample's paragraphs; the vectors rank all
CHINESE_QUERY = "赤壁之战"
FONT_URL = "/app/static/fonts/NotoSansSC-subset.woff2"
SCREENSHOTS = harness.REPO / "tests" / "browser" / "screenshots"


def open_page(page, url: str, title: str) -> None:
    page.goto(url)
    page.get_by_role("heading", name=title).wait_for()
    harness.wait_idle(page)


# Each sidebar entry's icon: its Material Symbols name, its font, and how wide it is drawn.
NAV_ICONS_JS = """() => Array.from(document.querySelectorAll('[data-testid="stSidebarNav"] a')).map(a => {
    const icon = a.querySelector('[data-testid="stIconMaterial"]');
    return icon && {name: icon.textContent, font: getComputedStyle(icon).fontFamily,
                    width: icon.getBoundingClientRect().width};
})"""


def test_the_sidebar_starts_with_home_and_there_is_no_developer_toolbar(page, ready_app):
    open_page(page, ready_app, "Search relevance workbench")
    entries = page.locator('[data-testid="stSidebarNav"] a [data-testid="stMarkdownContainer"]').all_inner_texts()
    assert [e.strip() for e in entries] == [title for _, title, _ in PAGES] == [
        "Home", "Search", "Compare", "Distributions", "Corpus", "Evaluate", "Graph", "Present", "Judge"]
    # The page icons are Material Symbols from the font Streamlit serves (no emoji font needed, no
    # request elsewhere: the page fixture fails on one). Drawn as one glyph each, not as the
    # ligature's letters ("compare_arrows" in text would be ~100 px wide).
    page.wait_for_function("() => document.fonts.check('24px \"Material Symbols Rounded\"', 'home')")
    icons = page.evaluate(NAV_ICONS_JS)
    assert [i["name"] for i in icons] == [icon.split("/")[1].rstrip(":") for _, _, icon in PAGES]
    assert all("Material Symbols Rounded" in i["font"] and 0 < i["width"] <= 24 for i in icons), icons
    favicon = page.evaluate("() => document.querySelector(\"link[rel='shortcut icon']\").href")
    assert favicon.startswith("data:image/svg+xml"), favicon[:80]  # the magnifier drawn in SVG
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator('[data-testid="stSidebar"]').screenshot(path=str(SCREENSHOTS / "sidebar.png"))
    assert page.locator('[data-testid="stAppDeployButton"]').count() == 0
    assert page.locator('[data-testid="stMainMenu"]').count() == 0
    assert page.get_by_role("button", name="Deploy").count() == 0


# st.dataframe draws its cells on a canvas: record every string drawn, to see what a cell shows (the
# grid's accessibility table holds the values, with "" for a missing one).
RECORD_DRAWN_TEXT = """(() => {
    window.__drawn = new Set();
    const fillText = CanvasRenderingContext2D.prototype.fillText;
    CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
        window.__drawn.add(String(text));
        return fillText.call(this, text, ...rest);
    };
})();"""


def test_a_rank_a_source_did_not_give_reads_a_dash(page, ready_app, browser_db):
    config = SearchConfig()
    workbench = Workbench(Store(str(browser_db)))
    outcome = workbench.rank(workbench.candidates(harness.SAMPLE_COLLECTION, SPARSE_QUERY, config), config).outcome

    def ranks(source: str) -> list[str]:  # as the accessibility table holds them: "" when missing
        return ["" if r.sources[source].rank is None else str(r.sources[source].rank) for r in outcome.results]

    bm25, dense = ranks("bm25"), ranks("dense")
    assert "" in bm25 and "" not in dense, "the premise: BM25 misses some shown results, the vectors none"

    page.add_init_script(RECORD_DRAWN_TEXT)
    open_page(page, f"{ready_app}/Search?collection={harness.SAMPLE_COLLECTION}&q={quote_plus(SPARSE_QUERY)}",
              "Search")
    harness.wait_table_column(page, 0, "id", [r.doc_id for r in outcome.results])
    harness.wait_table_column(page, 0, "BM25 rank", bm25)  # missing values, still a numeric column
    harness.wait_table_column(page, 0, "vector rank", dense)
    assert [s == "" for s in harness.table_column(page, 0, "BM25 score")] == [s == "" for s in bm25]
    page.wait_for_function("() => window.__drawn.has('—')")
    drawn = page.evaluate("() => Array.from(window.__drawn)")
    assert "None" not in drawn and "nan" not in drawn and "<NA>" not in drawn
    page.mouse.move(0, 0)


def test_chinese_text_renders_with_the_bundled_font(page, ready_app):
    with urllib.request.urlopen(ready_app + FONT_URL, timeout=10) as response:
        assert response.status == 200 and len(response.read()) > 1_000_000
    open_page(page, f"{ready_app}/Search?collection={GRAPH_COLLECTION}&q={quote_plus(CHINESE_QUERY)}", "Search")
    page.locator(".wb-card").first.wait_for()
    harness.wait_idle(page)
    # The face is fetched only for characters in its unicode-range, i.e. because Chinese is drawn with it.
    page.wait_for_function("""() => Array.from(document.fonts)
        .some(f => f.family.replaceAll('"', '') === 'workbench-cjk' && f.status === 'loaded')""", timeout=30_000)
    assert page.evaluate("() => document.fonts.check('16px workbench-cjk', '赤壁之战')")
    family = page.locator(".wb-card").first.evaluate("el => getComputedStyle(el).fontFamily")
    assert family.startswith("workbench-cjk"), family
    # The tokens BM25 indexes, in a <pre>: the same face, not the browser's monospace (tofu).
    tokens = page.locator(".wb-tokens").first.evaluate("el => getComputedStyle(el).fontFamily")
    assert tokens.startswith("workbench-cjk"), tokens
    page.mouse.move(0, 0)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "chinese-search.png"))


# ---- two tabs ingesting at once -----------------------------------------------------------------
def rows_csv(prefix: str, n: int) -> bytes:
    lines = ["id,title,text"] + [
        f"{prefix}-{i:03d},{prefix} note {i},The {prefix} archive entry {i} records a harbour and a lighthouse "
        f"and ship number {i * 7} arriving in spring" for i in range(n)]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def two_tabs(browser, ready_app):
    """Two pages in separate browser contexts (two sessions, as two tabs of two users), each aborting
    and recording every request not addressed to the app's server."""
    contexts, pages, outside = [], [], []
    for _ in range(2):
        context = browser.new_context(viewport=harness.VIEWPORT)
        outside.append(harness.guard_requests(context, ready_app))
        page = context.new_page()
        page.set_default_timeout(120_000)
        contexts.append(context)
        pages.append(page)
    yield pages
    for n, page in enumerate(pages):
        try:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"two-tabs-{n}.png"))
        finally:
            contexts[n].close()
    assert not outside[0] and not outside[1], f"requests left the app's server: {outside}"


def prepare_upload(page, url: str, filename: str, data: bytes, collection: str, existing: bool) -> None:
    """On the Corpus page: upload `filename`, and target a new collection or an existing one."""
    prepare_uploads(url, [(page, filename, data, collection, existing)])


def prepare_uploads(url: str, uploads: list[tuple]) -> None:
    """`prepare_upload` for each (page, filename, data, collection, existing) of `uploads`, step by
    step in every tab before the next step (each tab has its own session: the server runs their
    scripts meanwhile, rather than one tab waiting for the other's to finish)."""
    for page, *_ in uploads:
        page.goto(f"{url}/Corpus")
    for page, *_ in uploads:
        page.get_by_role("heading", name="Corpus").wait_for()
        harness.wait_idle(page)
    for page, filename, data, *_ in uploads:
        page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(
            files=[{"name": filename, "mimeType": "text/csv", "buffer": data}])
    for page, filename, *_ in uploads:
        page.get_by_text(f"Preview of {filename}").wait_for()
        harness.wait_idle(page)
    # The ingest form's picker (key corpus.add_to, class st-key-corpus-add_to), not the "Delete or
    # clear" section's: same label, and on the page before the radio's rerun draws this one.
    selector = '[data-testid="stMain"] [class~="st-key-corpus-add_to"] input[role="combobox"]'
    for page, _, _, collection, existing in uploads:
        if existing:
            page.get_by_text("existing collection", exact=True).click()
        else:
            name = page.get_by_role("textbox", name="New collection name", exact=True)
            name.fill(collection)
            name.press("Enter")
    for page, _, _, collection, existing in uploads:
        if existing:
            picker = page.locator(selector)
            picker.wait_for()
            harness.wait_idle(page)
            harness.choose_option(page, picker, page.get_by_role("option", name=collection, exact=True))
    for page, _, _, collection, existing in uploads:
        if existing:
            page.wait_for_function("([sel, name]) => document.querySelector(sel)?.value === name",
                                   arg=[selector, collection])
        harness.wait_idle(page)


def ingest_at_once(pages) -> None:
    """Press Ingest in both tabs, one right after the other (the second press does not wait for the
    first ingest), and wait for both to start."""
    for page in pages:
        page.get_by_role("button", name="Ingest", exact=True).click()
    for page in pages:
        page.locator('[data-testid="stProgress"], [data-testid="stAlertContentSuccess"], '
                     '[data-testid="stAlertContentError"]').first.wait_for()


def collection_ids(browser_db, name: str) -> list[str]:
    store = Store(str(browser_db))
    return store.column(name, ["id"]).column("id").to_pylist()


def sidebar_collections(page) -> list[str]:
    """The options of the sidebar's collection picker (opened and closed again)."""
    picker = page.locator(harness.COLLECTION_PICKER)
    picker.click()
    options = page.get_by_role("option").all_inner_texts()
    page.keyboard.press("Escape")
    return [o.strip() for o in options]


def test_two_tabs_ingesting_into_different_collections_at_once(two_tabs, ready_app, browser_db):
    a, b = two_tabs
    prepare_uploads(ready_app, [(a, "harbour-a.csv", rows_csv("alpha", 60), "tabs-alpha", False),
                                (b, "harbour-b.csv", rows_csv("beta", 60), "tabs-beta", False)])
    ingest_at_once([a, b])
    a.get_by_text("Ingested 60 documents: collection 'tabs-alpha' now holds 60").wait_for(timeout=240_000)
    b.get_by_text("Ingested 60 documents: collection 'tabs-beta' now holds 60").wait_for(timeout=240_000)
    for page in (a, b):
        harness.wait_idle(page)
    assert sorted(collection_ids(browser_db, "tabs-alpha")) == [f"alpha-{i:03d}" for i in range(60)]
    assert sorted(collection_ids(browser_db, "tabs-beta")) == [f"beta-{i:03d}" for i in range(60)]
    # each tab sees the other's collection once it moves on (here: to the Home page)
    for page in (a, b):
        page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Home").click()
        page.get_by_role("heading", name="Search relevance workbench").wait_for()
        harness.wait_idle(page)
        assert {"tabs-alpha", "tabs-beta"} <= set(sidebar_collections(page))
        page.wait_for_function(f"""() => {{
            const shown = ({harness.NTH_COLUMN_JS})([0, "collection"]) || [];
            return shown.includes("tabs-alpha") && shown.includes("tabs-beta");
        }}""", timeout=30_000)


def test_two_tabs_adding_to_the_same_collection_at_once(two_tabs, ready_app, browser_db):
    a, b = two_tabs
    prepare_upload(a, ready_app, "harbour-base.csv", rows_csv("base", 5), "tabs-shared", existing=False)
    a.get_by_role("button", name="Ingest", exact=True).click()
    a.get_by_text("Ingested 5 documents: collection 'tabs-shared' now holds 5").wait_for(timeout=240_000)
    harness.wait_idle(a)
    prepare_uploads(ready_app, [(a, "harbour-c.csv", rows_csv("gamma", 50), "tabs-shared", True),
                                (b, "harbour-d.csv", rows_csv("delta", 50), "tabs-shared", True)])
    ingest_at_once([a, b])
    for page in (a, b):
        page.get_by_text("Added 50 documents: collection 'tabs-shared' now holds").wait_for(timeout=240_000)
        harness.wait_idle(page)
    ids = collection_ids(browser_db, "tabs-shared")
    assert len(ids) == len(set(ids)) == 105, "every row once"
    assert sorted(ids) == sorted([f"base-{i:03d}" for i in range(5)] + [f"gamma-{i:03d}" for i in range(50)]
                                 + [f"delta-{i:03d}" for i in range(50)])
    assert Store(str(browser_db)).info("tabs-shared").doc_count == 105
    # the later of the two says 105; the earlier 55
    holds = sorted(int(p.get_by_text("now holds").inner_text().split("now holds ")[1].split(" ")[0]) for p in (a, b))
    assert holds == [55, 105]
