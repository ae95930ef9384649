"""Compare: first stage vs reranked, config A vs config B, today vs an earlier version of the
collection (rank changes, overlap@k and RBO), or each source's own ranking side by side."""

import streamlit as st

from ui import page, state
from ui.search import results, source_views, view_controls, views
from ui.search.config_controls import config_b_actions, config_controls

context = page.context()
collection = page.require_collection(context)
st.title("Compare rankings")
query = view_controls.query_box()
mode = view_controls.compare_mode()
config_a = config_controls("a", title="Config A", rerank_always=mode == "rerank")
if mode == "configs":
    summary = st.container()
    left, right, b_column = st.columns([2, 2, 1])
    config_b_actions(context.workbench, b_column)
    config_b = config_controls("b", b_column, title="Config B")
version = view_controls.version_picker(context.workbench, collection, today=False) if mode == "versions" else None
state.write_url("compare")

if page.need_query(query):
    if mode == "rerank":
        result = page.search(context.workbench, collection, query, config_a, force_rerank=True)
        if result is not None:
            views.search_summary(result, results.final_rows(result))
            first = results.first_stage_rows(result)
            views.comparison(first, results.final_rows(result), ("First stage (fused)", "Reranked"),
                             config_a.top_k)
    elif mode == "sources":
        result = page.search(context.workbench, collection, query, config_a, skip_rerank=True)
        if result is not None:
            source_views.source_rankings(result, config_a.top_k)
    elif mode == "versions":
        past = page.at_version(context.workbench, collection, version) if version is not None else None
        if past is not None:
            then = page.search(past, collection, query, config_a)
            now = page.search(context.workbench, collection, query, config_a)
            if then is not None and now is not None:
                views.comparison(results.final_rows(then), results.final_rows(now),
                                 (f"Version {version}", "Today"), config_a.top_k)
    else:
        result_a = page.search(context.workbench, collection, query, config_a)
        result_b = page.search(context.workbench, collection, query, config_b)
        if result_a is not None and result_b is not None:
            views.comparison(results.final_rows(result_a), results.final_rows(result_b),
                             ("Config A", "Config B"), min(config_a.top_k, config_b.top_k), (left, right), summary)
