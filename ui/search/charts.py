"""Plotly figure builders: pure functions of plain data (no Streamlit), so they can be tested.

User text that ends up in a figure (ids, titles, source names: a link may name any source) goes
through `plot_text` (labels, titles, legends, hover text) or `template_text` (inside a
hovertemplate): plotly renders a subset of HTML tags (<b>, <a href>, <br> …) in all of them.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from retrieval.search.fusion.fuse import rrf_term
from retrieval.sources import label

SOURCE_COLORS = {"bm25": "#d97706", "dense": "#2563eb"}
THRESHOLD_COLOR = "#dc2626"
_FALLBACK_COLORS = ("#059669", "#7c3aed", "#db2777", "#0891b2")


def plot_text(value: Any) -> str:
    """User text made literal for a plotly label, title, legend entry or hover text: HTML-escaped
    (plotly shows the entities as the characters)."""
    return html.escape(str(value))


def template_text(value: Any) -> str:
    """`plot_text` for inside a hovertemplate or texttemplate: '%' becomes an entity too, so a
    name holding '%{y}' is not read as a placeholder."""
    return plot_text(value).replace("%", "&#37;")


def color(source: str, index: int = 0) -> str:
    return SOURCE_COLORS.get(source, _FALLBACK_COLORS[index % len(_FALLBACK_COLORS)])


def _layout(fig: go.Figure, height: int, **kwargs: Any) -> go.Figure:
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10), **kwargs)
    return fig


def score_histograms(raw: Mapping[str, Sequence[float]], normalized: Mapping[str, Sequence[float]],
                     thresholds: Mapping[str, float | None], normalization: str, bins: int = 30) -> go.Figure:
    """Per source (columns): raw scores (top row, with the source's minimum as a vertical line)
    and normalised scores (bottom row)."""
    sources = list(raw)
    titles = [f"{plot_text(label(s))} raw ({len(raw[s])})" for s in sources]
    titles += [f"{plot_text(label(s))} {normalization} ({len(normalized.get(s, []))})" for s in sources]
    fig = make_subplots(rows=2, cols=max(1, len(sources)), subplot_titles=titles, vertical_spacing=0.18)
    for col, source in enumerate(sources, start=1):
        fig.add_histogram(x=list(raw[source]), nbinsx=bins, marker_color=color(source, col - 1),
                          name=f"{plot_text(label(source))} raw", showlegend=False, row=1, col=col)
        fig.add_histogram(x=list(normalized.get(source, [])), nbinsx=bins, marker_color=color(source, col - 1),
                          opacity=0.7, name=f"{plot_text(label(source))} normalised", showlegend=False, row=2,
                          col=col)
        minimum = thresholds.get(source)
        if minimum is not None:
            fig.add_vline(x=minimum, line_color=THRESHOLD_COLOR, line_dash="dash", line_width=2,
                          annotation_text=f"min {minimum:g}", annotation_position="top right", row=1, col=col)
    fig.update_yaxes(title_text="candidates", col=1)
    return _layout(fig, 520)


def fused_histogram(display_scores: Sequence[float], thresholds: Mapping[str, float | None],
                    bins: int = 30) -> go.Figure:
    """Display scores of every fused candidate, with each set threshold (name -> position on the
    display scale) as a vertical line."""
    fig = go.Figure(go.Histogram(x=list(display_scores), nbinsx=bins, marker_color="#475569", name="display score"))
    for name, x in thresholds.items():
        if x is not None:
            fig.add_vline(x=x, line_color=THRESHOLD_COLOR, line_dash="dash", line_width=2,
                          annotation_text=f"{name} {x:.3g}", annotation_position="top right")
    fig.update_xaxes(title_text="display score")
    fig.update_yaxes(title_text="candidates")
    return _layout(fig, 300, title=f"Fused display scores ({len(display_scores)} candidates)")


def rrf_curves(ks: Sequence[float], max_rank: int, current_k: float | None = None) -> go.Figure:
    """RRF term 1/(k + rank) against rank (left) and the display-scaled (k+1)/(k + rank) (right),
    one line per k; the current k drawn thicker."""
    ranks = list(range(1, max(2, max_rank) + 1))
    all_ks = sorted(set(ks) | ({current_k} if current_k is not None else set()))
    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        "raw term 1/(k + rank)", "display scale (k + 1)/(k + rank)"))
    for k in all_ks:
        is_current = current_k is not None and k == current_k
        name = f"k = {k:g}" + (" (current)" if is_current else "")
        line = dict(width=4 if is_current else 1.5)
        raw = [rrf_term(r, k) for r in ranks]
        fig.add_scatter(x=ranks, y=raw, mode="lines", name=name, line=line, legendgroup=name, row=1, col=1,
                        hovertemplate=f"k={k:g}, rank %{{x}}: %{{y:.4f}}<extra></extra>")
        fig.add_scatter(x=ranks, y=[v * (k + 1) for v in raw], mode="lines", name=name, line=line,
                        legendgroup=name, showlegend=False, row=1, col=2,
                        hovertemplate=f"k={k:g}, rank %{{x}}: %{{y:.3f}}<extra></extra>")
    fig.update_xaxes(title_text="rank in one source")
    return _layout(fig, 380)


def rank_scatter(points: Sequence[Mapping[str, Any]], depth: int, x_source: str = "bm25",
                 y_source: str = "dense") -> go.Figure:
    """Rank in one source against rank in the other, coloured by fused rank (1 = darkest).

    A candidate missing from a source is drawn at depth + 1 (the 'not retrieved' line)."""
    missing = depth + 1
    xs = [p["x"] if p["x"] is not None else missing for p in points]
    ys = [p["y"] if p["y"] is not None else missing for p in points]
    text = [f"{plot_text(p['id'])} {plot_text(p.get('title', ''))}" for p in points]
    x_name, y_name = plot_text(label(x_source)), plot_text(label(y_source))
    fig = go.Figure(go.Scatter(
        x=xs, y=ys, mode="markers", text=text,
        marker=dict(color=[p["fused_rank"] for p in points], colorscale="Viridis", reversescale=False,
                    size=9, colorbar=dict(title="fused rank"), line=dict(width=0.5, color="white")),
        hovertemplate="%{text}<br>" + template_text(label(x_source)) + " rank %{x}, "
                      + template_text(label(y_source)) + " rank %{y}<br>fused rank %{marker.color}<extra></extra>",
    ))
    for axis in (fig.update_xaxes, fig.update_yaxes):
        axis(range=[0, missing + 1])
    # The two lines meet in the top-right corner: their labels go to opposite ends (the top
    # left and the bottom right), so they never sit on each other or on the points there.
    fig.add_hline(y=missing, line_color="#94a3b8", line_dash="dot",
                  annotation_text=f"not in {y_name}", annotation_position="top left")
    fig.add_vline(x=missing, line_color="#94a3b8", line_dash="dot",
                  annotation_text=f"not in {x_name}", annotation_position="bottom left", annotation_textangle=-90)
    fig.update_xaxes(title_text=f"{x_name} rank")
    fig.update_yaxes(title_text=f"{y_name} rank")
    return _layout(fig, 480)
