"""Several raters (retrieval/judging/raters.py): κ against sklearn, α against the `krippendorff` package,
small cases by hand, the consensus rule and the agreement report."""

import json
import math
import warnings

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from retrieval.judging.raters import (
    ADJUDICATED,
    GRADE_WEIGHTS,
    Rating,
    agreement,
    cohen_kappa,
    consensus,
    consensus_qrels,
    disagreements,
    is_llm_rater,
    krippendorff_alpha,
    validate_rater,
)
from retrieval.types import RetrievalError

WEIGHTS = (None, "linear", "quadratic")
LEVELS = ("nominal", "ordinal", "interval")


def sklearn_kappa(a, b, weights=None, labels=None) -> float:
    with warnings.catch_warnings():  # sklearn warns where κ is undefined (NaN), which is tested
        warnings.simplefilter("ignore")
        return cohen_kappa_score(a, b, weights=weights, labels=labels)


def reference_alpha(units: dict, level: str) -> float:
    """krippendorff.alpha of unit -> {rater: grade}: a raters × units matrix, NaN where missing."""
    raters = sorted({r for grades in units.values() for r in grades})
    data = [[np.nan if units[u].get(r) is None else units[u][r] for u in units] for r in raters]
    try:
        return krippendorff.alpha(reliability_data=np.array(data, dtype=float), level_of_measurement=level)
    except ValueError:  # the package refuses data without a pairable unit or with one value
        return math.nan


def same(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, abs=1e-12)


HAND_MADE = [
    ([0, 1, 2, 3, 3, 2], [0, 1, 2, 3, 2, 2]),
    ([0, 0, 1, 1, 2, 2, 3, 3], [1, 0, 2, 1, 3, 2, 3, 1]),
    ([0, 1, 3, 3, 0], [0, 0, 3, 1, 0]),  # grade 2 given by neither
    ([0, 1, 2, 3], [0, 1, 1, 1]),  # grades 2 and 3 missing from the second rater
    ([2, 2, 2, 2], [0, 1, 2, 3]),  # the first rater gives one grade only
    ([1, 1, 1], [1, 1, 1]),  # undefined: no chance disagreement
    (["a", "b", "a"], ["b", "b", "a"]),  # any hashable labels
]


@pytest.mark.parametrize(("a", "b"), HAND_MADE)
@pytest.mark.parametrize("weights", WEIGHTS)
def test_kappa_equals_sklearn_on_hand_made_data(a, b, weights):
    if weights and isinstance(a[0], str):
        return
    assert same(cohen_kappa(a, b, weights), sklearn_kappa(a, b, weights))
    if not isinstance(a[0], str):
        labels = list(range(-1, 5))  # labels nobody gave change the weighted distances, not κ
        assert same(cohen_kappa(a, b, weights, labels), sklearn_kappa(a, b, weights, labels))


def test_kappa_equals_sklearn_on_random_data():
    rng = np.random.default_rng(7)
    for trial in range(60):  # sklearn validates its arguments: ~5 ms a call
        n = int(rng.integers(2, 40))
        a = rng.integers(0, 4, n)
        # a third of the trials: the second rater mostly close to the first, as real raters are
        b = np.clip(a + rng.integers(-1, 2, n), 0, 3) if trial % 3 == 0 else rng.integers(0, 4, n)
        for weights in WEIGHTS:
            assert same(cohen_kappa(a.tolist(), b.tolist(), weights), sklearn_kappa(a, b, weights)), (a, b, weights)
            assert same(cohen_kappa(a.tolist(), b.tolist(), weights, [0, 1, 2, 3]),
                        sklearn_kappa(a, b, weights, [0, 1, 2, 3]))


def test_kappa_by_hand():
    # a = 0 1 0, b = 0 1 1. Counts C (rows a, columns b) = [[1, 1], [0, 1]]; a's totals (2, 1),
    # b's (1, 2), so chance E = outer((2, 1), (1, 2)) / 3 = [[2/3, 4/3], [1/3, 2/3]].
    # Unweighted: observed disagreement 1, expected 4/3 + 1/3 = 5/3, κ = 1 − 1 / (5/3) = 0.4.
    assert cohen_kappa([0, 1, 0], [0, 1, 1]) == pytest.approx(0.4, abs=1e-12)
    # Two labels one step apart: linear and quadratic weights are both 1 off the diagonal.
    assert cohen_kappa([0, 1, 0], [0, 1, 1], "quadratic") == pytest.approx(0.4, abs=1e-12)
    # Labels 0, 1, 2 with 2 unused: the 0–1 disagreement is still one step, and the chance
    # matrix has no mass on 2, so κ is unchanged.
    assert cohen_kappa([0, 1, 0], [0, 1, 1], "quadratic", labels=[0, 1, 2]) == pytest.approx(0.4, abs=1e-12)
    assert math.isnan(cohen_kappa([2, 2], [2, 2]))


def test_kappa_rejects_bad_input():
    with pytest.raises(RetrievalError, match="weights"):
        cohen_kappa([0], [0], "cubic")
    with pytest.raises(RetrievalError, match="2 against 1"):
        cohen_kappa([0, 1], [0])


ALPHA_DATA = [
    # krippendorff.alpha's own docstring example (Krippendorff's): 3 coders, 15 units, gaps
    {u: dict(zip("abc", grades, strict=True)) for u, grades in enumerate([
        (None, 1, None), (None, None, None), (None, 2, 2), (None, 1, 1), (None, 3, 3), (3, 3, 4), (4, 4, 4),
        (1, 3, None), (2, None, 2), (1, None, 1), (1, None, 1), (3, None, 3), (3, None, 3), (None, None, None),
        (3, None, 4)])},
    # relevance grades, four raters, one unit rated once (not pairable)
    {("q1", "d1"): {"a": 0, "b": 0, "c": 1}, ("q1", "d2"): {"a": 3, "b": 2, "c": 3, "d": 3},
     ("q2", "d1"): {"a": 1, "d": 2}, ("q2", "d3"): {"b": 2}, ("q3", "d9"): {"a": 0, "b": 3, "c": None}},
]


@pytest.mark.parametrize("units", ALPHA_DATA)
@pytest.mark.parametrize("level", LEVELS)
def test_alpha_equals_krippendorff_on_hand_made_data(units, level):
    assert same(krippendorff_alpha(units, level), reference_alpha(units, level))


def test_alpha_equals_krippendorff_on_random_data_with_gaps():
    rng = np.random.default_rng(11)
    for _ in range(150):
        n_raters, n_units = int(rng.integers(2, 6)), int(rng.integers(1, 25))
        grades = rng.integers(-1, 4, (n_raters, n_units))  # −1 too: TREC's spam grade
        missing = rng.random((n_raters, n_units)) < 0.35
        units = {u: {f"r{r}": None if missing[r, u] else int(grades[r, u]) for r in range(n_raters)}
                 for u in range(n_units)}
        for level in LEVELS:
            assert same(krippendorff_alpha(units, level), reference_alpha(units, level)), (units, level)


def test_alpha_by_hand():
    # Units (0, 0), (1, 1), (0, 1), two raters each, so every pair counts 1 / (m_u − 1) = 1.
    # Coincidences o = [[2, 1], [1, 2]] (unit 1 gives o₀₀ 2, unit 2 o₁₁ 2, unit 3 o₀₁ = o₁₀ = 1);
    # n₀ = n₁ = 3, n = 6; chance e₀₁ = e₁₀ = 3 · 3 / 5 = 1.8. Nominal: observed disagreement
    # 1 + 1 = 2, expected 3.6, α = 1 − 2 / 3.6 = 4/9. With two values ordinal δ² is
    # (n₀ + n₁ − (n₀ + n₁)/2)² = 9 and interval (0 − 1)² = 1 for both, so α is 4/9 at every level.
    units = {1: {"a": 0, "b": 0}, 2: {"a": 1, "b": 1}, 3: {"a": 0, "b": 1}, 4: {"a": 1}}
    for level in LEVELS:
        assert krippendorff_alpha(units, level) == pytest.approx(4 / 9, abs=1e-12)
    assert math.isnan(krippendorff_alpha({1: {"a": 2, "b": 2}, 2: {"a": 1}}))  # no variation
    assert math.isnan(krippendorff_alpha({1: {"a": 2}, 2: {"b": 1, "c": None}}))  # nothing pairable
    with pytest.raises(RetrievalError, match="level"):
        krippendorff_alpha(units, "ratio")


def test_consensus_rule():
    assert consensus({"a": 0, "b": 3, ADJUDICATED: 2}) == 2  # adjudicated wins
    assert consensus({"a": 0, "b": 0, ADJUDICATED: None}) == 0  # an adjudicator's "can't tell" settles nothing
    assert consensus({"a": 1, "b": 1, "c": 3}) == 1  # majority
    assert consensus({"a": 1, "b": 1, "c": 3, "d": None}) == 1  # "can't tell" is not a vote
    assert consensus({"a": 1, "b": 2}) == 2  # tie: mean 1.5 rounded half up
    assert consensus({"a": 1, "b": 1, "c": 2, "d": 2}) == 2  # 2 of 4 is no majority: mean 1.5 → 2
    assert consensus({"a": 0, "b": 1, "c": 3}) == 1  # mean 1.33 → 1
    assert consensus({"a": 2, "b": 3, "c": 3, "d": 0}) == 2  # mean 2.0
    assert consensus({"a": -1, "b": 0}) == 0  # mean −0.5 rounds half up to 0
    assert consensus({"a": -2, "b": -1}) == -1
    assert consensus({"a": None, "b": None}) is None
    assert consensus({}) is None


RATINGS = [
    Rating("q2", "d1", "ann", 3), Rating("q2", "d1", "bob", 0),  # spread 3
    Rating("q1", "d9", "ann", 1), Rating("q1", "d9", "bob", 2),  # spread 1
    Rating("q1", "d2", "ann", 0), Rating("q1", "d2", "bob", 2), Rating("q1", "d2", "cy", None),  # spread 2
    Rating("q1", "d1", "ann", 2), Rating("q1", "d1", "bob", 2), Rating("q1", "d1", "cy", 2),  # agree
    Rating("q1", "d3", "ann", 0), Rating("q1", "d3", "cy", 3), Rating("q1", "d3", ADJUDICATED, 1),  # settled
    Rating("q0", "d5", "ann", 1), Rating("q0", "d5", "llm:gpt", 3),  # spread 2
    Rating("q3", "d4", "cy", None),  # nobody can tell
]


def test_disagreements_widest_first_then_by_query_and_doc():
    found = disagreements(RATINGS)
    assert [(d.query_id, d.doc_id, d.spread) for d in found] == [
        ("q2", "d1", 3), ("q0", "d5", 2), ("q1", "d2", 2), ("q1", "d9", 1)]
    assert found[2].grades == {"ann": 0, "bob": 2}  # "can't tell" is no grade
    assert disagreements([Rating("q", "d", "a", 1), Rating("q", "d", "a", 2)]) == []  # the later rating replaces


def test_consensus_qrels_and_leaving_out_raters():
    assert consensus_qrels(RATINGS) == {
        "q2": {"d1": 2}, "q1": {"d1": 2, "d2": 1, "d3": 1, "d9": 2}, "q0": {"d5": 2}}
    assert list(consensus_qrels(RATINGS)["q1"]) == ["d1", "d2", "d3", "d9"]  # docs sorted, queries first-seen
    without_llm = consensus_qrels(RATINGS, exclude_raters=is_llm_rater)
    assert without_llm["q0"] == {"d5": 1}
    assert consensus_qrels(RATINGS, exclude_raters=("ann", "llm:gpt"))["q1"] == {"d1": 2, "d2": 2, "d3": 1, "d9": 2}
    assert "q0" not in consensus_qrels(RATINGS, exclude_raters=["ann", "llm:gpt"])


def test_agreement_equals_the_references_on_the_same_data():
    report = agreement(RATINGS)
    assert report.raters == ("ann", "bob", "cy", "llm:gpt")  # adjudication is not a rater
    assert report.labels == (0, 1, 2, 3)
    pairs = {p.raters: p for p in report.pairs}
    assert set(pairs) == {("ann", "bob"), ("ann", "cy"), ("ann", "llm:gpt"), ("bob", "cy")}  # bob/llm: nothing shared
    ann, bob = [3, 1, 0, 2], [0, 2, 2, 2]  # q2/d1, q1/d9, q1/d2, q1/d1
    assert pairs["ann", "bob"].n == 4
    assert pairs["ann", "bob"].cohen_kappa == pytest.approx(sklearn_kappa(ann, bob), abs=1e-12)
    assert pairs["ann", "bob"].weighted_kappa == pytest.approx(
        sklearn_kappa(ann, bob, GRADE_WEIGHTS, labels=[0, 1, 2, 3]), abs=1e-12)
    assert pairs["ann", "cy"].n == 2  # q1/d1 and q1/d3; d2 was "can't tell"
    # One document graded 1 and 3: chance predicts exactly that one disagreement, so κ = 1 − 1/1 = 0.
    assert pairs["ann", "llm:gpt"].cohen_kappa == 0.0
    # bob and cy share one document, both 2: no chance disagreement to compare with, κ undefined.
    assert (pairs["bob", "cy"].n, pairs["bob", "cy"].cohen_kappa, pairs["bob", "cy"].weighted_kappa) == (1, None, None)
    units = {("q2", "d1"): {"ann": 3, "bob": 0}, ("q1", "d9"): {"ann": 1, "bob": 2},
             ("q1", "d2"): {"ann": 0, "bob": 2}, ("q1", "d1"): {"ann": 2, "bob": 2, "cy": 2},
             ("q1", "d3"): {"ann": 0, "cy": 3}, ("q0", "d5"): {"ann": 1, "llm:gpt": 3}}
    assert report.krippendorff_alpha == pytest.approx(reference_alpha(units, "ordinal"), abs=1e-12)
    q1 = report.per_query["q1"]
    assert (q1.n_units, q1.n_disagreements) == (4, 3)  # d3 counts: adjudicated, but the raters differed
    q1_units = {u: g for u, g in units.items() if u[0] == "q1"}
    assert q1.alpha == pytest.approx(reference_alpha(q1_units, "ordinal"), abs=1e-12)
    assert list(report.per_query) == ["q2", "q1", "q0"]  # q3 has no grade at all


def test_weighted_kappa_uses_the_whole_grade_scale():
    # Nobody in the pair gave a 2, but another rater did: 1 against 3 is two steps, not one.
    ratings = [Rating("q", d, r, g) for d, r, g in [
        ("a", "x", 1), ("a", "y", 3), ("b", "x", 3), ("b", "y", 3), ("c", "x", 0), ("c", "y", 1),
        ("d", "x", 1), ("d", "y", 1), ("e", "z", 2), ("e", "x", 2)]]
    pair = next(p for p in agreement(ratings).pairs if p.raters == ("x", "y"))
    x, y = [1, 3, 0, 1], [3, 3, 1, 1]
    assert pair.weighted_kappa == pytest.approx(sklearn_kappa(x, y, "quadratic", labels=[0, 1, 2, 3]), abs=1e-12)
    assert pair.weighted_kappa != pytest.approx(sklearn_kappa(x, y, "quadratic"), abs=1e-6)


def test_agreement_json_shape():
    data = agreement(RATINGS).to_json()
    text = json.dumps(data, allow_nan=False)  # undefined figures are null, never NaN
    assert json.loads(text) == data
    assert set(data) >= {"pairs", "krippendorff_alpha"}
    assert isinstance(data["krippendorff_alpha"], float)
    assert data["pairs"][0] == {"raters": ["ann", "bob"], "cohen_kappa": data["pairs"][0]["cohen_kappa"],
                                "weighted_kappa": data["pairs"][0]["weighted_kappa"], "n": 4}
    assert all(set(p) == {"raters", "cohen_kappa", "weighted_kappa", "n"} for p in data["pairs"])
    assert (data["pairs"][2]["cohen_kappa"], data["pairs"][3]["cohen_kappa"]) == (0.0, None)
    assert set(data["per_query"]["q1"]) == {"alpha", "n_units", "n_disagreements"}
    empty = agreement([Rating("q", "d", "a", None), Rating("q", "d", ADJUDICATED, 2)]).to_json()
    assert (empty["pairs"], empty["krippendorff_alpha"], empty["raters"]) == ([], None, [])
    constant = agreement([Rating("q", "d", "a", 1), Rating("q", "d", "b", 1)])  # no variation: undefined
    assert constant.to_json()["pairs"] == [{"raters": ["a", "b"], "cohen_kappa": None, "weighted_kappa": None, "n": 1}]
    assert constant.krippendorff_alpha is None
    assert "undefined" in constant.summary()


@pytest.mark.parametrize("name", ["ann", "李雷", "Анна Петрова", "अमित", "llm:gpt-4o", "a.b_c-d:e@f/g+h", "x" * 64])
def test_valid_rater_names(name):
    assert validate_rater(name) == name


@pytest.mark.parametrize("name", ["", " ann", "ann ", "a,b", "a\tb", "a\nb", "x" * 65, "(x)", ADJUDICATED, 7])
def test_invalid_rater_names(name):
    with pytest.raises(RetrievalError, match="rater name"):
        validate_rater(name)


def test_adjudicated_only_where_allowed():
    assert validate_rater(ADJUDICATED, allow_reserved=True) == ADJUDICATED
    with pytest.raises(RetrievalError, match="reserved"):
        validate_rater(ADJUDICATED)


def test_llm_raters():
    assert is_llm_rater("llm:gpt-4o") and is_llm_rater("LLM:claude")
    assert not is_llm_rater("llm") and not is_llm_rater("ann") and not is_llm_rater("")
