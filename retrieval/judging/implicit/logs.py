"""Behaviour logs read as a stream of click events: UBI NDJSON and plain CSV/TSV click logs.

A `ClickEvent` is one thing a user saw or did: `action` "impression" (the document was shown at
`position` for the search `session`) or "click". Readers yield events one line at a time, so a
log of millions of events is never held in memory; what they cannot read is counted per reason
and named by its first line numbers (`LogReport`), never dropped silently.

UBI (User Behavior Insights, the schema OpenSearch's UBI plugin writes; github.com/o19s/ubi):
- events, one JSON object a line (an OpenSearch dump's `{"_source": {…}}` is unwrapped):
  `action_name` ("impression", "click"; other actions are counted and left out), `query_id` (one
  search: the session of the click models), `user_query` (optional when a queries file gives it),
  `event_attributes.object.object_id`, `event_attributes.position.ordinal` (an integer ≥ 0, as
  written), `session_id` and `timestamp` (kept by nobody here);
- queries, one JSON object a line: `query_id`, `user_query` (its text).

CSV/TSV click log: a header naming the columns query, doc, position and clicked (also document,
doc_id, object_id; rank, ordinal; click), optionally session (session_id, query_id) and time
(timestamp), in any order and case; a tab in the header means TSV. Each row is one impression;
clicked is 1/0, true/false or yes/no, and a clicked row is also a click. Without a session column
a session is a run of rows of one query with increasing positions (a new one starts where the
query changes or the position does not grow).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from retrieval.types import RetrievalError

IMPRESSION, CLICK = "impression", "click"
NAMED_LINES = 5  # line numbers kept per reason
CSV_COLUMNS = {"query": ("query", "user_query", "query_text"),
               "doc": ("doc", "document", "doc_id", "object_id", "docid"),
               "position": ("position", "rank", "ordinal"),
               "clicked": ("clicked", "click"),
               "session": ("session", "session_id", "query_id"),
               "time": ("time", "timestamp")}
TRUE_CELLS, FALSE_CELLS = ("1", "true", "yes", "y"), ("0", "false", "no", "n", "")


class ClickEvent(NamedTuple):
    """One impression or click of `doc` at `position` (as logged) in search `session` for `query`."""

    session: str
    query: str
    doc: str
    position: int
    action: str


@dataclass
class LogReport:
    """What the readers saw: lines read, events yielded, and lines left out per reason with the
    first `NAMED_LINES` of them as "file:line"."""

    lines: int = 0
    events: int = 0
    other_actions: int = 0
    bad: dict[str, int] = field(default_factory=dict)
    named: dict[str, list[str]] = field(default_factory=dict)

    def reject(self, reason: str, where: str) -> None:
        self.bad[reason] = self.bad.get(reason, 0) + 1
        shown = self.named.setdefault(reason, [])
        if len(shown) < NAMED_LINES:
            shown.append(where)

    def to_json(self) -> dict:
        return {"lines": self.lines, "events": self.events, "other_actions": self.other_actions,
                "bad_lines": {r: {"count": n, "lines": self.named[r]} for r, n in self.bad.items()}}


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8-sig", errors="strict", newline="") as handle:
            yield from enumerate(handle, start=1)
    except OSError as exc:
        raise RetrievalError(f"Cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise RetrievalError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _json_objects(path: Path, report: LogReport) -> Iterator[tuple[str, dict]]:
    for number, line in _lines(path):
        if not line.strip():
            continue
        report.lines += 1
        where = f"{path.name}:{number}"
        try:
            record = json.loads(line)
        except ValueError:
            report.reject("not JSON", where)
            continue
        if isinstance(record, dict) and isinstance(record.get("_source"), dict):
            record = record["_source"]
        if not isinstance(record, dict):
            report.reject("not a JSON object", where)
            continue
        yield where, record


def read_ubi_queries(path: Path, report: LogReport) -> dict[str, str]:
    """query_id -> user_query of a UBI queries file (its lines also count in `report`)."""
    texts: dict[str, str] = {}
    for where, record in _json_objects(path, report):
        query_id, text = record.get("query_id"), record.get("user_query")
        if not isinstance(query_id, str) or not query_id:
            report.reject("query without query_id", where)
        elif not isinstance(text, str) or not text.strip():
            report.reject("query without user_query", where)
        else:
            texts[query_id] = text.strip()
    return texts


def read_ubi_events(path: Path, report: LogReport, queries: dict[str, str] | None = None) -> Iterator[ClickEvent]:
    """The impressions and clicks of a UBI events file, in file order (module docstring). The
    query text is the event's `user_query`, else the queries file's text of its `query_id`."""
    queries = queries or {}
    for where, record in _json_objects(path, report):
        action = record.get("action_name")
        if not isinstance(action, str) or not action:
            report.reject("no action_name", where)
            continue
        action = action.lower()
        if action not in (IMPRESSION, CLICK):
            report.other_actions += 1
            continue
        query_id = record.get("query_id")
        if not isinstance(query_id, str) or not query_id:
            report.reject("no query_id", where)
            continue
        text = record.get("user_query")
        text = text.strip() if isinstance(text, str) and text.strip() else queries.get(query_id)
        if text is None:
            report.reject("no user_query (none in the event, query_id not in the queries file)", where)
            continue
        attributes = record.get("event_attributes") if isinstance(record.get("event_attributes"), dict) else {}
        thing = attributes.get("object") if isinstance(attributes.get("object"), dict) else {}
        doc = thing.get("object_id")
        if isinstance(doc, int) and not isinstance(doc, bool):
            doc = str(doc)
        if not isinstance(doc, str) or not doc:
            report.reject("no event_attributes.object.object_id", where)
            continue
        place = attributes.get("position") if isinstance(attributes.get("position"), dict) else {}
        position = _position(place.get("ordinal"))
        if position is None:
            report.reject("no event_attributes.position.ordinal (an integer ≥ 0)", where)
            continue
        report.events += 1
        yield ClickEvent(query_id, text, doc, position, action)


def _position(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value >= 0 else None


def read_click_csv(path: Path, report: LogReport) -> Iterator[ClickEvent]:
    """The impressions (one a row) and clicks of a CSV/TSV click log (module docstring)."""
    lines = _lines(path)
    header_line = next((line for _, line in lines if line.strip()), None)
    if header_line is None:
        raise RetrievalError(f"{path.name} is empty: a click log needs a header (query, doc, position, clicked)")
    delimiter = "\t" if "\t" in header_line else ","
    header = [cell.strip().lower() for cell in next(csv.reader([header_line], delimiter=delimiter))]
    columns = {name: next((header.index(a) for a in aliases if a in header), None)
               for name, aliases in CSV_COLUMNS.items()}
    missing = [name for name in ("query", "doc", "position", "clicked") if columns[name] is None]
    if missing:
        raise RetrievalError(f"{path.name}: the header names no {', '.join(missing)} column (it has "
                             f"{', '.join(header)}); a click log needs query, doc, position and clicked")
    previous: tuple[str, int] | None = None
    sessions = 0
    for number, cells in _csv_rows(lines, delimiter):
        report.lines += 1
        where = f"{path.name}:{number}"
        if len(cells) < len(header):
            report.reject(f"fewer than {len(header)} cells", where)
            continue
        query, doc = cells[columns["query"]].strip(), cells[columns["doc"]].strip()
        position = _position(cells[columns["position"]])
        clicked = cells[columns["clicked"]].strip().lower()
        if not query:
            report.reject("no query", where)
        elif not doc:
            report.reject("no doc", where)
        elif position is None:
            report.reject("position is not an integer ≥ 0", where)
        elif clicked not in TRUE_CELLS + FALSE_CELLS:
            report.reject("clicked is not 1/0, true/false or yes/no", where)
        else:
            if columns["session"] is not None and cells[columns["session"]].strip():
                session = cells[columns["session"]].strip()
            else:
                if previous is None or previous[0] != query or position <= previous[1]:
                    sessions += 1
                previous = (query, position)
                session = f"{path.name}#{sessions}"
            report.events += 1
            yield ClickEvent(session, query, doc, position, IMPRESSION)
            if clicked in TRUE_CELLS:
                report.events += 1
                yield ClickEvent(session, query, doc, position, CLICK)


def _csv_rows(lines: Iterable[tuple[int, str]], delimiter: str) -> Iterator[tuple[int, list[str]]]:
    for number, line in lines:
        if line.strip():
            yield number, next(csv.reader([line], delimiter=delimiter))


def read_logs(events: Path | None = None, queries: Path | None = None, click_csv: Path | None = None,
              report: LogReport | None = None) -> tuple[Iterator[ClickEvent], LogReport]:
    """The events of a UBI events file (with its queries file) and/or a CSV/TSV click log, one
    stream, and the report the stream fills as it is read."""
    if events is None and click_csv is None:
        raise RetrievalError("Give a UBI events file (--events) or a CSV/TSV click log (--csv)")
    if queries is not None and events is None:
        raise RetrievalError("A UBI queries file (--queries) goes with a UBI events file (--events)")
    report = report or LogReport()
    texts = read_ubi_queries(queries, report) if queries is not None else {}

    def stream() -> Iterator[ClickEvent]:
        if events is not None:
            yield from read_ubi_events(events, report, texts)
        if click_csv is not None:
            yield from read_click_csv(click_csv, report)

    return stream(), report
