"""Every cache of the retrieval core, in one place, owned by the Workbench.

Each cache is keyed by exactly what determines its content, so a hit is always right and nothing
needs invalidating: a write to a collection changes its state key (`Store.state_key`: the handle's
id and the table version), and everything read from the old state is simply never asked for again
and ages out of its LRU.

    loaded          (collection, state, source)                   -> what the source's `load` read
    sources         (collection, state, source, source params)    -> a built `Source`, one LRU per
                                                                     source name (a graph slider
                                                                     never evicts the BM25 index)
    candidates      (collection, state, source, params, query)    -> (depth fetched, SourceResult)
    documents       (collection, state)                           -> {doc id: row}, filled on demand
    filters         (collection, state, filters)                  -> (allowed ids, collection size)
    query_vectors   (model, query)                                -> the query's embedding
    rankings        (collection, state, source, params, query)    -> the source over the whole
                                                                     collection (why-not: returned
                                                                     order and every score)
    runs            (collection, state, config, queries)          -> a config's evaluated run
                                                                     (snapshot diffs re-run old
                                                                     configs on other versions)
    row_ids         (collection, state)                           -> the document id of each LanceDB
                                                                     row id (`RowIdMap`: 19 MB of
                                                                     ids at 1M documents)
    rerank          (reranker, query, doc id, hash(text))         -> rerank score
    responses       (descriptor fingerprint, request sent)        -> an outside engine's mapped hits
                                                                     (`sources/external/`): a slider,
                                                                     a write or another collection
                                                                     never asks the engine again
    passage_vectors (reranker model, hash(text))                  -> the text's E5 passage
                                                                     embedding (rerank re-scores a
                                                                     document for a new query with
                                                                     one query embedding)

Models themselves (`embed.load_encoder`, `rerank.get_reranker`) are loaded once per process,
like sentence-transformers' own model cache; they hold no per-collection state.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

BUILT_SOURCES_PER_NAME = 16
RUNS_KEPT = 16  # evaluated runs: a diff of snapshots re-runs at most two
RANKINGS_KEPT = 64  # whole-collection rankings (one per source and query): the why-not panel's


class LRU:
    """A small thread-safe least-recently-used mapping."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._create_lock = threading.Lock()

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def get_or_create(self, key: Hashable, create: Callable[[], Any]) -> Any:
        """The cached value, or `create()` stored and returned. Two threads asking for a missing
        key at once create it once (an index build or a collection read is too dear to repeat)."""
        missing = object()
        value = self.get(key, missing)
        if value is not missing:
            return value
        with self._create_lock:
            value = self.get(key, missing)
            if value is missing:
                value = create()
                self.put(key, value)
            return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


class RerankCache:
    """Rerank scores, keyed by (model name, query, doc id, hash of the text): the text is part of
    the key so that a document whose text changed, or the same id in another collection, is
    scored afresh. A bounded LRU, thread-safe."""

    def __init__(self, max_entries: int = 50_000):
        self.max_entries = max_entries
        self._scores = LRU(max_entries)

    def __len__(self) -> int:
        return len(self._scores)

    def get_many(self, model: str, query: str, docs: dict[str, str]) -> dict[str, float]:
        """Cached scores for those of `docs` (doc id -> text) that have one."""
        found = {}
        for doc_id, text in docs.items():
            score = self._scores.get((model, query, doc_id, hash(text)))
            if score is not None:
                found[doc_id] = score
        return found

    def put_many(self, model: str, query: str, docs: dict[str, str], scores: dict[str, float]) -> None:
        for doc_id, score in scores.items():
            self._scores.put((model, query, doc_id, hash(docs[doc_id])), score)

    def clear(self) -> None:
        self._scores.clear()


class Caches:
    """The Workbench's caches (see the module docstring for their keys)."""

    def __init__(self, candidate_cache_size: int = 4096):
        self.loaded = LRU(32)
        self._sources: dict[str, LRU] = {}
        self._sources_lock = threading.Lock()
        self.candidates = LRU(candidate_cache_size)
        self.documents = LRU(64)
        self.filters = LRU(256)
        self.row_ids = LRU(4)
        self.query_vectors = LRU(8192)
        self.rankings = LRU(RANKINGS_KEPT)
        self.runs = LRU(RUNS_KEPT)
        self.rerank = RerankCache()
        self.passage_vectors = LRU(50_000)  # 384 floats each: ≤ 77 MB
        self.responses = LRU(8192)

    def sources(self, name: str) -> LRU:
        """The LRU of built sources of one source name."""
        with self._sources_lock:
            return self._sources.setdefault(name, LRU(BUILT_SOURCES_PER_NAME))
