"""The Streamlit UI: every page (`pages/`) is a thin script over these modules, which reach the core
only through `retrieval.search.Workbench` (docs/architecture.md).

    page.py       the frame every page runs in (`frame`, from app.py; pages read `context()`), the guarded search
    state.py      session state and URL state (one `View` per browser session)
    resources.py  process-wide resources: one Workbench per database location
    progress.py   the progress bar of a long run
    search/       the Search, Compare and Distributions pages' parts (controls, results, charts)
    evaluate/     the Evaluate and Present pages' sections
    judging/      the Judge page and the Search page's ratings
    corpus/       the Corpus page
    graph/        the Graph page
"""
