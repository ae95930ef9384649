"""How fast a long run goes: documents per second and the time left, as front ends show them
(the Corpus page's ingest bar; the CLI draws tqdm bars, which compute the same)."""

from __future__ import annotations

import time


class Throughput:
    """Documents per second and time left of a long run, from the time of the first report:
    `text(done, total)` -> '1,024 of 20,000 documents · 512 docs/s · about 37 s left' (total 0:
    unknown, no time left). `clock` is injectable for tests."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._start: float | None = None

    def rate(self, done: int) -> float | None:
        now = self._clock()
        if self._start is None:
            self._start = now
        seconds = now - self._start
        return done / seconds if seconds > 0 and done else None

    def text(self, done: int, total: int) -> str:
        rate = self.rate(done)
        shown = f"{done:,} of {total:,} documents" if total else f"{done:,} documents"
        if rate is None:
            return shown
        shown += f" · {rate:,.{1 if rate < 100 else 0}f} docs/s"
        if total and done < total:
            shown += f" · about {duration((total - done) / rate)} left"
        return shown


def duration(seconds: float) -> str:
    """'37 s', '4 min 05 s', '2 h 07 min'."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
