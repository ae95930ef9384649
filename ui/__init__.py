"""The Streamlit UI's shared parts: every page is a thin script over these modules, and they reach
the core only through `retrieval.workbench.Workbench` (see docs/architecture.md for one line per
module: resources, page, state, controls, results, charts, views, the Corpus, Graph and Evaluate
page sections, judging, progress)."""
