"""A click simulator: users of a known click model over documents of known relevance, with noise.

Chuklin, Markov & de Rijke, "Click Models for Web Search" (2015), §8 (simulating users with click
models). The ranker is imperfect and fixed: each document's ranking score is its grade plus an
error drawn once, N(0, `ranker_noise`²) (so some poor documents are always shown high: the case
where raw CTR rewards position, not relevance). Each session picks a query (uniformly) and shows
its documents by that score plus a fresh N(0, `shuffle`²) (so a document is seen at several
positions, as under a ranker that changes between sessions; without that no model can tell
position from relevance), cut at `depth`, positions 0, 1, …; then the user clicks:

    attractiveness α(g) = ε + (1 − 2ε) · (2^g − 1) / (2^g_max − 1)    (grade g, noise ε = `noise`)
    - "pbm":     position r examined with γ_r = 1 / (r + 1)^η (`examination_curve`), independently;
                 click iff examined and attracted: P(C_r = 1) = γ_r · α(g)
    - "cascade": read from the top; click with α(g); a click satisfies with α(g) too and the user
                 stops, else reads on (the DBN with continuation 1: the SDBN's user)

The noise ε keeps a grade-0 document clickable and a grade-3 one skippable. Events are the UBI kind
(`logs.ClickEvent`): the impressions of a session, then its clicks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from retrieval.judging.implicit.logs import CLICK, IMPRESSION, ClickEvent
from retrieval.types import RetrievalError

USERS = ("pbm", "cascade")
MAX_GRADE = 3


def attractiveness(grade: int, noise: float = 0.05, max_grade: int = MAX_GRADE) -> float:
    """α(g) of the module docstring."""
    return noise + (1 - 2 * noise) * (2 ** grade - 1) / (2 ** max_grade - 1)


def examination_curve(depth: int, eta: float = 1.0) -> list[float]:
    """γ_r = 1 / (r + 1)^η for positions r = 0 … depth − 1."""
    return [1.0 / (r + 1) ** eta for r in range(depth)]


def simulate(relevance: Mapping[str, Mapping[str, int]], sessions: int, user: str = "pbm", depth: int = 10,
             eta: float = 1.0, noise: float = 0.05, shuffle: float = 1.0, ranker_noise: float = 1.0,
             seed: int = 0) -> Iterator[ClickEvent]:
    """The events of `sessions` simulated searches over `relevance` (query -> doc -> grade 0–3),
    session ids "s0", "s1", … (module docstring)."""
    if user not in USERS:
        raise RetrievalError(f"Unknown simulated user {user!r}: use one of {', '.join(USERS)}")
    rng = np.random.default_rng(seed)
    queries = [(q, list(docs), np.array([docs[d] for d in docs], dtype=np.float64))
               for q, docs in relevance.items() if docs]
    ranked = [g + rng.normal(0.0, ranker_noise, len(g)) for _, _, g in queries]
    gamma = np.array(examination_curve(depth, eta))
    for n in range(sessions):
        pick = rng.integers(len(queries))
        query, docs, grades = queries[pick]
        order = np.argsort(-(ranked[pick] + rng.normal(0.0, shuffle, len(grades))), kind="stable")[:depth]
        alpha = noise + (1 - 2 * noise) * (2 ** grades[order] - 1) / (2 ** MAX_GRADE - 1)
        session = f"s{n}"
        for r, i in enumerate(order):
            yield ClickEvent(session, query, docs[i], r, IMPRESSION)
        if user == "pbm":
            clicked = np.flatnonzero(rng.random(len(order)) < gamma[:len(order)] * alpha)
        else:
            clicked = []
            for r in range(len(order)):
                if rng.random() < alpha[r]:
                    clicked.append(r)
                    if rng.random() < alpha[r]:
                        break
        for r in clicked:
            yield ClickEvent(session, query, docs[order[r]], int(r), CLICK)
