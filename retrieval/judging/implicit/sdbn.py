"""The simplified dynamic Bayesian network (SDBN), a cascade model, in closed form.

Chuklin, Markov & de Rijke, "Click Models for Web Search" (2015), §3.8 (DBN) and §4.1 (the
simplified DBN's maximum-likelihood estimates); Chapelle & Zhang, "A dynamic Bayesian network
click model for web search ranking" (WWW 2009). The user reads the list from the top; a document
examined is clicked with its attractiveness a_qu, a click satisfies with s_qu, a satisfied user
stops, an unsatisfied one reads on (DBN's continuation γ = 1, which makes examination observable):
every position at or above the session's last click was examined, and in a session without a
click every position was. Over the sessions (`counts.ClickCounts.cascade`):

    a_qu = clicks / sessions where u was examined
    s_qu = sessions where u was the last click / clicks          (0 without a click)
    relevance_qu = a_qu · s_qu   (the probability that examining u satisfies: Chapelle & Zhang)

The examination curve reported beside it is the share of the sessions showing position r in which
r was examined (at or above the last click).
"""

from __future__ import annotations

from retrieval.judging.implicit.counts import ClickCounts


def fit_sdbn(counts: ClickCounts) -> tuple[dict[tuple[str, str], float], dict[int, float]]:
    """((query, doc) -> a · s, position -> share examined) from the cascade counts."""
    relevance = {}
    for pair, (examined, clicks, last_clicks) in counts.cascade.items():
        attractive = clicks / examined if examined else 0.0
        satisfying = last_clicks / clicks if clicks else 0.0
        relevance[pair] = attractive * satisfying
    examination = {r: counts.examined_at[r] / counts.shown_at[r] for r in sorted(counts.shown_at)}
    return relevance, examination
