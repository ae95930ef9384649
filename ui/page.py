"""The frame every page runs in (`frame`, from app.py; a page reads its `context()`), and the
guarded search every search page runs."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from retrieval.search.config import SearchConfig
from retrieval.search.workbench import SearchResult, Workbench
from ui import resources, state
from ui.search import view_controls, views

APP_TITLE = "Search relevance workbench"
# The pages in sidebar order: script, title (the sidebar's and the tab's), icon. app.py makes
# them `st.Page`s; their URLs are /, /Search, /Compare, … (the file name without its number).
# Icons are Material Symbols (`:material/name:`), a font Streamlit bundles: never an emoji, which
# a machine without an emoji font draws as an empty box (tests/ui/test_no_emoji.py).
PAGES = [
    ("pages/0_Home.py", "Home", ":material/home:"),
    ("pages/1_Search.py", "Search", ":material/search:"),
    ("pages/2_Compare.py", "Compare", ":material/compare_arrows:"),
    ("pages/3_Distributions.py", "Distributions", ":material/bar_chart:"),
    ("pages/4_Corpus.py", "Corpus", ":material/library_books:"),
    ("pages/5_Evaluate.py", "Evaluate", ":material/fact_check:"),
    ("pages/6_Graph.py", "Graph", ":material/hub:"),
    ("pages/7_Present.py", "Present", ":material/slideshow:"),
    ("pages/8_Judge.py", "Judge", ":material/rate_review:"),
]
# The tab's icon: a magnifier drawn in SVG (Streamlit sends it inline as a data: URL). An emoji
# needs an emoji font, and a Material icon as page_icon is fetched from a font CDN.
FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><circle cx="10" cy="10" r="6.5" '
           'fill="none" stroke="#2563eb" stroke-width="2.6"/><path d="M15 15l6 6" stroke="#2563eb" '
           'stroke-width="3" stroke-linecap="round"/></svg>')


@dataclass
class Context:
    workbench: Workbench
    view: state.View
    collection: str | None


FRAME_KEY = "page.frame"  # the Context the frame made for this run (session state)


def frame(title: str) -> Context:
    """What the app's frame (`app.py`) does before every page: page config, session View (read
    from the link on first load), the first-run sample corpus, and the sidebar collection picker
    that every page shares. The page reads the result with `context()`."""
    st.set_page_config(page_title=f"{title} · {APP_TITLE}", page_icon=FAVICON, layout="wide")
    view = state.view()
    workbench = resources.workbench()
    if not view.sample_checked:
        _ensure_sample(workbench)
        view.sample_checked = True
    collection = view_controls.collection_picker(workbench)
    for notice in view.notices:
        st.warning(views.markdown_safe(notice))
    view.notices.clear()
    context = Context(workbench, view, collection)
    st.session_state[FRAME_KEY] = context
    return context


def context() -> Context:
    """The Context the frame made for this run: the Workbench, the session's View and the
    collection picked in the sidebar.

    A page run without the frame is Streamlit's old multipage mode: a process's first run (and
    every AppTest run) treats a folder named `pages/` beside the entry script as the old layout's
    pages and runs the file the URL names directly, until the entry script calls
    `st.navigation`. Such a page frames itself here, and Streamlit is told that the app uses
    `st.navigation` (its own flag, which that call sets), so the next run goes through app.py.
    The flag is one per process: a session whose first run started in the old mode while another
    session's app.py turned it off has no frame yet either, and frames itself too."""
    if PagesManager.uses_pages_directory or FRAME_KEY not in st.session_state:
        PagesManager.uses_pages_directory = False
        caller = Path(sys._getframe(1).f_code.co_filename).as_posix()  # the page's file (no source read)
        return frame(next((title for path, title, _ in PAGES if caller.endswith(path)), APP_TITLE))
    return st.session_state[FRAME_KEY]


def _ensure_sample(workbench: Workbench) -> None:
    """On the first run against an empty database, ingest the bundled sample with a progress bar."""
    if not resources.needs_sample(workbench):
        return
    bar = st.progress(0.0, text="First run: ingesting the bundled sample corpus…")

    def progress(stage: str, done: int, total: int) -> None:
        bar.progress(min(1.0, done / max(total, 1)), text=f"First run: {stage} the sample corpus, {done}/{total}")

    try:
        if resources.ingest_sample(workbench, progress):
            state.view().collection = resources.SAMPLE_COLLECTION
            st.toast(f"Sample corpus ingested as '{resources.SAMPLE_COLLECTION}'")
    except Exception as exc:  # the app must still open: say what failed
        views.show_error(exc)
    finally:
        bar.empty()


def require_collection(context: Context) -> str:
    if context.collection is None:
        st.info("There is no collection yet. Create one on the Corpus page.")
        st.stop()
    return context.collection


def search(workbench: Workbench, collection: str, query: str, config: SearchConfig,
           force_rerank: bool = False, skip_rerank: bool = False) -> SearchResult | None:
    """`Workbench.search` with its errors shown (None then): cached candidates, pure fusion, and
    the rerank when it is on. A slider move costs only the fusion.

    `force_rerank` reranks whatever the config says (Compare's first stage vs reranked);
    `skip_rerank` leaves it out (pages that only chart the fusion)."""
    try:
        if force_rerank or skip_rerank:
            config = dataclasses.replace(config, rerank=force_rerank)
        if not config.rerank:
            return workbench.search(collection, query, config)
        with st.spinner("Reranking…"):
            return workbench.search(collection, query, config)
    except Exception as exc:  # bad input, a failing model or database: readable, and the page stays up
        views.show_error(exc)
    return None


def at_version(workbench: Workbench, collection: str, version: int | None, hint: str = "") -> Workbench | None:
    """The Workbench to search `collection` with: `workbench` for today's (`version` None), else
    a read-only one at that earlier version, said above the results (with `hint`); None (and the reason shown)
    when that version cannot be read."""
    if version is None:
        return workbench
    try:
        past = workbench.at_version(collection, version)
        info = past.info(collection)
    except Exception as exc:
        views.show_error(exc)
        return None
    st.caption(f"Read-only: the collection as it was at version {version} ({info.doc_count} documents). {hint}")
    return past


def need_query(query: str) -> bool:
    """True when there is a query; otherwise a hint naming queries of the current collection."""
    if query.strip():
        return True
    examples = example_queries(resources.workbench(), state.view().collection)
    st.info(views.markdown_safe("Type a query above to see results." +
                                (" For this collection, try " + " or ".join(f"“{q}”" for q in examples) + "."
                                 if examples else "")))
    return False


def example_queries(workbench: Workbench, collection: str | None, n: int = 2) -> list[str]:
    """Up to `n` queries to try on `collection`: its query sets' first queries, else its first
    documents' titles (six words at most); [] when it has neither or cannot be read. Read once
    per collection version."""
    if not collection:
        return []

    def read() -> list[str]:
        for set_name in workbench.judgments.query_sets(collection):
            queries = list(workbench.judgments.queries(collection, set_name).values())
            if queries:
                return queries[:n]
        rows = workbench.store.table(collection).search().select(["title"]).limit(50).to_arrow()
        titles = [" ".join(t.split()[:6]) for t in rows.column("title").to_pylist() if t and t.strip()]
        return list(dict.fromkeys(titles))[:n]

    try:
        return state.memo_read(workbench, ("example-queries", collection, workbench.store.version(collection)), read)
    except Exception:  # a hint must never break the page
        return []
