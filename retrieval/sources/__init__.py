"""The source registry: one `SourceSpec` per source (see `base.py` for the contract).

`SOURCES` maps a name to its descriptor; `SearchConfig`, the UI controls, the CLI and the
Workbench all read it, so adding a source is one module here plus one line below. Heavy imports
(models, LanceDB queries) happen inside `load`, so importing the registry loads no model.

    base.py            the contract: `SourceSpec`, `Source`, `LoadContext`; running one query's
                       sources (`run_sources`) or a batch (`run_source_batch`)
    lance_requests.py  LanceDB searches as query objects on LanceDB's event loop; `RowIdMap`
    bm25.py            BM25 over the analyser's tokens (rank-bm25 in memory, or LanceDB's index)
    dense.py           cosine similarity to stored vectors (exact, or an ANN index with refine);
                       the collection's own vectors or its cross-lingual ones per query
    keyword.py         seed 000's field-weighted keyword scorer over catalogue records
    graph.py           seed 002's entity activation over the collection's entity graph
    activation.py      the entity graph's maths: relevance, activation BFS, final score, trace
    graph_status.py    where a collection's entity graph build stands (what a search reads of it)
    external/          outside engines (an HTTP search API, an MCP search tool) as sources, declared
                       by descriptors registered in the store (`SourceSpecs` finds any name's spec)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval.sources import bm25, dense, graph, keyword
from retrieval.sources.base import LoadContext, Param, Source, SourceSpec, run_source, run_source_batch, run_sources

if TYPE_CHECKING:
    from retrieval.search.config import SearchConfig

SOURCES: dict[str, SourceSpec] = {spec.name: spec for spec in (bm25.SPEC, dense.SPEC, keyword.SPEC, graph.SPEC)}


def unknown_source(name: str) -> str:
    return f"unknown source {name!r}; known: {', '.join(SOURCES)}"


def source_params(name: str, config: SearchConfig, spec: SourceSpec | None = None) -> tuple:
    """What in `config` decides source `name`'s candidates (unknown sources: nothing): the key of
    its built source and, with the query and collection state, of its cached candidates. `spec`:
    the source's descriptor when it is not a built-in one (an outside engine's: `external/`)."""
    spec = spec if spec is not None else SOURCES.get(name)
    key = (name,) + (tuple(spec.key(config)) if spec is not None else ())
    return key + (("filters", *config.filters),) if config.filters else key


def candidate_key(config: SearchConfig) -> tuple:
    """The part of a config that decides which candidates the sources return."""
    return (config.depth,) + tuple(source_params(name, config) for name in sorted(config.sources))


def label(name: str) -> str:
    """What people read for a source name (the name itself for an unknown source)."""
    spec = SOURCES.get(name)
    return spec.label if spec is not None else name


__all__ = ["SOURCES", "LoadContext", "Param", "Source", "SourceSpec", "candidate_key", "label", "run_source",
           "run_source_batch", "run_sources", "source_params", "unknown_source"]
