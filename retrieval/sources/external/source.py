"""An outside engine as a source: a `SourceSpec` made from its descriptor (`external_spec`), so
the Retriever loads, builds, searches, caches and fuses it like BM25 or the vector source.

    load(context, collection)  the engine's client (one per descriptor and process: `engine_for`),
                               the response cache (the Workbench's `Caches.responses`) and, when a
                               template asks for `{query_vector}`, the collection's own encoder
    build(loaded, config)      the source for the config's filters (`{filters}`)
    search(query, depth)       the request filled for the query, answered from the response cache
                               (keyed by the descriptor's fingerprint and the request sent), else
                               sent; the answer mapped to hits (`mapping.map_hits`)

Hits are joined to the collection's documents by id, so they fuse with local hits and use the
same judgments; a hit the collection lacks keeps the engine's title and text in its `detail`
(`outside_rows` makes its row). With a metadata filter only the allowed local documents are kept
(an outside document's metadata is unknown). A failure raises, and `run_source` turns it into
that source's error while the others fuse; failures are never cached, and nothing is retried.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from retrieval.cache import LRU
from retrieval.sources.base import SourceSpec
from retrieval.sources.external.descriptor import Descriptor
from retrieval.sources.external.mapping import OutsideHit, map_hits
from retrieval.types import Hit, SourceResult

if TYPE_CHECKING:
    from retrieval.search.config import SearchConfig
    from retrieval.sources.base import LoadContext

TEXT_SHOWN = 500  # characters of an outside hit's text kept in its detail

_engines: dict[str, Any] = {}
_engines_lock = threading.Lock()


def engine_for(descriptor: Descriptor):
    """The client of `descriptor`'s engine, one per descriptor (fingerprint) and process, like an
    encoder (`models.embed.load_encoder`): an MCP server started over stdio is started once."""
    with _engines_lock:
        engine = _engines.get(descriptor.fingerprint)
        if engine is None:
            if descriptor.kind == "http":
                from retrieval.sources.external.http_kind import HttpEngine
                engine = HttpEngine(descriptor)
            else:
                from retrieval.sources.external.mcp_kind import McpEngine
                engine = McpEngine(descriptor)
            _engines[descriptor.fingerprint] = engine
        return engine


def close_engines() -> None:
    """Close every engine's client (an MCP server started over stdio stops)."""
    with _engines_lock:
        engines = list(_engines.values())
        _engines.clear()
    for engine in engines:
        engine.close()


@dataclass(frozen=True)
class LoadedEngine:
    descriptor: Descriptor
    engine: Any
    responses: LRU
    vectorize: Any = None  # query -> list of floats, when a template has {query_vector}


class ExternalSource:
    """A built outside source (see the module doc)."""

    def __init__(self, loaded: LoadedEngine, filters: tuple[str, ...] = ()):
        self.loaded, self.filters = loaded, filters
        self.descriptor = loaded.descriptor
        self.name = self.descriptor.name
        where = self.descriptor.url or " ".join(self.descriptor.command[:2])
        self.backend = f"outside engine ({self.descriptor.kind}: {where})"
        # "Why not?" knows only what the engine returned: in its first N, or not.
        self.unscored = (f"{self.descriptor.label} (an outside engine) did not return it among its first "
                         f"{self.descriptor.max_depth} results; its scores for other documents are unknown")

    def fetch(self, query: str, depth: int) -> list[OutsideHit]:
        """The engine's first `depth` results for `query`: from the response cache, else asked."""
        values: dict[str, Any] = {"query": query, "depth": depth, "filters": list(self.filters)}
        if self.loaded.vectorize is not None:
            values["query_vector"] = self.loaded.vectorize(query)
        request = self.loaded.engine.request(values)
        key = (self.descriptor.fingerprint, json.dumps(request, sort_keys=True, default=str))
        found = self.loaded.responses.get(key)
        if found is None:
            found = map_hits(self.loaded.engine.call(request), self.descriptor.paths, depth)
            self.loaded.responses.put(key, found)
        return found

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        if not query.strip():
            return []
        depth = min(depth, self.descriptor.max_depth)  # "why not?" asks for the whole collection
        found = self.fetch(query, depth)
        if allowed is not None:
            found = [h for h in found if h.doc_id in allowed]
        return [Hit(h.doc_id, h.score, rank, hit_detail(h)) for rank, h in enumerate(found[:depth], start=1)]


def hit_detail(hit: OutsideHit) -> dict[str, Any] | None:
    """What the engine said of a hit beside its score (shown in the explanation)."""
    detail = {}
    if hit.engine_score is not None:  # lower is better: its score is 1 / (1 + engine_score)
        detail["engine_score"] = hit.engine_score
    if hit.title is not None:
        detail["title"] = hit.title
    if hit.text is not None:
        detail["text"] = hit.text[:TEXT_SHOWN]
    return detail or None


def outside_rows(results: Mapping[str, SourceResult], ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Rows for documents the collection lacks, from the hits of `results` (source → result):
    the title and text an outside engine gave (the first hit that has them), else the id as the
    title; `outside` marks them."""
    wanted = set(ids)
    hits: dict[str, list[Hit]] = {}
    for result in results.values():
        for hit in result.hits:
            if hit.doc_id in wanted:
                hits.setdefault(hit.doc_id, []).append(hit)
    rows = {}
    for doc_id in sorted(wanted):
        found = hits.get(doc_id, [])
        title = next((h.detail["title"] for h in found if h.detail and h.detail.get("title")), None)
        text = next((h.detail["text"] for h in found if h.detail and h.detail.get("text")), "")
        rows[doc_id] = {"id": doc_id, "title": title or doc_id, "text": text, "metadata": "{}", "outside": True}
    return rows


def load(descriptor: Descriptor, context: LoadContext, collection: str) -> LoadedEngine:
    responses = getattr(context, "responses", None)  # (an empty LRU is falsy: no `or` here)
    responses = responses if responses is not None else LRU(1024)
    vectorize = None
    if descriptor.uses_query_vector:
        model = context.store.info(collection).model
        vectorize = lambda query: [float(x) for x in context.query_vector(model, query)]  # noqa: E731
    return LoadedEngine(descriptor, engine_for(descriptor), responses, vectorize)


def build(loaded: LoadedEngine, config: SearchConfig) -> ExternalSource:
    return ExternalSource(loaded, tuple(config.filters))


def external_spec(descriptor: Descriptor) -> SourceSpec:
    """The `SourceSpec` of an outside engine: keyed by the descriptor's fingerprint, so a changed
    descriptor under the same name is a new source to every cache."""
    return SourceSpec(
        name=descriptor.name, label=descriptor.label, load=partial(load, descriptor), build=build,
        key=lambda config: (descriptor.fingerprint,), optional=True, embeds_query=descriptor.uses_query_vector,
        weight_help=f"Multiplies {descriptor.label}'s part of the fused score (an outside engine: its own "
                    "scores, normalised like any source's).",
        description=f"{descriptor.label}: an outside {descriptor.kind} search engine, its hits joined to "
                    "the collection's documents by id.",
    )
