"""The Search, Compare and Distributions pages' parts.

    view_controls.py    the View's own controls: collection picker, version picker, query box, Compare's mode, RRF ks
    knobs.py            every SearchConfig control as data (`Knob`), source controls from the descriptors
    config_controls.py  drawing the config controls for config A or B, the graph's alone, Compare's B shortcuts
    filter_controls.py  a config's metadata filters: values picked with their counts, ranges typed
    rule_controls.py    a config's query rules: typed, checked line by line, exported as rules.txt
    results.py          pure data for the pages: the final ranking, table frames, score lists
    views.py            drawing helpers shared by the pages (Streamlit over `results`)
    charts.py           Plotly figure builders (pure functions of plain data)
    source_views.py     each source's own ranking side by side (Compare's "sources" mode)
    whynot.py           "Why not this document?" and the Evaluate page's recall gaps
"""
