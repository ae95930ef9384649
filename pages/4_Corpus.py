"""Corpus: upload and ingest files, the collections with their stats and versions, delete and clear."""

import streamlit as st

from ui import page, state
from ui.corpus import outside
from ui.corpus import views as corpus_views

context = page.context()
state.write_url("corpus")
st.title("Corpus")
corpus_views.flash()
st.subheader("Collections")
corpus_views.collections_table(context.workbench)
corpus_views.eval_caches(context.workbench)
st.subheader("Versions")
corpus_views.versions(context.workbench)
st.subheader("Add documents")
corpus_views.upload_form(context.workbench)
st.subheader("Delete or clear a collection")
corpus_views.manage(context.workbench)
st.subheader("Outside engines")
outside.outside_engines(context.workbench)
