"""Search: query, fusion controls, the explained results."""

import streamlit as st

from ui import page, state
from ui.judging import rating as judging
from ui.search import results, view_controls, views, whynot
from ui.search.config_controls import config_controls

context = page.context()
collection = page.require_collection(context)
st.title("Search")
query = view_controls.query_box()


@st.fragment
def fusion_and_results(workbench, collection: str, query: str) -> None:
    """The fusion controls and what they change. A fragment, so that moving a control reruns
    and re-sends only this, not the page's head, collection picker and query box (a new query
    or collection reruns the whole page)."""
    config = config_controls("a", title="Fusion")
    version = view_controls.version_picker(workbench, collection)
    state.write_url("search")
    searched = page.at_version(workbench, collection, version,
                               "Compare → “Today vs an earlier version” shows it beside today's.")
    if searched is None or not page.need_query(query):
        return
    result = page.search(searched, collection, query, config)
    if result is None:
        return
    rows = results.final_rows(result)
    views.search_summary(result, rows)
    if not rows:
        st.info("No result passes the thresholds: lower a minimum or raise top-K.")
    else:
        views.results_table(result, rows)
        st.subheader("Results")
        rate = judging.judging_toggle() and judging.judge(workbench, collection, query, in_fragment=True)
        views.result_cards(result, rows, per_result=rate or None)
    whynot.whynot_section(searched, collection, query, config)


fusion_and_results(context.workbench, collection, query)
