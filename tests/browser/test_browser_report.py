"""The snapshot report (retrieval/evaluation/snapshot_report.py) in Debian's chromium on a phone-sized
screen, with every request aborted: it needs none, and its figure, headline and Chinese text show."""

from __future__ import annotations

from pathlib import Path

import harness

from retrieval.evaluation.snapshot_diff import diff
from retrieval.evaluation.snapshot_report import report_html
from retrieval.evaluation.snapshots import SnapshotStore
from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.judging.judgments import JudgmentStore
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store

SCREENSHOTS = Path(__file__).with_name("screenshots")
TEA = """id,title,text
green,绿茶,"绿茶不发酵，清香鲜爽，龙井和碧螺春都是绿茶。"
black,红茶,"红茶全发酵，汤色红亮，祁门红茶很有名。"
puer,普洱茶,"普洱茶产于云南，可以存放多年，越陈越香。"
oolong,乌龙茶,"乌龙茶半发酵，铁观音和大红袍都是乌龙茶。"
"""


def test_the_report_opens_offline_on_a_phone_and_shows_its_figure(browser, tmp_path):
    workbench = Workbench(Store(str(tmp_path / "db")))
    create_collection(workbench.store, "tea", parse_bytes(TEA.encode(), "tea.csv"))
    judgments = JudgmentStore(workbench.store)
    # the last question shares no word with its answer beyond 茶, which every document has
    for query, doc_id in [("哪种茶是全发酵的", "black"), ("云南的茶", "puer"), ("铁观音是什么茶", "oolong"),
                          ("哪种茶放得越久越好喝", "puer")]:
        judgments.rate("tea", "default", query, doc_id, 2)
    snapshots = SnapshotStore(workbench.store)
    a = snapshots.create(workbench, "tea", "vectors only", SearchConfig(weights={"bm25": 0.0, "dense": 1.0}))
    b = snapshots.create(workbench, "tea", "bm25 only", SearchConfig(weights={"bm25": 1.0, "dense": 0.0}))
    d = diff(a, b)
    page_html = report_html(d, a, b)

    context = browser.new_context(viewport={"width": 390, "height": 844})
    outside = harness.guard_requests(context, "http://127.0.0.1:9")  # no server is ours: every request aborts
    page = context.new_page()
    try:
        page.set_content(page_html, wait_until="load")
        headline = page.locator("p.big")
        assert headline.is_visible() and f"Δ {d['delta']:+.4f}" in headline.inner_text()
        assert page.locator("h1").inner_text() == "nDCG@10: vectors only → bm25 only"  # as the app spells it
        bars = page.locator("svg rect")
        assert bars.count() == 3 and all(bars.nth(i).bounding_box()["height"] > 0 for i in range(3))
        assert page.locator("svg").bounding_box()["width"] <= 390  # fits the phone's width
        assert "Config: weights:" in page.locator("ul").first.inner_text()
        assert d["winners"] or d["losers"]
        shown = page.locator("h3").first.inner_text()  # the query's own (Chinese) text heads its entry
        assert any(q in shown for q in a.queries.values()), shown
        no_scroll = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert no_scroll, "the report scrolls sideways on a phone"
        SCREENSHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "snapshot-report.png"), full_page=True)
    finally:
        context.close()
    assert not outside, f"the report asked for {outside}"
