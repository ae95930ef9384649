"""Drawing helpers shared by the pages (Streamlit calls over the pure data in `results`)."""

from __future__ import annotations

import hashlib
import html
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from retrieval.evaluation.compare import RankChange
from retrieval.limits import EXCERPT_CHARS
from retrieval.search.workbench import SearchResult
from retrieval.sources import label
from retrieval.text.highlight import escape_markdown, query_terms, snippet, to_html
from ui.search import charts, results
from ui.search.results import ResultRow

_BULLET = re.compile(r"^(\s*-\s+)(.*)$")
_MUTED = "color:#64748b"
# A <pre> draws in the browser's monospace, which has no Chinese glyphs on a machine without a
# CJK font (tofu): the theme's bundled face first (`.streamlit/config.toml`, `workbench-cjk`; its
# unicode-range is CJK only), then Streamlit's code font for the rest.
_PRE_FONT = "font-family:workbench-cjk,'Source Code Pro',monospace"  # single quotes: inside style="…"

log = logging.getLogger(__name__)


def markdown_safe(message: str) -> str:
    """A message with user text in it, made safe for a Markdown element: each line escaped,
    '  - item' bullet lines kept as a list."""
    lines = []
    for line in str(message).splitlines():
        match = _BULLET.match(line)
        lines.append(f"- {escape_markdown(match.group(2))}" if match else escape_markdown(line))
    return "\n".join(lines)


def bold(text: str) -> str:
    """User text in bold: the text escaped (`markdown_safe`), the asterisks around it kept
    (`markdown_safe(f"**{text}**")` would escape them too and show them)."""
    return f"**{markdown_safe(' '.join(str(text).split()))}**" if str(text).strip() else ""


def labelled(label: str, text: str) -> str:
    """'**Label:** user text': our label in bold, the user's text escaped."""
    return f"**{label}** {markdown_safe(text)}"


def show_error(error: BaseException | str) -> None:
    """A core error as a readable message. RetrievalError text is written for users; anything
    else is unexpected and says so on the page, with its traceback in the log only."""
    from retrieval.types import RetrievalError

    if isinstance(error, RetrievalError):
        log.info("shown to the user: %s", error)
    elif isinstance(error, BaseException):
        log.error("unexpected error shown to the user", exc_info=error)
        error = f"Unexpected error ({type(error).__name__}): {error}"
    st.error(markdown_safe(str(error)), icon=":material/error:")


def search_summary(result: SearchResult, rows: Sequence[ResultRow]) -> None:
    """How many candidates each threshold removed, fusion notes as warnings, rerank and cache info."""
    st.caption(markdown_safe(results.removed_summary(result.candidates, result.outcome, len(rows))))
    for note in result.outcome.notes:
        st.warning(markdown_safe(note))
    if result.reranked is not None:
        st.info(markdown_safe(
            f"Reranked the top {len(result.reranked)} fused results with reranker "
            f"'{result.reranker_name}': {result.reranker_kind}. Order: final = λ·norm(fused) + (1 − λ)·norm(rerank) "
            f"with λ = {result.config.rerank_lambda:g}, both min-max over the reranked results."),
            icon=":material/swap_vert:")
    served = " · ".join(f"{label(s)}: {r.backend}" for s, r in result.candidates.sources.items() if r.backend)
    if served:
        st.caption(markdown_safe(f"Served by {served}"))
    timings = ", ".join(f"{escape_markdown(label(s))} {t * 1000:.0f} ms" for s, t in result.candidates.seconds.items())
    st.caption("Candidates from cache: only fusion ran." if result.candidates.from_cache
               else f"Candidates retrieved ({timings}); later slider moves re-fuse them from cache.")


def results_table(result: SearchResult, rows: Sequence[ResultRow]) -> None:
    sources = list(result.config.sources)
    reranked = result.reranked is not None
    frame = results.results_frame(rows, sources, query_terms(result.query), reranked)
    config = {
        "rank": st.column_config.NumberColumn(help="Final position (after rerank when it is on)"),
        "snippet": st.column_config.TextColumn(width="large", help="The best-matching window of the text"),
        "fused score": st.column_config.NumberColumn(format="%.5f", help="The score as the fusion formula gives it"),
        "display score": st.column_config.NumberColumn(
            format="%.4f", help="The fused score as a share of the best possible for this query: 1.0 is a "
                                "document every source ranks first"),
        "rerank score": st.column_config.NumberColumn(format="%.4f", help="The reranker's score"),
    }
    for source in sources:
        name = escape_markdown(label(source))  # tooltips are Markdown; a source name may come from a link
        config[f"{label(source)} rank"] = st.column_config.NumberColumn(help=f"Rank in {name}'s candidates")
        config[f"{label(source)} score"] = st.column_config.NumberColumn(
            format="%.4f", help=f"{name}'s raw score (BM25 score or cosine similarity)")
    # A source that did not return a document has no rank or score there: "—", the column stays numeric (sortable).
    st.dataframe(frame, hide_index=True, column_config=config, width="stretch", placeholder="—")


def result_cards(result: SearchResult, rows: Sequence[ResultRow],
                 per_result: Callable[[str], None] | None = None) -> None:
    """Per result one card: rank, id, display score, a stacked bar of each source's contribution,
    the highlighted title and snippet, and a collapsed `<details>` with the full text, the
    per-source explanation (with each source's own `detail`), tokens and metadata.

    One `st.html` element per result, and no chart: every element is re-sent to the browser and
    redrawn on every rerun, and a slider move must be drawn within 300 ms (docs/experiments/ui-latency.md).
    User text is escaped; only our own tags remain.

    `per_result(doc_id)`: the per-result hook, drawn right under each card (e.g. the judging
    widget of ui/judging/rating.py); None draws nothing.

    A card holds at most the first `limits.EXCERPT_CHARS` characters of a text (highlights and
    snippet within them); a longer document gets a "Full text" button under its card that sends
    the rest on click only."""
    sources = list(result.config.sources)
    bars = results.contribution_bars(rows, sources)
    terms = query_terms(result.query)
    st.html(bar_legend(sources, bars.negative))
    for row, segments in zip(rows, bars.segments, strict=True):
        title_spans, text_spans = results.text_spans(row, terms)
        st.html(card_html(row, segments, bars.negative, title_spans, text_spans, result.reranked is not None))
        if row.cut:
            full_text_button(row.doc_id, row.full_text)
        if per_result is not None:
            per_result(row.doc_id)


def card_html(row: ResultRow, segments: Sequence[results.BarSegment], two_sided: bool, title_spans, text_spans,
              reranked: bool) -> str:
    """One result card as escaped HTML (see `result_cards`)."""
    cut = snippet(row.text, [], results.SNIPPET_WIDTH, spans=text_spans)
    snippet_body = ("…" if cut.cut_left else "") + to_html(cut.text, cut.spans) + (
        "…" if cut.end < len(row.full_text) else "")
    extra = f" · {html.escape(results.rerank_label(row))}" if reranked else ""
    if row.reranked is not None:
        extra += f" · {html.escape(results.rerank_explanation(row.reranked))}"
    if row.fused.learned:
        tip = "each feature's contribution to the learned ranker's score (TreeSHAP); the bar shows the fusion"
        said = results.learned_explanation(row.fused.learned)
        extra += f'<br><span title="{html.escape(tip)}">{html.escape(said)}</span>'
    if row.fused.rules:  # what query rules did to it ("UP 1.5 by rule 7: category=guide")
        extra += f"<br>rules: {html.escape('; '.join(row.fused.rules))}"
    return (
        f'<div class="wb-card"><b>#{row.rank}</b> <span style="{_MUTED}">{html.escape(row.doc_id)}'
        f" · display {row.fused.display_score:.3f}{extra}</span>"
        f"{bar_html(segments, two_sided)}"
        f"<b>{to_html(row.title, title_spans)}</b> {snippet_body}"
        f'<details class="wb-details"><summary>Details of #{row.rank} ({html.escape(row.doc_id)})</summary>'
        f"{details_html(row, title_spans, text_spans)}</details></div>"
    )


def bar_html(segments: Sequence[results.BarSegment], two_sided: bool) -> str:
    """A stacked bar: one coloured part per source, as wide as its share of the largest fused
    score shown. `two_sided` (some contribution is negative, e.g. z-scores): negative parts
    grow left of a middle axis, positive parts right of it."""
    def part(index: int, segment: results.BarSegment) -> str:
        verb = "adds" if segment.contribution >= 0 else "subtracts"
        tip = f"{label(segment.source)} {verb} {abs(segment.contribution):.5g}"
        return (f'<div class="wb-bar-part" data-source="{html.escape(segment.source)}" title="{html.escape(tip)}" '
                f'style="width:{segment.fraction * 100:.2f}%;background:{charts.color(segment.source, index)}"></div>')

    positive = "".join(part(i, s) for i, s in enumerate(segments) if s.contribution > 0)
    numbers = " + ".join(f"{label(s.source)} {s.contribution:.4g}" for s in segments)
    if two_sided:
        negative = "".join(part(i, s) for i, s in reversed(list(enumerate(segments))) if s.contribution < 0)
        bar = (f'<div style="display:flex;width:50%;justify-content:flex-end;border-right:1px solid #334155">'
               f'{negative}</div><div style="display:flex;width:50%">{positive}</div>')
    else:
        bar = positive
    return (f'<div class="wb-bar" style="display:flex;align-items:center;gap:8px;margin:2px 0">'
            f'<div style="display:flex;width:240px;height:10px;background:#f1f5f9">{bar}</div>'
            f'<span style="{_MUTED};font-size:0.8em">{html.escape(numbers)}</span></div>')


def bar_legend(sources: Sequence[str], two_sided: bool) -> str:
    keys = "".join(
        f'<span style="display:inline-block;width:10px;height:10px;background:{charts.color(s, i)};'
        f'margin:0 4px 0 12px"></span>{html.escape(label(s))}' for i, s in enumerate(sources))
    scale = ("negative contributions left of the axis, positive right" if two_sided
             else "the bar's full width is the highest fused score shown")
    return f'<div style="{_MUTED}">Bars: what each source contributed to the fused score ({scale}).{keys}</div>'


def details_html(row: ResultRow, title_spans, text_spans) -> str:
    """The text (its first `limits.EXCERPT_CHARS` characters, highlighted), the per-source
    explanation and each source's own detail, tokens and metadata (each as bounded), and the chunk
    position, as one escaped HTML block."""
    frame = explain_frame(row)
    cells = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in record) + "</tr>"
        for record in frame.itertuples(index=False)
    )
    metadata = bounded(json.dumps(row.document.get("metadata") or {}, ensure_ascii=False, indent=2))
    tokens = bounded(row.document.get("tokens") or "")
    cut_note = (f'<div style="{_MUTED}">The first {EXCERPT_CHARS:,} of {len(row.full_text):,} characters: '
                "“Full text” under the card shows the rest.</div>") if row.cut else ""
    chunk = {k: row.document.get(k) for k in ("parent_id", "chunk_index", "start_line", "end_line")}
    chunk_line = (f'<div style="{_MUTED}">Chunk: ' + html.escape(", ".join(f"{k} {v}" for k, v in chunk.items()))
                  + "</div>") if any(v is not None for v in chunk.values()) else ""
    return (
        f"<div><b>{to_html(row.title, title_spans)}</b></div>"
        f'<div style="white-space:pre-wrap">{to_html(row.text, text_spans)}{"…" if row.cut else ""}</div>{cut_note}'
        f'<table class="wb-explain"><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>'
        f"{source_details_html(row)}"
        f'<div style="{_MUTED}">Tokens, as BM25 indexes them</div>'
        f'<pre class="wb-tokens" style="white-space:pre-wrap;{_PRE_FONT}">{html.escape(tokens)}</pre>'
        f'<div style="{_MUTED}">Metadata</div>'
        f'<pre class="wb-metadata" style="{_PRE_FONT}">{html.escape(metadata)}</pre>{chunk_line}'
    )


def bounded(text: str, limit: int = EXCERPT_CHARS) -> str:
    """At most `limit` characters of `text`, with '…' when cut (not yet escaped)."""
    return text if len(text) <= limit else text[:limit] + "…"


def full_text_button(doc_id: str, text: str, prefix: str = "fulltext") -> None:
    """For a text longer than the excerpt a card shows: a button that shows all of it, as plain
    text in a scrolling box, in the run its click starts only (so the megabytes are sent once,
    not on every rerun)."""
    key = f"{prefix}_{hashlib.sha1(doc_id.encode()).hexdigest()[:16]}"
    if st.button(f"Full text ({len(text):,} characters)", key=key,
                 help="Shows the whole text of this document once; the card holds only its first "
                      f"{EXCERPT_CHARS:,} characters (WORKBENCH_EXCERPT_CHARS)."):
        with st.container(height=400):
            st.text(text)


def source_details_html(row: ResultRow) -> str:
    """Each source's own explanation of its score (`SourceContribution.detail`), one table per
    source that gave one, labelled by the source; keys and values escaped."""
    parts = []
    for source, contribution in row.fused.sources.items():
        if not contribution.detail:
            continue
        body = "".join(f"<tr><th>{html.escape(str(key))}</th><td>{html.escape(detail_text(value))}</td></tr>"
                       for key, value in contribution.detail.items())
        parts.append(f'<div style="{_MUTED}">{html.escape(label(source))}: its own explanation</div>'
                     f'<table class="wb-source-detail" data-source="{html.escape(source)}">'
                     f'<tbody>{body}</tbody></table>')
    return "".join(parts)


def detail_text(value: Any) -> str:
    """A detail value as plain text: numbers as in the tables, lists joined by ', ', mappings as
    'key: value' pairs joined by '; ' (not yet escaped)."""
    if isinstance(value, Mapping):
        return "; ".join(f"{key}: {detail_text(item)}" for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(detail_text(item) for item in value)
    return _cell(value)


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def explain_frame(row: ResultRow) -> pd.DataFrame:
    """Per source: rank, raw, normalised, contribution and the fusion note."""
    return pd.DataFrame([
        {"source": label(s), "rank": c.rank, "raw score": c.raw_score, "normalised": c.normalized,
         "contribution": c.contribution, "note": c.note}
        for s, c in row.fused.sources.items()
    ])


def ranking(title: str, rows: Sequence[ResultRow], changes: Sequence[RankChange] | None = None) -> None:
    """One ranking of the Compare page, with change labels against the other ranking and the
    documents it dropped."""
    st.markdown(f"**{title}**")
    frame = results.ranking_frame(rows, changes)
    st.dataframe(frame, hide_index=True, width="stretch", placeholder="—", column_config={
        "change": st.column_config.TextColumn(help="▲ moved up, ▼ moved down, new: not in the other list"),
        "display score": st.column_config.NumberColumn(format="%.4f"),
        "rerank score": st.column_config.NumberColumn(format="%.4f"),
    })
    dropped = [c for c in changes or () if c.status == "dropped"]
    if dropped:
        st.caption(markdown_safe("Dropped: " + ", ".join(f"{c.doc_id} (was #{c.before})" for c in dropped)))


def comparison(before: Sequence[ResultRow], after: Sequence[ResultRow], titles: tuple[str, str], k: int,
               columns: Sequence | None = None, summary=None) -> None:
    """Two rankings side by side with rank-change labels on the second, overlap@k and RBO.

    `columns`: the two columns to draw the rankings in (default: two new ones); `summary`: the
    container for the metrics (default: here, above the rankings)."""
    from retrieval.evaluation.compare import overlap_at_k, rank_changes, rbo

    a_ids, b_ids = [r.doc_id for r in before], [r.doc_id for r in after]
    changes = rank_changes(a_ids, b_ids)
    k = max(1, k)
    m1, m2, m3 = (summary if summary is not None else st).columns(3)
    m1.metric(f"overlap@{k} (Jaccard)", f"{overlap_at_k(a_ids, b_ids, k):.3f}",
              help=f"|A ∩ B| / |A ∪ B| over the two top-{k} sets: 1 = same documents, 0 = none shared. "
                   "Ignores order.")
    m2.metric("rank-biased overlap (p = 0.9)", f"{rbo(a_ids, b_ids, 0.9):.3f}",
              help="RBO_ext (Webber et al. 2010): agreement of the two rankings at every depth, weighted "
                   "towards the top (p = 0.9 puts ~86% of the weight on the first 10 ranks). 1 = identical order.")
    moved = sum(1 for c in changes if c.status in ("up", "down"))
    new = sum(1 for c in changes if c.status == "new")
    m3.metric("moved / new / dropped", f"{moved} / {new} / {len(changes) - len(b_ids)}",
              help="Documents of the second ranking that moved, that are not in the first, "
                   "and documents of the first that the second lacks.")
    left, right = columns if columns is not None else st.columns(2)
    with left:
        ranking(titles[0], before)
    with right:
        ranking(titles[1], after, changes)


def distributions(result: SearchResult) -> None:
    """Score histograms per source (with the thresholds) and the fused display-score histogram."""
    config = result.config
    sources = list(config.sources)
    raw, normalized = results.source_scores(result.candidates, result.outcome, sources)
    thresholds = {s: config.min_raw.get(s) for s in sources}
    st.plotly_chart(charts.score_histograms(raw, normalized, thresholds, config.normalization), width="stretch")
    display = [r.display_score for r in result.outcome.ranked]
    thresholds = {"min display": config.min_display_score,
                  "min fused": None if config.min_score is None else config.min_score * min_fused_factor(result)}
    st.plotly_chart(charts.fused_histogram(display, thresholds), width="stretch")
    st.caption(markdown_safe(results.removed_summary(result.candidates, result.outcome,
                                                     len(result.outcome.results))))




def min_fused_factor(result: SearchResult) -> float:
    """display score = fused score × this for `result`'s results: the factor the plan used for
    this query, so the minimum fused score's line sits where the core's cut is (tests/ui/test_charts.py)."""
    return result.outcome.display_factor


def rrf_explainer(ks: Sequence[int], config) -> None:
    """RRF term against rank for several k, and why k = 60 squeezes raw scores into 0.014–0.016."""
    st.plotly_chart(charts.rrf_curves(ks, max(10, min(config.depth, 200)), config.rrf_k), width="stretch")
    s60 = results.rrf_squeeze(60, {"w": 1.0})
    cur = results.rrf_squeeze(config.rrf_k, config.weights)
    st.markdown(
        f"At **k = 60** a source adds 1/(60 + rank): **{s60['hi']:.4f}** at rank 1 and **{s60['lo']:.4f}** at "
        f"rank 10, only {s60['spread']:.0%} apart. With weights summing to 1, a document ranked alike in both "
        f"sources scores the same, so every top-10 fused score lies in **{s60['lo']:.3f}–{s60['hi']:.3f}** "
        "(the 0.014–0.016 people often see from RRF). Nothing is wrong with the ranking; the numbers just read badly. "
        "The display score multiplies by (k + 1)/Σw, so rank 1 everywhere reads 1.0.  \n"
        f"With the current **k = {config.rrf_k:g}** and Σw = {sum(config.weights.values()):g}: raw "
        f"{cur['lo']:.4f}–{cur['hi']:.4f}, display {cur['display_lo']:.3f}–{cur['display_hi']:.3f} "
        f"for ranks 10–1 (a {cur['spread']:.0%} spread)."
    )


def rank_scatter(result: SearchResult) -> None:
    documents = result.candidates.rows(r.doc_id for r in result.outcome.ranked)  # every point's title
    points = results.rank_points(result.outcome, documents)
    st.plotly_chart(charts.rank_scatter(points, result.config.depth), width="stretch")
