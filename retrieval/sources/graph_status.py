"""Where a collection's entity graph tables stand, as the graph source reports it: the board a
build writes its progress to (`GraphProgress`, filled by `indexing.graph_jobs.GraphBuilds`) and
the status a search, the Graph page and the Corpus page read from it (`GraphStatus`). Reading it
is all a search does about the graph build: the build runs on the write side."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from retrieval import limits
from retrieval.store import Store


@dataclass
class GraphStatus:
    """Where a collection's entity graph tables stand (`Workbench.graph.status`): "current"
    (written at ingest or built), "pending" (to be built: a large ingest skipped them), "off"
    (the collection's graph setting: built only when the user asks),
    "building" (`done` of `total` documents read), or "failed" (`error`)."""

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
                    f"{limits.GRAPH_INLINE_MAX:,} documents or more, in the background in the app, or with "
                    f"the Graph page's “Build the entity graph” or `collections graph NAME`); {joins}")
        if self.state == "off":
            return (f"graph index: off ({self.total:,} documents; chosen at upload, so no entities were extracted); "
                    f"build it with the Graph page's “Build the entity graph” or `collections graph NAME`; {joins}")
        if self.state == "failed":
            return (f"graph index: the build failed ({self.error}); build it again with the Graph page's “Build "
                    f"the entity graph” or `collections graph NAME`")
        return "graph index: built"


@dataclass
class _Progress:
    done: int = 0
    total: int = 0
    error: str = ""
    running: bool = False


class GraphProgress:
    """The entity graph builds of this process, as far as they have got, per collection."""

    def __init__(self, store: Store):
        self.store = store
        self._progress: dict[str, _Progress] = {}
        self._guard = threading.Lock()

    def status(self, collection: str) -> GraphStatus:
        """Where the collection's graph tables stand, and how far a build in this process is."""
        with self._guard:
            progress = self._progress.get(collection)
            if progress is not None and progress.running:
                return GraphStatus("building", progress.done, progress.total)
        info = self.store.info(collection)
        if info.graph not in ("pending", "off"):
            return GraphStatus("current", info.doc_count, info.doc_count)
        if progress is not None and progress.error:
            return GraphStatus("failed", progress.done, progress.total, progress.error)
        return GraphStatus(info.graph, 0, info.doc_count)

    def started(self, collection: str) -> None:
        with self._guard:
            self._progress[collection] = _Progress(running=True)

    def report(self, collection: str, done: int, total: int) -> None:
        with self._guard:
            progress = self._progress.setdefault(collection, _Progress(running=True))
            progress.done, progress.total = done, total

    def ended(self, collection: str, error: str = "") -> None:
        with self._guard:
            progress = self._progress.setdefault(collection, _Progress())
            progress.running = False
            if error:
                progress.error = error
