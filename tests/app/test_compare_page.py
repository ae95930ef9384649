"""Compare page: first stage vs reranked, and config A vs config B."""

from conftest import QUERY, fused, open_page, plain

from retrieval.evaluation.compare import overlap_at_k, rank_changes, rbo
from retrieval.search.config import SearchConfig
from ui.state import default_config_b, with_ui_sources

COMPARE = "pages/2_Compare.py"


def metric(at, label_start):
    return next(m.value for m in at.metric if m.label.startswith(label_start))


def test_first_stage_vs_reranked(workbench):
    at = open_page(COMPARE, q=QUERY, rerank_top_n="5", top_k="5")
    assert at.radio(key="view.compare_mode").value == "rerank"
    result = workbench.search("small", QUERY, SearchConfig(rerank=True, rerank_top_n=5, top_k=5))
    first = [r.doc_id for r in result.outcome.results]
    reranked = [r.doc_id for r in result.reranked]
    left, right = at.dataframe[0].value, at.dataframe[1].value
    assert list(left["id"]) == first
    assert list(right["id"]) == reranked
    expected_labels = [c.label for c in rank_changes(first, reranked) if c.after is not None]
    assert list(right["change"]) == expected_labels
    assert metric(at, "overlap@5") == f"{overlap_at_k(first, reranked, 5):.3f}"
    assert metric(at, "rank-biased overlap") == f"{rbo(first, reranked, 0.9):.3f}"
    assert any("Reranked the top 5" in i.value for i in at.info)
    assert at.query_params["mode"] == "rerank"


def test_config_a_against_config_b(workbench):
    at = open_page(COMPARE, q=QUERY, mode="configs", top_k="8")
    # B's controls are drawn in the main area with B's defaults (RRF k = 60, 0.5 / 0.5)
    assert at.selectbox(key="b.fusion").value == "rrf"
    assert at.slider(key="b.w_bm25").value == 0.5 and at.slider(key="b.w_dense").value == 0.5
    assert at.slider(key="b.top_k").value == 10
    assert not any(w.key.startswith("b.") for w in at.sidebar.slider)
    at.slider(key="b.w_dense").set_value(0.9).run()
    at.slider(key="b.top_k").set_value(8).run()
    _, a = fused(workbench, top_k=8)
    _, b = fused(workbench, fusion="rrf", weights={"bm25": 0.5, "dense": 0.9}, top_k=8)
    a_ids, b_ids = [r.doc_id for r in a.results], [r.doc_id for r in b.results]
    left, right = at.dataframe[0].value, at.dataframe[1].value
    assert list(left["id"]) == a_ids and list(right["id"]) == b_ids
    assert list(right["display score"]) == [r.display_score for r in b.results]
    changes = rank_changes(a_ids, b_ids)
    assert list(right["change"]) == [c.label for c in changes if c.after is not None]
    assert metric(at, "overlap@8") == f"{overlap_at_k(a_ids, b_ids, 8):.3f}"
    assert metric(at, "rank-biased overlap") == f"{rbo(a_ids, b_ids):.3f}"
    dropped = [c for c in changes if c.status == "dropped"]
    if dropped:
        assert any("Dropped" in c.value for c in at.caption)
    assert at.query_params["b.weights"] == "bm25=0.5,dense=0.9"
    assert at.query_params["b.fusion"] == "rrf"
    assert at.query_params["mode"] == "configs"


def test_config_b_shortcuts_copy_load_and_reset(workbench):
    from retrieval.search.saved_configs import ConfigStore

    ConfigStore(workbench.store).save("b-shortcut", SearchConfig(fusion="rrf", rrf_k=5, weights={"bm25": 1.0}))
    at = open_page(COMPARE, q=QUERY, mode="configs", fusion="weighted", weights="bm25=0.3,dense=0.7", top_k="6")
    at.button(key="b.copy_a").click().run()
    view = at.session_state["_workbench_view"]
    assert view.config_b == view.config_a and at.slider(key="b.w_bm25").value == 0.3
    assert any("Config B is now a copy of config A" in s.value for s in at.success)
    left, right = at.dataframe[0].value, at.dataframe[1].value
    assert list(left["id"]) == list(right["id"])  # the same config: the same ranking
    at.selectbox(key="b.saved").set_value("b-shortcut").run()
    at.button(key="b.load").click().run()
    assert at.selectbox(key="b.fusion").value == "rrf" and at.slider(key="b.rrf_k").value == 5
    assert at.session_state["_workbench_view"].config_b.weights == {"bm25": 1.0, "dense": 0.0}
    at.button(key="b.reset").click().run()
    assert at.session_state["_workbench_view"].config_b == with_ui_sources(default_config_b())
    assert at.query_params["b.fusion"] == "rrf" and at.query_params["b.weights"] == "bm25=0.5,dense=0.5"


def test_a_greyed_out_control_says_why(workbench):
    at = open_page(COMPARE, q=QUERY, mode="configs", fusion="rrf")
    assert at.sidebar.selectbox(key="a.normalization").disabled
    assert any(plain(c.value).startswith("Greyed out: RRF does not use the score normalisation (RRF adds w/(k + rank)")
               for c in at.sidebar.caption), [c.value for c in at.sidebar.caption]
    assert any(c.value == "Greyed out: turn “Rerank” on to use it." for c in at.sidebar.caption)
