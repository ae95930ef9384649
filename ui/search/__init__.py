"""The Search, Compare and Distributions pages' parts.

    controls.py      the collection picker, the query box and every SearchConfig control
    results.py       pure data for the pages: the final ranking, table frames, score lists
    views.py         drawing helpers shared by the pages (Streamlit over `results`)
    charts.py        Plotly figure builders (pure functions of plain data)
    source_views.py  each source's own ranking side by side (Compare's "sources" mode)
    whynot.py        "Why not this document?" and the Evaluate page's recall gaps
"""
