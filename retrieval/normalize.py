"""Score normalisation within one source's candidate list, so sources on different scales can be
added. Each function maps a list of raw scores to a list of the same length and order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


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
    span = hi - lo
    return [(s - lo) / span for s in scores]


def z_score(scores: Sequence[float]) -> list[float]:
    """norm(x) = (x − mean) / std, with the population standard deviation.

    When the deviation is 0 every score maps to 0.0 (no candidate stands out).
    """
    if not scores:
        return []
    n = len(scores)
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
    if std == 0:
        return [0.0] * n
    return [(s - mean) / std for s in scores]


def l2(scores: Sequence[float]) -> list[float]:
    """norm(x) = x / sqrt(Σ x²) (OpenSearch's l2 technique): keeps ratios between scores.

    When every score is 0 each maps to 0.0.
    """
    if not scores:
        return []
    length = math.sqrt(sum(s * s for s in scores))
    if length == 0:
        return [0.0] * len(scores)
    return [s / length for s in scores]


def identity(scores: Sequence[float]) -> list[float]:
    """norm(x) = x: raw scores as they are (only meaningful when sources share a scale)."""
    return list(scores)


NORMALIZERS = {"minmax": min_max, "zscore": z_score, "l2": l2, "none": identity}


def normalize(scores: Sequence[float], method: str) -> list[float]:
    """Apply the named normalisation: 'minmax', 'zscore', 'l2' or 'none'."""
    try:
        return NORMALIZERS[method](scores)
    except KeyError:
        raise ValueError(f"unknown normalisation {method!r}; use one of {sorted(NORMALIZERS)}") from None
