"""The facade the UI, CLI and benchmarks use: cached candidates, then pure fusion, then rerank.

A query walks: `search` → `candidates` (each configured source's top `depth` hits, through the
caches of `cache.Caches`, which the Workbench owns) → `fuse` (pure, milliseconds: what a slider
move runs) → `apply_rerank` (scores cached per reranker, query and text). Front ends also manage
collections, judgments and saved configs through it, so none of them talks to the store directly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

import numpy as np

from . import limits
from .cache import Caches
from .config import SearchConfig
from .fusion import fuse, fused_order
from .names import labels
from .sources import SOURCES, Source, run_source, run_source_batch, source_params, unknown_source
from .store import CollectionInfo, CollectionStats, Progress, Store
from .types import FusedResult, FusionOutcome, Hit, ParsedCorpus, RerankedResult, RetrievalError, SourceResult

if TYPE_CHECKING:
    from .indexing.pipeline import IngestResult
    from .ingest import DocumentStream

log = logging.getLogger(__name__)
METADATA_VALUES_KEPT = 50  # per field, for the filter controls


@dataclass
class CandidateSet:
    """Per-source candidates for one query on one collection version, plus the rows of those
    candidates read so far.

    Rows are read when something needs them (`rows`), not with the candidates: a search shows
    top-K of up to depth × sources candidates, and at 1M documents reading 200 rows took 31 ms of
    a 73 ms hybrid search (docs/experiments/scale.md). `Workbench.search` reads the rows of what
    it shows (and of the rerank head); a view of more candidates asks for theirs.
    """

    collection: str
    version: tuple[str, int]  # Store.state_key: handle id and table version
    query: str
    depth: int
    sources: dict[str, SourceResult]
    documents: dict[str, dict[str, Any]]  # rows (no vector) of the candidates read so far, by id
    seconds: dict[str, float] = field(default_factory=dict)  # retrieval time per source
    from_cache: bool = False
    filtered: tuple[int, int] | None = None  # (documents the filters left, documents in all)
    language: str | None = None  # the collection's language ('en', 'zh', 'mixed'): `retrieval.language`
    # Reads rows by id at this set's collection state (the Workbench's row cache); None: `documents` is all there is.
    reader: Callable[[set[str]], dict[str, dict[str, Any]]] | None = field(default=None, repr=False, compare=False)

    def rows(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """`documents`, after reading the rows of those of `ids` not read yet (one batch)."""
        missing = {i for i in ids if i not in self.documents}
        if missing and self.reader is not None:
            self.documents.update(self.reader(missing))
        return self.documents

    def all_ids(self) -> set[str]:
        """Every candidate's id (of every source)."""
        return {h.doc_id for r in self.sources.values() for h in r.hits}


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


@dataclass
class GraphStatus:
    """Where a collection's entity graph tables stand (`Workbench.graph_status`): "current"
    (written at ingest or built), "pending" (to be built: a large ingest skipped them),
    "building" (`done` of `total` documents read), or "failed" (`error`; tried again on the
    next search)."""

    state: str
    done: int = 0
    total: int = 0
    error: str = ""

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else 0

    @property
    def note(self) -> str:
        """The sentence the graph source's empty result, the Graph page and the Corpus page show."""
        joins = "the graph source joins when it is built"
        if self.state == "building":
            return (f"graph index: building {self.percent} % ({self.done:,} of {self.total:,} documents); {joins}")
        if self.state == "pending":
            return (f"graph index: pending ({self.total:,} documents; entity extraction runs after an ingest of "
                    f"{limits.GRAPH_INLINE_MAX:,} documents or more, in the background from the graph source's "
                    f"first search, or `collections graph NAME`); {joins}")
        if self.state == "failed":
            return f"graph index: the build failed ({self.error}); it is tried again on the next search"
        return "graph index: built"


@dataclass
class _GraphBuild:
    done: int = 0
    total: int = 0
    error: str = ""
    thread: threading.Thread | None = None
    running: bool = False


def tie_values(documents: dict[str, dict[str, Any]], field_name: str | None) -> dict[str, float]:
    """The numeric metadata field used to break ties, for the candidates that have it."""
    if not field_name:
        return {}
    values = {}
    for doc_id, row in documents.items():
        value = tie_value(row.get("metadata", {}), field_name)
        if value is not None:
            values[doc_id] = value
    return values


def tie_value(metadata: dict[str, Any], field_name: str) -> float | None:
    """A document's tie-break value: its metadata field as a float when it is a number (not a bool)."""
    value = metadata.get(field_name)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


class Workbench:
    def __init__(self, store: Store | None = None, candidate_cache_size: int = 4096):
        self.store = store or Store()
        self.caches = Caches(candidate_cache_size)
        # Called as model_check(kind, name) before a model a caller named is loaded (kind
        # "reranker" or "embedding model"); raises RetrievalError to refuse it. None: any name
        # (the CLI, whose user is on the server). The browser's Workbench refuses names outside
        # the built-ins and `limits.MODEL_DIRS_ENV` (`ui.state.browser_model_check`).
        self.model_check: Callable[[str, str], None] | None = None
        # A pending entity graph (`graph_build`) is built in a background thread on the graph
        # source's first search; False: only by `build_graph` (tests, scripts).
        self.graph_in_background = True
        self._graph_builds: dict[str, _GraphBuild] = {}
        self._graph_locks: dict[str, threading.Lock] = {}
        self._graph_guard = threading.Lock()

    @property
    def rerank_cache(self):
        return self.caches.rerank

    # ---- collections (the front ends' only way to the store) ---------------------------------
    def collections(self) -> list[CollectionInfo]:
        """Every collection's catalogue entry, in the order people read them: by display name."""
        return sorted(self.store.list_collections(), key=lambda i: (i.label.casefold(), i.name))

    def collection_names(self) -> list[str]:
        """Table names, by display name like `collections`, from the table listing and the
        catalogue's names (cheap enough for a picker redrawn on every move)."""
        shown = self.store.display_names()
        return sorted(shown, key=lambda n: (shown[n].casefold(), n))

    def labels(self) -> dict[str, str]:
        """Table name → what to show for it: its display name, with the table name in brackets
        when two collections would read the same (`names.labels`)."""
        return labels(self.store.display_names())

    def label(self, collection: str) -> str:
        """What to show for one collection (its table name when it is not listed)."""
        return self.labels().get(collection, collection)

    def truncation_note(self, info: CollectionInfo) -> str:
        """How many of the collection's documents the encoder truncated, as a sentence
        (`indexing.pipeline.truncation_note`, with its model's token window); '' when none or not counted."""
        from .embed import token_window
        from .indexing.pipeline import truncation_note

        if not info.truncated:
            return ""
        return truncation_note(info.truncated, info.doc_count, token_window(info.model))

    def resolve(self, name: str) -> str:
        """The table name of the collection a user named by table or display name (`Store.resolve`)."""
        return self.store.resolve(name)

    def exists(self, collection: str) -> bool:
        return self.store.exists(collection)

    def info(self, collection: str) -> CollectionInfo:
        return self.store.info(collection)

    def stats(self, collection: str) -> CollectionStats:
        return self.store.stats(collection)

    def create(self, collection: str, corpus: ParsedCorpus, model: str | None = None, description: str = "",
               progress: Progress | None = None, cross_lingual: bool | None = None) -> IngestResult:
        """A new collection from parsed documents, through the ingest pipeline (all or nothing).
        `collection` is the name the user gave, in any script (the table name is derived);
        `cross_lingual` None: cross-lingual vectors when `indexing.plan.wants_cross_lingual` says so."""
        from .indexing.pipeline import create_collection

        if model is not None and self.model_check is not None:
            self.model_check("embedding model", model)
        return create_collection(self.store, collection, corpus, model, description, progress, cross_lingual)

    def add(self, collection: str, corpus: ParsedCorpus, progress: Progress | None = None) -> IngestResult:
        from .indexing.pipeline import add_documents

        return add_documents(self.store, collection, corpus, progress)

    def ingest_stream(self, collection: str, stream: DocumentStream, add: bool = False, model: str | None = None,
                      description: str = "", progress: Progress | None = None,
                      cross_lingual: bool | None = None) -> IngestResult:
        """Create collection `collection` (any script) from a `DocumentStream`, or add it to
        collection `collection` (its table name), batch by batch in one all-or-nothing write
        (`indexing.pipeline.ingest_stream`; holds the collection's writer lock for the whole ingest)."""
        from .indexing.pipeline import ingest_stream

        if model is not None and self.model_check is not None:
            self.model_check("embedding model", model)
        return ingest_stream(self.store, collection, stream, add, model, description, progress, cross_lingual)

    def backends(self, collection: str) -> dict[str, str]:
        """What serves BM25 and vector search on this collection under the default config, in words
        (the Corpus page and `collections` say it; each search's own are in `SourceResult.backend`)."""
        config = SearchConfig(weights={"bm25": 1.0, "dense": 1.0})
        return {name: self.source(collection, name, config).backend for name in ("bm25", "dense")}

    def build_vector_index(self, collection: str) -> None:
        """An approximate vector index for a large collection (similarities stay exact: refine)."""
        from .indexing.indexes import build_vector_index

        build_vector_index(self.store, collection)

    # ---- the entity graph of a large collection (graph_build.py) -----------------------------
    def graph_status(self, collection: str) -> GraphStatus:
        """Where the collection's graph tables stand, and how far a build in this process is."""
        with self._graph_guard:
            build = self._graph_builds.get(collection)
            if build is not None and build.running:
                return GraphStatus("building", build.done, build.total)
        info = self.store.info(collection)
        if info.graph != "pending":
            return GraphStatus("current", info.doc_count, info.doc_count)
        if build is not None and build.error:
            return GraphStatus("failed", build.done, build.total, build.error)
        return GraphStatus("pending", 0, info.doc_count)

    def build_graph(self, collection: str, progress: Progress | None = None,
                    only_pending: bool = False) -> CollectionInfo:
        """Build the collection's entity graph tables from its stored documents, in batches, and
        mark them current, in one transaction (`graph_build.build_graph`). One build per
        collection at a time in this process (a second call waits for the first); with
        `only_pending`, nothing is done when the graph is current by then.
        `progress("finding entities", done, total)`; `graph_status` reads the same numbers."""
        from .graph_build import build_graph

        with self._graph_guard:
            lock = self._graph_locks.setdefault(collection, threading.Lock())
        with lock:
            if only_pending and self.store.info(collection).graph != "pending":
                return self.store.info(collection)
            with self._graph_guard:
                build = self._graph_builds.setdefault(collection, _GraphBuild())
                build.done, build.total, build.error, build.running = 0, 0, "", True

            def report(stage: str, done: int, total: int) -> None:
                build.done, build.total = done, total
                if progress:
                    progress(stage, done, total)
            try:
                return build_graph(self.store, collection, report)
            except Exception as exc:
                build.error = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                build.running = False

    def start_graph_build(self, collection: str) -> bool:
        """Start building a pending graph in a background thread, unless one is running (or
        `graph_in_background` is off). True when a build was started."""
        if not self.graph_in_background:
            return False
        with self._graph_guard:
            build = self._graph_builds.get(collection)
            if build is not None and build.thread is not None and build.thread.is_alive():
                return False

            build = self._graph_builds.setdefault(collection, _GraphBuild())

            def run() -> None:
                try:
                    self.build_graph(collection, only_pending=True)
                except Exception:
                    log.warning("building the entity graph of %s failed", collection, exc_info=True)
                finally:
                    build.running = False

            build.thread = threading.Thread(target=run, name=f"graph-build-{collection}", daemon=True)
            build.running, build.error = True, ""
            build.thread.start()
            return True

    def wait_graph(self, collection: str, timeout: float | None = None) -> None:
        """Wait for this process's background graph build of `collection`, if one runs."""
        with self._graph_guard:
            build = self._graph_builds.get(collection)
        if build is not None and build.thread is not None:
            build.thread.join(timeout)

    def delete(self, collection: str) -> None:
        self.store.delete(collection)

    def clear(self, collection: str) -> CollectionInfo:
        return self.store.clear(collection)

    @cached_property
    def judgments(self):
        """Query sets and graded judgments per collection (`judgments.JudgmentStore`)."""
        from .judgments import JudgmentStore

        return JudgmentStore(self.store)

    @cached_property
    def configs(self):
        """Saved search configs (`configs.ConfigStore`)."""
        from .configs import ConfigStore

        return ConfigStore(self.store)

    @property
    def writes(self) -> int:
        """How many writes went through this Workbench's store: readers that memoise what they read
        (the Evaluate page) read again when it grows."""
        return self.store.writes

    # ---- sources ---------------------------------------------------------------------------
    def query_vector(self, model: str, query: str) -> np.ndarray:
        """`query` embedded by `model`, once per (model, query): shared by every source that embeds."""
        def embed() -> np.ndarray:
            from .embed import load_encoder

            return load_encoder(model).encode_queries([query])[0]

        return self.caches.query_vectors.get_or_create((model, query), embed)

    def embed_queries(self, collection: str, queries: Iterable[str], config: SearchConfig,
                      batch_size: int = 64) -> int:
        """Embed, in batches, the queries whose vectors are not cached yet, with the collection's
        model, when a source of `config` embeds queries: what evaluation and sweeps do before
        their per-query loop (one batch of 64 costs far less than 64 single encodes). Returns how
        many were embedded."""
        embedding = [name for name in config.sources if name in SOURCES and SOURCES[name].embeds_query]
        if not embedding:
            return 0
        from .embed import load_encoder
        from .sources.dense import vector_space

        info = self.info(collection)
        todo: dict[str, list[str]] = {}  # model -> its queries not cached yet
        for query in dict.fromkeys(queries):
            # The vector source's model for this query (the cross-lingual one across languages,
            # `vector_space`); any other source that embeds uses the collection's model.
            models = {vector_space(query, info.model, info.language, info.xl_model, config.language_aware).model
                      if name == "dense" else info.model for name in embedding}
            for model in models:
                if self.caches.query_vectors.get((model, query)) is None:
                    todo.setdefault(model, []).append(query)
        for model, texts in todo.items():
            vectors = load_encoder(model).encode_queries(texts, batch_size=batch_size)
            for query, vector in zip(texts, vectors, strict=True):
                self.caches.query_vectors.put((model, query), vector)
        return sum(len(texts) for texts in todo.values())

    def source(self, collection: str, name: str, config: SearchConfig, state: tuple | None = None) -> Source:
        """The built source `name` for the collection's current state (or `state`) and `config`:
        the collection is read once per state (`SourceSpec.load`), the source built once per
        parameters (`SourceSpec.build`)."""
        spec = SOURCES.get(name)
        if spec is None:
            raise KeyError(unknown_source(name))
        state = state if state is not None else self.store.state_key(collection)
        loaded_key = (collection, state, name)
        return self.caches.sources(name).get_or_create(
            (collection, state) + source_params(name, config),
            lambda: spec.build(self.caches.loaded.get_or_create(loaded_key, lambda: spec.load(self, collection)),
                               config))

    # ---- candidates ------------------------------------------------------------------------
    def candidates(self, collection: str, query: str, config: SearchConfig) -> CandidateSet:
        """Each configured source's top `config.depth` hits, retrieved once and then cached (a
        smaller depth reuses a larger fetch, so moving the depth slider down never re-queries),
        with the candidates' rows already cached; the rest are read on demand (`CandidateSet.rows`)."""
        state = self.store.state_key(collection)
        allowed, filtered = self._allowed(collection, config, state)
        [results], seconds, all_cached = self._retrieve(collection, [query], config, state, allowed)
        doc_ids = {h.doc_id for r in results.values() for h in r.hits}
        cached = self._cached_rows(collection, state, doc_ids)
        row_ids = {h.doc_id: h.row_id for r in results.values() for h in r.hits if h.row_id is not None}
        return CandidateSet(collection, state, query, config.depth, results, cached, seconds, all_cached, filtered,
                            self.language(collection, state),
                            reader=partial(self._documents, collection, state, row_ids=row_ids))

    def source_results(self, collection: str, queries: list[str], config: SearchConfig,
                       state: tuple | None = None) -> list[dict[str, SourceResult]]:
        """`candidates(collection, query, config).sources` for each query, through the same cache,
        without reading any row: what evaluation and sweeps need. A source with `search_batch`
        (in-memory vectors) searches the uncached queries in one call. `state` (from `state()`)
        pins the collection state, so a long evaluation checks the table version once."""
        state = state if state is not None else self.store.state_key(collection)
        allowed, _ = self._allowed(collection, config, state)
        return self._retrieve(collection, queries, config, state, allowed)[0]

    def state(self, collection: str) -> tuple:
        """The collection's state key (`Store.state_key`): what every cache of its data keys on."""
        return self.store.state_key(collection)

    def _allowed(self, collection: str, config: SearchConfig, state: tuple
                 ) -> tuple[frozenset[str] | None, tuple[int, int] | None]:
        """The ids `config.filters` allow and (allowed, collection size); (None, None) unfiltered."""
        if not config.filters:
            return None, None
        allowed, total = self.filtered_ids(collection, config.filters, state)
        return allowed, (len(allowed), total)

    def _retrieve(self, collection: str, queries: list[str], config: SearchConfig, state: tuple,
                  allowed: frozenset[str] | None) -> tuple[list[dict[str, SourceResult]], dict[str, float], bool]:
        """Per query, each configured source's result (config order), from the candidate cache or
        from the source (`run_source_batch`: errors reported per query, not cached); the seconds
        each source spent retrieving; whether every result came from the cache."""
        results: list[dict[str, SourceResult]] = [{} for _ in queries]
        seconds: dict[str, float] = {}
        all_cached = True
        fetches: list[tuple[str, list[tuple], list[int]]] = []  # (source, cache keys, queries to fetch)
        for name in config.sources:
            keys = [(collection, state) + source_params(name, config) + (query,) for query in queries]
            missing = []
            for i, key in enumerate(keys):
                cached = self.caches.candidates.get(key)
                if cached is not None and cached[0] >= config.depth:
                    results[i][name] = _truncate(cached[1], config.depth)
                else:
                    missing.append(i)
            if not missing:
                continue
            all_cached = False
            if name not in SOURCES:
                for i in missing:
                    results[i][name] = SourceResult(name, (), error=unknown_source(name))
                continue
            fetches.append((name, keys, missing))

        def fetch(name: str, keys: list[tuple], missing: list[int]) -> None:
            started = time.perf_counter()
            try:
                source = self.source(collection, name, config, state)
            except Exception as exc:  # a source that cannot even be built is reported, not fatal
                log.warning("source %s could not be built for %s", name, collection, exc_info=True)
                for i in missing:
                    results[i][name] = SourceResult(name, (), error=f"{type(exc).__name__}: {exc}")
                return
            fetched = run_source_batch(source, [queries[i] for i in missing], config.depth, allowed)
            seconds[name] = time.perf_counter() - started
            keep = not getattr(source, "transient", False)
            for i, result in zip(missing, fetched, strict=True):
                if result.error is None and keep:
                    self.caches.candidates.put(keys[i], (config.depth, result))
                results[i][name] = result

        if len(fetches) > 1:
            # The sources of one search run side by side: LanceDB's searches (and numpy's products)
            # release the GIL, so at 1M documents a hybrid search waits for the slower source, not
            # for both (docs/experiments/scale.md). Each writes only its own entries.
            list(_source_pool().map(lambda job: fetch(*job), fetches))
        else:
            for job in fetches:
                fetch(*job)
        results = [{name: found[name] for name in config.sources if name in found} for found in results]
        return results, seconds, all_cached

    def language(self, collection: str, state: tuple | None = None) -> str:
        """The collection's language from its catalogue entry, read once per collection state."""
        state = state if state is not None else self.store.state_key(collection)
        return self.caches.loaded.get_or_create((collection, state, "_language"),
                                                lambda: self.store.info(collection).language)

    def metadata_fields(self, collection: str, state: tuple | None = None) -> dict[str, dict[str, Any]]:
        """Per metadata field: the kinds of its values ("string", "number", "date", "list") and
        its `METADATA_VALUES_KEPT` most frequent values as (value, count), most frequent first
        (lists count each item): what the filter controls offer. Read once per collection state."""
        state = state if state is not None else self.store.state_key(collection)
        return self._metadata(collection, state)[1]

    def _metadata(self, collection: str, state: tuple) -> tuple[list[tuple[str, dict]], dict[str, dict[str, Any]]]:
        def read():
            import json
            from collections import Counter

            from .filters import value_kind

            table = self.store.column(collection, ["id", "metadata"])
            rows = [(i, json.loads(m or "{}")) for i, m in zip(table.column("id").to_pylist(),
                                                               table.column("metadata").to_pylist(), strict=True)]
            fields: dict[str, dict[str, Any]] = {}
            for _, metadata in rows:
                for key, value in metadata.items():
                    entry = fields.setdefault(key, {"kinds": set(), "values": Counter()})
                    entry["kinds"].add(value_kind(value))
                    for item in value if isinstance(value, list) else [value]:
                        if isinstance(item, (str, int, float)) and not isinstance(item, bool):
                            entry["values"][str(item)] += 1
            for entry in fields.values():  # ranked once per state, not on every slider move
                entry["values"] = entry["values"].most_common(METADATA_VALUES_KEPT)
            return rows, fields

        return self.caches.loaded.get_or_create((collection, state, "_metadata"), read)

    def filtered_ids(self, collection: str, filters: list[str],
                     state: tuple | None = None) -> tuple[frozenset[str], int]:
        """The ids passing every filter, and the collection's size; a clear error for an unknown
        field or a range on a field without numbers or dates. Cached per state and filters."""
        from .filters import allowed_ids, check_fields, parse_filters

        state = state if state is not None else self.store.state_key(collection)
        parsed = parse_filters(filters)

        def compute():
            rows, fields = self._metadata(collection, state)
            check_fields(parsed, {name: entry["kinds"] for name, entry in fields.items()})
            return allowed_ids(rows, parsed), len(rows)

        return self.caches.filters.get_or_create((collection, state, tuple(filters)), compute)

    def collection_tie_values(self, collection: str, field_name: str | None,
                              state: tuple | None = None) -> dict[str, float]:
        """`tie_values` over every document of the collection, from the metadata read once per
        state (`_metadata`) and kept per field: ties broken without reading candidates' rows."""
        if not field_name:
            return {}
        state = state if state is not None else self.store.state_key(collection)
        rows = self._metadata(collection, state)[0]  # outside `read`: one LRU's creations do not nest

        def read() -> dict[str, float]:
            values = {}
            for doc_id, metadata in rows:
                value = tie_value(metadata, field_name)
                if value is not None:
                    values[doc_id] = value
            return values

        return self.caches.loaded.get_or_create((collection, state, "_ties", field_name), read)

    def source_rankings(self, collection: str, query: str, config: SearchConfig
                        ) -> dict[str, tuple[SourceResult, tuple[Hit, ...], str]]:
        """Per configured source, over the whole collection (the documents `config.filters`
        allow): (what it returns at depth = collection size, every document it scores ranked
        best first, why a document it does not score is unscored). The scores come from the
        source's `ranking(query, allowed)` hook when it has one (the keyword scorer: no result
        limit, no minimum), else they are its returned hits. Cached per source params and query."""
        state = self.store.state_key(collection)
        allowed = self.filtered_ids(collection, config.filters, state)[0] if config.filters else None
        size = len(self._metadata(collection, state)[0])
        rankings = {}
        for name in config.sources:
            def run(name=name):
                if name not in SOURCES:
                    return SourceResult(name, (), error=unknown_source(name)), (), ""
                try:
                    source = self.source(collection, name, config, state)
                except Exception as exc:
                    return SourceResult(name, (), error=f"{type(exc).__name__}: {exc}"), (), ""
                returned = run_source(source, query, max(size, 1), allowed)
                scored = returned.hits
                if hasattr(source, "ranking") and returned.error is None:
                    scored = tuple(source.ranking(query, allowed))
                return returned, scored, getattr(source, "unscored", "the source gives it no score for this query")

            key = (collection, state) + source_params(name, config) + (query,)
            rankings[name] = self.caches.rankings.get_or_create(key, run)
        return rankings

    def explain_document(self, collection: str, query: str, config: SearchConfig, doc_id: str):
        """'Why not this document?' (`whynot.explain`): per source its score, whole-collection rank
        and ties; the first stage of this search that dropped it; and the single-knob changes that
        bring it into the top-K, each tried for real, smallest first. An unknown id is a
        RetrievalError saying so."""
        from .whynot import explain

        return explain(self, collection, query, config, doc_id)

    def find_documents(self, collection: str, text: str, limit: int = 20) -> list[tuple[str, str]]:
        """(id, title) of documents whose title or id contains `text` (case-insensitive), at most
        `limit`, in collection order: the why-not picker's title search. Titles read once per state."""
        state = self.store.state_key(collection)

        def read():
            table = self.store.column(collection, ["id", "title"])
            return list(zip(table.column("id").to_pylist(), table.column("title").to_pylist(), strict=True))

        needle = text.strip().casefold()
        if not needle:
            return []
        rows = self.caches.loaded.get_or_create((collection, state, "_titles"), read)
        found = [(i, t or "") for i, t in rows if needle in (t or "").casefold() or needle in i.casefold()]
        return found[:limit]

    def documents(self, collection: str, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Rows of the given documents (no vectors), from the cache kept per collection state."""
        return self._documents(collection, self.store.state_key(collection), set(ids))

    def _documents(self, collection: str, state: tuple, ids: set[str],
                   row_ids: dict[str, int] | None = None) -> dict[str, dict[str, Any]]:
        rows = self.caches.documents.get_or_create((collection, state), dict)
        missing = [i for i in ids if i not in rows]
        if missing:
            rows.update(self.store.documents(collection, missing, row_ids))
        return {i: rows[i] for i in ids if i in rows}

    def _cached_rows(self, collection: str, state: tuple, ids: set[str]) -> dict[str, dict[str, Any]]:
        """The rows of `ids` already in the row cache (nothing read)."""
        rows = self.caches.documents.get((collection, state)) or {}
        return {i: rows[i] for i in ids if i in rows}

    # ---- fusion and rerank -----------------------------------------------------------------
    @staticmethod
    def fuse(candidates: CandidateSet, config: SearchConfig) -> FusionOutcome:
        """Pure and fast: what every slider move runs. The language rule (`retrieval.language`)
        decides the weights the fusion uses; its note leads the explanation."""
        from .language import language_rule

        fused_config, language_note = language_rule(config, candidates.query, candidates.language)
        documents = candidates.rows(candidates.all_ids()) if config.tie_field else candidates.documents
        outcome = fuse(candidates.sources, fused_config, tie_values(documents, config.tie_field))
        if language_note:
            outcome.notes.insert(0, language_note)
        for source in candidates.sources.values():  # a large collection's graph not built yet: said with the results
            outcome.notes.extend(n for n in source.notes if not source.hits and n.startswith("graph index:"))
        if candidates.filtered is not None:
            left, total = candidates.filtered
            outcome.notes.insert(0, f"filter {' AND '.join(config.filters)} left {left} of {total} documents; "
                                    "every source ranked only those (BM25 statistics stay the whole collection's)")
        return outcome

    @staticmethod
    def fused_order(sources: dict[str, SourceResult], config: SearchConfig, query: str, language: str | None,
                    tie_values: dict[str, float] | None = None, limit: int | None = None) -> list[str]:
        """The doc ids of `fuse`'s ranking (`FusionOutcome.ranked`: before the fused-score
        thresholds and top-K), at most `limit`: the same language rule, scores and tie-breaks
        (`fusion.fused_order`, which `fusion.fuse` explains), no explanation built. `language` is
        the collection's (`language`), `tie_values` the tie field's values (`collection_tie_values`)."""
        from .language import language_rule

        return fused_order(sources, language_rule(config, query, language)[0], tie_values, limit)

    def search(self, collection: str, query: str, config: SearchConfig) -> SearchResult:
        """Candidates, fusion and (when the config says so) rerank: the whole query path."""
        config.validate()  # a UI edits fields in place, which __post_init__ never saw
        candidates = self.candidates(collection, query, config)
        outcome = self.fuse(candidates, config)
        result = SearchResult(query, config, candidates, outcome)
        if config.rerank:
            self.apply_rerank(result)
        candidates.rows([r.doc_id for r in outcome.results] + [f.doc_id for f, _ in result.final_ranking()])
        return result

    def stored_vectors(self, collection: str, doc_ids: list[str], model: str) -> dict[str, np.ndarray]:
        """The vectors by `model` the collection stores for `doc_ids` (its own column, or its
        cross-lingual one), by id; {} when it stores none by that model."""
        from .store import XL_COLUMN

        info = self.info(collection)
        column = "vector" if info.model == model else XL_COLUMN if info.xl_model == model else None
        if column is None or not doc_ids:
            return {}
        return self.store.vectors(collection, doc_ids, column)

    def apply_rerank(self, result: SearchResult) -> None:
        """Re-score the top-N fused results with the configured reranker (scores cached)."""
        from .rerank import rerank

        self._check_reranker(result.config.reranker)  # before anything is read or loaded
        head = [r.doc_id for r in result.eligible()[: result.config.rerank_top_n]]
        rows = result.candidates.rows(head)
        texts = {doc_id: embedding_text_of(rows[doc_id]) for doc_id in head if doc_id in rows}
        reranker = self._reranker_for(result.candidates.collection, result.config.reranker, texts, head)
        # Rerank what passed the score thresholds; the top-K cut applies to the reranked list.
        result.reranked = rerank(result.query, result.eligible(), texts, reranker, result.config.rerank_top_n,
                                 self.caches.rerank, result.config.rerank_lambda, self.caches.passage_vectors)
        result.reranker_name, result.reranker_kind = reranker.name, reranker.kind

    def rerank_scores(self, collection: str, query: str, doc_ids: list[str], reranker_name: str,
                      state: tuple | None = None) -> dict[str, float]:
        """The reranker's score of each of `doc_ids` for `query`, exactly as `apply_rerank` gets
        them (same texts, same caches, stored passage vectors seeded): what the sweep's rerank
        variants reorder with. `state` pins the collection state the rows are read at."""
        from .rerank import rerank_scores

        self._check_reranker(reranker_name)
        state = state if state is not None else self.store.state_key(collection)
        rows = self._documents(collection, state, set(doc_ids))
        missing = [d for d in doc_ids if d not in rows]
        if missing:
            raise RetrievalError(f"No text for document(s) to rerank: {', '.join(missing[:10])}")
        texts = {doc_id: embedding_text_of(rows[doc_id]) for doc_id in doc_ids}
        reranker = self._reranker_for(collection, reranker_name, texts, doc_ids)
        return rerank_scores(query, texts, reranker, self.caches.rerank, self.caches.passage_vectors)

    def _check_reranker(self, name: str) -> None:
        """Refuse a reranker the front end does not allow (`model_check`), before loading it."""
        if self.model_check is not None:
            self.model_check("reranker", name)

    def _reranker_for(self, collection: str, name: str, texts: dict[str, str], head: list[str]):
        """The reranker `name` (checked by `_check_reranker` first), with the passage embeddings
        the collection stores for `head` put in its cache when it re-scores with embeddings (E5)."""
        from .rerank import get_reranker, seed_passages

        reranker = get_reranker(name)
        model = getattr(reranker, "passage_model", None)
        if model is not None:  # E5 re-scoring: the collection may store these passage embeddings
            seed_passages(self.caches.passage_vectors, reranker, texts, head,
                          lambda ids: self.stored_vectors(collection, ids, model))
        return reranker


_pool_lock = threading.Lock()
_pool = None


def _source_pool():
    """The threads sources of one search run on (shared by every Workbench of the process; a
    source's fetch never waits on another, so a full pool only queues)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor

            _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="source")
        return _pool


def embedding_text_of(row: dict[str, Any]) -> str:
    """Title and text of a stored row, joined as at ingest."""
    from .indexing.derive import embedding_text
    from .types import Document

    return embedding_text(Document(id=row["id"], text=row["text"], title=row.get("title") or ""))


def _truncate(result: SourceResult, depth: int) -> SourceResult:
    if len(result.hits) <= depth:
        return result
    return SourceResult(result.source, result.hits[:depth], result.error, result.notes, result.backend)
