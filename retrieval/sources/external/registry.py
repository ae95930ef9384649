"""Registered outside engines: their descriptors kept by name in the store's keyed side table
`_external_sources` (`store.side_tables.KeyedTable`), and the lookup of a source name's
`SourceSpec` for the Retriever (`SourceSpecs`): the built-in sources first, then descriptors used
for one run only (`evaluate --source FILE`), then the registered ones.

A descriptor is saved as given (validated first): it holds `${NAME}` placeholders, never a
credential (`descriptor.py` refuses a literal one). A registered descriptor is read again when
the table changes (its version, read at most once a second for a name already known), so a
source added or removed by another process is seen.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import UTC, datetime

import pyarrow as pa

from retrieval.sources.base import SourceSpec
from retrieval.sources.external.descriptor import Descriptor, parse_descriptor
from retrieval.sources.external.source import external_spec
from retrieval.store.side_tables import KeyedTable
from retrieval.types import RetrievalError

RECHECK_S = 1.0  # a source registered or removed by another process is seen within this
EXTERNAL_TABLE = "_external_sources"
EXTERNAL_SCHEMA = pa.schema([("name", pa.string()), ("descriptor", pa.string()), ("added", pa.string())])


def _builtin() -> dict[str, SourceSpec]:
    from retrieval.sources import SOURCES

    return SOURCES


class ExternalSources:
    """The registered outside engines of `store`."""

    def __init__(self, store):
        self.table = KeyedTable(store, EXTERNAL_TABLE, EXTERNAL_SCHEMA, "name")

    def add(self, descriptor: Descriptor, replace: bool = False) -> None:
        """Register `descriptor` under its name (a name taken: refused unless `replace`)."""
        if descriptor.name in _builtin():
            raise RetrievalError(f"{descriptor.name!r} is a built-in source's name: give the outside engine another")
        with self.table.lock():
            if not replace and self.table.has(descriptor.name):
                raise RetrievalError(f"a source named {descriptor.name!r} is registered already (remove it first, "
                                     "or replace it)")
            self.table.put({"name": descriptor.name, "descriptor": descriptor.to_json(),
                            "added": datetime.now(UTC).isoformat(timespec="seconds")})

    def remove(self, name: str) -> None:
        with self.table.lock():
            if not self.table.has(name):
                known = ", ".join(self.names()) or "none"
                raise RetrievalError(f"no outside source named {name!r}; registered: {known}")
            self.table.delete(name)

    def names(self) -> list[str]:
        return sorted(self.table.keys())

    def get(self, name: str) -> Descriptor | None:
        row = self.table.get(name, ["descriptor"])
        return parse_descriptor(row["descriptor"]) if row else None

    def rows(self) -> list[dict]:
        """Each registered source: name, kind, label, where (URL or command), added."""
        out = []
        for row in sorted(self.table.rows(), key=lambda r: r["name"]):
            d = parse_descriptor(row["descriptor"])
            out.append({"name": d.name, "kind": d.kind, "label": d.label,
                        "where": d.url or " ".join(d.command), "added": row["added"]})
        return out

    def version(self) -> int | None:
        """The table's version (None before the first registration): a change means re-read."""
        table = self.table._table()
        return None if table is None else table.version


class SourceSpecs:
    """A source name's `SourceSpec` (see the module doc); None for a name nothing defines."""

    def __init__(self, store=None):
        self.registry = ExternalSources(store) if store is not None else None
        self.session: dict[str, SourceSpec] = {}
        self._registered: dict[str, SourceSpec | None] = {}
        self._version: int | None = None
        self._checked_at = -math.inf
        self._lock = threading.Lock()

    def use(self, descriptor: Descriptor) -> None:
        """Make `descriptor`'s engine a source of this process's searches without registering it."""
        if descriptor.name in _builtin():
            raise RetrievalError(f"{descriptor.name!r} is a built-in source's name: give the outside engine another")
        self.session[descriptor.name] = external_spec(descriptor)

    def get(self, name: str) -> SourceSpec | None:
        builtin = _builtin().get(name)
        if builtin is not None:
            return builtin
        if name in self.session:
            return self.session[name]
        if self.registry is None:
            return None
        with self._lock:
            # The table's version is read (~1 ms) for a name not known yet, and for a known one at
            # most once a `RECHECK_S`: a search asks for its sources' specs several times.
            now = time.monotonic()
            if self._registered.get(name) is None or now - self._checked_at > RECHECK_S:
                version, self._checked_at = self.registry.version(), now
                if version != self._version:
                    self._registered, self._version = {}, version
            version = self._version
            if name not in self._registered:
                descriptor = self.registry.get(name) if version is not None else None
                self._registered[name] = external_spec(descriptor) if descriptor is not None else None
            return self._registered[name]
