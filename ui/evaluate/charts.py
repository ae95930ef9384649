"""The Evaluate page's tables and figures as pure functions of plain data (no Streamlit), so they
are tested on their own: metric tables, the per-query table with its Search links, the sweep
heatmap and ranking, the A/B delta chart.

User text that ends up in a figure (query texts, ids, source names) is HTML-escaped
(`charts.plot_text`, `charts.template_text` inside templates): plotly renders a subset of HTML
tags in labels and hover text. Values are the core's floats, never rounded here (the
tables format them for display).
"""

from __future__ import annotations

import copy
import html
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import plotly.graph_objects as go

from retrieval.evaluation.evaluate import metric_label, worst_queries  # noqa: F401 - worst_queries: the page's name for the core's
from retrieval.evaluation.snapshot_report import waterfall_range
from retrieval.search.config import SearchConfig
from retrieval.sources import label
from ui import state
from ui.search.charts import plot_text

METRIC_HELP = {
    "ndcg@10": "Normalised discounted cumulative gain of the top 10: graded gains, discounted by log2(rank + 1), "
               "divided by the best possible ordering. 1 = ideal order.",
    "mrr@10": "1 / rank of the first relevant document within the top 10 (0 when none).",
    "recall@100": "Share of the relevant documents found in the top 100.",
    "precision@10": "Share of the top 10 that is relevant (always out of 10).",
    "map": "Mean average precision: the precision at each relevant document's rank, averaged "
           "(relevant documents never retrieved add 0).",
}
HYBRID = "hybrid"
PRIMARY = "ndcg@10"
SEARCH_PAGE_URL = "Search"  # pages/1_Search.py's URL path, relative to the app's root


def system_label(system: str) -> str:
    """'bm25' -> 'BM25', 'dense' -> 'vector', 'hybrid' -> 'fused'."""
    return "fused" if system == HYBRID else label(system)


def ordered_systems(systems: Sequence[str]) -> list[str]:
    """Single sources first (as given), the fused ranking last."""
    return [s for s in systems if s != HYBRID] + ([HYBRID] if HYBRID in systems else [])


# ---- evaluation ------------------------------------------------------------------------------
def metrics_frame(metrics: Mapping[str, Mapping[str, float]], names: Sequence[str]) -> pd.DataFrame:
    """One row per system (sources, then fused), one column per metric: the mean values."""
    records = [{"system": system_label(system), **{metric_label(m): metrics[system].get(m) for m in names}}
               for system in ordered_systems(list(metrics))]
    return pd.DataFrame.from_records(records, columns=["system"] + [metric_label(m) for m in names])


def metrics_chart(metrics: Mapping[str, Mapping[str, float]], names: Sequence[str]) -> go.Figure:
    """Grouped bars: per metric, one bar per system."""
    from ui.search.charts import color, plot_text, template_text

    fig = go.Figure()
    for i, system in enumerate(ordered_systems(list(metrics))):
        fig.add_bar(x=[metric_label(m) for m in names], y=[metrics[system].get(m, 0.0) for m in names],
                    name=plot_text(system_label(system)),
                    marker_color="#111827" if system == HYBRID else color(system, i),
                    hovertemplate=f"{template_text(system_label(system))} %{{x}}: %{{y:.4f}}<extra></extra>")
    fig.update_yaxes(range=[0, 1], title_text="mean over the judged queries")
    fig.update_layout(height=320, margin=dict(l=10, r=10, t=30, b=10), barmode="group",
                      legend=dict(orientation="h", y=1.12))
    return fig


def search_url(view: state.View, query: str, config: SearchConfig, base: str = SEARCH_PAGE_URL,
               why: str | None = None) -> str:
    """A link opening the Search page on `query` with `config` (and the View's collection and
    query set): `state.params_for` of a copy of the View, so the link is exactly what the Search
    page would put in its own address bar. `why`: a document its "Why not?" section opens on."""
    linked = copy.copy(view)
    linked.query = query
    linked.config_a = config
    linked.why = why
    return f"{base}?{urlencode(state.params_for(linked, 'search'))}"


def per_query_frame(per_query: Mapping[str, Mapping[str, Mapping[str, float]]], queries: Mapping[str, str],
                    names: Sequence[str], link: Callable[[str], str] | None = None,
                    n_judged: Mapping[str, int] | None = None) -> pd.DataFrame:
    """One row per evaluated query, worst fused nDCG@10 first (ties by query id): id, text, the
    fused metrics, each source's nDCG@10 (or the first metric), judged count and a Search link.
    `per_query`: system -> query id -> metric -> value (`EvaluationReport.per_query`)."""
    systems = ordered_systems(list(per_query))
    primary = PRIMARY if PRIMARY in names else names[0]
    fused = per_query.get(HYBRID) or per_query[systems[-1]]
    records = []
    for qid in fused:
        record: dict[str, Any] = {"query id": qid, "query": queries.get(qid, "")}
        for m in names:
            record[metric_label(m)] = fused[qid].get(m)
        for system in systems:
            if system != HYBRID:
                record[f"{system_label(system)} {metric_label(primary)}"] = per_query[system].get(qid, {}).get(primary)
        if n_judged is not None:
            record["judged"] = n_judged.get(qid, 0)
        if link is not None:
            record["open"] = link(queries.get(qid, ""))
        records.append(record)
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        return frame
    return frame.sort_values([metric_label(primary), "query id"], kind="stable").reset_index(drop=True)


# ---- sweep -----------------------------------------------------------------------------------
NOT_USED = "—"  # a table cell of a setting the row does not use


def sweep_frame(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> pd.DataFrame:
    """The ranked sweep table (rows as the core ranks them, best first) with a rank column; the
    metrics right after the variant's label, its settings after them (so the metrics are in sight
    in a 1400-pixel window). A setting the variant's method does not use (RRF's normalisation)
    reads "—", not "None"; the number columns keep it empty for the table's placeholder (`NOT_USED`)."""
    settings = ["fusion", "normalization", "combination", "weight", "rrf_k", "rerank_top_n", "rerank_lambda"]
    records = []
    for i, row in enumerate(rows, start=1):
        record = {"rank": i, "label": row.get("label"), **{c: row.get(c) for c in settings}}
        record.update({c: NOT_USED for c in ("normalization", "combination") if record[c] is None})
        record.update({metric_label(m): row.get(m) for m in names})
        records.append(record)
    return pd.DataFrame.from_records(records, columns=["rank", "label", *[metric_label(m) for m in names], *settings])


def sweep_grid(rows: Sequence[Mapping[str, Any]], metric: str = PRIMARY
               ) -> tuple[list[float], list[float], list[list[float | None]]]:
    """The RRF variants as a grid: (weights, ks, z[weight][k]); where several variants share a
    weight and k (e.g. differing only in normalisation, which RRF ignores) the best value counts."""
    rrf = [r for r in rows if r.get("weight") is not None and r.get("rrf_k") is not None
           and r.get("rerank_lambda") is None]  # first-stage variants only
    weights = sorted({float(r["weight"]) for r in rrf})
    ks = sorted({float(r["rrf_k"]) for r in rrf})
    best: dict[tuple[float, float], float] = {}
    for r in rrf:
        key = (float(r["weight"]), float(r["rrf_k"]))
        value = r.get(metric)
        if value is not None and (key not in best or value > best[key]):
            best[key] = value
    z = [[best.get((w, k)) for k in ks] for w in weights]
    return weights, ks, z


def sweep_heatmap(rows: Sequence[Mapping[str, Any]], metric: str = PRIMARY,
                  weight_name: str = "BM25 weight") -> go.Figure:
    """Heatmap of `metric` over the RRF variants: BM25 weight (rows) × RRF k (columns). The best
    cell's number carries a star beside it ("0.986 ★") and the cell an outline, so the number
    stays readable; a cell no variant scored reads "—" (`NOT_USED`), in the cell and its hover."""
    from ui.search.charts import plot_text, template_text

    weights, ks, z = sweep_grid(rows, metric)
    cells = [(v, i, j) for i, row in enumerate(z) for j, v in enumerate(row) if v is not None]
    best = max(cells, key=lambda c: (c[0], -c[1], -c[2])) if cells else None
    text = [[NOT_USED if v is None else f"{v:.3f}" + (" ★" if best and (i, j) == best[1:] else "")
             for j, v in enumerate(row)] for i, row in enumerate(z)]
    shown = [[NOT_USED if v is None else f"{v:.4f}" for v in row] for row in z]
    fig = go.Figure(go.Heatmap(
        x=[f"{k:g}" for k in ks], y=[f"{w:g}" for w in weights], z=z, text=text, texttemplate="%{text}",
        customdata=shown, hoverongaps=True, colorscale="Viridis", colorbar=dict(title=metric_label(metric)),
        hovertemplate=f"{template_text(weight_name)} %{{y}}, RRF k %{{x}}: {metric_label(metric)} %{{customdata}}"
                      "<extra></extra>",
    ))
    if best is not None:  # an outline around the best cell (categories sit at 0, 1, …)
        _, i, j = best
        fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                      line=dict(color="#dc2626", width=3), fillcolor="rgba(0,0,0,0)")
    fig.update_xaxes(title_text="RRF k", type="category")
    fig.update_yaxes(title_text=plot_text(weight_name), type="category")
    fig.update_layout(height=120 + 34 * max(1, len(weights)), margin=dict(l=10, r=10, t=30, b=10),
                      title=f"{metric_label(metric)} of the RRF variants (★ the best)")
    return fig


def rerank_lines(rows: Sequence[Mapping[str, Any]], metric: str = PRIMARY
                 ) -> dict[int, list[tuple[float, float]]]:
    """The rerank variants as lines: top-N -> [(λ, metric value)] by λ ascending."""
    lines: dict[int, list[tuple[float, float]]] = {}
    for r in rows:
        if r.get("rerank_lambda") is not None and r.get(metric) is not None:
            lines.setdefault(int(r["rerank_top_n"]), []).append((float(r["rerank_lambda"]), r[metric]))
    return {n: sorted(points) for n, points in sorted(lines.items())}


def rerank_chart(rows: Sequence[Mapping[str, Any]], first_stage: float | None, metric: str = PRIMARY) -> go.Figure:
    """`metric` of the rerank variants against λ (0: the reranker's order, 1: the first stage's),
    one line per top-N, and the first stage without rerank as a dashed line."""
    fig = go.Figure()
    for top_n, points in rerank_lines(rows, metric).items():
        fig.add_scatter(x=[lam for lam, _ in points], y=[v for _, v in points], mode="lines+markers",
                        name=f"top-{top_n}",
                        hovertemplate=f"top-{top_n}, λ %{{x}}: {metric_label(metric)} %{{y:.4f}}<extra></extra>")
    if first_stage is not None:
        fig.add_hline(y=first_stage, line_dash="dash", line_color="#6b7280",
                      annotation_text=f"no rerank {first_stage:.4f}", annotation_position="bottom right")
    fig.update_xaxes(title_text="λ (weight of the first stage)", range=[-0.02, 1.02])
    fig.update_yaxes(title_text=metric_label(metric))
    fig.update_layout(height=320, margin=dict(l=10, r=10, t=30, b=10), legend_title_text="reranked",
                      title=f"{metric_label(metric)} of the rerank variants")
    return fig


# ---- optimiser -------------------------------------------------------------------------------
def importance_chart(importance: Mapping[str, float], what: str) -> go.Figure:
    """What mattered in an optimisation: one horizontal bar per parameter or feature (the app's
    words, `OptimizeResult.importance_labels`), largest on top; the names in full (plotly widens
    the margin to fit them), `what` the value axis' title."""
    from ui.search.charts import plot_text

    names = list(importance)
    fig = go.Figure(go.Bar(x=list(importance.values()), y=[plot_text(n) for n in names], orientation="h",
                           marker_color="#2563eb", hovertemplate="%{y}: %{x:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", automargin=True, type="category")
    fig.update_xaxes(title_text=plot_text(what), rangemode="tozero")
    fig.update_layout(height=80 + 26 * max(1, len(names)), margin=dict(l=10, r=10, t=10, b=10))
    return fig


# ---- A/B -------------------------------------------------------------------------------------
def delta_frame(deltas: Mapping[str, float], queries: Mapping[str, str]) -> pd.DataFrame:
    """Per query the delta (B − A), largest gain first (ties by id)."""
    order = sorted(deltas, key=lambda q: (-deltas[q], q))
    return pd.DataFrame({"query id": order, "query": [queries.get(q, "") for q in order],
                         "delta (B − A)": [deltas[q] for q in order]})


def outcome_of(delta: float) -> str:
    return "win" if delta > 0 else "loss" if delta < 0 else "tie"


def delta_chart(deltas: Mapping[str, float], queries: Mapping[str, str], metric: str = PRIMARY) -> go.Figure:
    """One bar per query, sorted by delta (B − A): green where B wins, red where it loses, grey ties."""
    frame = delta_frame(deltas, queries)
    colours = {"win": "#16a34a", "loss": "#dc2626", "tie": "#94a3b8"}
    hover = [f"{html.escape(q)}: {html.escape(t[:80])}" for q, t in zip(frame["query id"], frame["query"], strict=True)]
    fig = go.Figure(go.Bar(
        x=list(range(1, len(frame) + 1)), y=list(frame["delta (B − A)"]), text=hover,
        marker_color=[colours[outcome_of(d)] for d in frame["delta (B − A)"]],
        hovertemplate="%{text}<br>delta %{y:.4f}<extra></extra>",
    ))
    fig.add_hline(y=0, line_color="#475569", line_width=1)
    fig.update_xaxes(title_text="queries, sorted by delta")
    fig.update_yaxes(title_text=f"{metric_label(metric)} of B − A")
    fig.update_layout(height=320, margin=dict(l=10, r=10, t=30, b=10))
    return fig


def causes_waterfall(d: Mapping[str, Any]) -> go.Figure:
    """A snapshot diff (`retrieval.evaluation.snapshot_diff.diff`) as a waterfall: A's value, each cause's
    share of Δ, and B's value (the shares add up to Δ, so the last step lands on B)."""
    causes = list(d["causes"].items())
    fig = go.Figure(go.Waterfall(
        x=[plot_text(d["a"]["name"]), *(plot_text(c) for c, _ in causes), plot_text(d["b"]["name"])],
        measure=["absolute", *["relative"] * len(causes), "total"],
        y=[d["a"]["value"], *(share for _, share in causes), 0.0],
        increasing={"marker": {"color": "#16a34a"}}, decreasing={"marker": {"color": "#dc2626"}},
        totals={"marker": {"color": "#64748b"}}, connector={"line": {"color": "#94a3b8"}},
        hovertemplate="%{x}: %{y:.4f}<extra></extra>",
    ))
    # not from 0: a +0.0176 change is then most of the plot, not a sliver (`waterfall_range`)
    fig.update_yaxes(title_text=metric_label(d["metric"]), range=list(waterfall_range(d)))
    fig.update_layout(height=300, margin=dict(l=10, r=10, t=30, b=10), showlegend=False)
    return fig


def snapshot_trend(points: Sequence[Mapping[str, Any]], metric: str = PRIMARY) -> go.Figure:
    """A query set's metric across its snapshots, oldest first: the mean and its 95 % interval
    (`points`: name, value, ci95 as `(low, high)`)."""
    names = [plot_text(p["name"]) for p in points]
    fig = go.Figure(go.Scatter(
        x=list(range(1, len(points) + 1)), y=[p["value"] for p in points], mode="lines+markers", text=names,
        error_y={"type": "data", "symmetric": False, "array": [p["ci95"][1] - p["value"] for p in points],
                 "arrayminus": [p["value"] - p["ci95"][0] for p in points]},
        hovertemplate="%{text}: %{y:.4f}<extra></extra>",
    ))
    fig.update_xaxes(title_text="snapshots, oldest first", tickvals=list(range(1, len(points) + 1)), ticktext=names)
    fig.update_yaxes(title_text=metric_label(metric))
    fig.update_layout(height=300, margin=dict(l=10, r=10, t=30, b=10))
    return fig
