"""The write transaction: a journal per write, rollback when it fails, recovery when its writer
died (docs/reliability.md).

Under the collection's writer lock (store/locks.py) a write first records a journal
(`<name>.journal.json`, written to a temporary file and renamed, so it is whole or absent: the
operation, the writer's pid, the version of every table it will touch or None when it does not
exist, and the catalogue entry before it), then writes, then removes the journal. If the write
fails, it is rolled back at once; if the process is killed, the journal stays and the next
holder of the lock (any write, any process) rolls it back: tables restored to their recorded
versions or dropped if they did not exist, the catalogue entry put back; a clear or delete is
finished instead (dropping cannot be undone). Restoring is safe because nobody else can have
committed to those tables while the lock was held. A conflicting commit is never "fixed" by
restoring an older version over someone else's.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.store.locks import crash_point
from retrieval.store.tables import AUX_KINDS, aux_table_name

if TYPE_CHECKING:
    from retrieval.store.database import Store

log = logging.getLogger(__name__)


def journal_path(store: Store, name: str) -> Path:
    return store.lock_dir / f"{name}.journal.json"


def read_journal(store: Store, name: str) -> dict:
    """Collection `name`'s journal, {} when there is none."""
    try:
        return json.loads(journal_path(store, name).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def table_versions(store: Store, names: Iterable[str]) -> dict[str, int | None]:
    """Each table's current version, None for a table that does not exist."""
    existing = set(store.table_names())
    return {t: (store.db.open_table(t).version if t in existing else None) for t in names}


def write_durably(path: Path, text: str) -> None:
    """`text` to `path` whole or not at all, and on disk before any table is touched: a temporary
    file synced, renamed over `path` (atomic), then the folder synced. A power cut (not only a
    kill) then leaves either no journal, and no table changed, or the whole journal."""
    partial = path.with_suffix(".tmp")
    with open(partial, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


@contextmanager
def transaction(store: Store, name: str, op: str, tables: Iterable[str]) -> Iterator[None]:
    """Run a write of `op` to collection `name` touching `tables` (LanceDB table names) all or
    nothing. The caller holds the collection's writer lock."""
    journal = {"op": op, "pid": os.getpid(), "tables": table_versions(store, tables),
               "catalogue": store.catalogue.entry(name)}
    path = journal_path(store, name)
    write_durably(path, json.dumps(journal))
    crash_point(f"{op}:journal")
    try:
        yield
    except BaseException:
        try:
            roll_back(store, name, journal)
        except Exception:  # the journal stays: the next holder of the lock tries again
            log.exception("rolling back %s of %s failed; the next writer will retry", op, name)
            raise
        path.unlink(missing_ok=True)
        raise
    path.unlink(missing_ok=True)


def recover(store: Store, name: str) -> None:
    """A journal found on taking the lock belongs to a writer that died: undo (or finish) it."""
    journal = read_journal(store, name)
    if not journal:
        return
    log.warning("recovering collection %s: a %s by process %s did not finish", name, journal.get("op"),
                journal.get("pid"))
    roll_back(store, name, journal)
    journal_path(store, name).unlink(missing_ok=True)
    store.note_write()


def roll_back(store: Store, name: str, journal: dict) -> None:
    """Undo the journal's write (a clear or delete: finish it)."""
    store.forget_handle(name)
    if journal["op"] == "delete":
        drop_all(store, name)
        return
    if journal["op"] == "clear":
        clear_tables(store, name)
        entry = journal.get("catalogue")
        if entry is not None:
            store.catalogue.put(name, {**entry, "doc_count": 0, "truncated": 0, "graph": ""})
        return
    existing = set(store.table_names())
    for table_name, version in journal["tables"].items():
        if version is None:
            if table_name in existing:
                store.db.drop_table(table_name)
        elif table_name in existing:
            table = store.db.open_table(table_name)
            if table.version != version:
                table.restore(version)
    store.catalogue.put(name, journal.get("catalogue"))


def drop_all(store: Store, name: str) -> None:
    """Drop every table of the collection and its catalogue entry (idempotent: a delete, or
    finishing one)."""
    store.forget_handle(name)
    existing = set(store.table_names())
    for table_name in [aux_table_name(name, kind) for kind in AUX_KINDS] + [name]:
        if table_name in existing:
            store.db.drop_table(table_name)
            crash_point(f"delete:{'table' if table_name == name else 'aux'}")
    store.catalogue.put(name, None)


def clear_tables(store: Store, name: str) -> None:
    """Delete every document and drop the per-document auxiliary tables (idempotent: a clear, or
    finishing one)."""
    existing = set(store.table_names())
    if name in existing:
        store.db.open_table(name).delete("true")
    crash_point("clear:rows")
    for kind, per_document in AUX_KINDS.items():
        table_name = aux_table_name(name, kind)
        if per_document and table_name in existing:
            store.db.drop_table(table_name)
