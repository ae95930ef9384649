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
from retrieval.types import RetrievalError

if TYPE_CHECKING:
    from retrieval.search.config import SearchConfig

SOURCES: dict[str, SourceSpec] = {spec.name: spec for spec in (bm25.SPEC, dense.SPEC, keyword.SPEC, graph.SPEC)}


# A source may be named by its label, what the app shows ('vector' for dense): label → name.
SOURCE_ALIASES: dict[str, str] = {spec.label: spec.name for spec in SOURCES.values()
                                  if spec.label.lower() != spec.name}


def unknown_source(name: str) -> str:
    aliases = ", ".join(f"{alias!r} for {name}" for alias, name in SOURCE_ALIASES.items())
    return f"unknown source {name!r}; known: {', '.join(SOURCES)} (also {aliases})"


def source_name(name: str) -> str:
    """The source a user's word names: a source's name, or its label as the app shows it
    (`SOURCE_ALIASES`: 'vector' → 'dense'); other words are left as they are (a config keeps an
    unknown source, reported when searched; `known_source` refuses it)."""
    return SOURCE_ALIASES.get(name, name)


def known_source(name: str, outside: tuple[str, ...] = ()) -> str:
    """`source_name(name)` when it is a source or one of the `outside` engines' names, else
    RetrievalError listing them (a front end's option)."""
    if source_name(name) in SOURCES:
        return source_name(name)
    if name in outside:
        return name
    more = f"; outside engines: {', '.join(outside)}" if outside else ""
    raise RetrievalError(unknown_source(name) + more)


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


__all__ = ["SOURCES", "SOURCE_ALIASES", "LoadContext", "Param", "Source", "SourceSpec", "candidate_key", "known_source",
           "label", "run_source", "run_source_batch", "run_sources", "source_name", "source_params", "unknown_source"]
