"""Dense retrieval: cosine similarity between the query embedding and stored document vectors.

    similarity(q, d) = (q · d) / (‖q‖ ‖d‖) = 1 − cosine_distance

Without a vector index (collections below `limits.SCALE_DOCS`) the search is exact: the vectors
are read once per collection state into one float32 matrix and a query is one matrix-vector
product (~1 ms at 20k documents, where LanceDB's exact scan takes ~20 ms a query). With an
index (IVF_PQ etc., built from `SCALE_DOCS` on) LanceDB searches, and `refine_factor` re-scores
the shortlist with full vectors so reported similarities stay exact.
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
        q = np.asarray(self._embed(query), dtype=np.float32)
        norm = float(np.linalg.norm(q))
        # einsum, not `matrix @ q`: a BLAS matrix-vector product spreads over threads that spin
        # on a busy 2-core machine (8 CPU ms at 20k × 384, against 1.8 here; scale.md).
        similarities = np.einsum("ij,j->i", matrix, q / norm if norm else q)
        mask = None if allowed is None else np.fromiter((i in allowed for i in ids), bool, len(ids))
        return top_hits(ids, similarities, depth, keep_zero=True, mask=mask)
