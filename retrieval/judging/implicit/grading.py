"""A click model's scores as a judgment list: grades 0–3 by thresholds, a minimum of impressions.

`implicit_judgments(counts, model)` fits one model of `MODELS` to a click log's counts and returns
an `ImplicitList`: the model's position curve (`position_ctr` for ctr and coec, SRW's rank-aggregated
CTR; `examination` for pbm and sdbn), one judgment per (query, document) with its evidence, and
what was left unjudged, counted.

    grade = the number of thresholds t₁ < t₂ < t₃ with score ≥ t   (0 … 3)

Default thresholds per model (`DEFAULT_THRESHOLDS`): COEC is 1 where a document is clicked as
often as the average document at its position, so (0.5, 1, 2); CTR, PBM's attractiveness and
SDBN's a·s are probabilities, so (0.1, 0.3, 0.6) — change them for your traffic
(`--thresholds`). A pair with fewer than `min_impressions` impressions is left unjudged and
counted; with `known_docs`, a pair whose document is not in the collection is left out and counted.
Evidence: clicks and impressions are the events' counts for ctr and coec (SRW's), the sessions'
(shown, clicked) for pbm and sdbn; `position` is the lowest position the pair was seen at.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from retrieval.judging.implicit.coec import coec_scores, ctr_scores, position_ctr
from retrieval.judging.implicit.counts import ClickCounts
from retrieval.judging.implicit.pbm import fit_pbm
from retrieval.judging.implicit.sdbn import fit_sdbn
from retrieval.types import RetrievalError

MODELS = ("coec", "ctr", "pbm", "sdbn")
DEFAULT_THRESHOLDS = {"coec": (0.5, 1.0, 2.0), "ctr": (0.1, 0.3, 0.6), "pbm": (0.1, 0.3, 0.6),
                      "sdbn": (0.1, 0.3, 0.6)}


@dataclass(frozen=True)
class ImplicitJudgment:
    """One (query text, document) pair's score, grade and evidence."""

    query: str
    doc: str
    score: float
    grade: int
    clicks: int
    impressions: int
    position: int


@dataclass
class ImplicitList:
    """A click model's judgment list (module docstring)."""

    model: str
    curve_name: str  # "position_ctr" or "examination"
    curve: dict[int, float]
    thresholds: tuple[float, ...]
    judgments: list[ImplicitJudgment]
    skipped: dict = field(default_factory=dict)
    log: dict = field(default_factory=dict)

    @property
    def rater(self) -> str:
        """The judgment source's name, `implicit:<model>`."""
        from retrieval.judging.raters import IMPLICIT_PREFIX

        return f"{IMPLICIT_PREFIX}{self.model}"

    def qrels(self) -> dict[str, dict[str, int]]:
        """query text -> doc -> grade."""
        out: dict[str, dict[str, int]] = {}
        for j in self.judgments:
            out.setdefault(j.query, {})[j.doc] = j.grade
        return out

    def to_json(self) -> dict:
        """{"model", "position_ctr" or "examination": {rank: value}, "thresholds", "judgments":
        [{"query", "doc", "score", "grade", "clicks", "impressions", "position"}], "skipped", "log"}."""
        return {"model": self.model, self.curve_name: {str(r): v for r, v in self.curve.items()},
                "thresholds": list(self.thresholds),
                "judgments": [{"query": j.query, "doc": j.doc, "score": j.score, "grade": j.grade,
                               "clicks": j.clicks, "impressions": j.impressions, "position": j.position}
                              for j in self.judgments],
                "skipped": self.skipped, "log": self.log}


def validate_thresholds(thresholds: Sequence[float]) -> tuple[float, ...]:
    """Three increasing finite numbers ≥ 0, or a RetrievalError saying so."""
    values = tuple(float(t) for t in thresholds)
    if len(values) != 3 or any(not (v >= 0 and v < float("inf")) for v in values) \
            or not values[0] < values[1] < values[2]:
        raise RetrievalError(f"Thresholds are three increasing numbers ≥ 0 (grades 1, 2 and 3 from there), "
                             f"got {', '.join(map(str, thresholds)) or 'none'}")
    return values


def grade_of(score: float, thresholds: Sequence[float]) -> int:
    """The number of thresholds at or below `score` (0 … 3)."""
    return sum(1 for t in thresholds if score >= t)


def implicit_judgments(counts: ClickCounts, model: str, min_impressions: int = 1,
                       thresholds: Sequence[float] | None = None,
                       known_docs: Callable[[str], bool] | None = None) -> ImplicitList:
    """Fit `model` to the counts and grade its scores (module docstring)."""
    if model not in MODELS:
        raise RetrievalError(f"Unknown click model {model!r}: use one of {', '.join(MODELS)}")
    if not isinstance(min_impressions, int) or min_impressions < 1:
        raise RetrievalError(f"The minimum of impressions is a whole number ≥ 1, got {min_impressions!r}")
    thresholds = validate_thresholds(DEFAULT_THRESHOLDS[model] if thresholds is None else thresholds)
    lowest = {pair: values[2] for pair, values in counts.pairs.items()}
    if model in ("coec", "ctr"):
        scores = coec_scores(counts) if model == "coec" else ctr_scores(counts)
        curve_name, curve = "position_ctr", position_ctr(counts)
        evidence = {pair: (clicks, impressions) for pair, (clicks, impressions, _) in counts.pairs.items()}
    else:
        scores, curve = fit_pbm(counts) if model == "pbm" else fit_sdbn(counts)
        curve_name = "examination"
        evidence: dict[tuple[str, str], tuple[int, int]] = {}
        for (query, doc, _), (shown, clicked) in counts.serp.items():
            clicks, impressions = evidence.get((query, doc), (0, 0))
            evidence[query, doc] = (clicks + clicked, impressions + shown)
    judged, few, unknown = [], 0, 0
    for pair in sorted(scores):
        clicks, impressions = evidence.get(pair, (0, 0))
        if impressions < min_impressions:
            few += 1
        elif known_docs is not None and not known_docs(pair[1]):
            unknown += 1
        else:
            score = scores[pair]
            judged.append(ImplicitJudgment(pair[0], pair[1], score, grade_of(score, thresholds), clicks,
                                           impressions, lowest.get(pair, 0)))
    judged.sort(key=lambda j: (j.query, -j.score, j.doc))
    skipped = {"below_min_impressions": few, "unknown_docs": unknown, "beyond_max_rank": counts.beyond_max_rank}
    log = {"sessions": counts.sessions, "pairs": len(counts.pairs),
           "clicks_without_impression": counts.clicks_without_impression}
    return ImplicitList(model, curve_name, curve, thresholds, judged, skipped, log)
