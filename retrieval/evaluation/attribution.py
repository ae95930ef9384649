"""Which change moved a metric: Shapley values over the factors that changed between two runs.

A snapshot pair can differ in several factors at once (the config, the corpus version, the
judgments). Evaluate every mix, f(S) = the metric with the factors in S taken from the new
snapshot and the others from the old one (2ⁿ evaluations, n ≤ 3: at most 8). Factor i's share is
its Shapley value

    φᵢ = Σ_{S ⊆ N∖{i}} |S|! (n − |S| − 1)! / n! · (f(S ∪ {i}) − f(S)),

its marginal effect averaged over every order of switching the factors from old to new. The shares
add up to the whole change: Σᵢ φᵢ = f(N) − f(∅) (efficiency), a factor that changes nothing gets
0, and with one factor φ = f(N) − f(∅).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from math import factorial

from retrieval.types import RetrievalError


def subsets(factors: Sequence[str]) -> list[frozenset[str]]:
    """Every subset of `factors`, smallest first: the mixes to evaluate."""
    return [frozenset(c) for size in range(len(factors) + 1) for c in combinations(factors, size)]


def shapley(factors: Sequence[str], value: Mapping[frozenset[str], float] | Callable[[frozenset[str]], float]
            ) -> dict[str, float]:
    """φ for each factor (see the module docstring); `value` gives f(S) for every subset S."""
    factors = list(dict.fromkeys(factors))
    if not factors:
        return {}
    f = value if callable(value) else value.__getitem__
    try:
        values = {s: float(f(s)) for s in subsets(factors)}
    except KeyError as exc:
        raise RetrievalError(f"Shapley values need the metric for every mix of {factors}; missing {exc}") from exc
    n = len(factors)
    shares = {}
    for factor in factors:
        others = [x for x in factors if x != factor]
        total = 0.0
        for s in subsets(others):
            weight = factorial(len(s)) * factorial(n - len(s) - 1) / factorial(n)
            total += weight * (values[s | {factor}] - values[s])
        shares[factor] = total
    return shares
