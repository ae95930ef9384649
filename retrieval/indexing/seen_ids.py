"""The ids a streaming ingest has already met, in 8 bytes an id: a set of str took ~92 bytes an
id (92 MB at 1M documents, the largest thing the stream kept), so memory grew with the corpus.

Each id is kept as its 64-bit hash (Python's `hash` of a str, SipHash; salted per process,
which is fine: the ids live as long as one stream) in sorted numpy runs merged like a binary
counter (a run is merged into the one before it while it is at least half as long), so a
lookup costs O(r log n) with r ≤ log2(n / b) + 1 runs (b: the batch) and all merging
O(n log n) over a stream of n ids.

Two different ids are told apart unless their hashes collide: a stream of n ids has one such
pair with probability ≈ n² / 2^65 (3·10⁻⁸ at 1M, 3·10⁻⁶ at 10M). Then a document would be
refused as a repeat that is not one; no document is ever written twice.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def id_hashes(ids: Sequence[str]) -> np.ndarray:
    """The ids' 64-bit hashes, in order (int64)."""
    return np.fromiter((hash(i) for i in ids), dtype=np.int64, count=len(ids))


class SeenIds:
    """Ids met so far: `seen_before(ids)` asks, `add(ids)` records; `len` counts the hashes
    kept (an id once per `add`, and once overall after the runs holding it are merged)."""

    def __init__(self) -> None:
        self._runs: list[np.ndarray] = []  # sorted, unique within a run, longest first

    def __len__(self) -> int:
        return sum(len(run) for run in self._runs)

    def __contains__(self, doc_id: str) -> bool:
        return bool(self.seen_before([doc_id])[0])

    def seen_before(self, ids: Sequence[str]) -> np.ndarray:
        """For each id, whether an earlier `add` recorded it (repeats within `ids` are not
        looked at: the caller sees them in order)."""
        hashes = id_hashes(ids)
        found = np.zeros(len(hashes), dtype=bool)
        for run in self._runs:
            at = np.searchsorted(run, hashes)
            at[at == len(run)] = 0  # past the end: compared with run[0], which differs or matches truly
            found |= run[at] == hashes
        return found

    def add(self, ids: Sequence[str]) -> None:
        """Record `ids`."""
        if not len(ids):
            return
        self._runs.append(np.unique(id_hashes(ids)))
        while len(self._runs) > 1 and 2 * len(self._runs[-1]) >= len(self._runs[-2]):
            last = self._runs.pop()
            self._runs[-1] = np.union1d(self._runs[-1], last)
