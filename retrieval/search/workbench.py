"""The facade the UI, CLI, MCP server and benchmarks use.

A Workbench owns one `Store` and the caches of `cache.Caches`, and is made of components, each
in its own module: `reads` (`CollectionReads`: language, metadata, filters, tie values, rows per
collection state), `graph` (`GraphBuilds`: the entity graph built in the background),
`retriever` (`Retriever`: built sources and cached candidates). A query walks: `search` →
`retriever.candidates` → `rank`, which runs the config's `RankingPlan` explained (`plan.py`:
language rule, fusion, thresholds, top-K) and the rerank stage (scores cached per reranker,
query and text). Evaluation, the sweep and "why not?" run the same plan. Front ends also manage
collections, judgments and saved configs through it, so none of them talks to the store directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval import limits
from retrieval.cache import LRU, Caches
from retrieval.indexing.graph_jobs import GraphBuilds
from retrieval.indexing.indexes import build_vector_index, index_for_size
from retrieval.indexing.pipeline import IngestResult, add_documents, create_collection, ingest_stream, truncation_note
from retrieval.judging.judgments import JudgmentStore
from retrieval.models.embed import token_window
from retrieval.search.collection_reads import CollectionReads, tie_values
from retrieval.search.config import SearchConfig
from retrieval.search.plan import RankingPlan
from retrieval.search.rerank import get_reranker, rerank, seed_passages
from retrieval.search.rerank import rerank_scores as scores_of
from retrieval.search.retriever import Retriever
from retrieval.search.saved_configs import ConfigStore
from retrieval.search.search_result import CandidateSet, SearchResult
from retrieval.search.whynot.explain import Explanation, explain
from retrieval.store import XL_COLUMN, CollectionInfo, CollectionStats, Progress, Store
from retrieval.store.names import labels
from retrieval.store.versions import StoreAtVersion
from retrieval.text.passages import embedding_text_of
from retrieval.types import ParsedCorpus, RetrievalError

if TYPE_CHECKING:
    from retrieval.indexing.readers.stream import DocumentStream

VERSIONS_KEPT = 4  # Workbenches at earlier versions kept per Workbench (each with its sources' memory)


class Workbench:
    def __init__(self, store: Store | None = None, candidate_cache_size: int = 4096, caches: Caches | None = None):
        self.store = store or Store()
        self.caches = caches or Caches(candidate_cache_size)
        self.reads = CollectionReads(self.store, self.caches)
        self.graph = GraphBuilds(self.store)
        self.retriever = Retriever(self.store, self.caches, self.reads,
                                   lambda name: self.graph.progress.status(name).note)
        # Called as model_check(kind, name) before a model a caller named is loaded (kind
        # "reranker" or "embedding model"); raises RetrievalError to refuse it. None: any name
        # (the CLI, whose user is on the server). The browser's Workbench refuses names outside
        # the built-ins and `limits.MODEL_DIRS_ENV` (`ui.state.browser_model_check`).
        self.model_check: Callable[[str, str], None] | None = None
        self._versions = LRU(VERSIONS_KEPT)  # Workbenches at earlier versions (`at_version`)

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
               progress: Progress | None = None, cross_lingual: bool | None = None,
               graph: str = "auto") -> IngestResult:
        """A new collection from parsed documents, through the ingest pipeline (all or nothing).
        `collection` is the name the user gave, in any script (the table name is derived);
        `cross_lingual` None: cross-lingual vectors when `indexing.plan.wants_cross_lingual` says so;
        `graph`: the entity graph setting (`indexing.graph.graph_setting`: auto, on, off)."""
        if model is not None and self.model_check is not None:
            self.model_check("embedding model", model)
        return self._after_write(create_collection(self.store, collection, corpus, model, description, progress,
                                                   cross_lingual, graph))

    def add(self, collection: str, corpus: ParsedCorpus, progress: Progress | None = None) -> IngestResult:
        return self._after_write(add_documents(self.store, collection, corpus, progress))

    def ingest_stream(self, collection: str, stream: DocumentStream, add: bool = False, model: str | None = None,
                      description: str = "", progress: Progress | None = None,
                      cross_lingual: bool | None = None, graph: str = "auto") -> IngestResult:
        """Create collection `collection` (any script) from a `DocumentStream`, or add it to
        collection `collection` (its table name), batch by batch in one all-or-nothing write
        (`indexing.pipeline.ingest_stream`; holds the collection's writer lock for the whole ingest)."""
        if model is not None and self.model_check is not None:
            self.model_check("embedding model", model)
        return self._after_write(ingest_stream(self.store, collection, stream, add, model, description, progress,
                                               cross_lingual, graph=graph))

    def _after_write(self, result: IngestResult) -> IngestResult:
        """Derived data the write left to build: a large collection's entity graph, started in the
        background when this Workbench builds graphs so (`GraphBuilds.in_background`: the app's).
        Never from a search, which only reads."""
        if result.info.graph == "pending" and self.graph.in_background:
            self.graph.start(result.info.name)
        return result

    def backends(self, collection: str) -> dict[str, str]:
        """What serves BM25 and vector search on this collection under the default config, in words
        (the Corpus page and `collections` say it; each search's own are in `SourceResult.backend`)."""
        config = SearchConfig(weights={"bm25": 1.0, "dense": 1.0})
        return {name: self.retriever.source(collection, name, config).backend for name in ("bm25", "dense")}

    def at_version(self, collection: str, version: int) -> Workbench:
        """A read-only Workbench on which `collection` is as it was at table version `version`
        (LanceDB time travel, `versions.StoreAtVersion`): search, evaluation and "why not?" run
        there exactly as here, writes to the collection are refused, and a version a compaction
        removed is a clear error. It shares this Workbench's caches (query vectors, reranker
        scores; its own entries are keyed by the version) and its model check; the last
        `VERSIONS_KEPT` are kept."""
        key = (collection, self.store.state_key(collection)[0], int(version))

        def make() -> Workbench:
            past = Workbench(StoreAtVersion(self.store, collection, version), caches=self.caches)
            past.model_check = self.model_check
            return past

        return self._versions.get_or_create(key, make)

    def build_vector_index(self, collection: str) -> None:
        """An approximate vector index for a large collection (similarities stay exact: refine);
        from `limits.SCALE_DOCS` documents every index an ingest builds at that size, trained
        anew (`index_for_size` with `retrain`: each vector column's, the id index, compaction),
        e.g. after an ingest whose index step failed or adds that only extended the index."""
        info = self.info(collection)
        if info.doc_count >= limits.SCALE_DOCS:
            index_for_size(self.store, info, retrain=True)
        else:
            build_vector_index(self.store, collection)

    def delete(self, collection: str) -> None:
        self.store.delete(collection)

    def clear(self, collection: str) -> CollectionInfo:
        return self.store.clear(collection)

    @cached_property
    def judgments(self) -> JudgmentStore:
        """Query sets and graded judgments per collection."""
        return JudgmentStore(self.store)

    @cached_property
    def configs(self) -> ConfigStore:
        """Saved search configs."""
        return ConfigStore(self.store)

    @property
    def writes(self) -> int:
        """How many writes went through this Workbench's store: readers that memoise what they read
        (the Evaluate page) read again when it grows."""
        return self.store.writes

    # ---- reads and candidates (the components' most used calls) -----------------------------
    def state(self, collection: str) -> tuple:
        """The collection's state key (`Store.state_key`): what every cache of its data keys on."""
        return self.reads.state(collection)

    # ---- outside engines as sources (`sources/external/`) --------------------------------------
    def outside_sources(self):
        """The registered outside engines (`ExternalSources`: add, remove, rows)."""
        from retrieval.sources.external import ExternalSources

        return ExternalSources(self.store)

    def use_source(self, descriptor) -> None:
        """Make an outside engine's descriptor a source of this Workbench's searches without
        registering it (`evaluate --source FILE`)."""
        self.retriever.specs.use(descriptor)

    def documents(self, collection: str, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Rows of the given documents (no vectors), from the cache kept per collection state."""
        return self.reads.documents(collection, ids)

    def candidates(self, collection: str, query: str, config: SearchConfig) -> CandidateSet:
        """Each configured source's top `config.depth` hits, cached (`Retriever.candidates`)."""
        return self.retriever.candidates(collection, query, config)

    def source_results(self, collection: str, queries: list[str], config: SearchConfig,
                       state: tuple | None = None) -> list[dict]:
        """Each query's per-source results, no rows read (`Retriever.source_results`)."""
        return self.retriever.source_results(collection, queries, config, state)

    # ---- search ----------------------------------------------------------------------------
    def search(self, collection: str, query: str, config: SearchConfig) -> SearchResult:
        """Candidates, then `rank`: the whole query path."""
        return self.rank(self.candidates(collection, query, config), config)

    def plan(self, collection: str, config: SearchConfig, state: tuple | None = None) -> RankingPlan:
        """`config`'s ranking plan, with its learned ranker loaded when it names one (the model
        from the store's `ranker_models`, the collection's document stats at `state`), and with query
        rules, the collection's ids per filter (what UP/DOWN and PIN read)."""
        members = None
        if config.rules:
            state = state if state is not None else self.reads.state(collection)
            members = partial(self._members, collection, state)
        if not config.ranker:
            return RankingPlan(config, members=members)
        from retrieval.search.learned_ranker import LearnedRanker
        from retrieval.search.ranker_models import RankerModels

        state = state if state is not None else self.reads.state(collection)
        docs = self.reads.doc_stats(collection, state)  # outside `load`: one LRU's creations do not nest

        def load() -> LearnedRanker:  # parsing a model takes longer than a search: once per state
            return LearnedRanker(RankerModels(self.store).load(config.ranker), docs, config.ranker)

        learned = self.caches.loaded.get_or_create(("_ranker", config.ranker, collection, state), load)
        return RankingPlan(config, learned, members)

    def _members(self, collection: str, state: tuple, filters: tuple[str, ...]) -> frozenset[str]:
        """The ids passing `filters` at `state` (cached); none when a filter names a field the
        collection lacks (an UP rule written for another collection boosts nothing here)."""
        try:
            return self.reads.filtered_ids(collection, list(filters), state)[0]
        except RetrievalError:
            return frozenset()

    def rank(self, candidates: CandidateSet, config: SearchConfig) -> SearchResult:
        """`config`'s ranking plan run explained on `candidates` (what a slider move that does not
        re-query runs): fusion with the language rule, thresholds, top-K, then the rerank stage
        when the config reranks; the rows of what is shown are read."""
        config.validate()  # a UI may hold an edited config (`config.edited`) that was never checked
        documents = candidates.rows(candidates.all_ids()) if config.tie_field else candidates.documents
        plan = self.plan(candidates.collection, config, candidates.version if config.rules else None)
        outcome = plan.explain(candidates.sources, candidates.query, candidates.language,
                               tie_values(documents, config.tie_field))
        for source in candidates.sources.values():  # a large collection's graph not built yet: said with the results
            outcome.notes.extend(n for n in source.notes if not source.hits and n.startswith("graph index:"))
        rules = plan.query_rules(candidates.query) if config.rules else None  # this config's, not the fetch's
        if candidates.filtered is not None:
            left, total = candidates.filtered
            filters = config.filters + (rules.filter_texts if rules is not None else [])
            outcome.notes.insert(0, f"filter {' AND '.join(filters)} left {left} of {total} documents; "
                                    "every source ranked only those (BM25 statistics stay the whole collection's)")
        result = SearchResult(candidates.query, config, candidates, outcome,
                              rules=plan.pinnable(rules) if rules is not None else None)
        if config.rerank:
            self.apply_rerank(result)
        candidates.rows([r.doc_id for r in outcome.results] + [f.doc_id for f, _ in result.final_ranking()])
        return result

    def explain_document(self, collection: str, query: str, config: SearchConfig, doc_id: str) -> Explanation:
        """'Why not this document?' (`whynot.explain`): per source its score, whole-collection rank
        and ties; the first stage of this search that dropped it; and the single-knob changes that
        bring it into the top-K, each tried for real, smallest first."""
        return explain(self, collection, query, config, doc_id)

    # ---- rerank ----------------------------------------------------------------------------
    def stored_vectors(self, collection: str, doc_ids: list[str], model: str,
                       backend: str | None = None) -> dict[str, np.ndarray]:
        """The vectors by `model` the collection stores for `doc_ids` (its own column, or its
        cross-lingual one), by id; {} when it stores none by that model, or, with `backend`,
        when they were not all computed on that encoder backend (the catalogue's record)."""
        info = self.info(collection)
        column = "vector" if info.model == model else XL_COLUMN if info.xl_model == model else None
        if column is None or not doc_ids or (backend is not None and info.encoder_backend != backend):
            return {}
        return self.store.vectors(collection, doc_ids, column)

    def apply_rerank(self, result: SearchResult) -> None:
        """Re-score the top-N fused results with the configured reranker (scores cached)."""
        self._check_reranker(result.config.reranker)  # before anything is read or loaded
        head = [r.doc_id for r in result.eligible()[: result.config.rerank_top_n]]
        rows = result.candidates.rows(head)
        texts = {doc_id: embedding_text_of(rows[doc_id]) for doc_id in head if doc_id in rows}
        reranker = self.reranker_for(result.candidates.collection, result.config.reranker, texts, head)
        # Rerank what passed the score thresholds; the top-K cut applies to the reranked list.
        result.reranked = rerank(result.query, result.eligible(), texts, reranker, result.config.rerank_top_n,
                                 self.caches.rerank, result.config.rerank_lambda, self.caches.passage_vectors)
        result.reranker_name, result.reranker_kind = reranker.name, reranker.kind

    def rerank_scores(self, collection: str, query: str, doc_ids: list[str], reranker_name: str,
                      state: tuple | None = None) -> dict[str, float]:
        """The reranker's score of each of `doc_ids` for `query`, exactly as `apply_rerank` gets
        them (same texts, same caches, stored passage vectors seeded): what the sweep's rerank
        variants reorder with. `state` pins the collection state the rows are read at."""
        self._check_reranker(reranker_name)
        state = state if state is not None else self.reads.state(collection)
        rows = self.reads.documents(collection, doc_ids, state)
        missing = [d for d in doc_ids if d not in rows]
        if missing:
            raise RetrievalError(f"No text for document(s) to rerank: {', '.join(missing[:10])}")
        texts = {doc_id: embedding_text_of(rows[doc_id]) for doc_id in doc_ids}
        reranker = self.reranker_for(collection, reranker_name, texts, doc_ids)
        return scores_of(query, texts, reranker, self.caches.rerank, self.caches.passage_vectors)

    def _check_reranker(self, name: str) -> None:
        """Refuse a reranker the front end does not allow (`model_check`), before loading it."""
        if self.model_check is not None:
            self.model_check("reranker", name)

    def reranker_for(self, collection: str, name: str, texts: dict[str, str], head: list[str]):
        """The reranker `name` (checked by `_check_reranker` first), with the passage embeddings
        the collection stores for `head` put in its cache when it re-scores with embeddings (E5)."""
        reranker = get_reranker(name)
        model = getattr(reranker, "passage_model", None)
        if model is not None:  # E5 re-scoring: the collection may store these passage embeddings
            seed_passages(self.caches.passage_vectors, reranker, texts, head,
                          lambda ids: self.stored_vectors(collection, ids, model, reranker.backend))
        return reranker
