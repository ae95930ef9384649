"""Plotly figure builders and result data helpers (pure functions, no Streamlit)."""

import pytest

from retrieval.types import FusedResult, SourceContribution
from ui.search import charts
from ui.search.results import ResultRow, contribution_bars, rrf_squeeze


def _row(rank: int, **contributions: float) -> ResultRow:
    sources = {s: SourceContribution(s, None, None, None, c) for s, c in contributions.items()}
    fused = FusedResult(f"d{rank}", rank, sum(contributions.values()), 0.0, sources)
    return ResultRow(rank, fused, None, {})


def test_contribution_bars_share_one_scale():
    bars = contribution_bars([_row(1, bm25=0.01, dense=0.006), _row(2, dense=0.008)], ["bm25", "dense"])
    assert not bars.negative
    assert [[(s.source, s.contribution, s.fraction) for s in row] for row in bars.segments] == [
        [("bm25", 0.01, 0.01 / 0.016), ("dense", 0.006, 0.006 / 0.016)],
        [("bm25", 0.0, 0.0), ("dense", 0.008, 0.008 / 0.016)],  # a source that did not return it adds 0
    ]


def test_contribution_bars_with_negative_parts_scale_each_side():
    bars = contribution_bars([_row(1, bm25=0.5, dense=-0.2), _row(2, bm25=-0.4, dense=-0.4)], ["bm25", "dense"])
    assert bars.negative
    assert [[s.fraction for s in row] for row in bars.segments] == [[0.5 / 0.8, 0.2 / 0.8], [0.5, 0.5]]


def test_histograms_draw_only_set_thresholds():
    fig = charts.score_histograms({"bm25": [1.0, 5.0], "dense": [0.2, 0.9]},
                                  {"bm25": [0.0, 1.0], "dense": [0.0, 1.0]}, {"bm25": 2.0, "dense": None}, "minmax")
    lines = [s for s in fig.layout.shapes if s.line.dash == "dash"]
    assert [(s.x0, s.x1) for s in lines] == [(2.0, 2.0)]
    assert [t.name for t in fig.data] == ["BM25 raw", "BM25 normalised", "vector raw", "vector normalised"]


def test_rrf_curves_are_the_formula():
    fig = charts.rrf_curves([60], 10, current_k=2)
    raw = {t.name: list(t.y) for t in fig.data if t.showlegend is not False}
    assert raw["k = 60"] == [1 / (60 + r) for r in range(1, 11)]
    assert raw["k = 2 (current)"][0] == 1 / 3
    display = next(t for t in fig.data if t.showlegend is False and t.name == "k = 60")
    assert display.y[0] == pytest.approx(1.0)


def test_rank_scatter_places_missing_ranks_past_the_depth():
    points = [{"id": "a", "title": "", "x": 1, "y": None, "fused_rank": 1},
              {"id": "<i>", "title": "t", "x": None, "y": 3, "fused_rank": 2}]
    fig = charts.rank_scatter(points, depth=10)
    trace = fig.data[0]
    assert list(trace.x) == [1, 11] and list(trace.y) == [11, 3]
    assert list(trace.marker.color) == [1, 2]
    assert trace.text[1] == "&lt;i&gt; t"
    # the two "not in" labels sit at opposite ends of their lines (they met in the corner before)
    labels = {a.text: a for a in fig.layout.annotations}
    assert (labels["not in vector"].x, labels["not in vector"].xref) == (0, "x domain")
    assert (labels["not in BM25"].y, labels["not in BM25"].yref) == (0, "y domain")


def test_k60_squeeze_numbers():
    s = rrf_squeeze(60, {"bm25": 0.5, "dense": 0.5})
    assert s["hi"] == 1 / 61 and s["lo"] == 1 / 70
    assert round(s["hi"], 3) == 0.016 and round(s["lo"], 3) == 0.014
    assert s["display_hi"] == pytest.approx(1.0)


def test_the_distributions_min_fused_line_is_the_core_s_cut_for_every_method_and_combination(tmp_path):
    """The minimum fused score drawn on the display scale (`views.min_fused_factor`) lands where
    the core cuts: a result passes min_score exactly when its display score is at or above the
    line. (The page once used 1/Σw for the harmonic and geometric means, which the core shows as
    they are.) Weights sum to 2 so 1/Σw and 1 differ."""
    from retrieval.search.config import SearchConfig
    from retrieval.search.fusion.methods import COMBINATIONS, FUSION_METHODS
    from retrieval.search.search_result import CandidateSet
    from retrieval.search.workbench import Workbench
    from retrieval.store import Store
    from retrieval.types import Hit, SourceResult
    from ui.search.views import min_fused_factor

    def ranked(source, *pairs):
        return SourceResult(source, tuple(Hit(d, s, r) for r, (d, s) in enumerate(pairs, start=1)))

    sources = {"bm25": ranked("bm25", ("a", 9.0), ("b", 6.0), ("c", 2.0), ("d", 1.0)),
               "dense": ranked("dense", ("b", 0.9), ("c", 0.7), ("a", 0.6), ("e", 0.2))}
    configs = [SearchConfig(fusion=name, combination=combination, weights={"bm25": 0.5, "dense": 1.5})
               for name, method in FUSION_METHODS.items()
               for combination in (COMBINATIONS if method.uses("combination") else ["arithmetic"])]
    assert len(configs) == 5
    workbench = Workbench(Store(str(tmp_path)))
    for config in configs:
        candidates = CandidateSet("c", ("x", 1), "q", config.depth, sources, {})
        scores = sorted(r.score for r in workbench.rank(candidates, config).outcome.ranked)
        cut = scores[len(scores) // 2]  # a minimum that keeps the upper half
        result = workbench.rank(candidates, config.replace(min_score=cut))
        line = cut * min_fused_factor(result)
        kept = {r.doc_id for r in result.outcome.results}
        assert kept and len(kept) < len(result.outcome.ranked), config.fusion
        for r in result.outcome.ranked:
            assert (r.doc_id in kept) == (r.display_score >= line), (config.fusion, config.combination, r)
        assert min_fused_factor(result) == result.outcome.ranked[0].display_score / result.outcome.ranked[0].score
