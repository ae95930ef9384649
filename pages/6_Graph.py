"""Graph: the entity graph source's activation for a query, hop by hop (seed 002)."""

import streamlit as st

from ui import page, state
from ui.graph import views as graph_views
from ui.search import view_controls
from ui.search.config_controls import graph_controls

context = page.context()
collection = page.require_collection(context)
st.title("Entity graph")
st.caption("Each chunk is an event; its people, places, times, topics, actions and tags are found by rules "
           "(jieba part-of-speech tags, TF-IDF keywords), no LLM. The query's entities activate the chunks that "
           "share them (hop 0); activation then spreads to chunks sharing entities with those (hops 1, 2 …).")
query = view_controls.query_box()
config = graph_controls("a")
state.write_url("graph")
source = graph_views.graph_source(context.workbench, collection, config)  # cached per collection state
graph_views.build_status(context.workbench, collection, source)

if query.strip():
    graph_views.activation_view(context.workbench, collection, query, source)
else:
    st.info("Type a query above. On the sample-three-kingdoms collection, try “诸葛亮北伐” or “赤壁之战” "
            "(multi-hop) or “曹操和刘备的战役”.")
