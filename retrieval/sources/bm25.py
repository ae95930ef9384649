"""BM25 sources over the analyser's stored tokens.

`RankBM25Source` — in-memory BM25 with settable k1 and b and Lucene's idf: rank-bm25's `BM25Okapi`
formula, scored from postings (`BM25Postings`, built once per collection version) instead of by
rank-bm25's Python loop over every document, with bit-for-bit the same scores (the tests compare
it with `LuceneIdfBM25`, rank-bm25 itself):

    idf(t) = ln(1 + (N − n_t + 0.5) / (n_t + 0.5))
    score(d, q) = Σ_{t ∈ q} idf(t) · tf(t,d)·(k1 + 1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl))

rank-bm25's own idf, ln((N − n + 0.5)/(n + 0.5)), is zero or negative for a term in half the
documents or more (it then substitutes ε × mean idf), which on small corpora makes common query
terms worthless; Lucene's +1 keeps every idf positive, and is what LanceDB's index uses.

`LanceFTSSource` — LanceDB's native full-text index over the same tokens: the backend for large
collections (milliseconds at 1M documents, where rank-bm25 scores every document in Python).
It has fixed k1 = 1.2, b = 0.75 and the same Lucene idf, so with those values both backends give
the same ranking (the test suite checks this).

Speed (docs/experiments/scale.md): rank-bm25 reads every document's term counts in Python for
every query term (~20 ms a query at 20k documents); the postings touch only the documents that
hold a query term (well under 1 ms there).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property, partial
from typing import TYPE_CHECKING

import numpy as np
from rank_bm25 import BM25Okapi

from retrieval import limits
from retrieval.sources.base import Derives, LoadContext, Param, SourceSpec, ids_in, top_hits
from retrieval.sources.lance_requests import LanceRequest, RowIdMap, fts_query, hit_ids, ready_map
from retrieval.text.tokenize import analyser, reindex_note, tokenize
from retrieval.types import Hit

if TYPE_CHECKING:
    from retrieval.search.config import SearchConfig

class LoadedBM25:
    """A collection's BM25 inputs at one state, read on first use: the table handle (native
    index) and its row-id map, its size, every document's stored tokens (rank-bm25), and the
    analyser the collection was built with (`tokenize.analyser`), which queries go through."""

    def __init__(self, context: LoadContext, collection: str):
        self.table = context.table(collection)
        self.doc_count = self.table.count_rows()
        self.tokenizer = context.store.info(collection).tokenizer
        self.analyse = analyser(self.tokenizer)
        self._context, self._collection = context, collection

    def row_id_map(self) -> RowIdMap:
        return self._context.row_id_map(self._collection)

    @cached_property
    def tokens(self) -> tuple[list[str], list[list[str]]]:
        rows = self._context.column(self._collection, ["id", "tokens"])
        return rows.column("id").to_pylist(), [t.split() for t in rows.column("tokens").to_pylist()]

    @cached_property
    def ids(self) -> list[str]:
        return self.tokens[0]

    @cached_property
    def postings(self) -> BM25Postings:
        """The in-memory index, shared by every (k1, b): a slider move over k1 or b re-derives
        one length-normalisation vector, it does not re-read or re-index the collection."""
        postings = BM25Postings(self.tokens[1])
        self.__dict__.pop("tokens", None)  # the postings hold what scoring needs
        return postings


def key(config: SearchConfig) -> tuple:
    if config.bm25_backend == "lancedb":
        return ("lancedb",)
    return (config.bm25_backend, config.bm25_k1, config.bm25_b)


def resolved_backend(backend: str, doc_count: int) -> str:
    """'auto' → 'rank_bm25' below `limits.SCALE_DOCS` documents, else 'lancedb'; others as given."""
    if backend != "auto":
        return backend
    return "lancedb" if doc_count >= limits.SCALE_DOCS else "rank_bm25"


def build(loaded: LoadedBM25, config: SearchConfig):
    backend = resolved_backend(config.bm25_backend, loaded.doc_count)
    source: RankBM25Source | LanceFTSSource
    if backend == "lancedb":
        source = LanceFTSSource(loaded.table, loaded.row_id_map, analyse=loaded.analyse)
        if config.bm25_backend == "auto":
            source.backend += f" (auto: {loaded.doc_count:,} documents ≥ {limits.SCALE_DOCS:,})"
    else:
        source = RankBM25Source(loaded.ids, None, config.bm25_k1, config.bm25_b, postings=loaded.postings,
                                analyse=loaded.analyse)
    # A collection built with an older analyser is flagged where the source says what served it.
    if (note := reindex_note(loaded.tokenizer)) is not None:
        source.backend += f"; {note}"
    return source


_AGAIN = " Retrieves BM25 candidates again."
SPEC = SourceSpec(
    name="bm25", label="BM25", load=LoadedBM25, build=build, key=key, lexical=True,
    # rank-bm25 reads the tokens; the 'native' backend LanceDB's full-text index over them.
    derives=Derives(columns=("tokens", "n_tokens"), text_index=("tokens",)),
    weight_help="Multiplies BM25's part of the fused score: RRF adds w/(k + BM25 rank), weighted sum "
                "adds w × normalised BM25 score. 0 keeps BM25's ranks visible but makes it add nothing.",
    min_raw=Param("min_raw.bm25", "Minimum BM25 raw score",
                  "Drops BM25 hits whose raw BM25 score is below this before fusion (0 = off): they add "
                  "nothing from BM25, the other BM25 hits keep their ranks, and normalisation is "
                  "recomputed over the hits that remain.", 0.0, 30.0, 0.1),
    params=(
        Param("bm25_k1", "BM25 k1", "Term-frequency saturation (rank_bm25): a higher k1 lets repeated query "
              "terms keep adding score, 0 counts presence only." + _AGAIN, 0.0, 3.0, 0.05),
        Param("bm25_b", "BM25 b", "Length normalisation (rank_bm25): 1 fully penalises long documents, 0 "
              "ignores length." + _AGAIN, 0.0, 1.0, 0.05),
    ),
    description="Okapi BM25 over the analyser's tokens (rank-bm25 with settable k1 and b, or LanceDB's "
                "native full-text index).",
)


class LuceneIdfBM25(BM25Okapi):
    """`BM25Okapi` whose idf is Lucene's ln(1 + (N − n + 0.5)/(n + 0.5))."""

    def _calc_idf(self, nd):
        for word, freq in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


NO_TERMS = "the query has no indexable terms (only stopwords, punctuation or symbols): BM25 found no terms to match"


def why_no_hits(query: str, analyse: Callable[[str], list[str]] = tokenize) -> str | None:
    """Why BM25 returns nothing for `query`, when the query itself is the reason."""
    return NO_TERMS if not analyse(query) else None


class BM25Postings:
    """Term → (documents holding it, its count in each), document lengths and Lucene idf, built
    once from the token lists; `scores` gives rank-bm25's `get_scores` for any k1 and b.

    Exactly rank-bm25's arithmetic, term by term in query order (a repeated query term counts
    again), so the float64 scores are identical: for each query term t with idf(t),

        score[d] += idf(t) · (tf · (k1 + 1) / (tf + k1 · (1 − b + b · len(d) / avgdl)))

    over the documents d holding t only (rank-bm25 adds idf · 0 = 0.0 for the others); a term
    outside the vocabulary adds nothing. Where rank-bm25 divides 0 by 0 for a document without
    the term (k1 = 0, or b = 1 and an empty document) and gets NaN, which drops the document
    from its ranking, this adds nothing: with k1 = 0 a document scores the idf of each query
    term it holds (presence only, as the k1 slider says), instead of vanishing when it lacks one."""

    def __init__(self, token_lists: list[list[str]]):
        vocabulary: dict[str, int] = {}
        term_ids: list[int] = []
        for tokens in token_lists:
            term_ids.extend([vocabulary.setdefault(t, len(vocabulary)) for t in tokens])
        n = len(token_lists)
        self.doc_count = n
        self.doc_len = np.array([len(t) for t in token_lists], dtype=np.int64)  # as rank-bm25 keeps it
        total = sum(len(t) for t in token_lists)
        self.avgdl = total / n if n else 0.0  # rank-bm25: a Python int / int
        # One (term, document) key per token; sorted unique keys are postings by term, then document.
        keys = np.asarray(term_ids, dtype=np.int64) * max(n, 1) + np.repeat(np.arange(n, dtype=np.int64),
                                                                             self.doc_len)
        keys, counts = np.unique(keys, return_counts=True)
        terms = keys // max(n, 1)
        self.docs = keys - terms * max(n, 1)
        self.tf = counts.astype(np.int64)
        self.starts = np.searchsorted(terms, np.arange(len(vocabulary) + 1))
        self.vocabulary = vocabulary
        frequencies = np.diff(self.starts).tolist()
        self.idf = [math.log(1 + (n - f + 0.5) / (f + 0.5)) for f in frequencies]  # LuceneIdfBM25._calc_idf

    def length_norm(self, k1: float, b: float) -> np.ndarray:
        """k1 · (1 − b + b · len(d) / avgdl) per document, computed as rank-bm25 does."""
        return k1 * (1 - b + b * self.doc_len / self.avgdl)

    def scores(self, terms: list[str], k1: float, b: float, norm: np.ndarray | None = None) -> np.ndarray:
        """Every document's score for the query terms (0 where none occurs)."""
        scores = np.zeros(self.doc_count)
        if not self.avgdl:
            return scores
        norm = self.length_norm(k1, b) if norm is None else norm
        for term in terms:
            column = self.vocabulary.get(term)
            if column is None:
                continue
            start, end = self.starts[column], self.starts[column + 1]
            docs, tf = self.docs[start:end], self.tf[start:end]
            scores[docs] += self.idf[column] * (tf * (k1 + 1) / (tf + norm[docs]))
        return scores


class RankBM25Source:
    name = "bm25"

    def why_empty(self, query: str) -> str | None:
        return why_no_hits(query, self.analyse)
    unscored = "it shares no indexed term with the query (BM25 score 0)"

    def __init__(self, ids: list[str], token_lists: list[list[str]] | None, k1: float = 0.9, b: float = 0.4,
                 postings: BM25Postings | None = None, analyse: Callable[[str], list[str]] = tokenize):
        """From the documents' token lists, or from `postings` already built over them (then
        `token_lists` is not read); queries analysed by `analyse` (the collection's analyser)."""
        self.ids = ids
        self.analyse = analyse
        self.k1, self.b = k1, b
        self.backend = f"BM25 in memory (rank-bm25's scores, k1 {k1:g}, b {b:g})"
        self.postings = postings if postings is not None else BM25Postings(token_lists or [])
        # rank-bm25 divides by the mean length; an all-empty corpus has no BM25 scores at all.
        self._norm = self.postings.length_norm(k1, b) if self.postings.avgdl else None

    def scores(self, terms: list[str]) -> np.ndarray:
        """rank-bm25's `get_scores(terms)` with Lucene idf, for every document."""
        return self.postings.scores(terms, self.k1, self.b, self._norm)

    def coverage(self, query: str) -> tuple[int, int]:
        """(the query's analysed terms, how many of them the vocabulary holds): a query feature."""
        terms = self.analyse(query)
        return len(terms), sum(1 for t in terms if t in self.postings.vocabulary)

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        terms = self.analyse(query)
        if not terms or self._norm is None:
            return []
        mask = None if allowed is None else np.fromiter((i in allowed for i in self.ids), bool, len(self.ids))
        return top_hits(self.ids, self.scores(terms), depth, mask=mask)


class LanceFTSSource:
    name = "bm25"

    def why_empty(self, query: str) -> str | None:
        return why_no_hits(query, self.analyse)
    unscored = "it shares no indexed term with the query (BM25 score 0)"

    def __init__(self, table, row_id_map: Callable[[], RowIdMap] | None = None,
                 analyse: Callable[[str], list[str]] = tokenize):
        """The native index of `table`; `row_id_map()` names the rows a search returns (`table`
        must then be checked out at that map's version), else each search selects `id`; queries
        analysed by `analyse` (the collection's analyser)."""
        self.table = table
        self.analyse = analyse
        self._row_id_map = row_id_map
        self.backend = "LanceDB native BM25 index (k1 1.2, b 0.75 fixed)"

    def lance_request(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> LanceRequest | None:
        """The native index's search for `query` (`lance_requests.fts_query` over the analysed
        terms, space-joined); None when there is nothing to search (no terms, nothing allowed).
        Row ids and scores only once the row-id map is read (`lance_requests.RowIdMap`)."""
        terms = self.analyse(query)
        if not terms or (allowed is not None and not allowed):
            return None
        filter = ids_in(allowed) if allowed is not None else None
        named = ready_map(self._row_id_map)
        search = fts_query(" ".join(terms), "tokens", depth, filter, with_ids=named is None)
        return LanceRequest(self.table, search, partial(_fts_hits, depth, named))

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        request = self.lance_request(query, depth, allowed)
        return [] if request is None else request.run()


def _fts_hits(depth: int, row_id_map: RowIdMap | None, rows) -> list[Hit]:
    """A full-text search's rows (id or the map's, _score, _rowid) as hits, best first."""
    return top_hits(hit_ids(rows, row_id_map), rows.column("_score").to_pylist(), depth,
                    row_ids=rows.column("_rowid").to_pylist())
