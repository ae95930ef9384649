"""The Evaluate and Present pages' sections, one module each.

    sets.py       the query set: pick, numbers, downloads, upload
    implicit_sources.py  the judgment source: the raters' consensus or a click model's list, with
                  its coverage and agreement with the explicit judgments
    run.py        config A scored on the set: metrics, worst queries, per query
    sweep.py      a grid of fusion (and rerank) variants around config A
    ab.py         A/B of two saved configs with a paired significance test
    optimize.py   the optimiser in the background, best-so-far curve, Stop
    configs.py    saved configs: save, export, import, load, delete, serve to agents
    snapshots.py  keep, list and diff snapshots
    present.py    the Present page: one change for stakeholders
    charts.py     the tables and figures as pure functions of plain data
    common.py     what the sections share: the session's results, memoised reads, labels
"""
