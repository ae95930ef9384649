"""Distributions: score histograms with thresholds, RRF curves for several k, BM25 vs vector ranks."""

import streamlit as st

from ui import page, state
from ui.search import view_controls, views
from ui.search.config_controls import config_controls

context = page.context()
collection = page.require_collection(context)
st.title("Score distributions")
query = view_controls.query_box()
config = config_controls("a", title="Fusion")
ks = view_controls.rrf_ks()
state.write_url("distributions")

result = None
if page.need_query(query):
    result = page.search(context.workbench, collection, query, config, skip_rerank=True)
if result is not None:
    st.subheader("Scores over this query's candidates")
    views.distributions(result)
st.subheader("RRF contribution against rank")
views.rrf_explainer(ks, config)
if result is not None:
    st.subheader("BM25 rank against vector rank")
    views.rank_scatter(result)
