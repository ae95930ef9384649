"""Several raters per judgment: how far they agree, where they disagree, and what the metrics use.

A rating is one rater's grade of one document for one query (`Rating`); a rater is a name, no
login (`validate_rater`). A grade of None is the rater's "can't tell": it is never counted, in
agreement or in consensus. The grade given under the reserved name `ADJUDICATED` settles a
disagreement: it is the resolution, not a rater, so agreement leaves it out.

Cohen's κ, two raters a and b over the n documents both graded (`cohen_kappa`; the same numbers
as `sklearn.metrics.cohen_kappa_score`). With labels ℓ₀ < … < ℓ_{m−1} (by default every grade
either gave), C_ij the number of documents a graded ℓ_i and b graded ℓ_j, and E_ij = (Σ_k C_ik) ·
(Σ_k C_kj) / n what chance alone would give:

    κ = 1 − Σ w_ij C_ij / Σ w_ij E_ij
    w_ij = [i ≠ j] (unweighted), |i − j| ("linear") or (i − j)² ("quadratic")

The distances are between the positions of the labels, so `agreement` passes every grade from
the lowest to the highest of the data as labels: a 1 against a 3 is two steps apart even when
nobody gave a 2. Weighted κ for grades is quadratic (`GRADE_WEIGHTS`), the usual choice for
ordinal relevance grades: a 0 against a 3 costs nine times a 2 against a 3. κ is undefined (NaN)
when Σ w_ij E_ij = 0, e.g. both raters gave one and the same grade throughout.

Krippendorff's α, any number of raters, some of them missing (`krippendorff_alpha`; the same
numbers as the `krippendorff` package). A unit (a query and a document) with m_u ≥ 2 grades is
pairable; one with fewer drops out. Over the pairable units, the coincidence of grades c and k is

    o_ck = Σ_u (number of ordered pairs of different raters of u grading c and k) / (m_u − 1)
    n_c  = Σ_k o_ck,  n = Σ_c n_c,  e_ck = n_c · (n_k − [c = k]) / (n − 1)   (expected by chance)
    α    = 1 − Σ o_ck δ²_ck / Σ e_ck δ²_ck

with δ²_ck = [c ≠ k] (nominal), (c − k)² (interval), or for ordinal data, from the marginals,
(Σ_{g=c..k} n_g − (n_c + n_k) / 2)² (Krippendorff 2011, "Computing Krippendorff's
alpha-reliability"). Grades are ordinal (`GRADE_LEVEL`). α is undefined (NaN) when no unit is
pairable or Σ e_ck δ²_ck = 0 (every pairable grade the same).

Consensus (`consensus`), what the metrics read, per query and document: the adjudicated grade if
there is one; else the majority grade, given by more than half of the raters who gave a grade;
else the mean of the grades rounded half up, ⌊mean + ½⌋ ({1, 2} → 2, {0, 1, 3} → 1); None when
nobody gave a grade.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from retrieval.types import RetrievalError

ADJUDICATED = "(adjudicated)"  # reserved rater name: the grade that settles a disagreement
LLM_PREFIX = "llm:"  # rater names of language models, e.g. "llm:gpt-4o"
IMPLICIT_PREFIX = "implicit:"  # judgment lists a click model made from logs, e.g. "implicit:pbm"
MAX_RATER_CHARS = 64
RATER_PUNCTUATION = " ._-:@/+"
KAPPA_WEIGHTS = (None, "linear", "quadratic")
ALPHA_LEVELS = ("nominal", "ordinal", "interval")
GRADE_WEIGHTS = "quadratic"  # weighted κ of relevance grades
GRADE_LEVEL = "ordinal"  # α of relevance grades

Unit = tuple[str, str]  # (query id, doc id)


@dataclass(frozen=True)
class Rating:
    """One rater's grade of a document for a query; grade None: the rater "can't tell"."""

    query_id: str
    doc_id: str
    rater: str
    grade: int | None


def validate_rater(name: str, allow_reserved: bool = False) -> str:
    """A rater name: 1–64 letters (any script), digits, spaces and `. _ - : @ / +`, no leading
    or trailing space. `ADJUDICATED` only with `allow_reserved` (where adjudication is written)."""
    if allow_reserved and name == ADJUDICATED:
        return name
    if name == ADJUDICATED:
        raise RetrievalError(f"The rater name {ADJUDICATED!r} is reserved for adjudicated grades")
    valid = (isinstance(name, str) and 0 < len(name) <= MAX_RATER_CHARS and name == name.strip()
             and all(_rater_char(c) for c in name))
    if not valid:
        raise RetrievalError(
            f"Invalid rater name {name!r}: use 1–{MAX_RATER_CHARS} letters, digits, spaces and "
            f"{' '.join(RATER_PUNCTUATION.strip())}, with no space at either end"
        )
    return name


def _rater_char(char: str) -> bool:
    # Marks (M*) too: Devanagari, Thai … write letters with combining vowel signs.
    return char in RATER_PUNCTUATION or unicodedata.category(char)[0] in "LMN"


def is_llm_rater(name: str) -> bool:
    """Whether the rater is a language model: its name starts with "llm:" (any case)."""
    return name[:len(LLM_PREFIX)].lower() == LLM_PREFIX


def is_implicit_rater(name: str) -> bool:
    """Whether the "rater" is a click model's judgment list: its name starts with "implicit:"
    (any case). Such a list is a judgment source of its own, never part of the consensus."""
    return name[:len(IMPLICIT_PREFIX)].lower() == IMPLICIT_PREFIX


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable], weights: str | None = None,
                labels: Sequence[Hashable] | None = None) -> float:
    """Cohen's κ of two raters' grades of the same items, a[i] and b[i] (module docstring);
    `labels` default to the sorted grades either gave; pairs with a grade outside `labels` are
    left out. NaN when undefined. Equal to sklearn's `cohen_kappa_score(a, b, labels=…, weights=…)`."""
    if weights not in KAPPA_WEIGHTS:
        raise RetrievalError(f"κ weights must be one of {KAPPA_WEIGHTS}, got {weights!r}")
    if len(a) != len(b):
        raise RetrievalError(f"κ needs the grades of the same items: {len(a)} against {len(b)}")
    labels = sorted(set(a) | set(b)) if labels is None else list(labels)
    index = {label: i for i, label in enumerate(labels)}
    m = len(labels)
    confusion = np.zeros((m, m), dtype=np.float64)
    for x, y in zip(a, b, strict=True):
        if x in index and y in index:
            confusion[index[x], index[y]] += 1
    total = confusion.sum()
    if total == 0:
        return float("nan")
    expected = np.outer(confusion.sum(axis=1), confusion.sum(axis=0)) / total
    steps = np.abs(np.subtract.outer(np.arange(m), np.arange(m))).astype(np.float64)
    w = (steps > 0).astype(np.float64) if weights is None else steps if weights == "linear" else steps ** 2
    chance = float((w * expected).sum())
    if chance == 0:
        return float("nan")
    return float(1 - (w * confusion).sum() / chance)


def krippendorff_alpha(units: Mapping[Hashable, Mapping[str, float | None]], level: str = GRADE_LEVEL) -> float:
    """Krippendorff's α of `units` (unit -> {rater: grade}; None grades left out) at `level`
    nominal, ordinal or interval (module docstring). NaN when undefined. Equal to
    `krippendorff.alpha(reliability_data=…, level_of_measurement=level)` on the same data."""
    if level not in ALPHA_LEVELS:
        raise RetrievalError(f"α level must be one of {ALPHA_LEVELS}, got {level!r}")
    pairable = [[g for g in grades.values() if g is not None] for grades in units.values()]
    pairable = [grades for grades in pairable if len(grades) >= 2]
    values = sorted({g for grades in pairable for g in grades})
    if not values:
        return float("nan")
    index = {value: i for i, value in enumerate(values)}
    counts = np.zeros((len(pairable), len(values)), dtype=np.float64)  # unit × value: how many gave it
    for row, grades in enumerate(pairable):
        for g in grades:
            counts[row, index[g]] += 1
    m_u = counts.sum(axis=1)
    # c_u c_uᵀ counts pairs of ratings; minus the diagonal: a rating is not paired with itself.
    pairs = counts[:, :, None] * counts[:, None, :] - counts[:, :, None] * np.eye(len(values))
    observed = (pairs / (m_u - 1)[:, None, None]).sum(axis=0)
    n_c = observed.sum(axis=0)
    n = n_c.sum()
    expected = (np.outer(n_c, n_c) - np.diag(n_c)) / (n - 1)
    delta = _alpha_distances(np.asarray(values, dtype=np.float64), n_c, level)
    chance = float((expected * delta).sum())
    if chance == 0:
        return float("nan")
    return float(1 - (observed * delta).sum() / chance)


def _alpha_distances(values: np.ndarray, n_c: np.ndarray, level: str) -> np.ndarray:
    """δ²_ck for the sorted `values` (module docstring)."""
    if level == "nominal":
        return 1.0 - np.eye(len(values))
    if level == "interval":
        return np.subtract.outer(values, values) ** 2
    i, k = np.meshgrid(np.arange(len(values)), np.arange(len(values)), indexing="ij")
    low, high = np.minimum(i, k), np.maximum(i, k)
    cumulative = np.concatenate(([0.0], np.cumsum(n_c)))
    between = cumulative[high + 1] - cumulative[low]  # Σ n_g for g from low to high
    return (between - (n_c[low] + n_c[high]) / 2) ** 2


@dataclass(frozen=True)
class PairAgreement:
    """Two raters (sorted names) over the n documents both graded; κ None when undefined."""

    raters: tuple[str, str]
    cohen_kappa: float | None
    weighted_kappa: float | None
    n: int


@dataclass(frozen=True)
class QueryAgreement:
    """α over one query's documents; n_units: its documents with ≥ 2 grades, n_disagreements:
    those with different grades (adjudicated or not)."""

    alpha: float | None
    n_units: int
    n_disagreements: int


@dataclass(frozen=True)
class Agreement:
    """How far the raters agree (`agreement`); `labels`: the grade scale κ was computed on."""

    raters: tuple[str, ...]
    labels: tuple[int, ...]
    pairs: tuple[PairAgreement, ...]
    krippendorff_alpha: float | None
    per_query: dict[str, QueryAgreement] = field(default_factory=dict)

    def summary(self) -> str:
        """The figures as lines of text: α, then κ and weighted κ of each pair."""
        lines = [f"{len(self.raters)} raters; Krippendorff's α ({GRADE_LEVEL}): {_shown(self.krippendorff_alpha)}"]
        lines += [f"{_rater_shown(p.raters[0])} / {_rater_shown(p.raters[1])}: κ {_shown(p.cohen_kappa)}, "
                  f"weighted κ ({GRADE_WEIGHTS}) {_shown(p.weighted_kappa)}, n {p.n}" for p in self.pairs]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """`pairs` [{raters: [r1, r2], cohen_kappa, weighted_kappa, n}], `krippendorff_alpha`,
        then `raters`, `labels`, `weights`, `level` and `per_query` {query id: {alpha, n_units,
        n_disagreements}}; undefined values are null."""
        return {
            "pairs": [{"raters": list(p.raters), "cohen_kappa": p.cohen_kappa, "weighted_kappa": p.weighted_kappa,
                       "n": p.n} for p in self.pairs],
            "krippendorff_alpha": self.krippendorff_alpha,
            "raters": list(self.raters),
            "labels": list(self.labels),
            "weights": GRADE_WEIGHTS,
            "level": GRADE_LEVEL,
            "per_query": {q: {"alpha": a.alpha, "n_units": a.n_units, "n_disagreements": a.n_disagreements}
                          for q, a in self.per_query.items()},
        }


def agreement(ratings: Iterable[Rating]) -> Agreement:
    """Agreement of the raters (module docstring): κ and weighted κ for every pair of raters
    with a document both graded, α over all units and per query. Adjudicated grades and "can't
    tell" are left out; a rater's later rating of the same document replaces an earlier one."""
    units = _graded_units(ratings, with_adjudicated=False)
    raters = tuple(sorted({r for grades in units.values() for r in grades}))
    grades = [g for unit in units.values() for g in unit.values()]
    labels = tuple(range(min(grades), max(grades) + 1)) if grades else ()
    pairs = []
    for first, second in combinations(raters, 2):
        both = [unit for unit in units.values() if first in unit and second in unit]
        if both:
            a, b = [unit[first] for unit in both], [unit[second] for unit in both]
            pairs.append(PairAgreement((first, second), _defined(cohen_kappa(a, b, labels=labels)),
                                       _defined(cohen_kappa(a, b, GRADE_WEIGHTS, labels)), len(both)))
    per_query: dict[str, dict[Unit, dict[str, int]]] = {}
    for (query_id, doc_id), unit in units.items():
        per_query.setdefault(query_id, {})[query_id, doc_id] = unit
    return Agreement(
        raters, labels, tuple(pairs), _defined(krippendorff_alpha(units)),
        {q: QueryAgreement(_defined(krippendorff_alpha(query_units)),
                           sum(1 for unit in query_units.values() if len(unit) >= 2),
                           sum(1 for unit in query_units.values() if _spread(unit) > 0))
         for q, query_units in per_query.items()},
    )


def _shown(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def _rater_shown(name: str) -> str:
    return name or "(unnamed)"


def _defined(value: float) -> float | None:
    return None if value != value else value  # NaN: undefined, null in JSON


@dataclass(frozen=True)
class Disagreement:
    """A document the raters graded differently, not yet adjudicated; spread = max − min."""

    query_id: str
    doc_id: str
    grades: dict[str, int]
    spread: int


def disagreements(ratings: Iterable[Rating]) -> list[Disagreement]:
    """Documents to adjudicate: different grades and no adjudicated grade yet, widest spread
    first, then by query id and doc id. Implicit lists are no raters to adjudicate: left out."""
    found = [Disagreement(q, d, {r: unit[r] for r in sorted(unit)}, _spread(unit))
             for (q, d), unit in _graded_units((r for r in ratings if not is_implicit_rater(r.rater)),
                                               with_adjudicated=True).items()
             if ADJUDICATED not in unit and _spread(unit) > 0]
    return sorted(found, key=lambda x: (-x.spread, x.query_id, x.doc_id))


def _spread(grades: Mapping[str, int]) -> int:
    given = [g for r, g in grades.items() if r != ADJUDICATED]
    return max(given) - min(given) if given else 0


def consensus(grades: Mapping[str, int | None]) -> int | None:
    """The grade the metrics use for one document (module docstring): adjudicated, else majority,
    else the mean rounded half up; None when nobody gave a grade."""
    if grades.get(ADJUDICATED) is not None:
        return grades[ADJUDICATED]
    given = [g for r, g in grades.items() if r != ADJUDICATED and g is not None]
    if not given:
        return None
    grade, count = Counter(given).most_common(1)[0]
    if 2 * count > len(given):
        return grade
    return (2 * sum(given) + len(given)) // (2 * len(given))  # ⌊mean + ½⌋ in integers: no float ties


def consensus_qrels(ratings: Iterable[Rating], exclude_raters: Collection[str] | Callable[[str], bool] = ()
                    ) -> dict[str, dict[str, int]]:
    """query id -> doc id -> consensus grade, queries in first-seen order, doc ids sorted;
    documents without one left out. `exclude_raters`: names, or a test such as `is_llm_rater`."""
    excluded = exclude_raters if callable(exclude_raters) else set(exclude_raters).__contains__
    units = _graded_units((r for r in ratings if not excluded(r.rater)), with_adjudicated=True)
    by_query: dict[str, dict[str, int]] = {}
    for (query_id, doc_id), unit in units.items():  # each has a grade: consensus is not None
        by_query.setdefault(query_id, {})[doc_id] = consensus(unit)
    return {q: dict(sorted(docs.items())) for q, docs in by_query.items()}


def _graded_units(ratings: Iterable[Rating], with_adjudicated: bool) -> dict[Unit, dict[str, int]]:
    """(query id, doc id) -> {rater: grade}, first-seen order, "can't tell" left out (a later
    rating by the same rater replaces an earlier one, a "can't tell" included)."""
    units: dict[Unit, dict[str, int | None]] = {}
    for rating in ratings:
        if with_adjudicated or rating.rater != ADJUDICATED:
            units.setdefault((rating.query_id, rating.doc_id), {})[rating.rater] = rating.grade
    return {unit: {r: g for r, g in grades.items() if g is not None} for unit, grades in units.items()
            if any(g is not None for g in grades.values())}
