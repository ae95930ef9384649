"""The position-based model (PBM), fitted by expectation-maximisation.

Chuklin, Markov & de Rijke, "Click Models for Web Search" (2015), §3.4 (the model) and §4.2 (EM).
A document u shown at position r for query q is clicked iff the position is examined and the
document is attractive, independently:

    P(C = 1) = γ_r · α_qu        γ_r: examination of position r,  α_qu: attractiveness of u for q

EM over the session counts (`counts.ClickCounts.serp`: per (q, u, r), N sessions shown, C clicked);
with the current γ, α, per (q, u, r):

    α_qu ← Σ_r [C + (N − C) · (1 − γ_r) α_qu / (1 − γ_r α_qu)] / Σ_r N
    γ_r  ← Σ_qu [C + (N − C) · γ_r (1 − α_qu) / (1 − γ_r α_qu)] / Σ_qu N

(a click says E = A = 1; a non-click leaves P(A = 1 | C = 0) = (1 − γ)α / (1 − γα), and the same
for E), from 0.5 everywhere until no parameter moves by more than `TOLERANCE` or `MAX_ITERATIONS`.
The likelihood fixes only the products γ_r α_qu, so the curve is scaled to γ = 1 at its most
examined position (α scaled by the same factor): the usual assumption that the top of the page is
always seen. A document must be seen at several positions (rankings that vary between sessions)
for the model to tell its position from its attractiveness.
"""

from __future__ import annotations

import numpy as np

from retrieval.judging.implicit.counts import ClickCounts

MAX_ITERATIONS = 200
TOLERANCE = 1e-6
_EPS = 1e-9


def fit_pbm(counts: ClickCounts) -> tuple[dict[tuple[str, str], float], dict[int, float]]:
    """((query, doc) -> α, position -> γ) of the PBM fitted to the session counts (module
    docstring). Empty dicts for an empty log."""
    if not counts.serp:
        return {}, {}
    keys = list(counts.serp)
    pairs = {}
    pair_index = np.array([pairs.setdefault((q, d), len(pairs)) for q, d, _ in keys], dtype=np.int64)
    positions = sorted({r for _, _, r in keys})
    where = {r: i for i, r in enumerate(positions)}
    rank_index = np.array([where[r] for _, _, r in keys], dtype=np.int64)
    shown = np.array([counts.serp[k][0] for k in keys], dtype=np.float64)
    clicked = np.array([counts.serp[k][1] for k in keys], dtype=np.float64)
    unclicked = shown - clicked
    shown_per_pair = np.bincount(pair_index, shown, len(pairs))
    shown_per_rank = np.bincount(rank_index, shown, len(positions))
    alpha = np.full(len(pairs), 0.5)
    gamma = np.full(len(positions), 0.5)
    for _ in range(MAX_ITERATIONS):
        a, g = alpha[pair_index], gamma[rank_index]
        missed = np.maximum(1.0 - g * a, _EPS)
        new_alpha = np.bincount(pair_index, clicked + unclicked * (1 - g) * a / missed, len(pairs)) / shown_per_pair
        new_gamma = np.bincount(rank_index, clicked + unclicked * g * (1 - a) / missed, len(positions)) / shown_per_rank
        new_alpha = np.clip(new_alpha, _EPS, 1 - _EPS)
        new_gamma = np.clip(new_gamma, _EPS, 1 - _EPS)
        moved = max(np.abs(new_alpha - alpha).max(), np.abs(new_gamma - gamma).max())
        alpha, gamma = new_alpha, new_gamma
        if moved < TOLERANCE:
            break
    top = gamma.max()
    alpha, gamma = alpha * top, gamma / top
    return ({pair: float(alpha[i]) for pair, i in pairs.items()},
            {r: float(gamma[i]) for r, i in where.items()})
