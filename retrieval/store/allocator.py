"""How memory that LanceDB frees goes back to the system (glibc's malloc, on Linux).

glibc serves each allocation of at least `M_MMAP_THRESHOLD` bytes with a mapping of its own,
unmapped when it is freed. Smaller allocations come from per-thread arenas, and what is freed
there stays in the process (its RSS) for the next allocation from the same arena. Unless the
threshold is set, it starts at 128 KiB and rises to the size of every mapped block freed, up to
32 MiB (mallopt(3), M_MMAP_THRESHOLD). After LanceDB frees a few large buffers, the multi-MB
buffers of its index builds and compaction therefore come from the arenas of its many threads
and stay there. Setting the threshold fixes it and stops the rise.

LanceDB alone at 1M rows (full-text index, IVF_RQ, id BTREE, compaction in one process): peak
RSS 792 MB with glibc's default, 505 with a 1 MiB threshold, 453 with 128 KiB. A whole ingest
holds more than LanceDB's buffers (the encoder, Python): with 1 MiB its peak was ~90 MB lower at
100k and 1M documents, and it ran ~5 % slower, since each large buffer is mapped anew and its
pages are zeroed by the kernel (`limits.MALLOC_MMAP_THRESHOLD`, docs/experiments/ingest.md).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
from collections.abc import Mapping

M_MMAP_THRESHOLD = -3  # glibc's malloc.h; glibc refuses a threshold above 32 MiB (64-bit)


def fix_mmap_threshold(threshold: int, environ: Mapping[str, str] = os.environ, libc=None) -> bool:
    """`mallopt(M_MMAP_THRESHOLD, threshold)` for this whole process; True when it was set.

    Nothing is changed when `threshold` is 0 (glibc's rising default stays), when the user set
    glibc's own `MALLOC_MMAP_THRESHOLD_` (read at start-up, so it already holds), or when the C
    library is not glibc. `libc` is the library to call (default: this process's glibc)."""
    if threshold <= 0 or "MALLOC_MMAP_THRESHOLD_" in environ:
        return False
    if libc is None:
        libc = process_glibc()
        if libc is None:
            return False
    return libc.mallopt(M_MMAP_THRESHOLD, threshold) == 1


@functools.cache  # loaded once: every Store asks
def process_glibc():
    """This process's glibc (`ctypes.CDLL`), or None under another C library (musl, macOS)."""
    if platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL("libc.so.6")
    return libc if hasattr(libc, "mallopt") else None
