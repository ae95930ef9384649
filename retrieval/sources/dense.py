"""Dense retrieval: cosine similarity between the query embedding and stored document vectors.

    similarity(q, d) = (q · d) / (‖q‖ ‖d‖) = 1 − cosine_distance

Without a vector index (collections below `limits.SCALE_DOCS`) the search is exact: the vectors
are read once per collection state into one float32 matrix and a query is one matrix-vector
product (~1 ms at 20k documents, where LanceDB's exact scan takes ~20 ms a query); a batch of
queries (evaluation, sweeps: `search_batch`) is one matrix product for all of them, whose
shortlists are re-scored by the one-query product, so batch and single search agree exactly.
With an index (IVF_RQ, `limits.ANN_INDEX`, built from `SCALE_DOCS` on) LanceDB searches
`limits.ann_nprobes` partitions, and `refine_factor` re-scores the shortlist with full vectors so
reported similarities stay exact (`refine_factor_for`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.models import embed
from retrieval.models.embed import E5
from retrieval.sources.base import Derives, LoadContext, Param, SourceSpec, ids_in, top_hits
from retrieval.sources.lance_requests import LanceRequest, RowIdMap, hit_ids, ready_map, vector_query
from retrieval.store import XL_COLUMN, vector_matrix
from retrieval.text.tokenize import crosses_languages
from retrieval.types import Hit

if TYPE_CHECKING:
    from retrieval.search.config import SearchConfig


@dataclass(frozen=True)
class VectorSpace:
    """One vector column of a collection and the model whose vectors it holds."""

    column: str
    model: str


@dataclass(frozen=True)
class LoadedDense:
    """The collection's table handle, its model(s), and the Workbench's query-embedding cache.

    `xl_model`: the model of the cross-lingual column (`vector_xl`, "" when the collection has
    none); `language`: the collection's ('en', 'zh', 'mixed'), which a query may cross."""

    table: Any
    model: str
    context: LoadContext

    collection: str = ""
    language: str = ""
    xl_model: str = ""
    encoder_backend: str = ""  # what computed the stored vectors (the catalogue's; "" not recorded)

    def space(self, query: str, language_aware: bool) -> VectorSpace:
        """The vectors a query is searched in (`vector_space`)."""
        return vector_space(query, self.model, self.language, self.xl_model, language_aware)

    def query_vector(self, space: VectorSpace, query: str):
        return self.context.query_vector(space.model, query)

    def index(self, column: str):
        """The column's ANN index (IvfPq …), None when search is exact."""
        return self._indices.get(column)

    @cached_property
    def _indices(self) -> dict[str, Any]:
        # LanceDB names them IvfFlat, IvfPq, IvfHnswSq …: any index on a vector column.
        return {i.columns[0]: i for i in self.table.list_indices() if len(i.columns) == 1
                and i.columns[0] in (VECTOR_COLUMN, XL_COLUMN)}

    def column(self, column: str) -> ColumnVectors:
        """A vector column's ids and unit vectors, read on first use (once per collection state)."""
        data = self._columns.get(column)
        if data is None:  # two threads may both create one: the same data, one of them kept
            data = self._columns.setdefault(column, ColumnVectors(self.context, self.collection, column))
        return data

    def row_id_map(self) -> RowIdMap:
        return self.context.row_id_map(self.collection)

    @cached_property
    def _columns(self) -> dict[str, ColumnVectors]:
        return {}


class ColumnVectors:
    """One vector column of a collection in memory: the exact search's data."""

    def __init__(self, context: LoadContext, collection: str, column: str):
        self._context, self._collection, self._column = context, collection, column

    @cached_property
    def vectors(self) -> tuple[list[str], np.ndarray]:
        """(ids, unit vectors as an n × dim float32 matrix), in storage order."""
        rows = self._context.column(self._collection, ["id", self._column])
        ids = rows.column("id").to_pylist()
        matrix = vector_matrix(rows, self._column)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)  # 1 ± 1e-7 for the encoders' vectors
        np.divide(matrix, norms, out=matrix, where=norms > 0)
        return ids, matrix

    @cached_property
    def row_norm_max(self) -> float:
        """The largest ‖d‖ of the unit matrix (1 ± 1e-7; 0 for an empty one): `shortlist_margin`'s."""
        matrix = self.vectors[1]
        return float(np.linalg.norm(matrix, axis=1).max()) if len(matrix) else 0.0


VECTOR_COLUMN = "vector"


def vector_space(query: str, model: str, collection_language: str, xl_model: str,
                 language_aware: bool) -> VectorSpace:
    """The collection's own vectors (`vector`, its model), or its cross-lingual ones (`vector_xl`,
    the multilingual model) for a query whose language differs from the collection's
    (`tokenize.crosses_languages`), when it has them and the config is language-aware: the
    English model cannot read a Chinese question (XQuAD zh→en nDCG@10 0.095, against 0.815 with
    the multilingual vectors; docs/experiments/cross-lingual.md)."""
    if xl_model and language_aware and crosses_languages(query, collection_language):
        return VectorSpace(XL_COLUMN, xl_model)
    return VectorSpace(VECTOR_COLUMN, model)


def load(context: LoadContext, collection: str) -> LoadedDense:
    info = context.store.info(collection)
    return LoadedDense(context.table(collection), info.model, context, collection, info.language,
                       info.xl_model, info.encoder_backend)


def build(loaded: LoadedDense, config: SearchConfig) -> CrossLingualDense:
    return CrossLingualDense(loaded, config.language_aware)


SPEC = SourceSpec(
    name="dense", label="vector", load=load, build=build, embeds_query=True,
    # The collection's own vectors and, when it has them, the cross-lingual ones; each gets an
    # ANN index once the collection is large.
    derives=Derives(columns=("vector", XL_COLUMN), vector_index=("vector", XL_COLUMN)),
    key=lambda config: (config.language_aware,),
    weight_help="Multiplies the vector (embedding) part of the fused score: RRF adds w/(k + vector rank), "
                "weighted sum adds w × normalised cosine similarity. 0 makes it add nothing.",
    min_raw=Param("min_raw.dense", "Minimum vector raw score",
                  "Drops vector hits whose cosine similarity is below this before fusion (0 = off): they "
                  "add nothing from the vector side, the others keep their ranks, and normalisation is "
                  "recomputed over the hits that remain.", 0.0, 1.0, 0.01),
    description="Cosine similarity between the query's and each document's embedding (the collection's model; "
                "for a query in the other language, its cross-lingual vectors when it has them).",
)


class CrossLingualDense:
    """The vector source: each query searches the vector space `vector_space` picks for it, by
    an exact in-memory scan (no ANN index on that column) or LanceDB's index."""

    name = "dense"

    def __init__(self, loaded: LoadedDense, language_aware: bool):
        self._loaded = loaded
        self.language_aware = language_aware
        self._searchers: dict[VectorSpace, DenseSource | InMemoryDenseSource] = {}

    def searcher(self, space: VectorSpace) -> DenseSource | InMemoryDenseSource:
        if space not in self._searchers:
            loaded = self._loaded
            embed = partial(loaded.query_vector, space)
            index = loaded.index(space.column)
            self._searchers[space] = (InMemoryDenseSource(loaded.column(space.column), embed)
                                      if index is None else DenseSource(loaded.table, embed, index, space.column,
                                                                        row_id_map=loaded.row_id_map))
        return self._searchers[space]

    @property
    def has_index(self) -> bool:
        """Whether the collection's own vectors have an ANN index (else the search is exact)."""
        return self._loaded.index(VECTOR_COLUMN) is not None

    @property
    def backend(self) -> str:
        """What serves a query in the collection's language."""
        return self.backend_for("")

    def backend_for(self, query: str) -> str:
        """What serves `query`, naming the vectors when they are the cross-lingual ones, or when a
        query in the other language meets a collection without them."""
        loaded = self._loaded
        space = loaded.space(query, self.language_aware)
        # backend_for, not load_encoder(…).backend: describing a source must not load its model
        served = self.searcher(space).backend + mixed_vectors_note(loaded.encoder_backend,
                                                                   embed.backend_for(space.model))
        if space.column == XL_COLUMN:
            return f"{served}, over the cross-lingual vectors ({space.model}): the query is in the other language"
        if crosses_languages(query, loaded.language) and loaded.model != E5:
            why = ("language-aware fusion is off" if loaded.xl_model else
                   "the collection has no cross-lingual vectors (re-ingest it to add them)")
            return f"{served}, with {loaded.model} although the query is in the other language: {why}"
        return served

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        return self.searcher(self._loaded.space(query, self.language_aware)).search(query, depth, allowed)

    def lance_request(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> LanceRequest | None:
        """The LanceDB search of `query`'s vector space (`DenseSource.lance_request`); None when
        that space is searched in memory or there is nothing to search (`search` answers)."""
        searcher = self.searcher(self._loaded.space(query, self.language_aware))
        make = getattr(searcher, "lance_request", None)
        return make(query, depth, allowed) if make is not None else None

    def search_batch(self, queries: list[str], depth: int, allowed: frozenset[str] | None = None) -> list[list[Hit]]:
        """`search` for each query: the queries of each vector space together, in one
        `search_batch` where its searcher has one."""
        by_space: dict[VectorSpace, list[int]] = {}
        for i, query in enumerate(queries):
            by_space.setdefault(self._loaded.space(query, self.language_aware), []).append(i)
        hits: list[list[Hit]] = [[] for _ in queries]
        for space, positions in by_space.items():
            searcher = self.searcher(space)
            batch = [queries[i] for i in positions]
            found = (searcher.search_batch(batch, depth, allowed) if hasattr(searcher, "search_batch")
                     else [searcher.search(q, depth, allowed) for q in batch])
            for i, result in zip(positions, found, strict=True):
                hits[i] = result
        return hits


def mixed_vectors_note(stored: str, query: str) -> str:
    """"" when the query's vector comes from the backend that computed the stored ones (or that
    is not recorded), else a clause naming both: the two give close but not equal vectors (int8
    queries over torch's vectors cost ≤ 0.0015 nDCG@10 on the shared sets, encoder.md)."""
    if not stored or stored == query:
        return ""
    return f"; query vectors from {query}, the collection's from {stored} (re-ingest it to match)"


# Indexes whose stored codes order nearly as the exact vectors do (8-bit scalar quantisation,
# RaBitQ, or none): re-scoring as many candidates as are asked for is enough (IVF_RQ at 1M
# documents, MiniLM: recall@10 the same with ×1, ×3 and ×5; docs/experiments/peers.md). Product
# quantisation (IvfPq) and others re-score 10× as many.
FINE_INDEXES = frozenset({"IvfRq", "IvfSq", "IvfHnswSq", "IvfFlat", "IvfHnswFlat"})
MIN_REFINED = 100  # a small depth still re-scores at least this many of the index's best


def refine_factor_for(index_type: str, depth: int) -> int:
    """How many times `depth` candidates LanceDB takes from the index and re-scores exactly:
    ⌈MIN_REFINED / depth⌉ (at least 1) for an index in `FINE_INDEXES`, else 10 (IVF_PQ, whose
    recall@10 at 1M documents was 0.78 with ×1 and 0.96–0.98 with ×10)."""
    return max(1, -(-MIN_REFINED // max(1, depth))) if index_type in FINE_INDEXES else 10


class DenseSource:
    name = "dense"

    def __init__(self, table, embed: Callable[[str], Any], index=None, column: str = VECTOR_COLUMN,
                 nprobes: int | None = None, row_id_map: Callable[[], RowIdMap] | None = None):
        """LanceDB's search of `column`, through its ANN `index` (None: LanceDB's exact scan),
        probing `nprobes` partitions (default `limits.ann_nprobes`); `embed(query)` gives the
        query's vector (the Workbench caches it per model and query); `row_id_map()` names the
        rows a search returns (`table` must then be checked out at that map's version), else
        each search selects `id`."""
        from retrieval import limits

        self.table = table
        self._embed = embed
        self._row_id_map = row_id_map
        self.column = column
        self.index_type = index.index_type if index is not None else None
        self.nprobes = nprobes or limits.ann_nprobes(self.index_type)
        if index is None:
            self.backend = "exact scan (LanceDB, cosine)"
        else:
            refine = refine_factor_for(self.index_type, MIN_REFINED)
            self.backend = (f"LanceDB {self.index_type} ANN index ({self.nprobes} partitions probed), shortlist "
                            f"re-scored exactly (refine ×{refine} at depth {MIN_REFINED})")

    @property
    def has_index(self) -> bool:
        return self.index_type is not None

    def lance_request(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> LanceRequest | None:
        """LanceDB's search for `query`'s vector (`lance_requests.vector_query`: through the index
        with `nprobes` and the refine factor, else an exact scan); None when there is nothing to
        search (no query text, nothing allowed)."""
        if not query.strip() or (allowed is not None and not allowed):
            return None
        filter = ids_in(allowed) if allowed is not None else None
        nprobes, refine = (self.nprobes, refine_factor_for(self.index_type, depth)) if self.has_index else (None, None)
        named = ready_map(self._row_id_map)
        search = vector_query(self._embed(query), self.column, depth, nprobes, refine, filter, with_ids=named is None)
        return LanceRequest(self.table, search, partial(_vector_hits, depth, named))

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        request = self.lance_request(query, depth, allowed)
        return [] if request is None else request.run()


def _vector_hits(depth: int, row_id_map: RowIdMap | None, rows) -> list[Hit]:
    """A vector search's rows (id or the map's, _distance, _rowid) as hits, similarity = 1 −
    distance, best first."""
    similarities = [1.0 - d for d in rows.column("_distance").to_pylist()]
    return top_hits(hit_ids(rows, row_id_map), similarities, depth, keep_zero=True,
                    row_ids=rows.column("_rowid").to_pylist())


class InMemoryDenseSource:
    """Exact cosine search over a column's vectors held in memory (`data.vectors`: ids and the
    unit vectors, read once per collection state; `data.row_norm_max`, a `ColumnVectors`):
    similarity = q · d for the unit vectors every encoder returns, computed in float32 as
    LanceDB's exact scan does (agreeing with it to ~1e-7)."""

    name = "dense"
    backend = "exact scan (in memory, cosine)"

    def __init__(self, data: ColumnVectors, embed: Callable[[str], Any]):
        self._data = data
        self._embed = embed

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        if not query.strip() or (allowed is not None and not allowed):
            return []
        ids, matrix = self._data.vectors
        if not ids:
            return []
        similarities = exact_similarities(matrix, unit(self._embed(query)))
        mask = None if allowed is None else np.fromiter((i in allowed for i in ids), bool, len(ids))
        return top_hits(ids, similarities, depth, keep_zero=True, mask=mask)

    def search_batch(self, queries: list[str], depth: int, allowed: frozenset[str] | None = None) -> list[list[Hit]]:
        """`search` for each query, the same hits and the same float32 similarities, for a batch:
        one BLAS matrix product scores every query against every document (~8× cheaper a query
        than `search`'s product), a shortlist is cut from it with a margin that covers its
        rounding (`shortlist_margin`), and the shortlist is re-scored by `search`'s own product,
        which gives each document the same float32 as over the whole matrix."""
        ids, matrix = self._data.vectors
        hits: list[list[Hit]] = [[] for _ in queries]
        live = [i for i, query in enumerate(queries) if query.strip()]
        if not ids or not live or (allowed is not None and not allowed):
            return hits
        units = np.stack([unit(self._embed(queries[i])) for i in live])
        approximate = units @ matrix.T  # (queries × documents); BLAS sums in its own order
        finite = np.isfinite(approximate).all(axis=1)  # the margin argument needs finite scores
        n = len(ids)
        if allowed is not None:
            mask = np.fromiter((i in allowed for i in ids), bool, n)
            approximate[:, ~mask] = -np.inf  # left out before the cut, as `search`'s mask does
            shortlist_all = np.flatnonzero(mask)
        else:
            shortlist_all = np.arange(n)
        cut = len(shortlist_all) > depth
        if cut:
            cutoffs = np.partition(approximate, n - depth, axis=1)[:, n - depth]
        bound = shortlist_margin(matrix.shape[1], self._data.row_norm_max)
        for row, i in enumerate(live):
            if not finite[row]:
                hits[i] = self.search(queries[i], depth, allowed)
                continue
            shortlist = shortlist_all
            if cut:
                margin = bound * float(np.linalg.norm(units[row]))
                shortlist = np.flatnonzero(approximate[row] >= cutoffs[row] - margin)
            exact = exact_similarities(matrix[shortlist], units[row])
            hits[i] = top_hits([ids[j] for j in shortlist.tolist()], exact, depth, keep_zero=True)
        return hits


def unit(vector) -> np.ndarray:
    """q / ‖q‖ in float32 (a zero vector as it is): the query side of the cosine."""
    q = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(q))
    return q / norm if norm else q


def exact_similarities(matrix: np.ndarray, query_unit: np.ndarray) -> np.ndarray:
    """matrix · q, one float32 dot product per row. Each row's value depends only on that row and
    q (the same float32 over the whole matrix or over any subset of its rows), which the batch's
    shortlist relies on: observed on numpy 2.4.6, not documented by numpy, so
    tests/evaluation/test_evaluate_lean.py compares `search_batch` with `search` bit for bit."""
    # einsum, not `matrix @ q`: a BLAS matrix-vector product spreads over threads that spin
    # on a busy 2-core machine (8 CPU ms at 20k × 384, against 1.8 here; scale.md).
    return np.einsum("ij,j->i", matrix, query_unit)


def shortlist_margin(dim: int, row_norm_max: float) -> float:
    """How far below the approximate depth-th score a document may lie and still be in the exact
    top `depth`, per unit of ‖q‖: 4·γ·max‖d‖·2, with γ = n·u/(1 − n·u), n = dim, u = 2⁻²⁴.

    Any float32 evaluation of a dot product q·d, whatever the order of its additions, is within
    γ·Σ|q_i·d_i| ≤ γ·‖q‖·‖d‖ of the exact value (Higham, Accuracy and Stability, §3.1), so two
    evaluations differ by at most δ = 2γ‖q‖‖d‖. A document in the exact top depth then scores at
    least (approximate depth-th score) − 2δ in the approximate product. The last factor 2 covers
    the rounding of the comparison itself."""
    u = 2.0 ** -24
    gamma = dim * u / (1 - dim * u)
    return 4 * gamma * row_norm_max * 2
