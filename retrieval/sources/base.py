"""The source contract: a typed descriptor per source, the searcher it builds, and the guard that
keeps one failing source from breaking a search.

A source is described once, by a `SourceSpec`, and everything else reads that description:
`SearchConfig` takes its parameter defaults, the UI draws its weight, minimum-score and parameter
sliders from it, the CLI parses its options with it, and the Workbench caches it:

    load(context, collection) -> loaded        expensive: reads the collection (an index, rows,
                                               vectors); cached by the Workbench per collection
                                               state (`Store.state_key`)
    build(loaded, config)     -> Source        cheap: applies the config's parameters; cached by
                                               the Workbench per `key(config)`
    Source.search(query, depth) -> [Hit]       best first, ranks 1..n; candidates cached per query

so fusion never special-cases a source, and a slider over a source's parameter never re-reads
the collection. What a source reads is also what it needs derived at ingest (`SourceSpec.derives`:
columns, indexes, auxiliary tables); the write path (`retrieval/indexing/`) derives exactly that.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, as_completed
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from retrieval.sources.lance_requests import LanceRequest, RowIdMap, start_request
from retrieval.types import Hit, RetrievalError, SourceResult

if TYPE_CHECKING:  # only for annotations: sources never import the config at run time
    import numpy as np
    import pyarrow as pa

    from retrieval.search.config import SearchConfig
    from retrieval.store import Store


log = logging.getLogger(__name__)


class Source(Protocol):
    """A built source. It may also have `why_empty(query) -> str | None`: why it returns nothing
    for a query (e.g. BM25: the query has no indexable terms), added to the result's notes;
    `backend`: what serves it, in words (shown with its results and in the explanation), and
    `backend_for(query)` when that depends on the query;
    `unscored`: a sentence saying why a document it does not return has no score (why-not); and
    `ranking(query, allowed) -> [Hit]`: every document it scores, when `search` hides some at any
    depth (the keyword scorer's result limit and minimum relevance), for the whole-collection rank;
    `search_batch(queries, depth, allowed) -> [[Hit]]`: exactly `search`'s hits for each query,
    computed for a batch at once (evaluation and sweeps retrieve in batches: `run_source_batch`);
    `lance_request(query, depth, allowed) -> LanceRequest | None`: `search` as one LanceDB query
    (`lance_requests`), so that one query's LanceDB searches run together (`run_sources`); None
    when `search` answers without LanceDB."""

    name: str

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        """The `depth` best documents for `query` among `allowed` (None: all), best first, with
        ranks 1..n. The metadata filter is applied before ranking, so depth counts allowed ones."""
        ...


class LoadContext(Protocol):
    """What `SourceSpec.load` may use, at the collection state being loaded: the store, the
    collection's table and whole columns as they are at that state, the row-id map of that
    state, query embeddings cached per (model, query), and where a collection's entity graph
    build stands (the Workbench's `Retriever` provides them: `retriever.StateContext`). Nothing
    here writes: a search only reads."""

    store: Store

    def graph_note(self, collection: str) -> str:
        """Where the collection's entity graph tables stand, as a sentence (`GraphStatus.note`)."""
        ...

    def query_vector(self, model: str, query: str) -> np.ndarray: ...

    def table(self, collection: str) -> Any:
        """The collection's table at the state loaded: a read-only handle (`Store.table_at`)."""
        ...

    def column(self, collection: str, columns: list[str]) -> pa.Table:
        """Whole columns at the state loaded (`Store.column`)."""
        ...

    def row_id_map(self, collection: str) -> RowIdMap:
        """The document id of each LanceDB row id at the state loaded, read in the background once
        per state and shared by the sources (`lance_requests.RowIdMap`)."""
        ...


@dataclass(frozen=True)
class Param:
    """One tunable parameter of a source: where it lives in `SearchConfig` (`path`: a field name,
    or "field.key" for an entry of a dict field such as `keyword.tag`), its default (dict entries
    only: plain fields carry their own default), the slider range and what it does."""

    path: str
    label: str
    help: str
    low: float
    high: float
    step: float
    default: float | None = None

    @property
    def group(self) -> str | None:
        """The dict field holding the parameter ("keyword", "graph"), None for a plain field."""
        return self.path.split(".", 1)[0] if "." in self.path else None

    @property
    def key(self) -> str:
        return self.path.split(".", 1)[-1]


@dataclass(frozen=True)
class Derives:
    """What an ingest derives for a source, beside the documents' own fields, for it to read at
    query time; the write path (`retrieval/indexing/plan.py`) reads these, never a source's name."""

    columns: tuple[str, ...] = ()  # collection table columns ("tokens", "vector", "vector_xl")
    text_index: tuple[str, ...] = ()  # columns under LanceDB's native full-text index, after every write
    vector_index: tuple[str, ...] = ()  # vector columns that get an ANN index from `limits.SCALE_DOCS` documents
    tables: tuple[str, ...] = ()  # auxiliary tables (`store.AUX_KINDS` kinds) written with the rows


@dataclass(frozen=True)
class SourceSpec:
    """Everything the core, the UI and the CLI know about one source."""

    name: str  # the key in `SearchConfig.weights`
    label: str  # what people read, mid-sentence ("BM25", "vector", "entity graph")
    load: Callable[[LoadContext, str], Any]
    build: Callable[[Any, SearchConfig], Source]
    key: Callable[[SearchConfig], tuple] = lambda config: ()  # the config values `build` reads
    weight_help: str = ""  # the weight slider's tooltip
    min_raw: Param | None = None  # the per-source minimum raw score slider (low = off)
    params: tuple[Param, ...] = ()  # its own parameters, drawn as sliders
    optional: bool = False  # joins the fusion only when picked (BM25 and vector always retrieve)
    description: str = ""  # one sentence: what it scores and how (the "Extra sources" tooltip)
    # Matches the query's words literally, so it finds nothing real across languages
    # (`retrieval.search.language`: its weight drops to 0 there when the config is language-aware).
    lexical: bool = False
    # Embeds the query with the collection's model (`LoadContext.query_vector`): evaluation and
    # sweeps embed all their queries in batches first (`Retriever.embed_queries`).
    embeds_query: bool = False
    # What an ingest derives for it (nothing: it reads the documents' own fields).
    derives: Derives = Derives()

    def defaults(self, group: str) -> dict[str, float]:
        """Defaults of this source's parameters stored in the dict field `group`."""
        return {p.key: p.default for p in self.params if p.group == group}


def run_source(source: Source, query: str, depth: int, allowed: frozenset[str] | None = None) -> SourceResult:
    """Run a source; an exception becomes `error`, non-finite scores are dropped with a note, and
    a source that returns nothing says why when it can (`empty_reason`).

    After dropping, the remaining hits are re-ranked 1..n in their original order, so ranks stay
    consecutive for RRF.
    """
    try:
        hits = source.search(query, depth) if allowed is None else source.search(query, depth, allowed)
    except Exception as exc:  # a source failing must not break the search: report it instead
        return failed_result(source, query, exc)
    return checked_result(source, query, hits)


def failed_result(source: Source, query: str, exc: BaseException) -> SourceResult:
    """A source's failure on `query` as its result: no hits, the exception as the error (logged;
    with its traceback unless it is a `RetrievalError`, whose message says it all: an outside
    engine's timeout, refusal or answer of another shape)."""
    if isinstance(exc, RetrievalError):
        log.warning("source %s failed on query %r: %s", source.name, query, exc)
    else:
        log.warning("source %s failed on query %r", source.name, query, exc_info=exc)
    return SourceResult(source.name, (), error=f"{type(exc).__name__}: {exc}")


def run_sources(sources: Mapping[str, Source], query: str | Mapping[str, str], depth: int,
                allowed: frozenset[str] | None = None, pool: Executor | None = None) -> dict[str, SourceResult]:
    """`run_source` for each of one query's sources (name → built source), the same results,
    faster: each LanceDB search (`lance_request`) starts on LanceDB's event loop as soon as it is
    made, the other sources search meanwhile (side by side on `pool` when there are several),
    and each LanceDB search's rows are read into hits as soon as they arrive — BM25's while the
    vector search is still running. `query` may be a text per source (query rules' rewrites)."""
    texts = {name: query if isinstance(query, str) else query[name] for name in sources}
    started: dict[Future, tuple[str, LanceRequest]] = {}
    results: dict[str, SourceResult] = {}
    for name, source in sources.items():
        make = getattr(source, "lance_request", None)
        try:
            request = make(texts[name], depth, allowed) if make is not None else None
        except Exception as exc:
            results[name] = failed_result(source, texts[name], exc)
            continue
        if request is not None:
            started[start_request(request)] = (name, request)
    searching = {name for name, _ in started.values()}
    others = [name for name in sources if name not in searching and name not in results]
    run = (pool.map if pool is not None and len(others) > 1 else map)
    results.update(zip(others, run(lambda name: run_source(sources[name], texts[name], depth, allowed), others),
                       strict=True))
    for future in as_completed(started):
        name, request = started[future]
        try:
            results[name] = checked_result(sources[name], texts[name], request.read(future.result()))
        except Exception as exc:
            results[name] = failed_result(sources[name], texts[name], exc)
    return {name: results[name] for name in sources}


def run_source_batch(source: Source, queries: Sequence[str], depth: int,
                     allowed: frozenset[str] | None = None) -> list[SourceResult]:
    """`run_source` for each query, in order: in one `search_batch` call when the source has one
    (the same hits as `search`, computed for all queries at once), else query by query. A batch
    that raises is run query by query, so a failure is reported per query as `run_source` does."""
    search_batch = getattr(source, "search_batch", None)
    if search_batch is None or not queries:
        return [run_source(source, query, depth, allowed) for query in queries]
    try:
        batch = search_batch(list(queries), depth, allowed)
    except Exception:
        log.warning("source %s failed on a batch of %d queries; running them one by one", source.name,
                    len(queries), exc_info=True)
        return [run_source(source, query, depth, allowed) for query in queries]
    return [checked_result(source, query, hits) for query, hits in zip(queries, batch, strict=True)]


def checked_result(source: Source, query: str, hits: Sequence[Hit]) -> SourceResult:
    """A source's hits for `query` as a `SourceResult` (see `run_source`)."""
    finite = [h for h in hits if math.isfinite(h.raw_score)]
    notes: tuple[str, ...] = ()
    if len(finite) != len(hits):
        notes = (f"{len(hits) - len(finite)} hit(s) with NaN or infinite scores dropped",)
        finite = [Hit(h.doc_id, h.raw_score, rank, h.detail, h.row_id) for rank, h in enumerate(finite, start=1)]
    if not hits:
        reason = empty_reason(source, query)
        notes += (reason,) if reason else ()
    coverage = getattr(source, "coverage", None)
    return SourceResult(source.name, tuple(finite), notes=notes, backend=backend_of(source, query),
                        coverage=coverage(query) if coverage else None)


def backend_of(source: Source, query: str) -> str:
    """What serves `query` in `source`, in words: its `backend_for(query)` when what serves it
    depends on the query (the vector source's cross-lingual column), else its `backend`."""
    backend_for = getattr(source, "backend_for", None)
    return backend_for(query) if backend_for is not None else getattr(source, "backend", "")


def empty_reason(source: Source, query: str) -> str | None:
    """Why `source` returned nothing for `query`, when that is known: no query text, or the
    source's own reason (`why_empty`); None otherwise."""
    if not query.strip():
        return "no query text"
    why_empty = getattr(source, "why_empty", None)
    return why_empty(query) if why_empty is not None else None


def ids_in(ids: frozenset[str]) -> str:
    """A LanceDB SQL prefilter keeping these ids (quotes doubled)."""
    return "id IN (" + ", ".join("'" + i.replace("'", "''") + "'" for i in sorted(ids)) + ")"


def top_hits(ids: list[str], scores, depth: int, keep_zero: bool = False, mask=None,
             row_ids: list[int] | None = None) -> list[Hit]:
    """Best `depth` (id, score) pairs, best first; ties by id so the order is deterministic.
    `mask` (booleans per id) keeps only the allowed ones, before the cut; `row_ids` (per id)
    go on the hits."""
    import numpy as np

    scores = np.asarray(scores, dtype=np.float64)
    keep = np.ones(len(scores), dtype=bool) if keep_zero else scores > 0
    if mask is not None:
        keep &= mask
    candidates = np.flatnonzero(keep)
    if len(candidates) > depth:
        # Partition first (O(n)); the cut-off score may tie, so take every tied one then sort.
        cutoff = np.partition(scores[candidates], len(candidates) - depth)[len(candidates) - depth]
        candidates = candidates[scores[candidates] >= cutoff]
    # (−score, id) pairs compared as tuples (in C, not through a key function): score
    # descending, ties by id; negating a float is exact, so −(−score) is the score.
    picked = sorted(zip([-s for s in scores[candidates].tolist()], [ids[i] for i in candidates.tolist()], strict=True))
    row_of = {ids[i]: row_ids[i] for i in candidates.tolist()} if row_ids is not None else {}
    return [Hit(doc_id, -negated, rank, row_id=row_of.get(doc_id))
            for rank, (negated, doc_id) in enumerate(picked[:depth], start=1)]
