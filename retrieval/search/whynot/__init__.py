"""'Why not this document?': where one document stands for a query, the first stage of the
search that dropped it, and the smallest single change of the config that brings it into the
top-K, found by trying changes, not guessed.

    standing.py     where it stands per source (score, whole-collection rank, ties, position), the
                    stages of a search and the first that dropped it
    trials.py       the single-knob changes tried, each a real run of the config's ranking plan,
                    their sizes and classes, and the order that makes the smallest the first
    explain.py      the walk over a Workbench (`Workbench.explain_document`) and its `Explanation`
    recall_gaps.py  the judged-relevant documents an evaluated query did not rank in its first cutoff

Entry point: `explain.explain`.
"""
