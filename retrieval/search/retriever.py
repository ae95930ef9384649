"""Candidates: each configured source's top `depth` hits for a query, retrieved once per
(collection state, source parameters, query) and then cached, with the candidates' rows read on
demand (`CandidateSet.rows`).

A source's `load` receives a `StateContext` (`sources.base.LoadContext`): the collection's table
and columns as they are at the state being loaded, that state's row-id map, query vectors cached
per (model, query), and where a large collection's entity graph build stands (the graph source
reports it; the build itself runs on the write side, never from a search).

Query rules (`config.rules`): each source searches its rewritten text (`QueryRules.text_for`) among
what the config's and rules' FILTERs allow; the candidate cache keys on that text and those filters.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np

from retrieval.cache import Caches
from retrieval.models.embed import load_encoder
from retrieval.search.collection_reads import CollectionReads
from retrieval.search.config import SearchConfig
from retrieval.search.rules import QueryRules, rules_for
from retrieval.search.search_result import CandidateSet
from retrieval.sources import Source, run_source, run_source_batch, run_sources, source_params, unknown_source
from retrieval.sources.dense import vector_space
from retrieval.sources.external import SourceSpecs
from retrieval.store import Store
from retrieval.types import Hit, SourceResult

log = logging.getLogger(__name__)


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def source_pool() -> ThreadPoolExecutor:
    """The threads sources of one search run on (shared by every Retriever of the process; a
    source's fetch never waits on another, so a full pool only queues)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="source")
        return _pool


def truncated(result: SourceResult, depth: int) -> SourceResult:
    """`result` with at most `depth` hits."""
    if len(result.hits) <= depth:
        return result
    return SourceResult(result.source, result.hits[:depth], result.error, result.notes, result.backend,
                        result.coverage)


def built_key(collection: str, state: tuple, name: str, config: SearchConfig, spec=None) -> tuple:
    """What a built source is cached under: the collection state and the source's parameters."""
    return (collection, state) + source_params(name, config, spec)


class Retriever:
    """Built sources and their candidates, through the caches of `cache.Caches`."""

    def __init__(self, store: Store, caches: Caches, reads: CollectionReads, graph_note: Callable[[str], str]):
        # graph_note(collection): where its entity graph build stands (the Workbench's `GraphBuilds`).
        self.store, self.caches, self.reads, self.graph_note = store, caches, reads, graph_note
        self.specs = SourceSpecs(store)  # built-in sources, then outside engines (run-only, registered)

    # ---- query vectors (shared by every source that embeds) -------------------------------
    def query_vector(self, model: str, query: str) -> np.ndarray:
        """`query` embedded by `model`, once per (model, query)."""
        return self.caches.query_vectors.get_or_create(
            (model, query), lambda: load_encoder(model).encode_queries([query])[0])

    def embed_queries(self, collection: str, queries: Iterable[str], config: SearchConfig,
                      batch_size: int = 64) -> int:
        """Embed, in batches, the queries whose vectors are not cached yet, with the model each
        embedding source of `config` uses for them: what evaluation and sweeps do before their
        per-query loop (one batch of 64 costs far less than 64 single encodes). Returns how many
        were embedded."""
        embedding = [name for name in config.sources if (spec := self.specs.get(name)) and spec.embeds_query]
        if not embedding:
            return 0
        info = self.store.info(collection)
        todo: dict[str, list[str]] = {}  # model -> its queries not cached yet
        queries = list(queries)  # the vector sources embed each query's text after the rules' deletes
        texts = [r.vector if r else q for q, r in zip(queries, rules_for(config.rules, queries), strict=True)]
        for query in dict.fromkeys(texts):
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

    # ---- sources ---------------------------------------------------------------------------
    def source(self, collection: str, name: str, config: SearchConfig, state: tuple | None = None) -> Source:
        """The built source `name` for the collection's current state (or `state`) and `config`:
        the collection is read once per state (`SourceSpec.load`), the source built once per
        parameters (`SourceSpec.build`)."""
        spec = self.specs.get(name)
        if spec is None:
            raise KeyError(unknown_source(name))
        state = state if state is not None else self.store.state_key(collection)
        loaded_key = (collection, state, name)
        context = StateContext(self, state)
        return self.caches.sources(name).get_or_create(
            built_key(collection, state, name, config, spec),
            lambda: spec.build(self.caches.loaded.get_or_create(loaded_key, lambda: spec.load(context, collection)),
                               config))

    # ---- candidates ------------------------------------------------------------------------
    def candidates(self, collection: str, query: str, config: SearchConfig) -> CandidateSet:
        """Each configured source's top `config.depth` hits, retrieved once and then cached (a
        smaller depth reuses a larger fetch, so moving the depth slider down never re-queries),
        with the candidates' rows already cached; the rest are read on demand (`CandidateSet.rows`)."""
        state = self.store.state_key(collection)
        self.reads.require_documents(collection, state)
        [rules] = rules_for(config.rules, [query])
        filters = config.filters + (rules.filter_texts if rules is not None else [])
        allowed, filtered = self.reads.allowed(collection, filters, state)
        [results], seconds, all_cached = self._retrieve(collection, [query], config, state, allowed, [rules])
        doc_ids = {h.doc_id for r in results.values() for h in r.hits}
        cached = self.reads.cached_rows(collection, state, doc_ids)
        row_ids = {h.doc_id: h.row_id for r in results.values() for h in r.hits if h.row_id is not None}
        return CandidateSet(collection, state, query, config.depth, results, cached, seconds, all_cached, filtered,
                            self.reads.language(collection, state), rules,
                            reader=partial(self.reads.documents, collection, state=state, row_ids=row_ids))

    def source_results(self, collection: str, queries: list[str], config: SearchConfig,
                       state: tuple | None = None) -> list[dict[str, SourceResult]]:
        """`candidates(collection, query, config).sources` for each query, through the same cache,
        without reading any row: what evaluation and sweeps need. A source with `search_batch`
        (in-memory vectors) searches the uncached queries in one call. `state` pins the
        collection state, so a long evaluation checks the table version once."""
        state = state if state is not None else self.store.state_key(collection)
        self.reads.require_documents(collection, state)
        rules = rules_for(config.rules, queries)
        groups: dict[tuple[str, ...], list[int]] = {}  # queries by the rule filters they add
        for i, fired in enumerate(rules):
            groups.setdefault(tuple(fired.filter_texts) if fired is not None else (), []).append(i)
        results: list[dict[str, SourceResult]] = [{} for _ in queries]
        for extra, members in groups.items():
            allowed, _ = self.reads.allowed(collection, config.filters + list(extra), state)
            found = self._retrieve(collection, [queries[i] for i in members], config, state, allowed,
                                   [rules[i] for i in members])[0]
            for i, result in zip(members, found, strict=True):
                results[i] = result
        return results

    def _retrieve(self, collection: str, queries: list[str], config: SearchConfig, state: tuple,
                  allowed: frozenset[str] | None, rules: list[QueryRules | None] | None = None
                  ) -> tuple[list[dict[str, SourceResult]], dict[str, float], bool]:
        """Per query, each configured source's result (config order), from the candidate cache or
        from the source (`run_source_batch`: errors reported per query, not cached); the seconds
        each source spent retrieving; whether every result came from the cache. `rules`: per
        query the rules that fire on it (each source then searches its rewritten text; all the
        queries' rule filters are the same, and in `allowed`)."""
        results: list[dict[str, SourceResult]] = [{} for _ in queries]
        seconds: dict[str, float] = {}
        all_cached = True
        rules = rules if rules is not None else [None] * len(queries)
        extra = next(((("rule filters", *r.filter_texts),) for r in rules if r is not None and r.filters), ())
        fetches: list[tuple[str, list[tuple], list[int], list[str]]] = []  # (source, keys, queries to fetch, texts)
        for name in config.sources:
            spec = self.specs.get(name)
            lexical = spec is not None and spec.lexical
            texts = [r.text_for(lexical) if r is not None else q for q, r in zip(queries, rules, strict=True)]
            keys = [(collection, state) + source_params(name, config, spec) + (text,) + extra for text in texts]
            missing = []
            for i, key in enumerate(keys):
                cached = self.caches.candidates.get(key)
                if cached is not None and cached[0] >= config.depth:
                    results[i][name] = truncated(cached[1], config.depth)
                else:
                    missing.append(i)
            if not missing:
                continue
            all_cached = False
            if spec is None:
                for i in missing:
                    results[i][name] = SourceResult(name, (), error=unknown_source(name))
                continue
            fetches.append((name, keys, missing, texts))

        def fetch(name: str, keys: list[tuple], missing: list[int], texts: list[str]) -> None:
            started = time.perf_counter()
            source = self._built(collection, name, config, state)
            if isinstance(source, SourceResult):
                for i in missing:
                    results[i][name] = source
                return
            fetched = run_source_batch(source, [texts[i] for i in missing], config.depth, allowed)
            seconds[name] = time.perf_counter() - started
            for i, result in zip(missing, fetched, strict=True):
                self._keep(source, keys[i], config.depth, result)
                results[i][name] = result

        if len(queries) == 1 and len(fetches) > 1:
            self._fetch_together(collection, queries[0], config, state, allowed, fetches, results[0], seconds)
        elif len(fetches) > 1:
            # The sources run side by side: LanceDB's searches (and numpy's products) release
            # the GIL (docs/experiments/scale.md). Each writes only its own entries.
            list(source_pool().map(lambda job: fetch(*job), fetches))
        else:
            for job in fetches:
                fetch(*job)
        results = [{name: found[name] for name in config.sources if name in found} for found in results]
        return results, seconds, all_cached

    def _fetch_together(self, collection: str, query: str, config: SearchConfig, state: tuple,
                        allowed: frozenset[str] | None, fetches: list[tuple[str, list[tuple], list[int], list[str]]],
                        results: dict[str, SourceResult], seconds: dict[str, float]) -> None:
        """One query's sources (`fetches`: each needs it), built side by side (a first search
        after a write loads each one's data), then searched by `run_sources`: the LanceDB
        searches side by side on LanceDB's loop, so a hybrid search at 1M documents waits for
        the slower of the two, with none of the sync API's per-search overhead
        (docs/experiments/peers.md). Each source's seconds are the whole fetch's."""
        started = time.perf_counter()
        names = [name for name, _keys, _missing, _texts in fetches]
        built = {name: self.caches.sources(name).get(built_key(collection, state, name, config, self.specs.get(name)))
                 for name in names}
        if any(source is None for source in built.values()):  # a first search at this state: load side by side
            built = dict(zip(names, source_pool().map(lambda n: self._built(collection, n, config, state), names),
                             strict=True))
        # Those that embed the query make their request first: at 1M documents with MiniLM the
        # embedding (~5 ms) and the vector search are the longer path; BM25 starts right after.
        sources = {name: built[name] for name in sorted(names, key=lambda n: not self.specs.get(n).embeds_query)
                   if not isinstance(built[name], SourceResult)}
        texts = {name: texts[0] for name, _keys, _missing, texts in fetches}  # each source's rewritten query
        fetched = run_sources(sources, texts, config.depth, allowed, pool=source_pool())
        elapsed = time.perf_counter() - started
        for name, keys, _missing, _texts in fetches:
            if name not in sources:  # could not be built: its error is its result
                results[name] = built[name]
                continue
            seconds[name] = elapsed
            self._keep(sources[name], keys[0], config.depth, fetched[name])
            results[name] = fetched[name]

    def _built(self, collection: str, name: str, config: SearchConfig, state: tuple) -> Source | SourceResult:
        """The built source (`source`), or, when it cannot even be built, its result saying why
        (reported, not fatal: the other sources still search)."""
        try:
            return self.source(collection, name, config, state)
        except Exception as exc:
            log.warning("source %s could not be built for %s", name, collection, exc_info=True)
            return SourceResult(name, (), error=f"{type(exc).__name__}: {exc}")

    def _keep(self, source: Source, key: tuple, depth: int, result: SourceResult) -> None:
        """Cache a fetched result, unless it failed or its source's results may change (`transient`)."""
        if result.error is None and not getattr(source, "transient", False):
            self.caches.candidates.put(key, (depth, result))

    def source_rankings(self, collection: str, query: str, config: SearchConfig
                        ) -> dict[str, tuple[SourceResult, tuple[Hit, ...], str]]:
        """Per configured source, over the whole collection (the documents `config.filters`
        allow): (what it returns at depth = collection size, every document it scores ranked
        best first, why a document it does not score is unscored). The scores come from the
        source's `ranking(query, allowed)` hook when it has one (the keyword scorer: no result
        limit, no minimum), else they are its returned hits. Cached per source params and query."""
        state = self.store.state_key(collection)
        [rules] = rules_for(config.rules, [query])
        filters = config.filters + (rules.filter_texts if rules is not None else [])
        allowed = self.reads.filtered_ids(collection, filters, state)[0] if filters else None
        size = self.reads.size(collection, state)
        rankings = {}
        for name in config.sources:
            spec = self.specs.get(name)
            text = rules.text_for(spec is not None and spec.lexical) if rules is not None else query

            def run(name=name, query=text):
                if self.specs.get(name) is None:
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

            key = (collection, state) + source_params(name, config, self.specs.get(name)) + (text, tuple(filters))
            rankings[name] = self.caches.rankings.get_or_create(key, run)
        return rankings


@dataclass(frozen=True)
class StateContext:
    """What a source's `load` reads through (`sources.base.LoadContext`), at one collection state:
    the sources built for a state search that state's table version (`Store.table_at`), so their
    hits, their row ids and everything cached under the state describe the same version, also
    while another process writes."""

    retriever: Retriever
    state: tuple

    @property
    def store(self) -> Store:
        return self.retriever.store

    def graph_note(self, collection: str) -> str:
        return self.retriever.graph_note(collection)

    def query_vector(self, model: str, query: str) -> np.ndarray:
        return self.retriever.query_vector(model, query)

    def table(self, collection: str):
        return self.store.table_at(collection, self.state)

    def column(self, collection: str, columns: list[str]):
        return self.store.column(collection, columns, self.state)

    def row_id_map(self, collection: str):
        return self.retriever.reads.row_id_map(collection, self.state)

    @property
    def responses(self):
        """Outside engines' answers (`Caches.responses`), kept across collection states."""
        return self.retriever.caches.responses
