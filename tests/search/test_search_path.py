"""The fast search path gives exactly what the plain one gives. `Workbench.search` runs one query's
LanceDB searches together as `Query` objects (`sources.run_sources`) and builds each result's
explanation when it is first read (`fusion.fuse.ExplainedRanking`); the reference here is the path it
replaced: each source searched on its own through LanceDB's sync query builder, then the plan's
explanation read front to back. On the bundled sample's 60 English paragraphs with the large-
collection backends (LanceDB's native BM25 index, IVF_RQ with refine, cross-lingual vectors) and
every other one of its 638 English and Chinese questions (319; every eighth for two more
configs), the candidates (ids, raw scores, ranks, row
ids, notes), the fused ranking and every result's per-source raw score, normalised score, rank
and contribution are equal, float for float."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval import limits
from retrieval.cache import Caches
from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_path
from retrieval.search.config import SearchConfig
from retrieval.search.plan import RankingPlan
from retrieval.search.workbench import Workbench
from retrieval.sources.base import run_source, top_hits
from retrieval.sources.bm25 import LanceFTSSource
from retrieval.sources.dense import DenseSource, refine_factor_for
from retrieval.store import Store
from retrieval.text.tokenize import tokenize
from retrieval.types import ParsedCorpus

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "xquad"
CONFIGS = {
    "default": SearchConfig(),
    "rrf": SearchConfig(fusion="rrf", rrf_k=10, weights={"bm25": 0.3, "dense": 0.7}, depth=20),
    "thresholds": SearchConfig(depth=30, top_k=5, min_score=0.2, min_raw={"bm25": 2.0}),
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    parsed = parse_path(SAMPLE)
    documents = [d for d in parsed.documents if d.id.startswith("en-")]
    store = Store(str(tmp_path_factory.mktemp("search-path")))
    with pytest.MonkeyPatch.context() as patch:  # the backends of a large collection, on 60 paragraphs
        patch.setattr(limits, "SCALE_DOCS", 6)
        create_collection(store, "paths", ParsedCorpus(documents))
        workbench = Workbench(store)
        assert workbench.backends("paths")["bm25"].startswith("LanceDB native BM25 index")
        assert workbench.backends("paths")["dense"].startswith("LanceDB IvfRq ANN index")
        assert store.info("paths").xl_model
        yield store, list(parsed.queries.values())


def reference_hits(source, query: str, depth: int):
    """The replaced searches: LanceDB's sync query builders, one source at a time."""
    if isinstance(source, LanceFTSSource):
        terms = tokenize(query)
        if not terms:
            return []
        rows = (source.table.search(" ".join(terms), query_type="fts", fts_columns="tokens").limit(depth)
                .select(["id"]).with_row_id(True).to_arrow())
        return top_hits(rows.column("id").to_pylist(), rows.column("_score").to_pylist(), depth,
                        row_ids=rows.column("_rowid").to_pylist())
    assert isinstance(source, DenseSource)
    if not query.strip():
        return []
    builder = source.table.search(source._embed(query), vector_column_name=source.column).distance_type("cosine")
    if source.has_index:
        builder = builder.nprobes(source.nprobes).refine_factor(refine_factor_for(source.index_type, depth))
    rows = builder.limit(depth).select(["id"]).with_row_id(True).to_arrow()
    return top_hits(rows.column("id").to_pylist(), [1.0 - d for d in rows.column("_distance").to_pylist()], depth,
                    keep_zero=True, row_ids=rows.column("_rowid").to_pylist())


class Reference:
    """A built source searched the replaced way (no `lance_request`), the rest of it as it is."""

    def __init__(self, source, query: str):
        self._source = source
        # the vector source searches the column the query's language picks: that searcher
        self._searcher = source.searcher(source._loaded.space(query, source.language_aware)) \
            if hasattr(source, "searcher") else source

    def search(self, query, depth, allowed=None):
        assert allowed is None
        return reference_hits(self._searcher, query, depth)

    def __getattr__(self, name):
        if name == "lance_request":
            raise AttributeError(name)
        return getattr(self._source, name)


@pytest.mark.slow  # 10.5 s on 2 cores, after its fixture (4.9 s): the reference path on every source and query
def test_the_fast_path_ranks_and_explains_exactly_as_the_reference(sample):
    store, queries = sample
    # a Workbench per config: a config of smaller depth would reuse a deeper fetch's candidates,
    # and LanceDB's top 20 breaks a score tie at the cut otherwise than the top 20 of its top 100
    # (they share what depends on neither config nor depth: the query vectors, embedded once, and
    # the collection's reads)
    shared = Caches()
    workbenches = {}
    for name in CONFIGS:
        caches = Caches()
        caches.query_vectors, caches.loaded = shared.query_vectors, shared.loaded
        workbenches[name] = Workbench(store, caches=caches)
    asked = {name: [q for i, q in enumerate(queries) if i % (2 if name == "default" else 8) == 0] for name in CONFIGS}
    for name, workbench in workbenches.items():  # in batches, as an evaluation embeds them: far cheaper
        workbench.retriever.embed_queries("paths", asked[name], CONFIGS[name])
    assert len(queries) == 638 and sum(any("一" <= c <= "鿿" for c in q) for q in queries) > 300
    compared = 0
    for i, query in enumerate(queries):
        for name, config in CONFIGS.items():
            if i % (2 if name == "default" else 8):
                continue
            workbench = workbenches[name]
            result = workbench.search("paths", query, config)
            state = workbench.state("paths")
            reference = {source: run_source(Reference(workbench.retriever.source("paths", source, config, state),
                                                      query), query, config.depth)
                         for source in config.sources}
            assert result.candidates.sources == reference, (name, query)
            expected = RankingPlan(config).explain(reference, query, result.candidates.language, {})
            ranked = result.outcome.ranked
            # read back to front: a result built late is the one the front-to-back reading builds
            got = [ranked[j] for j in reversed(range(len(ranked)))][::-1]
            assert got == list(expected.ranked) and len(got) == len(expected.ranked), (name, query)
            assert result.outcome.results == expected.results
            assert (result.outcome.removed, result.outcome.notes, result.outcome.n_candidates) == (
                expected.removed, expected.notes, expected.n_candidates)
            compared += 1
    assert compared == 319 + 2 * 80


def test_the_source_that_embeds_the_query_starts_its_search_first(sample, monkeypatch):
    """One query's LanceDB searches start as each is made, the vector source's first whatever the
    order of the config's weights: its request embeds the query (~5 ms with MiniLM on CPU), and
    with BM25's search already running the embedding shared the cores with it. The results are
    the ones the sources give alone."""
    import retrieval.sources.base as base

    store, queries = sample
    started: list[str] = []
    at_embedding: list[list[str]] = []

    def start(request):
        started.append("fts" if request.query.full_text_query is not None else "vector")
        return real_start(request)

    real_start = base.start_request
    monkeypatch.setattr(base, "start_request", start)
    workbench = Workbench(store)
    real_vector = workbench.retriever.query_vector

    def query_vector(model, query):
        at_embedding.append(list(started))
        return real_vector(model, query)

    monkeypatch.setattr(workbench.retriever, "query_vector", query_vector)
    config = SearchConfig()
    assert list(config.weights) == ["bm25", "dense"]  # BM25 named first
    query = next(q for q in queries if q.isascii())
    result = workbench.search("paths", query, config)
    assert at_embedding == [[]] and started == ["vector", "fts"]
    assert list(result.candidates.sources) == ["bm25", "dense"]
    state = workbench.state("paths")
    for name in config.sources:
        alone = run_source(Reference(workbench.retriever.source("paths", name, config, state), query), query,
                           config.depth)
        assert result.candidates.sources[name] == alone and alone.hits, name
