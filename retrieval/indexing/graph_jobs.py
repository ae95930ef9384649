"""The entity graph of a large collection as a background job of this process: one build per
collection at a time (`GraphBuilds.build`), started in a thread (`GraphBuilds.start`) by the
app's write that left the graph pending or by the Graph page's button — never by a search, which
only reads. Each build reports how far it is to the graph source's board
(`sources.graph_status.GraphProgress`), which is what a search, the Graph page and the Corpus
page read. The build itself, reading the stored documents in batches and writing the graph tables
in one transaction, is `graph.build_graph`."""

from __future__ import annotations

import logging
import threading

from retrieval.indexing.graph import build_graph
from retrieval.sources.graph_status import GraphProgress, GraphStatus
from retrieval.store import CollectionInfo, Progress, Store

log = logging.getLogger(__name__)


class GraphBuilds:
    """This process's entity graph builds, per collection (the Workbench's `graph`)."""

    def __init__(self, store: Store):
        self.store = store
        self.progress = GraphProgress(store)
        # True (the app's Workbench, ui/resources.py): a write of the Workbench that leaves the graph
        # pending starts its build in a background thread (`start`). False (the CLI, scripts,
        # tests): only `build` and `start` called explicitly build it.
        self.in_background = False
        self._threads: dict[str, threading.Thread] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def status(self, collection: str) -> GraphStatus:
        """Where the collection's graph tables stand, and how far a build in this process is."""
        return self.progress.status(collection)

    def build(self, collection: str, progress: Progress | None = None,
              only_pending: bool = False) -> CollectionInfo:
        """Build the collection's entity graph tables from its stored documents, in batches, and
        mark them current, in one transaction (`graph.build_graph`). One build per collection at
        a time in this process (a second call waits for the first); with `only_pending`, nothing
        is done when the graph is current by then (pending or off: built). `progress("finding entities", done, total)`;
        `status` reads the same numbers."""
        with self._guard:
            lock = self._locks.setdefault(collection, threading.Lock())
        with lock:
            if only_pending and self.store.info(collection).graph not in ("pending", "off"):
                return self.store.info(collection)
            self.progress.started(collection)

            def report(stage: str, done: int, total: int) -> None:
                self.progress.report(collection, done, total)
                if progress:
                    progress(stage, done, total)
            error = ""
            try:
                return build_graph(self.store, collection, report)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                self.progress.ended(collection, error)

    def start(self, collection: str) -> bool:
        """Start building a pending graph in a background thread, unless one is running. True
        when a build was started."""
        with self._guard:
            thread = self._threads.get(collection)
            if thread is not None and thread.is_alive():
                return False

            def run() -> None:
                try:
                    self.build(collection, only_pending=True)
                except Exception:
                    log.warning("building the entity graph of %s failed", collection, exc_info=True)
                finally:
                    self.progress.ended(collection)

            self.progress.started(collection)  # "building" from now, not from when the thread runs
            thread = threading.Thread(target=run, name=f"graph-build-{collection}", daemon=True)
            self._threads[collection] = thread
            thread.start()
            return True

    def wait(self, collection: str, timeout: float | None = None) -> None:
        """Wait for this process's background graph build of `collection`, if one runs."""
        with self._guard:
            thread = self._threads.get(collection)
        if thread is not None:
            thread.join(timeout)
