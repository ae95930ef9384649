"""The fusion methods and the weighted-score combinations: one registry, every formula once.

A fusion method turns each source's kept candidates for a query into per-source values and the
values into one fused score per document. Everything that depends on the method — its formula,
which config fields it reads, how its candidates are prepared, how a fused score is displayed,
what its controls say, the sweep's grid points for it, the "why not?" trial grid of its
parameters, its label — is stated here, on its `FusionMethod`. The fusion engine (`fusion.py`),
the ranking plan (`plan.py`), the sweep, "why not?", the UI, the CLI and the MCP server read it
from `FUSION_METHODS`; adding a method is one entry here.

Methods (w_s: source weights; rank_s(d), x_s(d): d's rank and normalised score in source s; a
source that did not return d adds nothing):

    rrf        score(d) = Σ_s w_s / (k + rank_s(d))                   (Cormack et al. 2009)
    weighted   x_s = the config's normalisation of s's raw scores, combined by `combination`:
               arithmetic  score(d) = Σ_s w_s · x_s
               harmonic    score(d) = Σ_{S(d)} w_s / Σ_{S(d)} w_s / x_s
               geometric   score(d) = exp(Σ_{S(d)} w_s ln x_s / Σ_{S(d)} w_s)
               (S(d): the sources that returned d with x_s > 0; OpenSearch's three techniques)
    dbsf       x_s = (raw − (μ_s − 3σ_s)) / 6σ_s = 0.5 + z_s / 6, with μ_s and σ_s (population)
               over s's kept candidates for this query (Qdrant's distribution-based score
               fusion); 0.5 when σ_s = 0. score(d) = Σ_s w_s · x_s

The display score is the fused score as a share of the best one possible for this query,
display(d) = score(d) / best, so the best possible result reads 1.0 whatever the normalisation (an
l2-normalised top score among 100 candidates is about 0.18; as a share of the best it is 1.0) and
a minimum display score of 0.5 keeps the results with at least half of the best possible score.
The best is this query's candidates' (a filter that removes candidates changes the normalisations,
and so the shares, but a document every source ranks first still reads 1.0). With x_s* the top
normalised score of source s among this query's kept candidates:

    rrf         best = Σ_s w_s / (k + 1)            rank 1 in every configured source
    arithmetic  best = Σ_s w_s · max(x_s*, 0)        every source's top score (dbsf: the same)
    harmonic,   best = max_s x_s* (w_s > 0)          a weighted mean never exceeds its largest
    geometric                                        value: one source's top score alone

(best ≤ 0, which only z-scores of a single candidate give: score / Σ_s w_s.)

Contributions add up to the fused score: an additive method's are its terms (w/(k + rank),
w·x); a mean's split the score in proportion to w·x among the sources in S(d)
(`contribution_shares`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retrieval.search.fusion.normalize import normalize, z_score

if TYPE_CHECKING:
    from retrieval.search.config import SearchConfig

# (weight, normalised score) of each source that returned a document, in config order.
WeightedNorms = Sequence[tuple[float, float]]


# ---- the formulas -------------------------------------------------------------------------------
def rrf_term(rank: int, k: float, weight: float = 1.0) -> float:
    """One source's RRF contribution: w / (k + rank)."""
    return weight / (k + rank)


MIN_DISPLAY_BEST = 1e-300  # below it 1 / best (up to 1e300) times a fused score could overflow


def rrf_display_factor(k: float, total_weight: float) -> float:
    """(k + 1) / Σw: multiplying a fused RRF score by this makes rank 1 everywhere read 1.0."""
    return (k + 1) / total_weight


def arithmetic_score(pairs: WeightedNorms) -> float:
    """Σ w·x, added in the given order (a missing source simply has no pair)."""
    score = 0.0
    for weight, norm in pairs:
        score += weight * norm
    return score


def harmonic_score(pairs: WeightedNorms) -> float:
    """Σw / Σ(w/x) over the pairs with x > 0; 0 when no pair with x > 0 has a weight > 0."""
    weight_sum = 0.0
    inverse_sum = 0.0
    for weight, norm in pairs:
        if norm > 0:
            weight_sum += weight
            inverse_sum += weight / norm
    return weight_sum / inverse_sum if inverse_sum > 0 else 0.0


def geometric_score(pairs: WeightedNorms) -> float:
    """exp(Σ w·ln x / Σw) over the pairs with x > 0; 0 when their weights sum to 0."""
    weight_sum = 0.0
    log_sum = 0.0
    for weight, norm in pairs:
        if norm > 0:
            weight_sum += weight
            log_sum += weight * math.log(norm)
    return math.exp(log_sum / weight_sum) if weight_sum > 0 else 0.0


def contribution_shares(pairs: WeightedNorms, score: float) -> list[float]:
    """Each pair's part of a mean's `score`, summing to it: score · w·x / Σ w·x over the pairs
    with x > 0 (0 for the others, and for all when that sum is 0, where the score is 0 too)."""
    total = 0.0
    for weight, norm in pairs:
        if norm > 0:
            total += weight * norm
    if total <= 0:
        return [0.0] * len(pairs)
    # The share (≤ 1) first: score · w · x could underflow to 0 for tiny scores.
    return [score * (weight * norm / total) if norm > 0 else 0.0 for weight, norm in pairs]


def dbsf_normalize(scores: Sequence[float]) -> list[float]:
    """Distribution-based normalisation: (x − (μ − 3σ)) / (6σ) = 0.5 + z/6 (z: `normalize.z_score`,
    population σ); every score 0.5 when they are all equal. Not clipped: a score beyond μ ± 3σ
    maps outside [0, 1], as in Qdrant."""
    return [0.5 + z / 6.0 for z in z_score(scores)]


# ---- combinations (weighted fusion) -----------------------------------------------------------
@dataclass(frozen=True)
class Combination:
    """How a document's weighted, normalised scores become its fused score."""

    name: str
    label: str
    help: str
    # Additive: score = Σ w·x, added in config order (a document's contributions are its terms);
    # else `score(pairs)` is a weighted mean over the sources with x > 0.
    additive: bool
    score: Callable[[WeightedNorms], float]
    # The best fused score possible from each source's top normalised score (w, x*): the display
    # score's denominator (see the module docstring).
    best: Callable[[WeightedNorms], float]

    def enters(self, norm: float) -> bool:
        """Whether a returned source's normalised score takes part in the document's score."""
        return self.additive or norm > 0

    def shares(self, pairs: WeightedNorms, score: float) -> list[float]:
        """Each pair's contribution to `score` (they add up to it)."""
        if self.additive:
            return [weight * norm for weight, norm in pairs]
        return contribution_shares(pairs, score)


def best_sum(tops: WeightedNorms) -> float:
    """Σ w · x* over the sources whose top x* is positive: a document in each of those at its top
    (one missing from a source whose scores are all negative gains by it)."""
    return arithmetic_score([(weight, top) for weight, top in tops if top > 0])


def best_mean(tops: WeightedNorms) -> float:
    """max x* over the weighted sources with a positive top: a weighted mean of values each at
    most its source's top is at most the largest of them, reached by a document only that source
    returned."""
    return max((top for weight, top in tops if weight > 0 and top > 0), default=0.0)


COMBINATIONS: dict[str, Combination] = {c.name: c for c in (
    Combination("arithmetic", "arithmetic mean",
                "Arithmetic: Σ w·x (a source that did not return the document adds 0).",
                True, arithmetic_score, best_sum),
    Combination("harmonic", "harmonic mean",
                "Harmonic: Σw / Σ(w/x), pulled down by the weakest source.",
                False, harmonic_score, best_mean),
    Combination("geometric", "geometric mean",
                "Geometric: exp(Σ w·ln x / Σw), rewards agreement.",
                False, geometric_score, best_mean),
)}


# ---- fusion methods ---------------------------------------------------------------------------
@dataclass(frozen=True)
class MethodParam:
    """A config field a method reads (besides the weights), with what its control and the
    "why not?" trials need."""

    field: str  # the SearchConfig field
    label: str
    trial_grid: tuple[float, ...] = ()  # values "why not?" tries (the Search page's slider steps)


@dataclass(frozen=True)
class FusionMethod:
    """One fusion method; see the module docstring for the formulas."""

    name: str
    label: str  # what a picker shows: short enough for the sidebar (about 28 characters)
    short: str  # in a sentence or a config's title: 'RRF', 'weighted sum'
    help: str  # its formula in a sentence (the controls' help)
    display_help: str  # how its display score is scaled, in a sentence
    params: tuple[MethodParam, ...]
    # Parameter points the sweep's default grid tries, each × the weight split.
    sweep_points: tuple[dict[str, Any], ...]
    # Terms from ranks (RRF) rather than normalised scores.
    by_rank: bool = False
    # The normalisation of this method's own (None: the config's `normalization`).
    normalizer: Callable[[Sequence[float]], list[float]] | None = field(default=None, compare=False)
    normalizer_name: str = ""

    @property
    def param_fields(self) -> tuple[str, ...]:
        return tuple(p.field for p in self.params)

    def uses(self, field_name: str) -> bool:
        """Whether the method reads config field `field_name` (rrf_k, normalization, combination)."""
        return field_name in self.param_fields

    def preparation(self, config: SearchConfig) -> str | None:
        """How a source's kept candidates are prepared for the fused score: the name of the
        normalisation applied, or None when only ranks count (RRF)."""
        if self.by_rank:
            return None
        return self.normalizer_name or config.normalization

    def normalize(self, scores: Sequence[float], config: SearchConfig) -> list[float]:
        """The normalised scores a result shows for one source (for RRF too: its config's
        normalisation, shown though ranks decide)."""
        if self.normalizer is not None:
            return self.normalizer(scores)
        return normalize(scores, config.normalization)

    def combination(self, config: SearchConfig) -> Combination:
        """The combination of a score-based method (RRF's terms add, like arithmetic's)."""
        return COMBINATIONS[config.combination] if self.uses("combination") else COMBINATIONS["arithmetic"]

    def additive(self, config: SearchConfig) -> bool:
        """Whether the fused score is a sum of per-source terms (`term`)."""
        return self.by_rank or self.combination(config).additive

    def term(self, weight: float, rank: int, norm: float | None, config: SearchConfig) -> float:
        """An additive method's term of one source for one document."""
        return rrf_term(rank, config.rrf_k, weight) if self.by_rank else weight * norm

    def display_factor(self, config: SearchConfig, top_norms: Mapping[str, float] | None = None) -> float:
        """display score = fused score × this = 1 / score(d*) (see the module docstring);
        `top_norms`: each source's top normalised score for the query (the sources that returned
        candidates), which a score method needs (without them: 1 / Σw)."""
        total = sum(config.weights.values())
        if self.by_rank:
            return rrf_display_factor(config.rrf_k, total)
        if top_norms:
            best = self.combination(config).best([(w, top_norms[s]) for s, w in config.weights.items()
                                                  if s in top_norms])
            # a best score so small that score / best could overflow (near the smallest float, e.g.
            # a subnormal raw score) falls back as 0 does: display scores stay finite
            if best > MIN_DISPLAY_BEST:
                return 1.0 / best
        return 1.0 / total

    def title(self, config: SearchConfig) -> str:
        """The method and its parameters for people: 'RRF k=60', 'weighted sum (l2, arithmetic)', 'DBSF'."""
        k = [f"k={config.rrf_k:g}"] if self.uses("rrf_k") else []
        rest = [str(getattr(config, p.field)) for p in self.params if p.field != "rrf_k"]
        return " ".join([self.short, *k]) + (f" ({', '.join(rest)})" if rest else "")

    def describe(self, config: SearchConfig) -> str:
        """The method and its parameters as a label: 'rrf k=60', 'weighted l2 arithmetic', 'dbsf'."""
        parts = [self.name]
        for param in self.params:
            value = getattr(config, param.field)
            parts.append(f"k={value:g}" if param.field == "rrf_k" else str(value))
        return " ".join(parts)


# The Search page's RRF k slider steps: what "why not?" tries for k.
RRF_K_GRID = (1, 2, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 100, 120, 150, 200)

# In the sweep's grid order (weighted first, then RRF, then DBSF): its rows keep that order on ties.
FUSION_METHODS: dict[str, FusionMethod] = {m.name: m for m in (
    FusionMethod(
        "weighted", "Weighted sum (normalised)", "weighted sum",
        "Weighted sum adds w × normalised score: the score values count, so the normalisation matters.",
        "weighted sum: ÷ Σw × each source's top normalised score (harmonic and geometric means: ÷ the "
        "largest top normalised score)",
        (MethodParam("normalization", "normalisation"), MethodParam("combination", "combination")),
        tuple({"normalization": n, "combination": c} for n in ("minmax", "l2")
              for c in ("arithmetic", "harmonic", "geometric")),
    ),
    FusionMethod(
        "rrf", "RRF (reciprocal rank fusion)", "RRF",
        "RRF adds w/(k + rank) per source: only ranks count, raw score values are ignored.",
        "RRF: × (k + 1)/Σw (rank 1 in every source)",
        (MethodParam("rrf_k", "RRF k", tuple(float(k) for k in RRF_K_GRID)),),
        tuple({"rrf_k": float(k)} for k in (1, 5, 10, 20, 60)),
        by_rank=True,
    ),
    FusionMethod(
        "dbsf", "DBSF (distribution-based)", "DBSF",
        "DBSF (distribution-based score fusion) normalises each source's scores by this query's candidates, "
        "(x − (mean − 3σ)) / 6σ, "
        "then adds w × that: robust to one outlying score, unlike min-max.",
        "DBSF: ÷ Σw × each source's top normalised score",
        (),
        ({},),
        normalizer=dbsf_normalize, normalizer_name="dbsf",
    ),
)}


def method_of(config: SearchConfig) -> FusionMethod:
    """The config's fusion method (`SearchConfig.validate` checks the name)."""
    return FUSION_METHODS[config.fusion]


def display_factor(config: SearchConfig, top_norms: Mapping[str, float] | None = None) -> float:
    """display score = fused score × this, for the config's method (`FusionMethod.display_factor`)."""
    return method_of(config).display_factor(config, top_norms)


def method_params() -> tuple[str, ...]:
    """Every config field some method reads: the controls a method that does not read one greys out."""
    return tuple(dict.fromkeys(f for m in FUSION_METHODS.values() for f in m.param_fields))


def methods_help() -> str:
    """One sentence per method: the fusion picker's help."""
    return " ".join(m.help for m in FUSION_METHODS.values())


def display_help() -> str:
    """How each method scales its display score: the display-threshold help."""
    return "; ".join(m.display_help for m in FUSION_METHODS.values())


def labels() -> Mapping[str, str]:
    return {name: m.label for name, m in FUSION_METHODS.items()}
