"""Pure data for the pages: the final ranking of a search, table frames, score lists.

No Streamlit here, so everything is testable on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from retrieval.evaluation.compare import RankChange
from retrieval.limits import EXCERPT_CHARS, TITLE_CHARS
from retrieval.search.fusion.fuse import rrf_display_factor
from retrieval.search.workbench import CandidateSet, SearchResult
from retrieval.sources import label
from retrieval.text.highlight import Span, match_spans, snippet
from retrieval.types import FusedResult, FusionOutcome, RerankedResult

SNIPPET_WIDTH = 240


@dataclass
class ResultRow:
    """One shown result: its final rank, the fused result, its rerank (None: not reranked)."""

    rank: int
    fused: FusedResult
    reranked: RerankedResult | None
    document: dict[str, Any]

    @property
    def doc_id(self) -> str:
        return self.fused.doc_id

    @property
    def title(self) -> str:
        """The title, at most `limits.TITLE_CHARS` characters."""
        return (self.document.get("title") or "")[:TITLE_CHARS]

    @property
    def text(self) -> str:
        """The text as cards, tables and snippets show it: its first `limits.EXCERPT_CHARS`
        characters, so a 5 MB document does not make a 5 MB card on every rerun."""
        return self.full_text[:EXCERPT_CHARS]

    @property
    def full_text(self) -> str:
        """The whole text (shown on demand only)."""
        return self.document.get("text") or ""

    @property
    def cut(self) -> bool:
        """Whether `text` is an excerpt of a longer text."""
        return len(self.full_text) > EXCERPT_CHARS


def final_rows(result: SearchResult) -> list[ResultRow]:
    """What the page shows, best first, at most top-K.

    Without rerank: the thresholded fused results. With rerank: the reranked top-N, then (when
    top-N < top-K) the next first-stage results, not reranked, in fused order.
    """
    ranking = result.final_ranking()
    docs = result.candidates.rows(fused.doc_id for fused, _ in ranking)  # read already by a search
    return [ResultRow(i, fused, reranked, docs.get(fused.doc_id, {}))
            for i, (fused, reranked) in enumerate(ranking, start=1)]


def first_stage_rows(result: SearchResult) -> list[ResultRow]:
    """The fused (first-stage) results, before any rerank."""
    docs = result.candidates.rows(r.doc_id for r in result.outcome.results)
    return [ResultRow(r.rank, r, None, docs.get(r.doc_id, {})) for r in result.outcome.results]


def text_spans(row: ResultRow, terms: Iterable[str]) -> tuple[list[Span], list[Span]]:
    """Query-term spans in the title and in the text."""
    terms = frozenset(terms)
    return match_spans(row.title, terms), match_spans(row.text, terms)


@dataclass(frozen=True)
class BarSegment:
    """One source's part of a result's contribution bar: `fraction` of the bar's full width."""

    source: str
    contribution: float
    fraction: float


@dataclass(frozen=True)
class ContributionBars:
    """Per shown result its bar segments (every source of the config, in config order), on one
    scale: the largest total of one sign over the results is the full width (each half of it
    when `negative`, i.e. some contribution is below 0, as z-scores can be)."""

    segments: list[list[BarSegment]]
    negative: bool


def contribution_bars(rows: Sequence[ResultRow], sources: Sequence[str]) -> ContributionBars:
    parts = [[(s, row.fused.sources[s].contribution if s in row.fused.sources else 0.0) for s in sources]
             for row in rows]
    negative = any(c < 0 for row in parts for _, c in row)
    scale = max((max(sum(c for _, c in row if c > 0), -sum(c for _, c in row if c < 0)) for row in parts),
                default=0.0)
    return ContributionBars(
        [[BarSegment(s, c, abs(c) / scale if scale > 0 else 0.0) for s, c in row] for row in parts],
        negative)


def results_frame(rows: Sequence[ResultRow], sources: Sequence[str], terms: Iterable[str],
                  reranked: bool = False) -> pd.DataFrame:
    """The results table: rank, (rerank columns), id, scores, per-source rank/raw, title, snippet."""
    terms = frozenset(terms)
    records = []
    for row in rows:
        cut = snippet(row.text, terms, SNIPPET_WIDTH)
        record: dict[str, Any] = {"rank": row.rank}
        if reranked:
            record["first-stage rank"] = row.fused.rank
            record["change"] = rerank_label(row)
            record["rerank score"] = row.reranked.rerank_score if row.reranked else None
            record["final score"] = row.reranked.final_score if row.reranked else None
        record.update({
            "id": row.doc_id,
            "title": row.title,
            "snippet": cut.plain(len(row.text)),
            "fused score": row.fused.score,
            "display score": row.fused.display_score,
        })
        for source in sources:
            c = row.fused.sources.get(source)
            record[f"{label(source)} rank"] = c.rank if c else None
            record[f"{label(source)} score"] = c.raw_score if c else None
        records.append(record)
    frame = pd.DataFrame.from_records(records, columns=results_columns(sources, reranked))
    for column in frame.columns:
        if column.endswith("rank"):
            frame[column] = frame[column].astype("Int64")
        elif column.endswith("score"):
            frame[column] = frame[column].astype("float64")
    return frame


def results_columns(sources: Sequence[str], reranked: bool) -> list[str]:
    """The numbers first, the text last: rank, (rerank), id, the scores and each source's rank and
    score, then title and snippet, so the long text columns never push a source's columns out of
    a 1400-pixel window."""
    columns = ["rank"]
    if reranked:
        columns += ["first-stage rank", "change", "rerank score", "final score"]
    columns += ["id", "display score", "fused score"]
    for source in sources:
        columns += [f"{label(source)} rank", f"{label(source)} score"]
    return columns + ["title", "snippet"]


def rerank_label(row: ResultRow) -> str:
    if row.reranked is None:
        return "not reranked"
    return RankChange(row.doc_id, row.reranked.first_stage_rank, row.reranked.rank).label


def learned_explanation(parts: dict[str, float], shown: int = 5) -> str:
    """A learned ranker's score in words: 'learned score 0.812 = bias 0.100 + fused +0.500 +
    dense_rank +0.300 − bm25_raw −0.088 + 4 more +0.000' — the `shown` largest feature
    contributions by size, the rest summed (TreeSHAP: they add up to the score)."""
    bias = parts.get("bias", 0.0)
    features = sorted(((k, v) for k, v in parts.items() if k != "bias"), key=lambda kv: -abs(kv[1]))
    head, rest = features[:shown], features[shown:]
    terms = [f"{name} {value:+.3f}" for name, value in head]
    if rest:
        terms.append(f"{len(rest)} more {sum(v for _, v in rest):+.3f}")
    return f"learned score {sum(parts.values()):.3f} = bias {bias:.3f} · " + " · ".join(terms)


def rerank_explanation(reranked: RerankedResult) -> str:
    """'final 0.750 = 0.5 × fused 0.50 + 0.5 × rerank 1.00' (both min-max over the reranked top-N)."""
    lam = reranked.first_stage_weight
    return (f"final {reranked.final_score:.3f} = {lam:g} × fused {reranked.first_stage_norm:.2f} + "
            f"{1 - lam:g} × rerank {reranked.rerank_norm:.2f}")


def ranking_frame(rows: Sequence[ResultRow], changes: Sequence[RankChange] | None = None) -> pd.DataFrame:
    """A compact ranking for the Compare page: rank, change (vs the other list), id, title, scores."""
    change_of = {c.doc_id: c.label for c in changes or () if c.after is not None}
    records = []
    for row in rows:
        record: dict[str, Any] = {"rank": row.rank}
        if changes is not None:
            record["change"] = change_of.get(row.doc_id, "")
        record.update({"id": row.doc_id, "title": row.title or row.text[:80],
                       "display score": row.fused.display_score, "first-stage rank": row.fused.rank,
                       "rerank score": row.reranked.rerank_score if row.reranked else None})
        records.append(record)
    columns = ["rank"] + (["change"] if changes is not None else []) + [
        "id", "title", "display score", "first-stage rank", "rerank score"]
    return pd.DataFrame.from_records(records, columns=columns)


def removed_summary(candidates: CandidateSet, outcome: FusionOutcome, shown: int) -> str:
    """'37 candidates (BM25 20, vector 30) · min raw BM25 removed 3 · top-K removed 24 · 10 shown'."""
    per_source = ", ".join(f"{label(s)} {len(r.hits)}" for s, r in candidates.sources.items())
    parts = [f"{outcome.n_candidates} candidates ({per_source})" + ("" if candidates.query.strip()
                                                                   else ": no query text")]
    for name, count in outcome.removed.items():
        parts.append(f"{threshold_label(name)} removed {count}")
    parts.append(f"{shown} shown")
    return " · ".join(parts)


def threshold_label(name: str) -> str:
    if name.startswith("min raw "):
        return f"min raw {label(name[len('min raw '):])}"
    return {"top-k": "top-K"}.get(name, name)


def source_scores(candidates: CandidateSet, outcome: FusionOutcome, sources: Sequence[str]
                  ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per source: the raw scores of every candidate it returned, and the normalised scores
    fusion used (over the candidates that passed the source's minimum)."""
    raw = {s: [h.raw_score for h in candidates.sources[s].hits] if s in candidates.sources else []
           for s in sources}
    normalized: dict[str, list[float]] = {s: [] for s in sources}
    for result in outcome.ranked:
        for s in sources:
            c = result.sources.get(s)
            if c is not None and c.normalized is not None:
                normalized[s].append(c.normalized)
    return raw, normalized


def rank_points(outcome: FusionOutcome, documents: dict[str, dict[str, Any]], x_source: str = "bm25",
                y_source: str = "dense") -> list[dict[str, Any]]:
    """For the rank scatter: per fused candidate its rank in two sources (None: not used) and
    its fused rank."""
    points = []
    for r in outcome.ranked:
        cx, cy = r.sources.get(x_source), r.sources.get(y_source)
        points.append({
            "id": r.doc_id,
            "title": (documents.get(r.doc_id, {}).get("title") or "")[:60],
            "x": cx.rank if cx and cx.normalized is not None else None,
            "y": cy.rank if cy and cy.normalized is not None else None,
            "fused_rank": r.rank,
        })
    return points


def rrf_squeeze(k: float, weights: dict[str, float], ranks: tuple[int, int] = (1, 10)) -> dict[str, float]:
    """Raw and display RRF scores of a document ranked r in every source, for r in `ranks`."""
    total = sum(weights.values())
    first, last = ranks
    hi, lo = total / (k + first), total / (k + last)
    factor = rrf_display_factor(k, total) if total > 0 else 0.0
    return {"hi": hi, "lo": lo, "display_hi": hi * factor, "display_lo": lo * factor, "spread": 1 - lo / hi}
