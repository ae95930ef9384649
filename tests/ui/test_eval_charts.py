"""The Evaluate page's pure tables and figures (ui/evaluate/charts.py), without Streamlit."""

from urllib.parse import parse_qs, urlsplit

from retrieval.search.config import SearchConfig
from ui.evaluate import charts as ec
from ui.state import View, view_from_params

METRICS = ("ndcg@10", "mrr@10")
MEANS = {"hybrid": {"ndcg@10": 0.75, "mrr@10": 0.5}, "bm25": {"ndcg@10": 0.5, "mrr@10": 0.25},
         "dense": {"ndcg@10": 0.625, "mrr@10": 1.0}}
PER_QUERY = {
    "bm25": {"q1": {"ndcg@10": 1.0, "mrr@10": 1.0}, "q2": {"ndcg@10": 0.0, "mrr@10": 0.0},
             "q3": {"ndcg@10": 0.5, "mrr@10": 0.5}},
    "hybrid": {"q1": {"ndcg@10": 0.5, "mrr@10": 0.5}, "q2": {"ndcg@10": 0.25, "mrr@10": 1.0},
               "q3": {"ndcg@10": 0.5, "mrr@10": 0.2}},
}
QUERIES = {"q1": "first <b>query</b>", "q2": "second", "q3": "third & last"}


def test_metrics_frame_lists_sources_then_fused_with_exact_values():
    frame = ec.metrics_frame(MEANS, METRICS)
    assert list(frame.columns) == ["system", "nDCG@10", "MRR@10"]
    assert list(frame["system"]) == ["BM25", "vector", "fused"]
    assert list(frame["nDCG@10"]) == [0.5, 0.625, 0.75]
    assert list(frame["MRR@10"]) == [0.25, 1.0, 0.5]
    fig = ec.metrics_chart(MEANS, METRICS)
    assert [t.name for t in fig.data] == ["BM25", "vector", "fused"]
    assert list(fig.data[2].y) == [0.75, 0.5]


def test_per_query_frame_is_worst_first_with_search_links():
    view = View(collection="docs", query_set="mine")
    config = SearchConfig(rrf_k=5.0)
    frame = ec.per_query_frame(PER_QUERY, QUERIES, METRICS, link=lambda q: ec.search_url(view, q, config),
                               n_judged={"q1": 2, "q2": 1})
    assert list(frame["query id"]) == ["q2", "q1", "q3"]  # 0.25, then the 0.5 tie by id
    assert list(frame["nDCG@10"]) == [0.25, 0.5, 0.5]
    assert list(frame["MRR@10"]) == [1.0, 0.5, 0.2]
    assert list(frame["BM25 nDCG@10"]) == [0.0, 1.0, 0.5]
    assert list(frame["judged"]) == [1, 2, 0]
    link = frame["open"][0]
    assert link.startswith("Search?")
    params = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    assert params["q"] == "second" and params["collection"] == "docs" and params["set"] == "mine"
    assert params["rrf_k"] == "5.0"
    restored = view_from_params(params)  # the Search page reads back exactly this view
    assert restored.query == "second" and restored.config_a.rrf_k == 5.0 and restored.query_set == "mine"
    # the session's own View is untouched
    assert view.query == "" and view.config_a.rrf_k == 60.0


def test_worst_queries():
    assert ec.worst_queries(PER_QUERY["hybrid"], "ndcg@10", 2) == ["q2", "q1"]
    assert ec.worst_queries(PER_QUERY["hybrid"], "mrr@10", 1) == ["q3"]


ROWS = [
    {"label": "rrf w=0.3 k=10", "fusion": "rrf", "normalization": "minmax", "combination": "arithmetic",
     "weight": 0.3, "rrf_k": 10.0, "ndcg@10": 0.9, "mrr@10": 0.8},
    {"label": "rrf w=0.3 k=60 zscore", "fusion": "rrf", "normalization": "zscore", "combination": "arithmetic",
     "weight": 0.3, "rrf_k": 60.0, "ndcg@10": 0.7, "mrr@10": 0.6},
    {"label": "weighted w=0.5", "fusion": "weighted", "normalization": "minmax", "combination": "arithmetic",
     "weight": 0.5, "rrf_k": None, "ndcg@10": 0.65, "mrr@10": 0.6},
    {"label": "rrf w=0.7 k=10", "fusion": "rrf", "normalization": "minmax", "combination": "arithmetic",
     "weight": 0.7, "rrf_k": 10.0, "ndcg@10": 0.6, "mrr@10": 0.5},
    {"label": "rrf w=0.3 k=60", "fusion": "rrf", "normalization": "minmax", "combination": "arithmetic",
     "weight": 0.3, "rrf_k": 60.0, "ndcg@10": 0.5, "mrr@10": 0.4},
]


def test_sweep_grid_and_heatmap_take_the_best_per_cell():
    weights, ks, z = ec.sweep_grid(ROWS)
    assert weights == [0.3, 0.7] and ks == [10.0, 60.0]
    assert z == [[0.9, 0.7], [0.6, None]]  # (0.3, 60): best of 0.7 and 0.5; the weighted row is left out
    fig = ec.sweep_heatmap(ROWS)
    (heat,) = fig.data
    assert list(heat.x) == ["10", "60"] and list(heat.y) == ["0.3", "0.7"]
    assert [list(r) for r in heat.z] == z
    # the best cell (0.3, 10) keeps its number readable, the star beside it; the empty cell reads "—"
    assert [list(r) for r in heat.text] == [["0.900 ★", "0.700"], ["0.600", "—"]]
    assert [list(r) for r in heat.customdata] == [["0.9000", "0.7000"], ["0.6000", "—"]]
    assert "%{customdata}" in heat.hovertemplate and "%{z" not in heat.hovertemplate  # no "None" on hover
    (outline,) = fig.layout.shapes  # around the best cell: column 0, row 0
    assert (outline.x0, outline.x1, outline.y0, outline.y1) == (-0.5, 0.5, -0.5, 0.5)


def test_sweep_frame_keeps_the_core_order():
    frame = ec.sweep_frame(ROWS, METRICS)
    assert list(frame["rank"]) == [1, 2, 3, 4, 5]
    assert list(frame["label"]) == [r["label"] for r in ROWS]
    assert list(frame["nDCG@10"]) == [r["ndcg@10"] for r in ROWS]
    # the metrics right after the label, the settings after them: in sight at 1400 px
    assert list(frame.columns) == ["rank", "label", *[ec.metric_label(m) for m in METRICS], "fusion",
                                   "normalization", "combination", "weight", "rrf_k", "rerank_top_n", "rerank_lambda"]
    # a setting the method does not use reads "—", never "None"
    rrf = ec.sweep_frame([{**ROWS[0], "normalization": None, "combination": None}], METRICS)
    assert list(rrf["normalization"]) == ["—"] and list(rrf["combination"]) == ["—"]
    assert "None" not in rrf.astype(str).drop(columns=["rrf_k", "rerank_top_n", "rerank_lambda"]).to_numpy()


def test_delta_chart_colours_wins_losses_and_ties_and_escapes_text():
    deltas = {"q1": -0.25, "q2": 0.5, "q3": 0.0}
    frame = ec.delta_frame(deltas, QUERIES)
    assert list(frame["query id"]) == ["q2", "q3", "q1"]
    assert list(frame["delta (B − A)"]) == [0.5, 0.0, -0.25]
    fig = ec.delta_chart(deltas, QUERIES)
    bar = fig.data[0]
    assert list(bar.y) == [0.5, 0.0, -0.25]
    assert list(bar.marker.color) == ["#16a34a", "#94a3b8", "#dc2626"]
    assert "&lt;b&gt;query&lt;/b&gt;" in bar.text[2] and "<b>" not in bar.text[2]
    assert [ec.outcome_of(d) for d in (0.1, 0.0, -0.1)] == ["win", "tie", "loss"]


def test_the_importance_chart_names_parameters_in_full_largest_on_top():
    fig = ec.importance_chart({"BM25 share of the weight": 0.7, "Candidate depth (per source)": 0.2, "<b>x</b>": 0.1},
                              "parameter importance (PED-ANOVA)")
    (bars,) = fig.data
    assert list(bars.y) == ["BM25 share of the weight", "Candidate depth (per source)", "&lt;b&gt;x&lt;/b&gt;"]
    assert list(bars.x) == [0.7, 0.2, 0.1] and bars.orientation == "h"
    assert fig.layout.yaxis.autorange == "reversed" and fig.layout.yaxis.automargin  # no label cut short
    assert fig.layout.xaxis.title.text == "parameter importance (PED-ANOVA)"  # on the values' axis
