"""Overlapping stages of a streaming ingest: `Ahead(items, depth)` runs the iteration of `items` —
every lazy step chained in it: reading a batch, checking it, tokenising it — in a worker thread,
while the caller consumes (embeds and writes) the batches it already has. The two sides meet in
a queue of at most `depth` batches, so a stream's memory holds at most `depth + 2` batches of this
stage (`depth` queued, one being made, one being consumed), whatever the corpus' size.

Why a thread: the consumer's heavy steps run outside the GIL (ONNX Runtime's and torch's kernels,
the Rust tokenizers, LanceDB's writes), so the pure-Python steps of the next batch (JSON parsing,
the BM25 analyser) run on the core they leave idle. Items come out in order; an exception raised
while making item n is raised to the consumer when it asks for item n (after items 0…n-1), so a
bad batch fails the ingest at the same point as a sequential one. `close()` (also on leaving a
`with` block) stops the worker and drops what it made but nobody took.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

_DONE = object()  # the worker's last message when `items` ended


class Ahead(Generic[T]):
    """`items`, made in a worker thread at most `depth` (≥ 1) items ahead of the consumer. The
    worker starts on the first `next()`."""

    def __init__(self, items: Iterable[T], depth: int = 1, name: str = "ingest-ahead"):
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.depth = depth
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self._items = iter(items)
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._finished = False

    def _work(self) -> None:
        while not self._stop.is_set():  # closed: make nothing more
            try:
                item = next(self._items)
            except StopIteration:
                self._put((True, _DONE))
                return
            except BaseException as exc:  # handed to the consumer, raised there in order
                self._put((False, exc))
                return
            if not self._put((True, item)):
                return

    def _put(self, message) -> bool:
        """Queue `message`, waiting while the queue is full; False when closed meanwhile."""
        while not self._stop.is_set():
            try:
                self.queue.put(message, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
            self._thread.start()
        ok, item = self.queue.get()
        if not ok:
            self._finished = True
            self.close()
            raise item
        if item is _DONE:
            self._finished = True
            self.close()
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop the worker (it ends at its next item) and wait for it; queued items are dropped."""
        self._finished = True
        self._stop.set()
        while True:  # unblock a worker waiting to put
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        close = getattr(self._items, "close", None)
        if close is not None and (self._thread is None or not self._thread.is_alive()):
            close()

    def __enter__(self) -> Ahead[T]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
