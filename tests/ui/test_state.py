"""URL <-> View mapping of the UI (pure, no Streamlit run)."""

import json

import pytest

from retrieval.search.config import SearchConfig
from retrieval.types import RetrievalError
from ui.state import View, default_config_b, params_for, view_from_params


def test_defaults_without_parameters():
    view = view_from_params({})
    assert view.collection is None and view.query == ""
    assert view.config_a == SearchConfig()
    assert view.config_b == default_config_b()
    assert view.compare_mode == "rerank" and view.rrf_ks == [1, 10, 60, 200]
    assert view.notices == []


def test_round_trip_per_page():
    view = View(collection="docs", query="tea 茶")
    view.config_a = SearchConfig(fusion="weighted", weights={"bm25": 0.3, "dense": 0.7}, rrf_k=12.0, top_k=7,
                                 min_raw={"bm25": 2.5}, min_display_score=0.25, rerank=True)
    view.config_b = SearchConfig(rrf_k=5.0)
    view.compare_mode = "configs"
    view.rrf_ks = [5, 60]
    compare = params_for(view, "compare")
    assert compare["q"] == "tea 茶" and compare["mode"] == "configs" and compare["b.rrf_k"] == "5.0"
    back = view_from_params(compare)
    assert (back.collection, back.query, back.config_a, back.config_b, back.compare_mode) == (
        "docs", "tea 茶", view.config_a, view.config_b, "configs")
    assert "ks" not in compare and params_for(view, "distributions")["ks"] == "5,60"
    assert view_from_params(params_for(view, "distributions")).rrf_ks == [5, 60]
    assert params_for(view, "corpus") == {"collection": "docs"}
    assert not any(k.startswith("b.") for k in params_for(view, "search"))


def test_bad_values_are_skipped_and_reported():
    view = view_from_params({"rrf_k": "x", "top_k": "3", "fusion": "magic", "mode": "nope", "ks": "60,7,abc",
                             "b.depth": "-1"})
    assert view.config_a.rrf_k == 60.0 and view.config_a.top_k == 3 and view.config_a.fusion == "weighted"
    assert view.config_b.depth == default_config_b().depth
    assert view.rrf_ks == [60] and view.compare_mode == "rerank"
    text = " | ".join(view.notices)
    for part in ("rrf_k", "fusion must be one of", "compare mode", "7, abc", "config B", "depth must be"):
        assert part in text, part


def test_weights_always_list_both_ui_sources():
    view = view_from_params({"weights": "dense=1"})
    assert view.config_a.weights == {"bm25": 0.0, "dense": 1.0}
    assert list(view_from_params({"weights": "dense=1,bm25=0.5"}).config_a.weights) == ["bm25", "dense"]
    # both zero cannot be a valid config: the defaults stay and the reason is given
    view = view_from_params({"weights": "bm25=0,dense=0"})
    assert view.config_a.weights == {"bm25": 0.4, "dense": 0.6}
    assert any("at least one source weight" in n for n in view.notices)


def test_judging_is_off_by_default_and_on_for_links_that_judge():
    from ui.state import params_for, view_from_params

    assert view_from_params({}).judging is False
    assert view_from_params({"judge": "1"}).judging is True
    assert view_from_params({"set": "sample"}).judging is True  # e.g. Evaluate's worst-query links
    view = view_from_params({"judge": "1", "q": "x"})
    assert params_for(view, "search")["judge"] == "1"
    assert "judge" not in params_for(view_from_params({"q": "x"}), "search")


def test_a_link_with_deeply_nested_or_huge_json_is_skipped_with_a_notice():
    # 100,000 nested lists made json.loads raise RecursionError on every page of the session.
    deep = "[" * 100_000 + "]" * 100_000
    for name, raw in (("filters", deep), ("query_weights", '{"a": ' * 50_000 + "1" + "}" * 50_000),
                      ("filters", json.dumps(["category=x"] * 2_000)), ("b.query_weights", "{" * 40 + "}" * 40)):
        view = view_from_params({"q": "river", name: raw})
        assert view.config_a.filters == [] and view.config_a.query_weights == {} and view.query == "river"
        text = " | ".join(view.notices)
        assert "Ignored part of the link" in text and name.removeprefix("b.") in text, text
        assert ("nested" in text or "characters long" in text) and raw[:50] not in text, text
    nested = '{"weights": {"bm25": ' + "[" * 33 + "1" + "]" * 33 + "}}"
    with pytest.raises(RetrievalError, match="nested more than 32 deep"):
        SearchConfig.from_json(nested)
    with pytest.raises(RetrievalError, match="nested more than 32 deep"):
        SearchConfig.from_json("[" * 100_000)
    ok = view_from_params({"filters": json.dumps(["category=a|b"])})
    assert ok.config_a.filters == ["category=a|b"] and ok.notices == []
