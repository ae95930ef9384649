"""A click log folded into counts, in one pass and bounded memory (`ClickCounts`).

Two kinds of counts, because the models read different things:

- **Event counts**, exactly what OpenSearch SRW's COEC counts (`coec.py`): per position p, click
  and impression events (`position_clicks`, `position_impressions`); per (query text, document),
  click events, impression events and the lowest position (smallest ordinal) of either (`pairs`).
  Events at a position above `max_rank` are left out (SRW's `ordinal <= maxRank` filter) and
  counted.
- **Session counts**, for the models of one result list at a time (`pbm.py`, `sdbn.py`): the events
  of one search (`ClickEvent.session`) make a list of (position, document, clicked) — a document
  shown twice keeps its first position, a click on a document with no impression adds it at the
  click's position (counted), several clicks on one document are one click. Per (query, document,
  position): sessions shown and clicked (`serp`); per (query, document), the cascade's counts
  (`cascade`: examined = shown at or above the session's last click, or anywhere in a session
  without a click; clicks; last clicks) and per position the sessions it was shown and examined.

Sessions are kept open until `window` later sessions have started (a log is written in time order,
so a search's events are near each other), then folded; memory grows with the distinct pairs,
not with the events. An event that comes after its session was folded opens it again as a new
session (a late click is then a click without an impression, counted: `stats`). The event counts
(COEC's) are exact whatever the order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from retrieval.judging.implicit.logs import CLICK, ClickEvent

WINDOW = 10_000  # sessions kept open at once (searches in progress at the same time in a log)


class ClickCounts:
    """Counts of a click log (module docstring); `add` events, then `finish`."""

    def __init__(self, max_rank: int = 20, window: int = WINDOW):
        self.max_rank = max_rank
        self.window = window
        self.position_clicks: Counter[int] = Counter()
        self.position_impressions: Counter[int] = Counter()
        self.pairs: dict[tuple[str, str], list[int]] = {}  # (query, doc) -> [clicks, impressions, lowest position]
        self.serp: dict[tuple[str, str, int], list[int]] = {}  # (query, doc, position) -> [shown, clicked]
        self.cascade: dict[tuple[str, str], list[int]] = {}  # (query, doc) -> [examined, clicks, last clicks]
        self.shown_at: Counter[int] = Counter()  # position -> sessions it was shown
        self.examined_at: Counter[int] = Counter()  # position -> sessions it was examined (cascade)
        self.sessions = 0
        self.beyond_max_rank = 0
        self.clicks_without_impression = 0
        self._open: dict[str, tuple[str, dict[str, list]]] = {}

    def add_all(self, events: Iterable[ClickEvent]) -> ClickCounts:
        for event in events:
            self.add(event)
        return self.finish()

    def add(self, event: ClickEvent) -> None:
        session, query, doc, position, action = event
        if position > self.max_rank:
            self.beyond_max_rank += 1
            return
        clicked = action == CLICK
        (self.position_clicks if clicked else self.position_impressions)[position] += 1
        pair = self.pairs.get((query, doc))
        if pair is None:
            self.pairs[query, doc] = [int(clicked), int(not clicked), position]
        else:
            pair[0 if clicked else 1] += 1
            pair[2] = min(pair[2], position)
        opened = self._open.get(session)
        if opened is None:
            if len(self._open) >= self.window:
                self._fold(*self._open.pop(next(iter(self._open))))
            opened = self._open[session] = (query, {})
        shown = opened[1].get(doc)
        if shown is None:
            if clicked:
                self.clicks_without_impression += 1
            opened[1][doc] = [position, clicked]
        elif clicked:
            shown[1] = True

    def finish(self) -> ClickCounts:
        """Fold the sessions still open; the counts are then complete."""
        for query, shown in self._open.values():
            self._fold(query, shown)
        self._open.clear()
        return self

    def _fold(self, query: str, shown: dict[str, list]) -> None:
        self.sessions += 1
        clicked_positions = [p for p, c in shown.values() if c]
        last = max(clicked_positions) if clicked_positions else None
        for doc, (position, clicked) in shown.items():
            key = (query, doc, position)
            counts = self.serp.get(key)
            if counts is None:
                counts = self.serp[key] = [0, 0]
            counts[0] += 1
            counts[1] += clicked
            self.shown_at[position] += 1
            cascade = self.cascade.get((query, doc))
            if cascade is None:
                cascade = self.cascade[query, doc] = [0, 0, 0]
            if last is None or position <= last:
                cascade[0] += 1
                self.examined_at[position] += 1
            cascade[1] += clicked
            cascade[2] += position == last

    def stats(self) -> dict[str, int]:
        """What was counted, for the report: sessions, pairs, events above max rank, clicks
        without an impression."""
        return {"sessions": self.sessions, "pairs": len(self.pairs), "beyond_max_rank": self.beyond_max_rank,
                "clicks_without_impression": self.clicks_without_impression}
