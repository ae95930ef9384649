"""The entity graph of a large collection as a background job of this process: where its tables
stand (`GraphStatus`), one build per collection at a time (`GraphBuilds.build`), started in a
thread on the graph source's first search (`GraphBuilds.start`). The build itself, reading the
stored documents in batches and writing the graph tables in one transaction, is
`graph_build.build_graph`."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from retrieval import limits
from retrieval.indexing.graph import build_graph
from retrieval.store import CollectionInfo, Progress, Store

log = logging.getLogger(__name__)


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


class GraphBuilds:
    """This process's entity graph builds, per collection (the Workbench's `graph`)."""

    def __init__(self, store: Store):
        self.store = store
        # A pending graph is built in a background thread on the graph source's first search
        # (`start`); False: only by `build` (tests, scripts).
        self.in_background = True
        self._builds: dict[str, _GraphBuild] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def status(self, collection: str) -> GraphStatus:
        """Where the collection's graph tables stand, and how far a build in this process is."""
        with self._guard:
            build = self._builds.get(collection)
            if build is not None and build.running:
                return GraphStatus("building", build.done, build.total)
        info = self.store.info(collection)
        if info.graph != "pending":
            return GraphStatus("current", info.doc_count, info.doc_count)
        if build is not None and build.error:
            return GraphStatus("failed", build.done, build.total, build.error)
        return GraphStatus("pending", 0, info.doc_count)

    def build(self, collection: str, progress: Progress | None = None,
                    only_pending: bool = False) -> CollectionInfo:
        """Build the collection's entity graph tables from its stored documents, in batches, and
        mark them current, in one transaction (`graph_build.build_graph`). One build per
        collection at a time in this process (a second call waits for the first); with
        `only_pending`, nothing is done when the graph is current by then.
        `progress("finding entities", done, total)`; `status` reads the same numbers."""
        with self._guard:
            lock = self._locks.setdefault(collection, threading.Lock())
        with lock:
            if only_pending and self.store.info(collection).graph != "pending":
                return self.store.info(collection)
            with self._guard:
                build = self._builds.setdefault(collection, _GraphBuild())
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

    def start(self, collection: str) -> bool:
        """Start building a pending graph in a background thread, unless one is running (or
        `in_background` is off). True when a build was started."""
        if not self.in_background:
            return False
        with self._guard:
            build = self._builds.get(collection)
            if build is not None and build.thread is not None and build.thread.is_alive():
                return False

            build = self._builds.setdefault(collection, _GraphBuild())

            def run() -> None:
                try:
                    self.build(collection, only_pending=True)
                except Exception:
                    log.warning("building the entity graph of %s failed", collection, exc_info=True)
                finally:
                    build.running = False

            build.thread = threading.Thread(target=run, name=f"graph-build-{collection}", daemon=True)
            build.running, build.error = True, ""
            build.thread.start()
            return True

    def wait(self, collection: str, timeout: float | None = None) -> None:
        """Wait for this process's background graph build of `collection`, if one runs."""
        with self._guard:
            build = self._builds.get(collection)
        if build is not None and build.thread is not None:
            build.thread.join(timeout)
