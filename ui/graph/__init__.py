"""The Graph page: the entity graph source's activation for one query, hop by hop.

    views.py    the page's drawing
    charts.py   the activation network and the activated-events table (pure builders)
"""
