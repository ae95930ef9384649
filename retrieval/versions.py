"""A collection's versions and what each changed (LanceDB keeps every commit of a table as a version).

For each version, newest first: its number, time, document count (the version's own row count,
from LanceDB's manifest, no data read) and the documents it added and removed against the version
before: the id sets of the two versions compared, read from a separate handle checked out at each
version (the collection's own handle is not moved). Above `IDS_READ_LIMIT` documents ids are not
read and a change is given by its count alone. A version that changes no document is an index
build or a compaction. Versions removed by a compaction's clean-up are not listed: they are gone.
"""

from __future__ import annotations

from dataclasses import dataclass

from .store import Store

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


def collection_versions(store: Store, name: str, limit: int = 20) -> list[VersionChange]:
    """The last `limit` versions of collection `name`, newest first (see the module docstring)."""
    versions = sorted(store.table(name).list_versions(), key=lambda v: v["version"])[-(limit + 1):]
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
