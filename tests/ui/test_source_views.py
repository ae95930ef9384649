"""The pure frame of Compare's per-source rankings (`ui.search.source_views.source_ranking_frame`)."""

import pandas as pd

from retrieval.types import Hit, SourceResult
from ui.search.source_views import source_ranking_frame

DOCS = {"a": {"title": "Alpha"}, "b": {"title": "", "text": "Beta text " * 20}}


def test_frame_lists_rank_score_title_detail_then_id():
    result = SourceResult("keyword", (
        Hit("a", 17.0, 1, {"name": "+10 (exact: chin)", "tags": "+2 (china)", "quality": 4.5}),
        Hit("b", 12.0, 2, {"name": "+10 (exact: chin)", "content": "+1 (x)", "quality": None}),
    ))
    frame = source_ranking_frame(result, DOCS, top_k=5)
    assert list(frame.columns) == ["rank", "raw score", "title", "name", "tags", "quality", "content", "id"]
    first = frame.iloc[0].to_dict()
    assert pd.isna(first.pop("content"))  # a field this hit's detail lacks: empty cell
    assert first == {"rank": 1, "raw score": 17.0, "title": "Alpha", "name": "+10 (exact: chin)",
                     "tags": "+2 (china)", "quality": 4.5, "id": "a"}
    assert frame.iloc[1]["title"] == ("Beta text " * 8)  # no title: the text's first 80 characters
    assert list(source_ranking_frame(result, DOCS, top_k=1)["id"]) == ["a"]
    columns = list(source_ranking_frame(result, DOCS, 5, with_detail=False).columns)
    assert columns == ["rank", "raw score", "title", "id"]


def test_an_empty_source_gives_an_empty_frame_with_the_columns():
    frame = source_ranking_frame(SourceResult("bm25"), DOCS, top_k=10)
    assert frame.empty and list(frame.columns) == ["rank", "raw score", "title", "id"]


def test_a_learned_score_is_explained_by_its_largest_contributions():
    from ui.search.results import learned_explanation

    parts = {"bias": 0.1, "fused": 0.5, "dense_rank": 0.3, "bm25_raw": -0.088, "length": 0.0, "cjk": 0.001,
             "oov": -0.002, "doc_length": 0.004, "title_match": 0.002}
    said = learned_explanation(parts, shown=3)
    assert said == ("learned score 0.817 = bias 0.100 · fused +0.500 · dense_rank +0.300 · bm25_raw -0.088 · "
                    "5 more +0.005")
