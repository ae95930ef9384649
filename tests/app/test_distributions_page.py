"""Distributions page: histograms with threshold lines that follow their sliders, RRF curves,
and the rank scatter."""

import json

from conftest import QUERY, fused, open_page

DISTRIBUTIONS = "pages/3_Distributions.py"


def figures(at):
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def threshold_lines(figure):
    return [s for s in figure["layout"].get("shapes", []) if s.get("line", {}).get("dash") == "dash"]


def test_threshold_line_moves_with_its_slider(workbench):
    at = open_page(DISTRIBUTIONS, q=QUERY, fusion="rrf", weights="bm25=0.5,dense=0.5")
    histograms = figures(at)[0]
    assert threshold_lines(histograms) == []  # minimums off: no line
    at.slider(key="a.min_raw_bm25").set_value(2.5).run()
    assert [line["x0"] for line in threshold_lines(figures(at)[0])] == [2.5]
    at.slider(key="a.min_raw_bm25").set_value(4.0).run()
    at.slider(key="a.min_display").set_value(0.4).run()
    histograms, fused_hist = figures(at)[:2]
    assert [line["x0"] for line in threshold_lines(histograms)] == [4.0]
    assert [line["x0"] for line in threshold_lines(fused_hist)] == [0.4]
    # a raw fused-score minimum is drawn on the display scale: × (k + 1)/Σw = × 61
    at.number_input(key="a.min_score").set_value(0.01).run()
    assert [line["x0"] for line in threshold_lines(figures(at)[1])] == [0.4, 0.01 * 61]


def test_histograms_hold_the_candidates_scores(workbench):
    at = open_page(DISTRIBUTIONS, q=QUERY, normalization="zscore")
    config, outcome = fused(workbench, normalization="zscore")
    candidates = workbench.candidates("small", QUERY, config)
    traces = figures(at)[0]["data"]
    by_name = {t["name"]: t for t in traces}
    assert by_name["BM25 raw"]["x"] == [h.raw_score for h in candidates.sources["bm25"].hits]
    assert by_name["vector raw"]["x"] == [h.raw_score for h in candidates.sources["dense"].hits]
    expected = [r.sources["dense"].normalized for r in outcome.ranked if r.sources["dense"].normalized is not None]
    assert by_name["vector normalised"]["x"] == expected
    display = figures(at)[1]["data"][0]["x"]
    assert display == [r.display_score for r in outcome.ranked]


def test_rrf_curves_for_several_k():
    at = open_page(DISTRIBUTIONS, rrf_k="20", ks="1,60")
    assert at.multiselect(key="view.rrf_ks").value == [1, 60]
    curves = figures(at)[0]  # no query: only the RRF chart
    names = [t["name"] for t in curves["data"] if t.get("showlegend", True) is not False]
    assert names == ["k = 1", "k = 20 (current)", "k = 60"]
    k60 = next(t for t in curves["data"] if t["name"] == "k = 60")
    assert k60["y"][0] == 1 / 61 and k60["y"][9] == 1 / 70
    text = " ".join(m.value for m in at.markdown)
    assert "0.0164" in text and "0.0143" in text and "0.014–0.016" in text
    assert at.query_params["ks"] == "1,60"


def test_rank_scatter_coloured_by_fused_rank(workbench):
    at = open_page(DISTRIBUTIONS, q=QUERY, depth="12")
    _, outcome = fused(workbench, depth=12)
    scatter = figures(at)[-1]["data"][0]
    assert scatter["marker"]["color"] == [r.rank for r in outcome.ranked]
    missing = 13  # depth + 1: "not retrieved by this source"
    assert scatter["x"] == [r.sources["bm25"].rank or missing for r in outcome.ranked]
    assert scatter["y"] == [r.sources["dense"].rank or missing for r in outcome.ranked]
