"""The Streamlit UI's shared parts: every page is a thin script over these modules.

- `resources`: the process-wide Workbench/Store (`st.cache_resource`) and the first-run sample.
- `state`: the session's View, bound widgets, and URL (query parameter) sync.
- `controls`: the sidebar collection picker, the query box and the SearchConfig controls.
- `results`: pure data for tables and charts (final ranking, frames, score lists).
- `charts`: plotly figure builders, pure functions of data.
- `views`: drawing helpers shared by pages (result lists, summaries, errors).
- `corpus`: the upload/ingest step and the collections table, callable without Streamlit.
- `page`: the setup every page runs first.
"""
