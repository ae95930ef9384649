"""Entity graph source: seed 002's entity activation (`retrieval.sources.activation`) over a collection's
chunks and their typed entities (`retrieval.text.entities`, stored at ingest beside the collection).

Query entities: the query goes through the same extractor as the chunks; then, since a query is
short, every entity name of the collection found in the query (Chinese names of ≥ 2 characters as
substrings, Latin names as whole words) is added with the type the extractor gave it, else with
every type it has in the collection. Names the collection does not know cannot activate anything
and are left out (`Activation.unknown` lists them).

The entity tables and chunk vectors are read once per collection version (`load_index`); every
graph slider only re-runs the activation and scoring, which are pure functions here.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

import numpy as np

from retrieval.cache import LRU
from retrieval.sources.activation import Activation, GraphSettings, Scored, activate, hit_detail, inverted, score_events
from retrieval.sources.base import Derives, LoadContext, Param, SourceSpec
from retrieval.store import GRAPH_KINDS, stored_documents
from retrieval.text.entities import default_extractor
from retrieval.text.entity_tables import graph_table_rows
from retrieval.types import Hit, RetrievalError

if TYPE_CHECKING:
    from retrieval.search.config import SearchConfig

_HAN_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


# ---- the collection index (read once per version) --------------------------------------------
@dataclass
class GraphIndex:
    ids: list[str]
    entities: dict[str, dict[str, frozenset]]
    events_of: dict[tuple[str, str], frozenset]
    names: dict[tuple[str, str], str]  # display name of (type, normalised name)
    known: dict[str, frozenset]  # normalised name -> types it has in the collection
    vectors: np.ndarray  # one unit row per id
    row: dict[str, int]
    days: dict[str, int]
    date_sources: dict[str, str]
    positions: dict[str, tuple[str | None, int | None]]
    titles: dict[str, str]
    model: str
    from_tables: bool  # False: computed in memory (collection ingested before the graph tables)
    # The query's entities depend only on the query and this index, so they live with it.
    _queries: LRU = field(default_factory=lambda: LRU(1024))

    def query_entities(self, query: str) -> tuple[dict[str, frozenset], dict[str, tuple[str, ...]]]:
        """(known query entities by type, extracted names the collection does not know); cached."""
        return self._queries.get_or_create(query, lambda: query_entities(query, self.known))


def query_entities(query: str, known: Mapping[str, frozenset]) -> tuple[dict[str, frozenset], dict[str, tuple]]:
    """The query's entities restricted to names the collection knows (rules in the module doc)."""
    extracted = default_extractor().extract(query)
    typed: dict[str, set] = {}
    unknown: dict[str, list] = {}
    for kind, names in extracted.items():
        for name in names:
            if kind in known.get(name, ()):
                typed.setdefault(kind, set()).add(name)
            elif name not in known:
                unknown.setdefault(kind, []).append(name)
    text = unicodedata.normalize("NFKC", query)
    folded = text.casefold()
    extracted_names = {n for names in extracted.values() for n in names}
    for name, kinds in known.items():
        if _HAN_RE.search(name):
            hit = len(name) >= 2 and name in text
        else:
            hit = len(name) >= 2 and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", folded) is not None
        if hit and not any(name in typed.get(k, ()) for k in kinds):
            for kind in (kinds if name not in extracted_names else
                         [k for k in kinds if name in extracted.get(k, {})] or kinds):
                typed.setdefault(kind, set()).add(name)
    return {k: frozenset(v) for k, v in typed.items()}, {k: tuple(sorted(v)) for k, v in unknown.items()}


def load_index(store, collection: str, today: date | None = None) -> GraphIndex:
    """The collection's graph index at its current state (the Workbench caches it per state)."""
    # A write commits a batch's rows before their entity links, and the entities table last, so
    # an index read in between pairs the new documents with fewer entities than they have. Under
    # the writer lock when it is free; while a write holds it — a streamed add, for as long as
    # the stream runs — read anyway, as the other sources do: the new documents may lack some
    # entities until the write ends, and the state key carries a mark meanwhile
    # (`Store.state_key`), so such an index is never served after the write.
    with store.lock_if_free(collection):
        return _read_index(store, collection, today or datetime.now(UTC).date())


def _read_index(store, collection: str, today: date) -> GraphIndex:
    info = store.info(collection)
    rows = store.column(collection, ["id", "title", "vector", "parent_id", "chunk_index"])
    ids = rows.column("id").to_pylist()
    n = len(ids)
    flat = np.asarray(rows.column("vector").combine_chunks().flatten(), dtype=np.float32)
    vectors = flat.reshape(n, -1) if n else np.zeros((0, info.dim), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms > 0, norms, 1.0)
    tables = store.graph_tables(collection)
    if tables is not None:
        entity_rows = tables["entities"].to_pylist()
        links = tables["event_entities"].to_pylist()
        times = tables["event_times"].to_pylist()
    else:  # ingested before the entity tables existed: extract in memory, dated by creation
        computed = graph_table_rows(stored_documents(store, collection), datetime.fromisoformat(info.created))
        entity_rows, links, times = computed["entities"], computed["event_entities"], computed["event_times"]
    by_id = {r["id"]: r for r in entity_rows}
    entities: dict[str, dict[str, set]] = {i: {} for i in ids}
    for link in links:
        ent = by_id.get(link["entity_id"])
        if ent is not None and link["event_id"] in entities:
            entities[link["event_id"]].setdefault(ent["type"], set()).add(ent["normalized_name"])
    frozen = {e: {k: frozenset(v) for k, v in sets.items()} for e, sets in entities.items()}
    known: dict[str, set] = {}
    for r in entity_rows:
        known.setdefault(r["normalized_name"], set()).add(r["type"])
    days, sources = {}, {}
    for t in times:
        try:
            days[t["event_id"]] = max(0, (today - date.fromisoformat(t["date"])).days)
        except (TypeError, ValueError):
            days[t["event_id"]] = 0
        sources[t["event_id"]] = t["date_source"]
    return GraphIndex(
        ids=ids, entities=frozen, events_of=inverted(frozen),
        names={(r["type"], r["normalized_name"]): r["name"] for r in entity_rows},
        known={k: frozenset(v) for k, v in known.items()}, vectors=vectors, row={i: n for n, i in enumerate(ids)},
        days=days, date_sources=sources,
        positions=dict(zip(ids, zip(rows.column("parent_id").to_pylist(), rows.column("chunk_index").to_pylist(),
                                    strict=True), strict=True)),
        titles=dict(zip(ids, rows.column("title").to_pylist(), strict=True)), model=info.model,
        from_tables=tables is not None,
    )


# ---- the source ------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadedGraph:
    """The collection's graph index (None while its graph is pending: `graph_build`), and the
    Workbench's query embeddings for its model."""

    index: GraphIndex | None
    context: LoadContext
    collection: str = ""

    def query_vector(self, query: str) -> np.ndarray:
        return self.context.query_vector(self.index.model, query)


def load(context: LoadContext, collection: str) -> LoadedGraph:
    if context.store.info(collection).graph in ("pending", "off"):
        return LoadedGraph(None, context, collection)
    return LoadedGraph(load_index(context.store, collection), context, collection)


def key(config: SearchConfig) -> tuple:
    return tuple(sorted(config.graph.items())) + (config.graph_focus,)


def build(loaded: LoadedGraph, config: SearchConfig) -> GraphSource | PendingGraph:
    if loaded.index is None:
        return PendingGraph(loaded.context, loaded.collection)
    return GraphSource(loaded.index, GraphSettings.from_config(config), loaded.query_vector)


class PendingGraph:
    """The graph source of a collection whose graph tables are pending (`indexing.graph`): no
    hits, and a note saying how far the build is. A search never starts the build (a search only
    reads): the write that left the graph pending starts it in the app, or the Graph page's
    button, or `collections graph NAME`. Its results are not cached (`transient`): the note
    changes as the build runs, and the built graph joins on the next search."""

    name = "graph"
    backend = "graph index pending"
    transient = True
    unscored = "the entity graph of this collection is not built yet"

    def __init__(self, context: LoadContext, collection: str):
        self.context, self.collection = context, collection

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        if depth < 1:
            raise RetrievalError(f"depth must be ≥ 1, got {depth}")
        return []

    def why_empty(self, query: str) -> str:
        return self.context.graph_note(self.collection)


_TYPE_HELP = ("Weight of this entity type in relevance(A, B) = Σ w_t·Jaccard_t / Σ w_t over the types both "
              "sides have (default {:g}). Higher: sharing this type's entities counts more.")
# Seed 002: entity-type weights (§4.2), multi-hop recall (§6: depth, breadth per hop, relevance
# threshold — 0.1, not the seed's 0.5: rule-found entities give a chunk many entities per type, so
# chunk-to-chunk relevance stays around 0.02–0.2 and a higher threshold stops every hop) and the
# final-score mix (§7: match 0.3, vector 0.3, time decay 0.2, preference 0.2, decay λ per day in
# e^(−λ·days)).
_TYPE_WEIGHTS = {"time": 0.9, "location": 1.0, "person": 1.1, "topic": 1.5, "action": 1.2, "tag": 1.0}
PARAMS: tuple[Param, ...] = tuple(
    Param(f"graph.{t}", f"{t.capitalize()} weight", _TYPE_HELP.format(w), 0, 3, 0.1, default=w)
    for t, w in _TYPE_WEIGHTS.items()
) + (
    Param("graph.depth", "Hops", "How many times activation spreads from the query's entities to chunks "
          "sharing entities with already activated chunks (BFS depth; 0 = direct matches only).", 0, 5, 1,
          default=2.0),
    Param("graph.breadth", "Breadth per hop", "At most this many new chunks are activated from each chunk "
          "per hop, the most relevant first.", 1, 20, 1, default=5.0),
    Param("graph.threshold", "Hop relevance threshold", "A chunk is activated by a hop only if its entity "
          "relevance to the chunk it spreads from reaches this.", 0.0, 1.0, 0.05, default=0.1),
    Param("graph.match", "Final score: entity match", "Weight of the entity match (match_ratio × 0.4 + "
          "relevance × 0.6) in the graph's final score (default 0.3).", 0.0, 1.0, 0.05, default=0.3),
    Param("graph.vector", "Final score: vector similarity", "Weight of the cosine similarity between query "
          "and chunk in the graph's final score (default 0.3).", 0.0, 1.0, 0.05, default=0.3),
    Param("graph.recency", "Final score: time decay", "Weight of the time decay e^(−λ·days) in the graph's "
          "final score (default 0.2).", 0.0, 1.0, 0.05, default=0.2),
    Param("graph.preference", "Final score: preference", "Weight of the preference score (chunk topics or "
          "tags among the focus topics) in the graph's final score (default 0.2).", 0.0, 1.0, 0.05, default=0.2),
    Param("graph.decay", "Time decay λ (per day)", "λ in e^(−λ·days): 0 ignores age; 0.01 halves the "
          "recency score after about 69 days.", 0.0, 0.1, 0.001, default=0.01),
)
GRAPH_DEFAULTS: dict[str, float] = {p.key: p.default for p in PARAMS}

SPEC = SourceSpec(
    name="graph", label="entity graph", load=load, build=build, key=key, params=PARAMS, optional=True,
    derives=Derives(tables=GRAPH_KINDS),  # entities, event-entity links, event times
    embeds_query=True,
    weight_help="Multiplies the entity graph's part of the fused score: RRF adds w/(k + graph rank), weighted "
                "sum adds w × normalised graph score.",
    description="Entity graph: entity activation over typed entities (person, place, time, topic, "
                "action, tag) with multi-hop recall.",
)


class GraphSource:
    name = "graph"
    unscored = "the query's entities do not activate it (not reached within the hops)"

    def __init__(self, index: GraphIndex, settings: GraphSettings, embed: Callable[[str], np.ndarray]):
        """`embed(query)` gives the query's vector (the Workbench caches it per model and query)."""
        self.index = index
        self.settings = settings
        self._embed = embed
        # An activation depends only on the query, the index and these settings: kept with them.
        self._activations = LRU(256)

    def activation(self, query: str) -> Activation:
        """The activation for `query` under this source's settings (cached per query)."""
        return self._activations.get_or_create(query, lambda: self._activate(query))

    def _activate(self, query: str) -> Activation:
        q, unknown = self.index.query_entities(query)
        result = activate(q, self.index.entities, self.settings, self.index.positions, self.index.events_of)
        result.unknown = unknown
        return result

    def scored(self, query: str) -> list[Scored]:
        """Every activated event with its final score and the parts of it, best first."""
        activation = self.activation(query)
        if not activation.events:
            return []
        ids = list(activation.events)
        q = self._embed(query)
        rows = [self.index.row[i] for i in ids]
        sims = self.index.vectors[rows] @ (q / (np.linalg.norm(q) or 1.0))
        return score_events(activation, self.index.entities, dict(zip(ids, sims.tolist(), strict=True)),
                            self.index.days, self.settings)

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        if not query.strip():
            return []
        if depth < 1:
            raise RetrievalError(f"depth must be ≥ 1, got {depth}")
        activation = self.activation(query)
        # The filter keeps allowed events only, before the depth cut; activation may still spread
        # through an event the filter removes (it is a bridge between two allowed ones).
        scored = [s for s in self.scored(query) if allowed is None or s.event_id in allowed]
        return [Hit(s.event_id, s.score, rank,
                    hit_detail(activation.events[s.event_id], s, self.index.date_sources.get(s.event_id, "")))
                for rank, s in enumerate(scored[:depth], start=1)]
