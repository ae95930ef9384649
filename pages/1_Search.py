"""Search: query, fusion controls, the explained results."""

import streamlit as st

from ui import controls, page, results, state, views

context = page.setup("Search")
collection = page.require_collection(context)
st.title("Search")
query = controls.query_box()
config = controls.config_controls("a", title="Fusion")
state.write_url("search")

if page.need_query(query):
    result = page.search(context.workbench, collection, query, config)
    if result is not None:
        rows = results.final_rows(result)
        views.search_summary(result, rows)
        if not rows:
            st.info("No result passes the thresholds: lower a minimum or raise top-K.")
        else:
            views.results_table(result, rows)
            st.subheader("What each source contributed")
            views.contribution_chart(result, rows)
            st.subheader("Results")
            views.result_cards(result, rows)
