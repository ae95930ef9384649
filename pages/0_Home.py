"""Home: what the workbench does, the collections, and the first-run sample ingest."""

import streamlit as st

from ui import page, state
from ui.corpus import actions as corpus
from ui.corpus import views as corpus_views

context = page.context()
state.write_url("home")

st.title("Search relevance workbench")
st.markdown(
    "Search a collection with **BM25**, **vector**, a field-weighted **keyword** scorer and an **entity graph**, "
    "fused by RRF, a weighted sum or DBSF.  \n"
    "Every score is explained: per source its rank, raw score, normalised score and contribution.  \n"
    "Move a slider and see the ranking change at once; rate results, evaluate them on judgments, sweep fusion "
    "variants and A/B-test configs."
)

# What each page linked from here is for; the pages' files and titles are `page.PAGES`.
PAGE_PURPOSES = {
    "Search": "results, scores and why; rate results 0–3",
    "Compare": "first stage vs rerank, config A vs B",
    "Distributions": "score histograms, RRF curves",
    "Corpus": "upload, ingest, manage collections",
    "Evaluate": "query sets, metrics, sweep, A/B test, saved configs",
    "Graph": "entity activation hop by hop",
}
PAGE_LINKS = [(path, title, PAGE_PURPOSES[title]) for path, title, _icon in page.PAGES if title in PAGE_PURPOSES]
cols = st.columns(len(PAGE_LINKS))
for col, (path, name, what) in zip(cols, PAGE_LINKS, strict=True):
    with col:
        st.page_link(path, label=f"**{name}**", help=what)
        st.caption(what)

st.subheader("Collections")
corpus_views.flash()
frame = corpus.collections_overview(context.workbench)
if frame.empty:
    st.info("No collection yet: upload files on the Corpus page.")
else:
    st.dataframe(frame, hide_index=True)
corpus_views.eval_caches(context.workbench)
