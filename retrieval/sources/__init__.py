"""Retrieval sources. Each implements `Source`: `search(query, depth) -> list[Hit]`, best first,
ranks from 1, so fusion never special-cases one."""

from .base import Source, run_source

__all__ = ["Source", "run_source"]
