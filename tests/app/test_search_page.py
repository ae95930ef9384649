"""Search page: defaults, exact fused values, URL state, highlighting, notes, rerank."""

import html
import json

import pytest

from conftest import QUERY, all_widgets, fused, nullable, open_page

SEARCH = "pages/1_Search.py"

DEFAULTS = {
    "a.fusion": "rrf", "a.w_bm25": 0.5, "a.w_dense": 0.5, "a.rrf_k": 60, "a.normalization": "minmax",
    "a.min_display": 0.0, "a.min_raw_bm25": 0.0, "a.min_raw_dense": 0.0, "a.top_k": 10, "a.depth": 100,
    "a.rerank": False, "a.rerank_top_n": 20, "a.min_score": None, "a.bm25_backend": "rank_bm25",
    "a.bm25_k1": 0.9, "a.bm25_b": 0.4, "a.reranker": "e5",
}


def widget(at, key):
    for w in all_widgets(at):
        if getattr(w, "key", None) == key:
            return w
    raise KeyError(key)


def assert_table_matches(at, outcome, query=QUERY):
    frame = at.dataframe[0].value
    results = outcome.results
    assert list(frame["id"]) == [r.doc_id for r in results]
    assert list(frame["rank"]) == [r.rank for r in results]
    assert list(frame["fused score"]) == [r.score for r in results]  # exact: same floats as the core
    assert list(frame["display score"]) == [r.display_score for r in results]
    for source, name in (("bm25", "BM25"), ("dense", "vector")):
        assert nullable(frame[f"{name} rank"]) == [r.sources[source].rank for r in results]
        assert nullable(frame[f"{name} score"]) == [r.sources[source].raw_score for r in results]


def test_controls_render_with_their_defaults_and_help(app_db):
    at = open_page(SEARCH)
    for key, value in DEFAULTS.items():
        assert widget(at, key).value == value, key
    assert widget(at, "view.collection").value == app_db.collection
    assert widget(at, "view.query").value == ""
    helpless = [w.key for w in all_widgets(at) if not (w.help or "").strip()]
    assert helpless == []
    assert "Type a query" in at.info[0].value


def test_results_are_the_core_fusion_exactly(workbench):
    at = open_page(SEARCH)
    at.text_input(key="view.query").set_value(QUERY).run()
    _, outcome = fused(workbench)
    assert_table_matches(at, outcome)
    # the threshold line: candidates and what top-K removed
    caption = at.caption[0].value
    assert f"{outcome.n_candidates} candidates" in caption
    assert f"top\\-K removed {outcome.removed['top-k']}" in caption


def test_moving_k_and_a_weight_refuses_cached_candidates(workbench):
    at = open_page(SEARCH, q=QUERY)
    at.slider(key="a.rrf_k").set_value(5).run()
    at.slider(key="a.w_bm25").set_value(0.2).run()
    _, outcome = fused(workbench, rrf_k=5.0, weights={"bm25": 0.2, "dense": 0.5})
    assert_table_matches(at, outcome)
    # the page's scores are the RRF formula: Σ w / (k + rank), a missing source adding 0
    for r in outcome.results:
        expected = 0.0
        for source, weight in (("bm25", 0.2), ("dense", 0.5)):
            rank = r.sources[source].rank
            expected += 0.0 if rank is None else weight / (5 + rank)
        assert r.score == pytest.approx(expected, rel=1e-15)
    _, before = fused(workbench)
    assert [r.score for r in before.results] != list(at.dataframe[0].value["fused score"])
    assert any("Candidates from cache" in c.value for c in at.caption)  # no retrieval, no embedding
    assert at.query_params["rrf_k"] == "5.0"
    assert at.query_params["weights"] == "bm25=0.2,dense=0.5"


def test_weighted_sum_with_a_display_threshold(workbench):
    at = open_page(SEARCH, q=QUERY)
    at.selectbox(key="a.fusion").set_value("weighted").run()
    at.selectbox(key="a.normalization").set_value("zscore").run()
    at.slider(key="a.min_display").set_value(0.3).run()
    _, outcome = fused(workbench, fusion="weighted", normalization="zscore", min_display_score=0.3)
    assert_table_matches(at, outcome)
    assert f"min display score removed {outcome.removed['min display score']}" in at.caption[0].value
    assert outcome.removed["min display score"] > 0


def test_per_source_minimum_and_top_k(workbench):
    at = open_page(SEARCH, q=QUERY)
    at.slider(key="a.min_raw_bm25").set_value(3.0).run()
    at.slider(key="a.top_k").set_value(4).run()
    _, outcome = fused(workbench, min_raw={"bm25": 3.0}, top_k=4)
    assert_table_matches(at, outcome)
    assert len(outcome.results) == 4
    assert f"min raw BM25 removed {outcome.removed['min raw bm25']}" in at.caption[0].value
    assert at.query_params["min_raw"] == "bm25=3"


def test_a_link_reproduces_the_view(app_db, workbench):
    params = {"collection": app_db.collection, "q": QUERY, "fusion": "weighted", "weights": "bm25=0.7,dense=0.3",
              "normalization": "minmax", "top_k": "5", "depth": "50", "min_raw": "dense=0.8"}
    at = open_page(SEARCH, **params)
    assert at.slider(key="a.w_bm25").value == 0.7
    assert at.slider(key="a.top_k").value == 5
    assert at.slider(key="a.min_raw_dense").value == 0.8
    assert at.text_input(key="view.query").value == QUERY
    _, outcome = fused(workbench, fusion="weighted", weights={"bm25": 0.7, "dense": 0.3}, top_k=5, depth=50,
                       min_raw={"dense": 0.8})
    assert_table_matches(at, outcome)
    for key, value in params.items():
        assert at.query_params[key] == value, key


def test_a_bad_link_value_is_reported_and_ignored():
    at = open_page(SEARCH, rrf_k="banana", top_k="7")
    assert at.slider(key="a.rrf_k").value == 60
    assert at.slider(key="a.top_k").value == 7
    assert any("rrf\\_k" in w.value for w in at.warning)


def test_highlights_escape_markup_in_documents():
    at = open_page(SEARCH, q="alert markdown")
    cards = [h.value for h in at.get("html")]
    unsafe = [c for c in cards if "unsafe-1" in c]
    assert unsafe, "the markup document is a result"
    card = unsafe[0]
    assert "<script>" not in card and "<b>Markup</b>" not in card
    assert "&lt;script&gt;<mark>alert</mark>(1)&lt;/script&gt;" in card
    assert "&lt;b&gt;Markup&lt;/b&gt; **title**" in card  # Markdown stays literal in st.html
    assert "**x** <mark>markdown</mark>" in card
    # the expander label escapes Markdown in the id too
    assert any(e.label == "Details of #1 (unsafe\\-1)" for e in at.expander)
    # the table cell holds the text as it is (a dataframe shows it literally)
    assert at.dataframe[0].value["title"][0] == "<b>Markup</b> **title**"


def test_expander_shows_tokens_and_metadata():
    at = open_page(SEARCH, q="alert markdown")
    details = next(e for e in at.expander if "unsafe" in e.label)
    block = details.get("html")[0].value
    tokens = block.split('<pre class="wb-tokens" style="white-space:pre-wrap">')[1].split("</pre>")[0]
    assert "alert" in tokens.split() and "markdown" in tokens.split()
    metadata = block.split('<pre class="wb-metadata">')[1].split("</pre>")[0]
    assert json.loads(html.unescape(metadata)) == {"source": "test", "quality": 3}
    assert "<th>contribution</th>" in block and "&lt;script&gt;" in block and "<script>" not in block


def test_an_empty_source_is_a_readable_warning():
    at = open_page(SEARCH, q="the of")  # only stopwords: BM25 has nothing to match
    assert any("bm25 returned no candidates" in w.value for w in at.warning)
    assert not at.error


def test_both_weights_zero_is_an_error_not_a_crash():
    at = open_page(SEARCH, q=QUERY)
    at.slider(key="a.w_bm25").set_value(0.0).run()
    at.slider(key="a.w_dense").set_value(0.0).run()
    assert any("at least one source weight must be" in e.value for e in at.error)
    assert not at.exception


def test_rerank_names_the_reranker_and_reorders(workbench):
    at = open_page(SEARCH, q=QUERY, rerank_top_n="4", top_k="6")
    at.toggle(key="a.rerank").set_value(True).run()
    info = " ".join(i.value for i in at.info)
    assert "e5" in info and "bi\\-encoder re\\-scoring" in info
    from retrieval.config import SearchConfig

    result = workbench.search("small", QUERY, SearchConfig(rerank=True, rerank_top_n=4, top_k=6))
    frame = at.dataframe[0].value
    reranked_ids = [r.doc_id for r in result.reranked]
    tail = [r.doc_id for r in result.outcome.results if r.doc_id not in reranked_ids][:2]
    assert list(frame["id"]) == reranked_ids + tail
    assert list(frame["change"])[4:] == ["not reranked"] * 2
    assert nullable(frame["rerank score"])[:4] == [r.rerank_score for r in result.reranked]
    assert list(frame["first-stage rank"])[:4] == [r.first_stage_rank for r in result.reranked]
