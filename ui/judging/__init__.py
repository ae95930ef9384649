"""Judging in the browser.

    page.py     the Judge page: the queue, raters, agreement, the LLM judge, imports and exports
    rating.py   the 0–3 rating of each result on the Search page, saved at once
"""
