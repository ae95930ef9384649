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
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..embed import E5
from ..store import XL_COLUMN
from ..tokenize import crosses_languages
from ..types import Hit
from .base import LoadContext, Param, SourceSpec, ids_in, top_hits

if TYPE_CHECKING:
    from ..config import SearchConfig


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

    def vectors(self, column: str) -> tuple[list[str], np.ndarray]:
        """(ids, unit vectors as an n × dim float32 matrix) of a column, in storage order: the exact
        search's data, read once per collection state."""
        return self._matrices[column] if column in self._matrices else self._read(column)

    @cached_property
    def _matrices(self) -> dict[str, tuple[list[str], np.ndarray]]:
        return {}

    def _read(self, column: str) -> tuple[list[str], np.ndarray]:
        rows = self.context.store.column(self.collection, ["id", column])
        ids = rows.column("id").to_pylist()
        flat = rows.column(column).combine_chunks().flatten().to_numpy(zero_copy_only=False)
        matrix = np.array(flat, dtype=np.float32).reshape(len(ids), -1)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)  # 1 ± 1e-7 for the encoders' vectors
        np.divide(matrix, norms, out=matrix, where=norms > 0)
        # Two threads may read it at once: the same data, the last one kept.
        self._matrices[column] = (ids, matrix)
        return ids, matrix


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
    return LoadedDense(context.store.table(collection), info.model, context, collection, info.language,
                       info.xl_model)


def build(loaded: LoadedDense, config: SearchConfig) -> CrossLingualDense:
    return CrossLingualDense(loaded, config.language_aware)


SPEC = SourceSpec(
    name="dense", label="vector", load=load, build=build, embeds_query=True,
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
            self._searchers[space] = (InMemoryDenseSource(partial(loaded.vectors, space.column), embed)
                                      if index is None else DenseSource(loaded.table, embed, index, space.column))
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
        served = self.searcher(space).backend
        if space.column == XL_COLUMN:
            return f"{served}, over the cross-lingual vectors ({space.model}): the query is in the other language"
        if crosses_languages(query, loaded.language) and loaded.model != E5:
            why = ("language-aware fusion is off" if loaded.xl_model else
                   "the collection has no cross-lingual vectors (re-ingest it to add them)")
            return f"{served}, with {loaded.model} although the query is in the other language: {why}"
        return served

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        return self.searcher(self._loaded.space(query, self.language_aware)).search(query, depth, allowed)


class DenseSource:
    name = "dense"

    def __init__(self, table, embed: Callable[[str], Any], index=None, column: str = VECTOR_COLUMN,
                 refine_factor: int = 10):
        """LanceDB's search of `column`, through its ANN `index` (None: LanceDB's exact scan);
        `embed(query)` gives the query's vector (the Workbench caches it per model and query)."""
        self.table = table
        self._embed = embed
        self.column = column
        self.has_index = index is not None
        self.refine_factor = refine_factor
        self.backend = (f"LanceDB {index.index_type} ANN index, shortlist re-scored exactly (refine ×{refine_factor})"
                        if index is not None else "exact scan (LanceDB, cosine)")

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        if not query.strip() or (allowed is not None and not allowed):
            return []
        q = self.table.search(self._embed(query), vector_column_name=self.column).distance_type("cosine")
        if allowed is not None:
            q = q.where(ids_in(allowed), prefilter=True)
        if self.has_index:
            q = q.refine_factor(self.refine_factor)
        rows = q.limit(depth).select(["id"]).to_arrow()
        ids = rows.column("id").to_pylist()
        similarities = [1.0 - d for d in rows.column("_distance").to_pylist()]
        return top_hits(ids, similarities, depth, keep_zero=True)


class InMemoryDenseSource:
    """Exact cosine search over a column's vectors held in memory (`vectors()`: ids and the unit
    vectors, read once per collection state): similarity = q · d for the unit vectors every
    encoder returns, computed in float32 as LanceDB's exact scan does (agreeing with it to ~1e-7)."""

    name = "dense"
    backend = "exact scan (in memory, cosine)"

    def __init__(self, vectors: Callable[[], tuple[list[str], np.ndarray]], embed: Callable[[str], Any]):
        self._vectors = vectors
        self._embed = embed

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        if not query.strip() or (allowed is not None and not allowed):
            return []
        ids, matrix = self._vectors()
        if not ids:
            return []
        q = np.asarray(self._embed(query), dtype=np.float32)
        norm = float(np.linalg.norm(q))
        # einsum, not `matrix @ q`: a BLAS matrix-vector product spreads over threads that spin
        # on a busy 2-core machine (8 CPU ms at 20k × 384, against 1.8 here; scale.md).
        similarities = np.einsum("ij,j->i", matrix, q / norm if norm else q)
        mask = None if allowed is None else np.fromiter((i in allowed for i in ids), bool, len(ids))
        return top_hits(ids, similarities, depth, keep_zero=True, mask=mask)
