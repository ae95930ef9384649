"""The controls of the View's own fields, shared by the pages: the collection picker, the version
picker (time travel), the query box, Compare's mode and the RRF k values to draw.

Every control is bound to the session's View (`state.bound`), so it keeps its value across
pages and is mirrored in the URL. Each has a `help=` saying what it does.
"""

from __future__ import annotations

import contextlib

import streamlit as st

from retrieval.search.workbench import Workbench
from retrieval.types import RetrievalError
from ui import resources, state
from ui.corpus import actions as corpus
from ui.search import views


def collection_picker(workbench: Workbench) -> str | None:
    """The sidebar collection picker shared by every page; None when there is no collection."""
    view = state.view()
    names = corpus.caches_last(workbench.collection_names())
    if not names:
        view.collection = None
        st.sidebar.info("No collection yet: add one on the Corpus page.")
        return None
    labels = workbench.labels()
    if view.collection not in names and view.collection is not None:
        with contextlib.suppress(RetrievalError):  # unknown or ambiguous: the fallback below says so
            view.collection = workbench.resolve(view.collection)  # a link may give the display name
    if view.collection not in names:
        fallback = resources.default_collection(names)
        if view.collection is not None:
            view.notices.append(f"Collection {view.collection!r} does not exist (any more); "
                                f"showing {labels.get(fallback, fallback)!r}.")
        view.switch_collection(fallback)
    return state.bound(st.sidebar.selectbox, "Collection", "view.collection", lambda: state.view().collection,
                       lambda value: state.view().switch_collection(value), options=names,
                       format_func=lambda n: labels.get(n, n),
                       help="The collection every page searches and charts (shared by all pages). "
                            "Each collection has its own documents, BM25 index and embedding model.")


# The Version picker's option for today's table: a value of its own, because a selectbox whose
# value is None shows no option at all ("Choose an option").
TODAY = "today"


def version_picker(workbench: Workbench, collection: str, today: bool = True, container=None) -> int | None:
    """The version of `collection` to search: None for today's, else one of its earlier table
    versions (read-only, `Workbench.at_version`). `today` False: an earlier one must be chosen
    (Compare's "today vs an earlier version"); None then when there is none yet."""
    from retrieval.store import listed_versions, version_label

    container = container or st
    view = state.view()
    try:  # read again when the table moved on
        listed = state.memo_read(workbench, ("versions-listed", collection, workbench.store.version(collection)),
                                 lambda: listed_versions(workbench.store, collection))
    except Exception as exc:
        views.show_error(exc)
        return None
    latest = listed[-1]["version"]
    earlier = [v["version"] for v in reversed(listed) if v["version"] != latest]
    labels: dict[int | str, str] = {v["version"]: version_label(v) for v in listed}
    labels[TODAY] = f"today ({labels[latest]})"
    options = ([TODAY] if today else []) + earlier
    if view.version is not None and view.version not in earlier:
        container.warning(f"Version {view.version} of this collection is not kept (a compaction removes old "
                          "versions; each collection numbers its own); showing today's.")
        view.version = None
    if not options:
        container.info("This collection has one version yet: every write (an ingest, an add, a clear) makes a new "
                       "one, and each earlier version stays searchable here.")
        return None
    if view.version is None and not today:
        view.version = earlier[0]

    def write_version(value: int | str | None) -> None:
        state.view().version = None if value in (TODAY, None) else value

    chosen = state.bound(container.selectbox, "Version", "view.version",
                         lambda: TODAY if state.view().version is None else state.view().version, write_version,
                         options=options, format_func=labels.get,
                         help="Search the collection as it was at an earlier version of its table (LanceDB time "
                              "travel), read-only, with any config: the same documents, indexes and scores as then.")
    return None if chosen in (TODAY, None) else chosen


def query_box() -> str:
    """The query text box (bound to the View)."""
    def write(value: str) -> None:
        state.view().query = value or ""

    return state.bound(st.text_input, "Query", "view.query", lambda: state.view().query, write,
                       placeholder="Type a question or keywords and press Enter",
                       help="BM25 matches its words after stemming (English) and jieba segmentation (Chinese); "
                            "the vector source embeds the whole query. A new query retrieves new candidates "
                            "(then cached); moving any slider only re-fuses them.")


def compare_mode() -> str:
    from ui.state import COMPARE_MODES

    def write(value: str) -> None:
        state.view().compare_mode = value

    return state.bound(st.radio, "Compare", "view.compare_mode", lambda: state.view().compare_mode, write,
                       options=list(COMPARE_MODES), horizontal=True,
                       format_func={"rerank": "First stage vs reranked", "configs": "Config A vs config B",
                                    "sources": "Each source's own ranking",
                                    "versions": "Today vs an earlier version"}.get,
                       help="First stage vs reranked: config A's fused ranking against the same list after the "
                            "reranker re-scored its top-N. Config A vs B: two fusion configs on the same query "
                            "(B's controls are in the right-hand column). Each source's own ranking: every "
                            "source of config A side by side, before fusion, with its raw scores (and the "
                            "keyword scorer's points per field). Today vs an earlier version: config A on the "
                            "collection as it was at an earlier version, beside today's.")


def rrf_ks() -> list[int]:
    from ui.state import RRF_K_CHOICES

    def write(value: list[int]) -> None:
        state.view().rrf_ks = sorted(value)

    return state.bound(st.multiselect, "RRF k values to draw", "view.rrf_ks", lambda: list(state.view().rrf_ks),
                       write, options=list(RRF_K_CHOICES),
                       help="Curves of the RRF term 1/(k + rank) to compare; the sidebar's current k is always "
                            "drawn (thicker). Smaller k: steeper curve, rank 1 dominates; larger k: flatter "
                            "curve and raw scores squeezed together.")
