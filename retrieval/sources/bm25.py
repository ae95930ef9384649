"""BM25 sources over the analyser's stored tokens.

`RankBM25Source` — rank-bm25's `BM25Okapi` with settable k1 and b, built once per collection
version, with Lucene's idf:

    idf(t) = ln(1 + (N − n_t + 0.5) / (n_t + 0.5))
    score(d, q) = Σ_{t ∈ q} idf(t) · tf(t,d)·(k1 + 1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl))

rank-bm25's own idf, ln((N − n + 0.5)/(n + 0.5)), is zero or negative for a term in half the
documents or more (it then substitutes ε × mean idf), which on small corpora makes common query
terms worthless; Lucene's +1 keeps every idf positive, and is what LanceDB's index uses.

`LanceFTSSource` — LanceDB's native full-text index over the same tokens: the backend for large
collections (milliseconds at 1M documents, where rank-bm25 scores every document in Python).
It has fixed k1 = 1.2, b = 0.75 and the same Lucene idf, so with those values both backends give
the same ranking (the test suite checks this).
"""

from __future__ import annotations

import math

from rank_bm25 import BM25Okapi

from ..tokenize import tokenize
from ..types import Hit
from .base import top_hits

LABEL = "BM25"


def params(config) -> tuple:
    if config.bm25_backend == "lancedb":
        return ("lancedb",)
    return ("rank_bm25", config.bm25_k1, config.bm25_b)


def build(store, collection: str, config):
    if config.bm25_backend == "lancedb":
        return LanceFTSSource(store.table(collection))
    rows = store.column(collection, ["id", "tokens"])
    token_lists = [t.split() for t in rows.column("tokens").to_pylist()]
    return RankBM25Source(rows.column("id").to_pylist(), token_lists, config.bm25_k1, config.bm25_b)


class LuceneIdfBM25(BM25Okapi):
    """`BM25Okapi` whose idf is Lucene's ln(1 + (N − n + 0.5)/(n + 0.5))."""

    def _calc_idf(self, nd):
        for word, freq in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


class RankBM25Source:
    name = "bm25"

    def __init__(self, ids: list[str], token_lists: list[list[str]], k1: float = 0.9, b: float = 0.4):
        self.ids = ids
        self.k1, self.b = k1, b
        # rank-bm25 divides by the mean length; an all-empty corpus would divide by zero.
        self.model = LuceneIdfBM25(token_lists, k1=k1, b=b) if any(token_lists) else None

    def search(self, query: str, depth: int) -> list[Hit]:
        terms = tokenize(query)
        if not terms or self.model is None:
            return []
        return top_hits(self.ids, self.model.get_scores(terms), depth)


class LanceFTSSource:
    name = "bm25"

    def __init__(self, table):
        self.table = table

    def search(self, query: str, depth: int) -> list[Hit]:
        terms = tokenize(query)
        if not terms:
            return []
        rows = (self.table.search(" ".join(terms), query_type="fts", fts_columns="tokens")
                .limit(depth).select(["id"]).to_arrow())
        ids = rows.column("id").to_pylist()
        scores = rows.column("_score").to_pylist()
        return top_hits(ids, scores, depth)
