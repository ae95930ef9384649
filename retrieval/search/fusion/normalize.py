"""Score normalisation within one source's candidate list, so sources on different scales can be
added. Each function maps a list of raw scores to a list of the same length and order.

For any finite scores every function returns finite values and keeps their order (a higher raw
score never gets a lower normalised one); tests/test_properties.py checks this. Min-max, z-score
and l2 do not change when all scores are multiplied by the same positive number, so scores whose
magnitude could overflow (or underflow) a square or a difference are first divided by the
largest magnitude.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from retrieval.limits import SCORE_MAX

# Magnitudes whose squares, sums of squares (up to 10^4 of them) and differences stay normal floats.
_SAFE_LOW, _SAFE_HIGH = 1e-100, 1e100


def _rescaled(scores: Sequence[float]) -> Sequence[float]:
    """`scores` divided by their largest magnitude when it lies outside [1e-100, 1e100] (else as
    they are, so ordinary scores give exactly the same floats as without this step)."""
    top = max(abs(s) for s in scores)
    if top == 0 or _SAFE_LOW <= top <= _SAFE_HIGH:
        return scores
    return [s / top for s in scores]


def min_max(scores: Sequence[float]) -> list[float]:
    """norm(x) = (x − min) / (max − min), in [0, 1].

    When every score is equal (including a single candidate) each maps to 1.0: they are all the
    best this source offered.
    """
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    scores = _rescaled(scores)
    lo, hi = min(scores), max(scores)
    span = hi - lo
    return [(s - lo) / span for s in scores]


def z_score(scores: Sequence[float]) -> list[float]:
    """norm(x) = (x − mean) / std, with the population standard deviation.

    When every score is equal (including a single candidate) each maps to 0.0: no candidate
    stands out. This is decided by comparing the scores, not by the computed deviation, which
    rounding makes tiny but non-zero for e.g. [0.1, 0.1, 0.1] (each would map to −1.0).
    """
    if not scores:
        return []
    n = len(scores)
    if min(scores) == max(scores):
        return [0.0] * n
    # Deviations from the mean computed as (s − lo) − mean(s − lo): the shifted scores are exact
    # for close scores, so scores one rounding step apart still get mean 0 and deviation 1.
    scores = _rescaled(scores)
    lo = min(scores)
    shifted = [s - lo for s in scores]
    mean = math.fsum(shifted) / n
    deviations = [s - mean for s in shifted]
    std = math.sqrt(math.fsum(d * d for d in deviations) / n)
    if not std > 0:
        return [0.0] * n
    return [d / std for d in deviations]


def l2(scores: Sequence[float]) -> list[float]:
    """norm(x) = x / sqrt(Σ x²) (OpenSearch's l2 technique): keeps ratios between scores.

    When every score is 0 each maps to 0.0.
    """
    if not scores:
        return []
    scores = _rescaled(scores)
    length = math.sqrt(sum(s * s for s in scores))
    if length == 0:
        return [0.0] * len(scores)
    return [s / length for s in scores]


def identity(scores: Sequence[float]) -> list[float]:
    """norm(x) = x: raw scores as they are (only meaningful when sources share a scale), clamped
    to ±1e100 (`limits.SCORE_MAX`) so that weighted sums of them cannot overflow."""
    return [min(SCORE_MAX, max(-SCORE_MAX, s)) for s in scores]


NORMALIZERS = {"minmax": min_max, "zscore": z_score, "l2": l2, "none": identity}


def normalize(scores: Sequence[float], method: str) -> list[float]:
    """Apply the named normalisation: 'minmax', 'zscore', 'l2' or 'none'."""
    try:
        return NORMALIZERS[method](scores)
    except KeyError:
        raise ValueError(f"unknown normalisation {method!r}; use one of {sorted(NORMALIZERS)}") from None
