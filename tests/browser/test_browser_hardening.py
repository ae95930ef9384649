"""Injection through names and links, in a real browser: what the reader sees is the text, never
a link, an image or markup (docs/reliability.md, "Hardened inputs and limits"). The `page`
fixture aborts and records every request leaving the app's server, so a remote image that
tried to load fails the test too."""

from __future__ import annotations

from urllib.parse import urlencode

import harness

EVIL_FILE = "[Click me](https:evil.example) ![t](https:evil.example).csv"
EVIL_SOURCE = "<b>x</b>"
QUERY = "How many career sacks did Jared Allen have?"
NO_EVIL_ELEMENTS_JS = """() => [
    ...document.querySelectorAll('a[href*="evil"], img[src*="evil"]'),
].map(e => e.outerHTML)"""


def open_page(page, url: str, title: str) -> None:
    page.goto(url)
    page.get_by_role("heading", name=title).wait_for()
    harness.wait_idle(page)


def test_an_uploaded_file_name_with_markdown_is_shown_as_text(page, ready_app):
    open_page(page, f"{ready_app}/Corpus", "Corpus")
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(
        files=[{"name": EVIL_FILE, "mimeType": "text/csv", "buffer": b"id,text\na,Some text.\n"}])
    page.get_by_text(f"Preview of {EVIL_FILE}", exact=True).wait_for()
    harness.wait_idle(page)
    assert page.evaluate(NO_EVIL_ELEMENTS_JS) == []
    assert page.get_by_role("link", name="Click me").count() == 0


def test_source_names_from_a_link_are_text_in_the_charts(page, ready_app):
    params = {"collection": harness.SAMPLE_COLLECTION, "q": QUERY,
              "weights": f"bm25=0.5,dense=0.5,{EVIL_SOURCE}=0.5"}
    open_page(page, f"{ready_app}/Distributions?{urlencode(params)}", "Score distributions")
    page.locator(".js-plotly-plot").first.wait_for()
    harness.wait_idle(page)
    texts = page.evaluate("""() => Array.from(document.querySelectorAll('.js-plotly-plot text'))
        .map(t => ({text: t.textContent, bold: !!t.querySelector('tspan[style*="bold"]')}))""")
    shown = [t for t in texts if "x" in t["text"] and "raw" in t["text"]]
    assert any(t["text"].startswith(f"{EVIL_SOURCE} raw") for t in shown), texts  # the name, literally
    assert not any(t["bold"] for t in shown)  # not bold markup
    assert page.evaluate(NO_EVIL_ELEMENTS_JS) == []
