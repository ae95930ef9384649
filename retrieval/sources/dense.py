"""Dense retrieval: cosine similarity between the query embedding and stored document vectors.

    similarity(q, d) = (q · d) / (‖q‖ ‖d‖) = 1 − cosine_distance

Without a vector index (collections below `limits.SCALE_DOCS`) the search is exact: the vectors
are read once per collection state into one float32 matrix and a query is one matrix-vector
product (~1 ms at 20k documents, where LanceDB's exact scan takes ~20 ms a query); a batch of
queries (evaluation, sweeps: `search_batch`) is one matrix product for all of them, whose
shortlists are re-scored by the one-query product, so batch and single search agree exactly.
With an index (IVF_PQ etc., built from `SCALE_DOCS` on) LanceDB searches, and `refine_factor`
re-scores the shortlist with full vectors so reported similarities stay exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..types import Hit
from .base import LoadContext, Param, SourceSpec, ids_in, top_hits

if TYPE_CHECKING:
    from ..config import SearchConfig


@dataclass(frozen=True)
class LoadedDense:
    """The collection's table handle, its model, and the Workbench's query-embedding cache."""

    table: Any
    model: str
    context: LoadContext

    collection: str = ""

    def query_vector(self, query: str):
        return self.context.query_vector(self.model, query)

    @cached_property
    def index(self):
        """The vector column's ANN index (IvfPq …), None when search is exact."""
        return next((i for i in self.table.list_indices() if i.columns == ["vector"]), None)

    @cached_property
    def vectors(self) -> tuple[list[str], np.ndarray]:
        """(ids, unit vectors as an n × dim float32 matrix), in storage order: the exact search's data."""
        rows = self.context.store.column(self.collection, ["id", "vector"])
        ids = rows.column("id").to_pylist()
        flat = rows.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        matrix = np.array(flat, dtype=np.float32).reshape(len(ids), -1)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)  # 1 ± 1e-7 for the encoders' vectors
        np.divide(matrix, norms, out=matrix, where=norms > 0)
        return ids, matrix

    @cached_property
    def row_norm_max(self) -> float:
        """The largest ‖d‖ of the unit matrix (1 ± 1e-7; 0 for an empty one): `shortlist_margin`'s."""
        matrix = self.vectors[1]
        return float(np.linalg.norm(matrix, axis=1).max()) if len(matrix) else 0.0


def load(context: LoadContext, collection: str) -> LoadedDense:
    return LoadedDense(context.store.table(collection), context.store.info(collection).model, context, collection)


def build(loaded: LoadedDense, config: SearchConfig) -> DenseSource | InMemoryDenseSource:
    if loaded.index is None:
        return InMemoryDenseSource(loaded, loaded.query_vector)
    return DenseSource(loaded.table, loaded.query_vector)


SPEC = SourceSpec(
    name="dense", label="vector", load=load, build=build, embeds_query=True,
    weight_help="Multiplies the vector (embedding) part of the fused score: RRF adds w/(k + vector rank), "
                "weighted sum adds w × normalised cosine similarity. 0 makes it add nothing.",
    min_raw=Param("min_raw.dense", "Minimum vector raw score",
                  "Drops vector hits whose cosine similarity is below this before fusion (0 = off): they "
                  "add nothing from the vector side, the others keep their ranks, and normalisation is "
                  "recomputed over the hits that remain.", 0.0, 1.0, 0.01),
    description="Cosine similarity between the query's and each document's embedding (the collection's model).",
)


class DenseSource:
    name = "dense"

    def __init__(self, table, embed: Callable[[str], Any], refine_factor: int = 10):
        """LanceDB's search; `embed(query)` gives the query's vector (the Workbench caches it per
        model and query)."""
        self.table = table
        self._embed = embed
        # LanceDB names them IvfFlat, IvfPq, IvfHnswSq …: any index on the vector column.
        index = next((i for i in table.list_indices() if i.columns == ["vector"]), None)
        self.has_index = index is not None
        self.refine_factor = refine_factor
        self.backend = (f"LanceDB {index.index_type} ANN index, shortlist re-scored exactly (refine ×{refine_factor})"
                        if index is not None else "exact scan (LanceDB, cosine)")

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        if not query.strip() or (allowed is not None and not allowed):
            return []
        q = self.table.search(self._embed(query), vector_column_name="vector").distance_type("cosine")
        if allowed is not None:
            q = q.where(ids_in(allowed), prefilter=True)
        if self.has_index:
            q = q.refine_factor(self.refine_factor)
        rows = q.limit(depth).select(["id"]).to_arrow()
        ids = rows.column("id").to_pylist()
        similarities = [1.0 - d for d in rows.column("_distance").to_pylist()]
        return top_hits(ids, similarities, depth, keep_zero=True)


class InMemoryDenseSource:
    """Exact cosine search over the collection's vectors held in memory (`LoadedDense.vectors`,
    read once per collection state): similarity = q · d for the unit vectors every encoder
    returns, computed in float32 as LanceDB's exact scan does (agreeing with it to ~1e-7)."""

    name = "dense"
    backend = "exact scan (in memory, cosine)"
    has_index = False

    def __init__(self, loaded: LoadedDense, embed: Callable[[str], Any]):
        self._loaded = loaded
        self._embed = embed

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        if not query.strip() or (allowed is not None and not allowed):
            return []
        ids, matrix = self._loaded.vectors
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
        ids, matrix = self._loaded.vectors
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
        bound = shortlist_margin(matrix.shape[1], self._loaded.row_norm_max)
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
    tests/test_evaluate_lean.py compares `search_batch` with `search` bit for bit."""
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
