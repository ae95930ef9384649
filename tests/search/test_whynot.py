"""'Why not this document?' on a six-document collection whose BM25 scores are computed by hand.

Every text has two tokens (so |d| = avgdl and BM25's length factor is 1, and tf = 1 gives
tf·(k1 + 1)/(tf + k1) = 1): a document's BM25 score is the sum of its query terms' idf,
idf(t) = ln(1 + (N − n_t + 0.5)/(n_t + 0.5)) with N = 6. For the query "kiwi mango":
n_kiwi = 3 (a, b, d) → idf = ln(1 + 3.5/3.5) = ln 2; n_mango = 2 (a, c) → ln(1 + 4.5/2.5) = ln 2.8.
So a = ln 2 + ln 2.8, c = ln 2.8, b = d = ln 2 (b and d have the same text), e and f share no term.
"""

import json
import math

import numpy as np
import pytest

from retrieval.cli.main import main
from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.models.embed import load_encoder
from retrieval.search.config import SearchConfig
from retrieval.search.rerank import get_reranker
from retrieval.search.whynot.standing import (
    DEPTH,
    FILTER,
    MIN_DISPLAY,
    MIN_FUSED,
    MIN_RAW,
    RERANK,
    SHOWN,
    TOP_K,
    collection_rank,
)
from retrieval.search.whynot.trials import RAISE_TOP_K, REQUERY, floor_to, relative_change
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.types import RetrievalError

FRUIT = """id,text,quality,colour
a,kiwi mango,4,red
b,kiwi plum,3,red
c,mango plum,5,red
d,kiwi plum,2,green
e,lemon melon,1,red
f,plum fig,1,red
"""
QUERY = "kiwi mango"
LN2, LN28 = math.log(2), math.log(2.8)
BM25_ONLY = {"bm25": 1.0}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return tmp_path_factory.mktemp("lancedb")


@pytest.fixture(scope="module")
def workbench(db):
    wb = Workbench(Store(str(db)))
    create_collection(wb.store, "fruit", parse_bytes(FRUIT.encode(), "fruit.csv"))
    return wb


def explain(workbench, doc_id, query=QUERY, **config):
    """The why-not report under RRF k = 60, 0.5 / 0.5 unless the test says otherwise: the stages and
    changes below are computed by hand for that fusion."""
    config = {"fusion": "rrf", "weights": {"bm25": 0.5, "dense": 0.5}, **config}
    return workbench.explain_document("fruit", query, SearchConfig(**config), doc_id)


def by_source(explanation):
    return {s.source: s for s in explanation.standings}


# ---- pure parts ------------------------------------------------------------------------------
def test_collection_rank_counts_strictly_higher_scores_and_reports_ties():
    scores = [3.0, 2.0, 2.0, 2.0, 1.0]
    assert collection_rank(scores, 3.0) == (1, 0)
    assert collection_rank(scores, 2.0) == (2, 2)  # three share rank 2: two others tie with it
    assert collection_rank(scores, 1.0) == (5, 0)


def test_relative_change_and_floor_to_a_slider_step():
    assert relative_change(0.5, 0.45) == pytest.approx(0.1)
    assert relative_change(60, 50) == pytest.approx(1 / 6)
    assert relative_change(None, 0.3) == 0.3 and relative_change(2.0, None) == 1.0
    assert floor_to(0.6931, 0.1) == 0.6
    assert floor_to(0.968254, 0.01) == 0.96
    assert floor_to(1 / 63, 1e-5) == 0.01587


# ---- whole-collection rank per source ----------------------------------------------------------
def test_bm25_scores_and_whole_collection_ranks_are_the_hand_computed_ones(workbench):
    expected = {"a": (LN2 + LN28, 1, 0, 1), "c": (LN28, 2, 0, 2), "b": (LN2, 3, 1, 3), "d": (LN2, 3, 1, 4)}
    for doc_id, (score, rank, ties, position) in expected.items():
        bm25 = by_source(explain(workbench, doc_id, depth=1, top_k=1))["bm25"]
        assert bm25.score == pytest.approx(score, abs=1e-12)
        assert (bm25.rank, bm25.ties, bm25.position, bm25.scored_count) == (rank, ties, position, 4)
        assert bm25.in_candidates == (doc_id == "a")  # depth 1: only a is a candidate
    unscored = by_source(explain(workbench, "e"))["bm25"]
    assert not unscored.scored and unscored.rank is None
    assert unscored.note == "BM25 does not score it: it shares no indexed term with the query (BM25 score 0)"


def test_dense_whole_collection_rank_is_one_plus_the_documents_with_a_higher_cosine(workbench):
    encoder = load_encoder(workbench.info("fruit").model)
    texts = {"a": "kiwi mango", "b": "kiwi plum", "c": "mango plum", "d": "kiwi plum", "e": "lemon melon",
             "f": "plum fig"}
    q = encoder.encode_queries([QUERY])[0]
    vectors = encoder.encode_passages(list(texts.values()))
    cosines = dict(zip(texts, (vectors @ q / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(q))).tolist(),
                       strict=True))
    assert cosines["b"] == cosines["d"]  # the same text: the same vector, a tie
    for doc_id in ("b", "d", "e"):
        dense = by_source(explain(workbench, doc_id, depth=1, top_k=1))["dense"]
        assert dense.score == pytest.approx(cosines[doc_id], abs=1e-5)
        assert dense.rank == 1 + sum(1 for c in cosines.values() if c > cosines[doc_id] + 1e-6)
        assert dense.ties == (1 if doc_id in ("b", "d") else 0)
        assert dense.scored_count == 6  # the cosine scores every document


def test_keyword_points_and_rank_beyond_its_minimum_relevance(workbench):
    # No title: description +3 (the text matches) and one content sentence +1 = 4 points for
    # a, b, c, d; the default minimum relevance 5 keeps the source from returning any of them.
    keyword = by_source(explain(workbench, "c", weights={"bm25": 0.5, "keyword": 0.5}))["keyword"]
    assert (keyword.score, keyword.rank, keyword.ties, keyword.position) == (4.0, 1, 3, None)
    assert keyword.note == "keyword scores it but does not return it at any depth (its own limit or minimum)"


# ---- the first stage that dropped it, and the smallest change ----------------------------------
def test_shown_document_says_its_rank(workbench):
    e = explain(workbench, "c", weights=BM25_ONLY)
    assert (e.stage, e.final_rank, e.changes) == (SHOWN, 2, [])
    assert e.reason == "It is shown: rank 2 of the top 10."


def test_filter_stage_and_removing_the_filter(workbench):
    e = explain(workbench, "d", weights=BM25_ONLY, filters=["colour=red"])
    assert e.stage == FILTER and e.reason == "The filter colour=red removes it before any source ranks."
    assert e.over_whole_collection and by_source(e)["bm25"].rank == 3  # the standing without the filter
    assert (e.best.knob, e.best.old, e.best.new, e.best.kind, e.best.rank) == ("filters", ["colour=red"], [],
                                                                             REQUERY, 4)


def test_depth_stage_and_raising_the_depth_to_its_position(workbench):
    # BM25 alone at depth 2 returns a, c; b is at position 3.
    e = explain(workbench, "b", weights=BM25_ONLY, depth=2)
    assert e.stage == DEPTH and e.reason == "No source returns it within the candidate depth 2."
    assert (e.best.knob, e.best.new, e.best.size, e.best.kind, e.best.rank) == ("depth", 3, 0.5, REQUERY, 3)
    assert e.best.config.depth == 3


def test_min_raw_stage_and_lowering_the_minimum_just_enough(workbench):
    # min 1.0 keeps a (1.72) and c (1.03); b's ln 2 = 0.693 is under it. Lowered to 0.6 (the
    # slider's 0.1 grid): relative change 0.4, better than removing it (1).
    e = explain(workbench, "b", weights=BM25_ONLY, min_raw={"bm25": 1.0})
    assert e.stage == MIN_RAW and e.reason == ("Every source that returns it has it below its minimum raw score "
                                               "(BM25 < 1).")
    assert by_source(e)["bm25"].passes_minimum is False
    assert (e.best.knob, e.best.new, e.best.rank) == ("min_raw.bm25", 0.6, 3)
    assert e.best.size == pytest.approx(0.4)
    assert e.best.config.min_raw == {"bm25": 0.6}


def test_min_fused_score_stage_and_lowering_it_below_the_documents_score(workbench):
    # RRF, BM25 alone, k = 60: a 1/61, c 1/62, b 1/63 = 0.015873 < 0.016. Lowering the minimum
    # to 0.01587 is a 0.8 % change; RRF k would have to drop to 50 (1/53 ≥ 0.016), 16.7 %.
    e = explain(workbench, "b", weights=BM25_ONLY, min_score=0.016)
    assert e.stage == MIN_FUSED and e.fused_rank == 3 and e.fused_score == pytest.approx(1 / 63)
    assert (e.best.knob, e.best.new, e.best.rank) == ("min_score", 0.01587, 3)
    assert e.best.size == pytest.approx((0.016 - 0.01587) / 0.016)
    k_change = next(c for c in e.changes if c.knob == "rrf_k")
    assert (k_change.new, k_change.size) == (50.0, pytest.approx(10 / 60))


def test_min_display_score_stage(workbench):
    # display = score × (k + 1)/Σw: b 61/63 = 0.9683 < 0.97; lowered to 0.96 (the slider's 0.01 grid).
    e = explain(workbench, "b", weights=BM25_ONLY, min_display_score=0.97)
    assert e.stage == MIN_DISPLAY and e.display_score == pytest.approx(61 / 63)
    assert (e.best.knob, e.best.new, e.best.rank) == ("min_display_score", 0.96, 3)


def test_top_k_stage_and_the_smallest_weight_change(workbench):
    # BM25 ranks a 1, c 2; the keyword scorer (minimum relevance 0, so it returns its 4-point
    # records, ties by quality: c 5, a 4, b 3, d 2) ranks c 1, a 2. With 0.5 each both score
    # 0.5/61 + 0.5/62 and a wins the tie by id, so c is second, out of the top 1. BM25 0.45
    # (−10 %) makes c's 0.45/62 + 0.5/61 beat a's 0.45/61 + 0.5/62; so would keyword 0.55
    # (+10 %); raising top-K to 2 always works, and is tried last.
    config = dict(weights={"bm25": 0.5, "keyword": 0.5}, keyword={"min_relevance": 0}, top_k=1)
    e = explain(workbench, "c", **config)
    assert e.stage == TOP_K and e.reason == "It passes every threshold but is at rank 2, below the top 1."
    assert (e.best.knob, e.best.old, e.best.new, e.best.rank) == ("weights.bm25", 0.5, 0.45, 1)
    assert e.best.size == pytest.approx(0.1)
    assert [(c.knob, c.new) for c in e.changes][1:] == [("weights.keyword", 0.55), ("top_k", 2)]
    assert e.changes[-1].kind == RAISE_TOP_K
    after = workbench.search("fruit", QUERY, e.best.config)
    assert [f.doc_id for f, _ in after.final_ranking()] == ["c"]


def test_rerank_stage_and_turning_rerank_off(workbench):
    # "mango": a and c tie in BM25 (ln 2.8 each), a first by id; the E5 reranker prefers c, so
    # with top-K 1 and top-N 2 the reranker pushes a out.
    scores = get_reranker("e5").score("mango", ["kiwi mango", "mango plum"])
    assert scores[1] > scores[0]
    e = explain(workbench, "a", query="mango", weights=BM25_ONLY, top_k=1, rerank=True, rerank_top_n=2,
                rerank_lambda=0.0)  # the reranker's order alone
    assert e.stage == RERANK and e.fused_rank == 1
    assert e.reason == ("It is at fused rank 1, inside the top 1 before rerank; the reranker moves it to rank 2 "
                        "after rerank, out of the top 1.")
    # Over the reranked two, min-max gives a fused 1, c fused 0 (RRF ranks 1 and 2) and a rerank 0,
    # c rerank 1: final(a) = λ, final(c) = 1 − λ, so a is back first from λ > 0.5: the smallest
    # change is λ 0 → 0.55 (size 0.55), before rerank off (size 1).
    assert (e.best.knob, e.best.new, e.best.rank) == ("rerank_lambda", 0.55, 1)
    assert [(c.knob, c.new) for c in e.changes][:2] == [("rerank_lambda", 0.55), ("rerank", False)]


def test_unknown_or_empty_document_id_is_a_clear_error(workbench):
    with pytest.raises(RetrievalError, match="Unknown document id 'zz' in collection 'fruit'"):
        explain(workbench, "zz")
    with pytest.raises(RetrievalError, match="Give a document id"):
        explain(workbench, "  ")


def test_title_or_id_search_finds_documents(workbench):
    assert workbench.reads.find_documents("fruit", "A") == [("a", "")]
    assert workbench.reads.find_documents("fruit", "") == []


def test_cli_explain_doc_prints_the_table_the_stage_and_the_smallest_change(workbench, db, capsys):
    capsys.readouterr()
    args = ["--db", str(db), "search", "fruit", QUERY, "--weights", "bm25=1", "--min-raw", "bm25=1",
            "--explain-doc", "b"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "document b"
    header = lines[1].split()
    assert header[:6] == ["source", "score", "rank", "ties", "position", "within"]
    assert lines[2].split()[:9] == ["BM25", "0.693147", "3", "of", "4", "1", "3", "yes", "no"]
    assert "stage: min raw: Every source that returns it has it below its minimum raw score (BM25 < 1)." in lines
    assert lines[-1].startswith("smallest change (")  # the only knob that helps: no "also" lines
    assert lines[-1].endswith("tried): minimum BM25 raw score: 1 → 0.6 (document at rank 3)")
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["stage"] == "min raw" and data["smallest_change"]["new"] == 0.6
    assert data["sources"][0]["rank"] == 3 and data["sources"][0]["ties"] == 1
    assert main(["--db", str(db), "search", "fruit", QUERY, "--explain-doc", "nope"]) == 2
    assert "error: Unknown document id 'nope' in collection 'fruit'" in capsys.readouterr().err


def test_recall_gaps_split_unretrieved_from_ranked_below_the_cutoff():
    from retrieval.search.whynot.recall_gaps import RecallGap, recall_gaps

    runs = {  # scores: higher first; q1's fused ranking is x1, x2 … x12
        "bm25": {"q1": {"x1": 3.0, "x12": 2.0, "x13": 1.0}, "q2": {"y1": 1.0}},
        "dense": {"q1": {"x2": 1.0}, "q2": {}},
        "hybrid": {"q1": {f"x{i}": 13.0 - i for i in range(1, 13)}, "q2": {"y1": 1.0}},
    }
    qrels = {"q1": {"x1": 2, "x12": 1, "x13": 3, "z": 1, "x5": 0}, "q2": {"y1": 1, "w": 2}}
    assert recall_gaps(runs, qrels) == [
        RecallGap("q1", "z", 1, (), None),  # no source returned it
        RecallGap("q1", "x12", 1, ("bm25",), 12),  # fused rank 12 > 10
        RecallGap("q1", "x13", 3, ("bm25",), None),  # retrieved, not in the fused ranking
        RecallGap("q2", "w", 2, (), None),
    ]
