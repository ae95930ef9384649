"""The in-memory BM25 scorer (postings) gives rank-bm25's scores, bit for bit."""

from __future__ import annotations

import random

import numpy as np
import pytest

from retrieval.sources.bm25 import BM25Postings, LuceneIdfBM25, RankBM25Source
from retrieval.text.tokenize import tokenize


def random_corpus(seed: int, n_docs: int, vocabulary: int) -> list[list[str]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocabulary)]
    # Zipf-like: a few terms in most documents (rank-bm25's own idf would go ≤ 0 there), many rare.
    weights = [1 / (i + 1) for i in range(vocabulary)]
    return [rng.choices(words, weights, k=rng.randint(0, 40)) for _ in range(n_docs)]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("k1", "b"), [(0.9, 0.4), (1.2, 0.75), (0.0, 0.0), (3.0, 1.0), (1.5, 0.3)])
def test_postings_scores_equal_rank_bm25_exactly(seed, k1, b):
    docs = random_corpus(seed, 300, 120)
    reference = LuceneIdfBM25(docs, k1=k1, b=b)
    postings = BM25Postings(docs)
    rng = random.Random(seed + 100)
    for _ in range(25):
        # repeated terms and terms outside the vocabulary included
        query = rng.choices([f"w{i}" for i in range(130)], k=rng.randint(1, 8))
        ours, theirs = postings.scores(query, k1, b), reference.get_scores(query)
        finite = np.isfinite(theirs)
        assert np.array_equal(ours[finite], theirs[finite])
        # rank-bm25 divides 0 by 0 (k1 = 0, or b = 1 and an empty document): NaN, dropped from
        # its ranking; here a document without the term gets nothing from it.
        assert np.isfinite(ours).all()
        assert k1 == 0 or b == 1 or finite.all()


def test_k1_zero_counts_presence_only():
    docs = [["a", "a", "a", "b"], ["a"], ["c"], ["b", "b"]]
    postings = BM25Postings(docs)
    idf = dict(zip(postings.vocabulary, postings.idf, strict=True))
    scores = postings.scores(["a", "b", "b"], 0.0, 0.75)
    assert scores.tolist() == [idf["a"] + idf["b"] + idf["b"], idf["a"], 0.0, idf["b"] + idf["b"]]


def test_source_ranks_as_rank_bm25_on_real_text():
    texts = ["The owl hunts mice at night.", "Mice eat grain; the farm cat hunts mice.",
             "猫头鹰在夜间捕食老鼠。", "老鼠吃谷物，农场的猫捕老鼠。", "Bees make honey in the hive."]
    docs = [tokenize(t) for t in texts]
    source = RankBM25Source([f"d{i}" for i in range(len(texts))], docs, k1=1.2, b=0.75)
    reference = LuceneIdfBM25(docs, k1=1.2, b=0.75)
    for query in ("cat hunts mice", "老鼠 猫", "honey honey bees", "nothing matches"):
        terms = tokenize(query)
        assert np.array_equal(source.scores(terms), reference.get_scores(terms))
        expected = [(f"d{i}", s) for i, s in enumerate(reference.get_scores(terms)) if s > 0]
        expected.sort(key=lambda p: (-p[1], p[0]))
        assert [(h.doc_id, h.raw_score) for h in source.search(query, 10)] == expected


def test_source_shares_postings_across_parameters_and_handles_empty_corpus():
    docs = random_corpus(7, 50, 30)
    postings = BM25Postings(docs)
    for k1, b in ((0.5, 0.1), (2.0, 0.9)):
        source = RankBM25Source([str(i) for i in range(50)], None, k1, b, postings=postings)
        assert np.array_equal(source.scores(["w1", "w3"]), LuceneIdfBM25(docs, k1=k1, b=b).get_scores(["w1", "w3"]))
    empty = RankBM25Source(["a", "b"], [[], []])
    assert empty.search("anything", 10) == []
    assert RankBM25Source([], []).search("anything", 10) == []
