"""Make docs/search.png (the README's picture): the Search page with a Chinese query over the
bundled sample, in a real browser (Chinese drawn with the bundled font, static/fonts/).
Run: .venv/bin/python tests/browser/docs_screenshot.py

Uses a throwaway database (the first-run ingest of the bundled sample takes a minute or so) and
the same no-outside-requests guard as the browser tests. Not a test (not collected by pytest).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from urllib.parse import quote_plus

import harness

QUERY = "黑豹队的防守丢了多少分？"  # "How many points did the Panthers defense surrender?"
OUT = harness.REPO / "docs" / "search.png"


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="docs-shot-"))
    server, url = harness.start_app(tmp / "db", None, tmp / "streamlit.log")  # no toolbar: .streamlit/config.toml
    try:
        with harness.guarded_page(url, 600_000) as (page, outside):
            page.goto(url)  # first run: ingest the bundled sample
            harness.wait_collection(page, harness.SAMPLE_COLLECTION, timeout=600_000)
            harness.wait_idle(page)
            page.goto(f"{url}/Search?collection={harness.SAMPLE_COLLECTION}&q={quote_plus(QUERY)}")
            page.locator(".wb-card").first.wait_for()
            harness.wait_idle(page)
            page.wait_for_function(f"() => document.querySelector({harness.json.dumps(harness.DATAFRAMES)})"
                                   "?.querySelector('table[role=\"grid\"] tbody tr') != null")
            page.mouse.move(0, 0)  # no hover effects
            OUT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(OUT))
        if outside:
            raise SystemExit(f"requests left the app's server: {outside}")
        print(f"{OUT} ({OUT.stat().st_size / 1024:.0f} KB)")
    finally:
        harness.stop_app(server)


if __name__ == "__main__":
    main()
