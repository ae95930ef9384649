"""Dense retrieval: cosine similarity between the query embedding and stored document vectors.

    similarity(q, d) = (q · d) / (‖q‖ ‖d‖) = 1 − cosine_distance

LanceDB's search is exact without a vector index; with one (IVF_PQ etc.), `refine_factor`
re-scores the shortlist with full vectors so reported similarities stay exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

    def query_vector(self, query: str):
        return self.context.query_vector(self.model, query)


def load(context: LoadContext, collection: str) -> LoadedDense:
    return LoadedDense(context.store.table(collection), context.store.info(collection).model, context)


def build(loaded: LoadedDense, config: SearchConfig) -> DenseSource:
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
        """`embed(query)` gives the query's vector (the Workbench caches it per model and query)."""
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
