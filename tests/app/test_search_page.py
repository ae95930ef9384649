"""Search page: defaults, exact fused values, URL state, highlighting, notes, rerank."""

import html
import json
import re

import pytest
from conftest import QUERY, all_widgets, fused, nullable, open_page, plain

from ui.search import views
from ui.search.knobs import FUSION_LABELS

SEARCH = "pages/1_Search.py"
CARD_ID = re.compile(r'^<div class="wb-card"><b>#\d+</b> <span style="[^"]*">([^ ]+) · ')

DEFAULTS = {
    "a.fusion": "weighted", "a.w_bm25": 0.4, "a.w_dense": 0.6, "a.rrf_k": 60, "a.normalization": "l2",
    "a.language_aware": True, "a.rerank_lambda": 0.6,
    "a.min_display": 0.0, "a.min_raw_bm25": 0.0, "a.min_raw_dense": 0.0, "a.top_k": 10, "a.depth": 100,
    "a.rerank": False, "a.rerank_top_n": 20, "a.min_score": None, "a.bm25_backend": "auto",
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
    # a greyed-out control named inside a sentence keeps its acronym (not "the rrf k")
    assert any(plain(c.value).startswith("Greyed out: weighted sum does not use the RRF k (") for c in at.caption)
    # the fusion picker's labels fit the sidebar's box (about 28 characters at 1400 px)
    assert max(len(label) for label in FUSION_LABELS.values()) <= 28


def test_results_are_the_core_fusion_exactly(workbench):
    at = open_page(SEARCH)
    at.text_input(key="view.query").set_value(QUERY).run()
    _, outcome = fused(workbench)
    assert_table_matches(at, outcome)
    # the numbers first, the long text last: the vector columns are in sight at 1400 px
    assert list(at.dataframe[0].value.columns) == [
        "rank", "id", "display score", "fused score", "BM25 rank", "BM25 score", "vector rank", "vector score",
        "title", "snippet"]
    # the threshold line: candidates and what top-K removed
    caption = at.caption[0].value
    assert f"{outcome.n_candidates} candidates" in caption
    assert f"top\\-K removed {outcome.removed['top-k']}" in caption


def test_moving_k_and_a_weight_refuses_cached_candidates(workbench):
    at = open_page(SEARCH, q=QUERY, fusion="rrf", weights="bm25=0.5,dense=0.5")
    at.slider(key="a.rrf_k").set_value(5).run()
    at.slider(key="a.w_bm25").set_value(0.2).run()
    _, outcome = fused(workbench, fusion="rrf", rrf_k=5.0, weights={"bm25": 0.2, "dense": 0.5})
    assert_table_matches(at, outcome)
    # the page's scores are the RRF formula: Σ w / (k + rank), a missing source adding 0
    for r in outcome.results:
        expected = 0.0
        for source, weight in (("bm25", 0.2), ("dense", 0.5)):
            rank = r.sources[source].rank
            expected += 0.0 if rank is None else weight / (5 + rank)
        assert r.score == pytest.approx(expected, rel=1e-15)
    _, before = fused(workbench, fusion="rrf", weights={"bm25": 0.5, "dense": 0.5})
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
    _, outcome = fused(workbench, fusion="weighted", normalization="minmax", weights={"bm25": 0.7, "dense": 0.3},
                       top_k=5, depth=50,
                       min_raw={"dense": 0.8})
    assert_table_matches(at, outcome)
    for key, value in params.items():
        assert at.query_params[key] == value, key


def test_a_bad_link_value_is_reported_and_ignored():
    at = open_page(SEARCH, rrf_k="banana", top_k="7")
    assert at.slider(key="a.rrf_k").value == 60
    assert at.slider(key="a.top_k").value == 7
    assert any("rrf\\_k" in w.value for w in at.warning)


def cards(at) -> dict[str, str]:
    """The result cards' HTML by doc id (the legend above them is not a card)."""
    return {match.group(1): h.value for h in at.get("html") if (match := CARD_ID.match(h.value))}


def between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def test_highlights_escape_markup_in_documents(app_db):
    at = open_page(SEARCH, q="alert markdown")
    card = cards(at)["unsafe-1"]
    assert "<script>" not in card and "<b>Markup</b>" not in card
    assert "&lt;script&gt;<mark>alert</mark>(1)&lt;/script&gt;" in card
    assert "&lt;b&gt;Markup&lt;/b&gt; **title**" in card  # Markdown stays literal in st.html
    assert "**x** <mark>markdown</mark>" in card
    # the details are collapsed under a summary naming the result, its id escaped
    rank = list(at.dataframe[0].value["id"]).index("unsafe-1") + 1
    assert f'<details class="wb-details"><summary>Details of #{rank} (unsafe-1)</summary>' in card
    # the table cell holds the text as it is (a dataframe shows it literally)
    assert at.dataframe[0].value["title"][0] == "<b>Markup</b> **title**"


def test_details_show_tokens_and_metadata(app_db):
    at = open_page(SEARCH, q="alert markdown")
    details = between(cards(at)["unsafe-1"], '<details class="wb-details">', "</details>")
    font = "font-family:workbench-cjk,'Source Code Pro',monospace"  # the bundled CJK face, not tofu
    tokens = between(details, f'<pre class="wb-tokens" style="white-space:pre-wrap;{font}">', "</pre>")
    assert "alert" in tokens.split() and "markdown" in tokens.split()
    metadata = between(details, f'<pre class="wb-metadata" style="{font}">', "</pre>")
    assert json.loads(html.unescape(metadata)) == {"source": "test", "quality": 3}
    assert "<th>contribution</th>" in details and "&lt;script&gt;" in details and "<script>" not in details
    assert "wb-source-detail" not in details  # BM25 and vectors give no detail of their own


def test_each_card_has_a_contribution_bar_on_one_scale(workbench):
    at = open_page(SEARCH, q=QUERY, rrf_k="5.0")
    _, outcome = fused(workbench, rrf_k=5.0)
    shown = cards(at)
    assert list(shown) == [r.doc_id for r in outcome.results]
    scale = max(r.score for r in outcome.results)  # RRF: every contribution ≥ 0
    for r in outcome.results:
        bar = between(shown[r.doc_id], '<div class="wb-bar"', "</span></div>")
        for source, colour in (("bm25", "#d97706"), ("dense", "#2563eb")):
            c = r.sources[source].contribution
            if c > 0:
                assert (f'data-source="{source}" title="{ {"bm25": "BM25", "dense": "vector"}[source]} adds {c:.5g}" '
                        f'style="width:{c / scale * 100:.2f}%;background:{colour}"') in bar
            else:
                assert f'data-source="{source}"' not in bar
        assert f"BM25 {r.sources['bm25'].contribution:.4g} + vector {r.sources['dense'].contribution:.4g}" in bar
    assert "highest fused score shown" in next(h.value for h in at.get("html") if "Bars:" in h.value)


def test_negative_contributions_grow_left_of_the_axis(workbench):
    at = open_page(SEARCH, q=QUERY, fusion="weighted", normalization="zscore")
    _, outcome = fused(workbench, fusion="weighted", normalization="zscore")
    negative = [(r.doc_id, s) for r in outcome.results for s, c in r.sources.items() if c.contribution < 0]
    assert negative, "the premise: z-scores below the mean subtract"
    doc_id, source = negative[0]
    bar = between(cards(at)[doc_id], '<div class="wb-bar"', "</span></div>")
    left = between(bar, "justify-content:flex-end;border-right:1px solid #334155\">", "</div></div>")
    assert f'data-source="{source}"' in left and "subtracts" in left


def test_a_sources_own_detail_is_shown_escaped_and_labelled(workbench):
    # "script" earns the markup document description 3 + one matching sentence 1: below the
    # default minimum of 5, so the link lowers it
    at = open_page(SEARCH, q="script", weights="bm25=0.5,dense=0.5,keyword=0.5", keyword="min_relevance=1")
    from retrieval.search.config import SearchConfig

    config = SearchConfig(weights={"bm25": 0.5, "dense": 0.5, "keyword": 0.5}, keyword={"min_relevance": 1})
    hit = next(h for h in workbench.candidates("small", "script", config).sources["keyword"].hits
               if h.doc_id == "unsafe-1")
    details = between(cards(at)["unsafe-1"], '<details class="wb-details">', "</details>")
    assert "keyword: its own explanation" in details
    table = between(details, '<table class="wb-source-detail" data-source="keyword"><tbody>', "</tbody></table>")
    assert table == "".join(f"<tr><th>{html.escape(key)}</th><td>{html.escape(views.detail_text(value))}</td></tr>"
                            for key, value in hit.detail.items())
    assert hit.detail["content"] == "+1 (unsafe <script>alert(1)</script> text w…)"
    assert "<td>+1 (unsafe &lt;script&gt;alert(1)&lt;/script&gt; text w…)</td>" in table  # escaped
    assert details.count("wb-source-detail") == 1  # only the source that gave a detail


def test_detail_values_read_as_text():
    assert views.detail_text({"hop": 1, "matched": {"person": ["Liu Bei", "<b>"]}, "relevance": 0.1234567,
                              "via": None}) == "hop: 1; matched: person: Liu Bei, <b>; relevance: 0.123457; via: –"


def test_the_per_result_hook_is_called_under_each_card(workbench):
    from streamlit.testing.v1 import AppTest

    script = f"""
import streamlit as st
from retrieval.search.config import SearchConfig
from ui import page, resources
from ui.search import results, views

workbench = resources.workbench()
result = page.search(workbench, "small", {QUERY!r}, SearchConfig(top_k=3))
views.result_cards(result, results.final_rows(result), per_result=lambda doc_id: st.caption("hook " + doc_id))
"""
    at = AppTest.from_string(script, default_timeout=180).run()
    assert not at.exception
    _, outcome = fused(workbench, top_k=3)
    drawn = [(node.type, node.value) for node in at.main.children.values()]
    assert [kind for kind, _ in drawn] == ["html"] + ["html", "caption"] * 3  # the legend, then card, hook
    assert [value for kind, value in drawn if kind == "caption"] == [f"hook {r.doc_id}" for r in outcome.results]
    assert [CARD_ID.match(value).group(1) for kind, value in drawn[1:] if kind == "html"] == \
        [r.doc_id for r in outcome.results]


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
    from retrieval.search.config import SearchConfig

    result = workbench.search("small", QUERY, SearchConfig(rerank=True, rerank_top_n=4, top_k=6))
    frame = at.dataframe[0].value
    reranked_ids = [r.doc_id for r in result.reranked]
    tail = [r.doc_id for r in result.outcome.results if r.doc_id not in reranked_ids][:2]
    assert list(frame["id"]) == reranked_ids + tail
    assert list(frame["change"])[4:] == ["not reranked"] * 2
    assert nullable(frame["rerank score"])[:4] == [r.rerank_score for r in result.reranked]
    assert list(frame["first-stage rank"])[:4] == [r.first_stage_rank for r in result.reranked]


def test_a_query_dependent_config_says_so_and_can_be_dropped(workbench):
    """A link with learned query-dependent weights: the sidebar says the sliders set only the total,
    the results' notes say what set this query's split, and 'Use fixed weights' drops it."""
    from retrieval.search.config import SearchConfig
    from ui.state import VIEW_KEY

    model = {"sources": ["bm25", "dense"], "intercept": 0.3, "coefficients": {"length": -1.0},
             "mean": {"length": 2.0}, "scale": {"length": 0.5}}
    at = open_page("pages/1_Search.py", q=QUERY, query_weights=json.dumps(model))
    assert at.session_state[VIEW_KEY].config_a.query_weights == model
    said = " ".join(plain(e.value) for e in [*at.caption, *at.markdown, *at.info, *at.warning])
    assert "Query-dependent weights (learned)" in said
    assert "query-dependent weights: bm25 " in said  # the search's own note: what set this query's split
    at.button(key="a.drop_query_weights").click().run()
    assert not at.exception
    config = at.session_state[VIEW_KEY].config_a
    assert config.query_weights == {} and config == SearchConfig().edited(weights=config.weights)
