"""Retrieval sources and their registry.

Each source module implements `Source`: `search(query, depth) -> list[Hit]`, best first, ranks
from 1, so fusion never special-cases one. A module registered in `SOURCE_MODULES` also provides

- `LABEL`: the name people read ("BM25", "Vector" …);
- `params(config) -> tuple`: the config values that decide its candidates (its cache key);
- `build(store, collection, config) -> Source`: the built source for the collection's current
  version (indexes, in-memory tables), which the workbench caches per (version, params).

Modules are imported on first use, so importing the registry loads no model or index code.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from .base import Source, run_source

if TYPE_CHECKING:
    from ..config import SearchConfig
    from ..store import Store

SOURCE_MODULES: dict[str, str] = {
    "bm25": "retrieval.sources.bm25",
    "dense": "retrieval.sources.dense",
    "graph": "retrieval.sources.graph",
    "keyword": "retrieval.sources.keyword",
}


def source_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(SOURCE_MODULES[name])
    except KeyError:
        raise KeyError(f"unknown source {name!r}; known: {', '.join(SOURCE_MODULES)}") from None


def source_params(name: str, config: "SearchConfig") -> tuple:
    """What in `config` decides source `name`'s candidates (unknown sources: nothing)."""
    return (name,) + tuple(source_module(name).params(config)) if name in SOURCE_MODULES else (name,)


def build_source(store: "Store", collection: str, name: str, config: "SearchConfig") -> Source:
    return source_module(name).build(store, collection, config)


__all__ = ["Source", "run_source", "SOURCE_MODULES", "source_params", "build_source"]
