"""Writer locks: one writer at a time per collection, across the threads and processes of one
machine, and the crash points the reliability tests kill a writer at.

A collection's lock is a re-entrant thread lock plus an OS file lock
(`<db>/_workbench_locks/<name>.lock`, or for object storage a local folder per URI, `lock_dir`;
flock: released by the OS when the holder dies, so a killed writer never leaves it taken). The
catalogue and the saved configs have locks of their own, always taken after a collection's
(docs/reliability.md); a create's claim on its display name is taken before it, but only ever
tried (`try_acquire`, no waiting), so it cannot close a circle of waits.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock, Timeout

from retrieval.paths import REPO_DIR
from retrieval.store.tables import is_remote

LOCK_DIR_NAME = "_workbench_locks"  # not a LanceDB table (no .lance suffix): never listed


def crash_point(step: str) -> None:
    """Where the reliability tests kill a writer: with `WORKBENCH_PAUSE_AT=<step>` the process
    writes `<step>` to `$WORKBENCH_PAUSE_FILE` and waits there to be killed (`kill -9`). A no-op
    otherwise (one environment lookup)."""
    if os.environ.get("WORKBENCH_PAUSE_AT") == step:
        Path(os.environ["WORKBENCH_PAUSE_FILE"]).write_text(step, encoding="utf-8")
        while True:
            threading.Event().wait(60)


def lock_dir(uri: str) -> Path:
    """Where the writer locks and journals of database `uri` live: inside a local database; for
    object storage (`s3://…`) in a local folder (`$WORKBENCH_LOCK_DIR`, else data/locks), one per
    URI, so they coordinate the processes of this machine only (see docs/reliability.md)."""
    if not is_remote(uri):
        return Path(uri) / LOCK_DIR_NAME
    base = Path(os.environ.get("WORKBENCH_LOCK_DIR") or REPO_DIR / "data" / "locks")
    return base / hashlib.sha1(uri.rstrip("/").encode()).hexdigest()[:16]


class WriterLock:
    """Exclusive across threads (a re-entrant thread lock) and processes (an OS file lock taken by
    the outermost entry). `on_acquire` runs when the file lock has just been taken (recovery)."""

    def __init__(self, path: Path, on_acquire: Callable[[], None] | None = None):
        self._thread = threading.RLock()
        self._file = FileLock(str(path), thread_local=False)
        self._depth = 0
        self._on_acquire = on_acquire

    def __enter__(self) -> WriterLock:
        self._thread.acquire()
        try:
            self._enter(timeout=-1)
        except BaseException:
            self._thread.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._file.release()
        self._thread.release()

    def _enter(self, timeout: float) -> None:
        """With the thread lock held: the outermost entry takes the file lock (waiting up to
        `timeout`, -1 for ever) and runs `on_acquire`."""
        if self._depth == 0:
            self._file.acquire(timeout=timeout)
            try:
                if self._on_acquire is not None:
                    self._on_acquire()
            except BaseException:
                self._file.release()
                raise
        self._depth += 1

    def try_acquire(self, timeout: float = 0) -> bool:
        """Take the lock only if nobody holds it, waiting at most `timeout` seconds; True when
        taken (then `__exit__`)."""
        taken = self._thread.acquire(timeout=timeout) if timeout > 0 else self._thread.acquire(blocking=False)
        if not taken:
            return False
        try:
            self._enter(timeout=timeout)
        except Timeout:  # another process holds it
            self._thread.release()
            return False
        except BaseException:
            self._thread.release()
            raise
        return True


def counts_as_write(method):
    """Decorator for a method of an object with a `store` (or of the Store itself) that writes:
    afterwards, even when it failed half-way and restored, `Store.writes` has grown, so readers
    that memoise what they read (the Evaluate page) know to read again."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        finally:
            getattr(self, "store", self).note_write()
    return wrapper
