"""Judging in the browser.

    page.py           the Judge page: the query set, the rater's name and the three tabs
    queue.py          the Judge tab's queue: what to judge next, or the depth-10 pool, blind order per rater
    grading.py        the Judge tab: one pair at a time, graded by key (0–3, can't tell, skip, undo)
    agreement.py      the Raters and agreement tab: κ per pair of raters, α, adjudicating disagreements
    ratings_files.py  importing and exporting ratings (CSV with raters, Quepid, TREC)
    llm.py            the LLM judge tab: its settings, the background run, its agreement with the people
    rating.py         the 0–3 rating of each result on the Search page, saved at once
"""
