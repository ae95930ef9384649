"""Dense retrieval: cosine similarity between the query embedding and stored document vectors.

    similarity(q, d) = (q · d) / (‖q‖ ‖d‖) = 1 − cosine_distance

LanceDB's search is exact without a vector index; with one (IVF_PQ etc.), `refine_factor`
re-scores the shortlist with full vectors so reported similarities stay exact.
"""

from __future__ import annotations

from functools import lru_cache

from ..types import Hit
from .base import top_hits

LABEL = "Vector"


def params(config) -> tuple:
    return ()


def build(store, collection: str, config):
    from ..embed import load_encoder

    return DenseSource(store.table(collection), load_encoder(store.info(collection).model))


class DenseSource:
    name = "dense"

    def __init__(self, table, encoder, refine_factor: int = 10):
        self.table = table
        self.encoder = encoder
        # LanceDB names them IvfFlat, IvfPq, IvfHnswSq …: any index on the vector column.
        self.has_index = any(i.columns == ["vector"] for i in table.list_indices())
        self.refine_factor = refine_factor
        self._embed = lru_cache(maxsize=1024)(self._embed_uncached)

    def _embed_uncached(self, query: str):
        return self.encoder.encode_queries([query])[0]

    def search(self, query: str, depth: int) -> list[Hit]:
        if not query.strip():
            return []
        q = self.table.search(self._embed(query), vector_column_name="vector").distance_type("cosine")
        if self.has_index:
            q = q.refine_factor(self.refine_factor)
        rows = q.limit(depth).select(["id"]).to_arrow()
        ids = rows.column("id").to_pylist()
        similarities = [1.0 - d for d in rows.column("_distance").to_pylist()]
        return top_hits(ids, similarities, depth, keep_zero=True)
