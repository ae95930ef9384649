"""What the MCP server's tuning write tools do, each refused unless the server was started with
`--allow-write` (checked before anything else) and each validated as the pages validate it; no
`mcp` here (`tuning_tools.py` registers them).

    save_config(name, config, overwrite)         the Evaluate page's "save config" (`ConfigStore.save`:
                                                 the name rule, `SearchConfig.validate`)
    record_judgment(query_set, query, doc_id, grade, rater)
                                                 the Search page's rating (`JudgmentStore.rate`: grade
                                                 0–3, ids, query text), of a document of the collection
    set_served_config(config, collection)        the config the search tools serve from now on
                                                 (this server process only: nothing is written)
    snapshot_create(name, config, query_set, collection)
                                                 `snapshot create` (`SnapshotStore.create`)
"""

from __future__ import annotations

from typing import Any

from retrieval.serve.arguments import ToolProblem
from retrieval.serve.tuning import TuningService


def writable(tuning: TuningService, tool: str) -> None:
    if not tuning.allow_write:
        raise ToolProblem(f"{tool} writes to the workbench and this server is read-only: start it with --allow-write "
                          "to allow it")


def save_config(tuning: TuningService, name: str, config: Any, overwrite: bool = False) -> dict[str, Any]:
    writable(tuning, "save_config")
    if config is None:
        raise ToolProblem("config is required: a config object, 'defaults' or a saved config's name")
    chosen, source = tuning.config(config, tuning.served(None))
    tuning.workbench.configs.save(name, chosen, overwrite=bool(overwrite))
    return {"saved": name, "config": chosen.to_dict(), "from": source,
            "summary": f"Saved {source} as config {name!r}: python -m retrieval … --config {name!r} uses it."}


def record_judgment(tuning: TuningService, query_set: str, query: str, doc_id: str, grade: int,
                    rater: str | None = None, collection_name: str | None = None) -> dict[str, Any]:
    writable(tuning, "record_judgment")
    served = tuning.served(collection_name)
    if not isinstance(doc_id, str) or not doc_id or not tuning.workbench.documents(served.collection, [doc_id]):
        raise ToolProblem(f"No document {doc_id!r} in {served.label}: judge a document the collection holds")
    query_id = tuning.workbench.judgments.rate(served.collection, query_set, query, doc_id, grade,
                                               **({"rater": rater} if rater is not None else {}))
    return {"collection": served.collection, "query_set": query_set, "query_id": query_id, "doc_id": doc_id,
            "grade": grade, "rater": rater or "",
            "summary": f"Recorded grade {grade} for {doc_id} on query {query_id} of {query_set!r}."}


def set_served_config(tuning: TuningService, config: Any, collection_name: str | None = None) -> dict[str, Any]:
    writable(tuning, "set_served_config")
    served = tuning.served(collection_name)
    if config is None:
        raise ToolProblem("config is required: a config object, 'defaults' or a saved config's name")
    chosen, source = tuning.config(config, served)
    chosen.validate()
    previous = served.config_name
    served.config, served.config_name = chosen, source
    return {"collection": served.collection, "config_name": source, "config": chosen.to_dict(),
            "previous": previous, "summary": f"{served.label} is now served with {source} (was {previous}); "
                                             "this server process only."}


def snapshot_create(tuning: TuningService, name: str, config: Any = None, query_set: str = "default",
                    collection_name: str | None = None) -> dict[str, Any]:
    from retrieval.evaluation.snapshots import SnapshotStore

    writable(tuning, "snapshot_create")
    served = tuning.served(collection_name)
    chosen, source = tuning.config(config, served)
    tuning.judged(served, query_set)  # the set exists, is judged and is within the per-call limit
    snap = SnapshotStore(tuning.workbench.store).create(tuning.workbench, served.collection, name, chosen, query_set)
    return {"name": snap.name, "mean": snap.mean, "collection": snap.collection, "query_set": snap.query_set,
            "table_version": snap.table_version, "queries": len(snap.per_query), "config_name": source,
            "summary": f"Snapshot {snap.name!r}: {source} on {len(snap.per_query)} judged queries of "
                       f"{query_set!r} (version {snap.table_version}): "
                       + ", ".join(f"{m} {v:.4f}" for m, v in snap.mean.items()) + "."}
