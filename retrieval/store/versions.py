"""A collection's versions: what each changed, and the collection read as it was at one of them
(LanceDB keeps every commit of a table as a version).

For each version, newest first: its number, time, document count (the version's own row count,
from LanceDB's manifest, no data read) and the documents it added and removed against the version
before: the id sets of the two versions compared, read from a separate handle checked out at each
version (the collection's own handle is not moved). Above `IDS_READ_LIMIT` documents ids are not
read and a change is given by its count alone. A version that changes no document is an index
build or a compaction. Versions removed by a compaction's clean-up are not listed: they are gone.

`StoreAtVersion` is a read-only `Store` on which one collection is as it was at one of its
versions (time travel): its table checked out at that version, and what lives beside it — its
catalogue entry and its entity graph tables, each a LanceDB table with versions of its own — at
the last version written before the collection's next version, since every write writes the
collection's rows first and the rest after them (`indexing/writer.py`). A Workbench over it
(`Workbench.at_version`) searches, evaluates and explains exactly as on the live store.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from retrieval.store.catalogue import CollectionInfo, info_from_entry
from retrieval.store.database import Store
from retrieval.store.tables import CATALOGUE_TABLE, GRAPH_KINDS, aux_table_name, sql_string
from retrieval.types import RetrievalError

IDS_READ_LIMIT = 200_000  # ids of two versions read per listed version: ~10 MB at this size


@dataclass(frozen=True)
class VersionChange:
    version: int
    timestamp: str
    documents: int
    added: int
    removed: int
    first: bool = False  # the table's first version: it was created here

    @property
    def summary(self) -> str:
        if self.first:
            return f"created with {self.documents} documents"
        parts = [f"{n} {what}" for n, what in ((self.added, "added"), (self.removed, "removed")) if n]
        return ", ".join(parts) if parts else "no document changed (an index build or a compaction)"


def listed_versions(store: Store, name: str) -> list[dict]:
    """The versions LanceDB keeps of collection `name`'s table, oldest first: each a dict of
    `version`, `timestamp` and `metadata` (with `total_rows`), from the manifests (no data read)."""
    return sorted(store.table(name).list_versions(), key=lambda v: v["version"])


def version_label(version: dict) -> str:
    """A version as a picker shows it: number, time (to the minute) and row count."""
    rows = int(version["metadata"].get("total_rows", 0))
    return f"v{version['version']} · {version['timestamp']:%Y-%m-%d %H:%M} · {rows} documents"


def collection_versions(store: Store, name: str, limit: int = 20) -> list[VersionChange]:
    """The last `limit` versions of collection `name`, newest first (see the module docstring)."""
    versions = listed_versions(store, name)[-(limit + 1):]
    counts = [int(v["metadata"].get("total_rows", 0)) for v in versions]
    read_ids = max(counts, default=0) <= IDS_READ_LIMIT
    handle = store.db.open_table(name) if read_ids else None

    def ids_at(version: int) -> set[str]:
        handle.checkout(version)
        return set(handle.search().select(["id"]).limit(None).to_arrow().column("id").to_pylist())

    changes, previous = [], None
    for i, (v, count) in enumerate(zip(versions, counts, strict=True)):
        current = ids_at(v["version"]) if read_ids else None
        if i == 0 and len(versions) > limit:
            previous = current  # only the baseline of the next one
            continue
        if i == 0:
            added, removed = count, 0
        elif read_ids:
            added, removed = len(current - previous), len(previous - current)
        else:
            added, removed = max(count - counts[i - 1], 0), max(counts[i - 1] - count, 0)
        changes.append(VersionChange(v["version"], v["timestamp"].isoformat(timespec="seconds"), count, added, removed,
                                     first=i == 0))
        previous = current
    return changes[::-1]


def _version_numbers(versions: list[dict]) -> str:
    numbers = sorted(v["version"] for v in versions)
    return f"v{numbers[0]}–v{numbers[-1]}" if len(numbers) > 1 else f"v{numbers[0]}"


class StoreAtVersion(Store):
    """`store` with collection `name` read-only at table version `version` (see the module
    docstring); every other collection, and the side tables (judgments, configs, snapshots), as
    in `store`. Writes to the collection are refused: a version of the past is not changed.

    A version a compaction removed, or one the table never had, is a clear error. The state key
    (`state_key`) is the live handle's id with the version, so caches shared with the live store
    never hand a source built on the live, moving handle to this pinned one."""

    def __init__(self, store: Store, name: str, version: int):
        self.__dict__.update(store.__dict__)  # the same connection, locks and catalogue
        self._handles, self._incarnations, self._read_handles = {}, {}, {}
        self.live, self.pinned, self.pinned_version = store, name, int(version)
        versions = listed_versions(store, name)
        label = store.info(name).label
        if self.pinned_version not in {v["version"] for v in versions}:
            if 0 < self.pinned_version < min(v["version"] for v in versions):
                raise RetrievalError(f"Version {self.pinned_version} of {label!r} no longer exists: a compaction "
                                     f"removed it (versions kept: {_version_numbers(versions)})")
            raise RetrievalError(f"{label!r} has no version {version} (its versions: {_version_numbers(versions)})")
        later = sorted((v["version"], v["timestamp"]) for v in versions if v["version"] > self.pinned_version)
        # When the collection's next version was written; None: this is its latest version.
        self.until: datetime | None = later[0][1] if later else None
        handle = self.db.open_table(name)
        handle.checkout(self.pinned_version)
        self._pinned_table = handle
        self._state = (f"{store.state_key(name)[0]}@{self.pinned_version}", self.pinned_version)
        self._graph_versions = {kind: self._version_before(aux_table_name(name, kind)) for kind in GRAPH_KINDS}
        self._info = self._info_then(store, handle)

    def _version_before(self, table_name: str) -> int | None:
        """The last version of `table_name` written before `until` (its latest when None); None
        when it had none then (created later, or dropped and made again since)."""
        if table_name not in self.table_names():
            return None
        versions = self.db.open_table(table_name).list_versions()
        kept = [v["version"] for v in versions if self.until is None or v["timestamp"] < self.until]
        return max(kept) if kept else None

    def _info_then(self, store: Store, handle: Any) -> CollectionInfo:
        """The catalogue entry as it was (the live one when the catalogue's versions of then are
        gone), its document count the version's own."""
        entry = None
        version = self._version_before(CATALOGUE_TABLE)
        if version is not None:
            with contextlib.suppress(ValueError):  # a compaction removed it: the live entry below
                catalogue = self.db.open_table(CATALOGUE_TABLE)
                catalogue.checkout(version)
                rows = catalogue.search().where(f"name = {sql_string(self.pinned)}").limit(1).to_arrow().to_pylist()
                entry = rows[0] if rows else None
        info = info_from_entry(entry) if entry is not None else store.info(self.pinned)
        return dataclasses.replace(info, doc_count=handle.count_rows())

    # ---- the pinned collection read as it was ----------------------------------------------
    def table(self, name: str):
        return self._pinned_table if name == self.pinned else super().table(name)

    def state_key(self, name: str) -> tuple[str, int]:
        return self._state if name == self.pinned else super().state_key(name)

    def table_at(self, name: str, state: tuple[str, int]):
        return self._pinned_table if name == self.pinned and state == self._state else super().table_at(name, state)

    def info(self, name: str) -> CollectionInfo:
        if name == self.pinned:
            return dataclasses.replace(self._info)
        return super().info(name)

    def has_graph_tables(self, name: str) -> bool:
        if name == self.pinned:
            return all(v is not None for v in self._graph_versions.values())
        return super().has_graph_tables(name)

    def graph_tables(self, name: str):
        """The entity graph tables as they were; None when they are not all there (then the graph
        source extracts the entities of the version's documents itself)."""
        if name != self.pinned:
            return super().graph_tables(name)
        if not self.has_graph_tables(name):
            return None
        tables = {}
        for kind, version in self._graph_versions.items():
            handle = self.db.open_table(aux_table_name(name, kind))
            try:
                handle.checkout(version)
            except ValueError:  # compacted away: extract from the documents instead
                return None
            tables[kind] = handle.to_arrow()
        return tables

    # ---- writes: refused for the pinned collection -----------------------------------------
    def writer_lock(self, name: str):
        """Readers of the pinned collection need no lock (nothing changes a version); a writer
        is stopped by `transaction`."""
        return contextlib.nullcontext() if name == self.pinned else super().writer_lock(name)

    @contextlib.contextmanager
    def lock_if_free(self, name: str):
        if name != self.pinned:
            with super().lock_if_free(name) as taken:
                yield taken
        else:
            yield True  # nothing changes a version: as good as the lock

    def transaction(self, name: str, op: str, tables):
        if name == self.pinned:
            raise RetrievalError(f"{self._info.label!r} is open read-only at version {self.pinned_version}: "
                                 "change the collection itself, not an earlier version of it")
        return super().transaction(name, op, tables)
