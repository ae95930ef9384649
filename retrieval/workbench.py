"""The facade the UI, CLI and benchmarks use: cached candidates, then pure fusion, then rerank.

Caches, each keyed by what determines its content:
- sources (a built BM25 index, a dense searcher): (collection, version, source, parameters);
- candidates: (collection, version, source, parameters, query), reused for any depth up to the
  depth fetched, so moving the depth slider down never re-queries;
- rerank scores: (reranker, query, doc id), in `rerank.RerankCache`.
Everything after candidates (`fuse`) is a pure function of them and the config.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from .config import SearchConfig
from .fusion import fuse
from .sources import SOURCE_MODULES, build_source, source_params
from .sources.base import Source, run_source
from .store import Store, embedding_text
from .types import FusedResult, FusionOutcome, RerankedResult, SourceResult

BUILT_SOURCES_PER_NAME = 16


class LRU:
    """A small thread-safe least-recently-used mapping."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, default=None):
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key, value) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


@dataclass
class CandidateSet:
    """Per-source candidates for one query on one collection version, plus their documents."""

    collection: str
    version: tuple[str, int]  # Store.state_key: handle id and table version
    query: str
    depth: int
    sources: dict[str, SourceResult]
    documents: dict[str, dict[str, Any]]  # every candidate's row (no vector)
    seconds: dict[str, float] = field(default_factory=dict)  # retrieval time per source
    from_cache: bool = False


@dataclass
class SearchResult:
    query: str
    config: SearchConfig
    candidates: CandidateSet
    outcome: FusionOutcome
    reranked: list[RerankedResult] | None = None
    reranker_name: str | None = None
    reranker_kind: str | None = None

    @property
    def documents(self) -> dict[str, dict[str, Any]]:
        return self.candidates.documents

    def eligible(self) -> list[FusedResult]:
        """Fused results that passed the score thresholds, before the top-K cut: what rerank sees."""
        outcome = self.outcome
        return outcome.ranked[: len(outcome.results) + outcome.removed.get("top-k", 0)]

    def final_ranking(self) -> list[tuple[FusedResult, RerankedResult | None]]:
        """What is shown, best first, at most top-K: without rerank the fused results; with rerank
        the reranked top-N, then (when N < K) the next first-stage results, not reranked."""
        if self.reranked is None:
            return [(r, None) for r in self.outcome.results]
        reranked_ids = {r.doc_id for r in self.reranked}
        ordered = [(r.fused, r) for r in self.reranked]
        ordered += [(r, None) for r in self.eligible() if r.doc_id not in reranked_ids]
        return ordered[: self.config.top_k]


def tie_values(documents: dict[str, dict[str, Any]], field_name: str | None) -> dict[str, float]:
    """The numeric metadata field used to break ties, for the candidates that have it."""
    if not field_name:
        return {}
    values = {}
    for doc_id, row in documents.items():
        value = row.get("metadata", {}).get(field_name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            values[doc_id] = float(value)
    return values


class Workbench:
    def __init__(self, store: Store | None = None, candidate_cache_size: int = 4096):
        from .rerank import RerankCache

        self.store = store or Store()
        # One LRU per source name: sliding a keyword or graph parameter builds new sources of that
        # kind only, and can never evict the BM25 index or the vector source (whose query
        # embeddings are cached on it).
        self._sources: dict[str, LRU] = {}
        self._candidates = LRU(candidate_cache_size)
        self.rerank_cache = RerankCache()
        self._build_lock = threading.Lock()

    # ---- sources ---------------------------------------------------------------------------
    def source(self, collection: str, version: tuple[str, int], name: str, config: SearchConfig) -> Source:
        """The built source for a collection version (built once, then cached)."""
        key = (collection, version) + source_params(name, config)
        with self._build_lock:
            cache = self._sources.setdefault(name, LRU(BUILT_SOURCES_PER_NAME))
        built = cache.get(key)
        if built is None:
            with self._build_lock:
                built = cache.get(key)
                if built is None:
                    built = build_source(self.store, collection, name, config)
                    cache.put(key, built)
        return built

    # ---- candidates ------------------------------------------------------------------------
    def candidates(self, collection: str, query: str, config: SearchConfig) -> CandidateSet:
        """Each configured source's top `config.depth` hits, retrieved once and then cached."""
        version = self.store.state_key(collection)
        results: dict[str, SourceResult] = {}
        seconds: dict[str, float] = {}
        all_cached = True
        for name in config.sources:
            key = (collection, version) + source_params(name, config) + (query,)
            cached = self._candidates.get(key)
            if cached is not None and cached[0] >= config.depth:
                fetched_depth, result = cached
                results[name] = _truncate(result, config.depth)
                continue
            all_cached = False
            if name not in SOURCE_MODULES:
                results[name] = SourceResult(name, (), error=f"unknown source {name!r}; known: {', '.join(SOURCE_MODULES)}")
                continue
            started = time.perf_counter()
            try:
                source = self.source(collection, version, name, config)
            except Exception as exc:  # a source that cannot even be built is reported, not fatal
                results[name] = SourceResult(name, (), error=f"{type(exc).__name__}: {exc}")
                continue
            result = run_source(source, query, config.depth)
            seconds[name] = time.perf_counter() - started
            if result.error is None:
                self._candidates.put(key, (config.depth, result))
            results[name] = result
        doc_ids = {h.doc_id for r in results.values() for h in r.hits}
        documents = self._documents(collection, version, doc_ids)
        return CandidateSet(collection, version, query, config.depth, results, documents, seconds, all_cached)

    def documents(self, collection: str, ids) -> dict[str, dict[str, Any]]:
        """Rows of the given documents (no vectors), from the cache kept per collection state."""
        return self._documents(collection, self.store.state_key(collection), set(ids))

    def _documents(self, collection: str, version: tuple[str, int], ids: set[str]) -> dict[str, dict[str, Any]]:
        key = (collection, version, "documents")
        cache = self._candidates.get(key)
        if cache is None:
            cache = {}
            self._candidates.put(key, cache)
        missing = [i for i in ids if i not in cache]
        if missing:
            cache.update(self.store.documents(collection, missing))
        return {i: cache[i] for i in ids if i in cache}

    # ---- fusion and rerank -----------------------------------------------------------------
    @staticmethod
    def fuse(candidates: CandidateSet, config: SearchConfig) -> FusionOutcome:
        """Pure and fast: what every slider move runs."""
        return fuse(candidates.sources, config, tie_values(candidates.documents, config.tie_field))

    def search(self, collection: str, query: str, config: SearchConfig) -> SearchResult:
        candidates = self.candidates(collection, query, config)
        outcome = self.fuse(candidates, config)
        result = SearchResult(query, config, candidates, outcome)
        if config.rerank:
            self.apply_rerank(result)
        return result

    def apply_rerank(self, result: SearchResult) -> None:
        """Re-score the top-N fused results with the configured reranker (scores cached)."""
        from .rerank import get_reranker, rerank

        reranker = get_reranker(result.config.reranker)
        texts = {doc_id: embedding_text_of(row) for doc_id, row in result.documents.items()}
        # Rerank what passed the score thresholds; the top-K cut applies to the reranked list.
        result.reranked = rerank(result.query, result.eligible(), texts, reranker,
                                 result.config.rerank_top_n, self.rerank_cache)
        result.reranker_name, result.reranker_kind = reranker.name, reranker.kind


def embedding_text_of(row: dict[str, Any]) -> str:
    """Title and text of a stored row, joined as at ingest."""
    from .types import Document

    return embedding_text(Document(id=row["id"], text=row["text"], title=row.get("title") or ""))


def _truncate(result: SourceResult, depth: int) -> SourceResult:
    if len(result.hits) <= depth:
        return result
    return SourceResult(result.source, result.hits[:depth], result.error, result.notes)
