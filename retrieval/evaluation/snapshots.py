"""Snapshots: named, immutable records of one evaluation, kept in the store's `_snapshots` table.

A snapshot holds what is needed to compare it later without the tool's state of that day: the
collection, its table version and document count, the full config, the query set's name, queries
and judgments as they were (with a fingerprint of the judgments), the evaluated run per query
(ids best first with the score the search showed: the reranked score for a reranked head,
else the fused score) cut at the config's depth, and per-query metrics.

Metrics (`SNAPSHOT_METRICS`): ndcg@10, precision@10, recall@100 and mrr (trec_eval
semantics, see `metrics`), and judged@10 = |top 10 ∩ judged documents| / 10, the share of the
top 10 that has a judgment (what a metric computed on the rest cannot see). Only judged queries
count; a judged query the run left empty scores 0.

One row per snapshot, columns of plain values and JSON (no pickle). Names follow the saved-config
rule (`saved_configs.validate_saved_name`) and are unique in the store. A snapshot is never changed: only
renamed or deleted, each one LanceDB commit under the table's lock (a keyed side table,
`store.side_tables.KeyedTable`). `diff` lives in `snapshot_diff.py`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from retrieval.evaluation.evaluate import Qrels, QrelsEvaluator, run_from_rankings, searched, trec_run
from retrieval.evaluation.trust import judged_at
from retrieval.judging.judgments import CONSENSUS, JudgmentStore
from retrieval.models.embed import backend_for
from retrieval.search.config import SearchConfig
from retrieval.search.plan import evaluation_config
from retrieval.search.saved_configs import validate_saved_name
from retrieval.sources import SOURCES
from retrieval.store import CollectionInfo, Store, counts_as_write, sql_string
from retrieval.store.side_tables import KeyedTable
from retrieval.types import RetrievalError

SNAPSHOTS_TABLE = "_snapshots"
RANX_METRICS = ("ndcg@10", "precision@10", "recall@100", "mrr")
JUDGED_AT = 10
SNAPSHOT_METRICS = (*RANX_METRICS, f"judged@{JUDGED_AT}")
SNAPSHOTS_SCHEMA = pa.schema([
    pa.field("name", pa.string(), nullable=False),
    pa.field("collection", pa.string(), nullable=False),
    pa.field("created", pa.string(), nullable=False),
    pa.field("table_version", pa.int64(), nullable=False),
    pa.field("doc_count", pa.int64(), nullable=False),
    pa.field("config", pa.string(), nullable=False),  # SearchConfig.to_json
    pa.field("query_set", pa.string(), nullable=False),
    pa.field("queries", pa.string(), nullable=False),  # JSON {query id: text}
    pa.field("qrels", pa.string(), nullable=False),  # JSON {query id: {doc id: grade}}
    pa.field("judgments_key", pa.string(), nullable=False),
    pa.field("run", pa.string(), nullable=False),  # JSON {query id: [[doc id, score], …]}
    pa.field("per_query", pa.string(), nullable=False),  # JSON {query id: {metric: value}}
    # JSON {model: encoder backend} of the query vectors (`query_encoders`); null: taken before
    # snapshots recorded it (the column is added to an older table by its next `add`).
    pa.field("encoders", pa.string(), nullable=True),
])

Scored = dict[str, list[tuple[str, float]]]  # query id -> (doc id, score) best first
# (config, table version, {query id: text}) -> {query id: doc ids best first}: a config run on a version
Rerun = Callable[[SearchConfig, int, Mapping[str, str]], Mapping[str, Sequence[str]]]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def validate_snapshot_name(name: str) -> str:
    return validate_saved_name(name, "snapshot")


def judgments_key(qrels: Mapping[str, Mapping[str, int]]) -> str:
    """A fingerprint of the judgments: equal judgments, equal key (order does not matter)."""
    canonical = json.dumps({q: dict(sorted(d.items())) for q, d in sorted(qrels.items())}, sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def score_rankings(rankings: Mapping[str, Sequence[str]], qrels: Qrels) -> dict[str, dict[str, float]]:
    """`SNAPSHOT_METRICS` per judged query of `qrels` (queries in qrels order)."""
    evaluator = QrelsEvaluator(qrels)
    _, per_query = evaluator.evaluate_rankings(rankings, RANX_METRICS)
    for qid, values in per_query.items():
        values[f"judged@{JUDGED_AT}"] = judged_at(list(rankings.get(qid, ())), evaluator.judged[qid])
    return per_query


@dataclass(frozen=True)
class Snapshot:
    name: str
    collection: str
    created: str
    table_version: int
    doc_count: int
    config: SearchConfig
    query_set: str
    queries: dict[str, str]
    qrels: Qrels
    judgments_key: str
    run: Scored
    per_query: dict[str, dict[str, float]]
    encoders: dict[str, str] | None = None  # model -> backend of its query vectors; None: not recorded

    def check_metrics(self, metrics: Sequence[str] = SNAPSHOT_METRICS) -> Snapshot:
        """This snapshot, or a clear error when a per-query value of `metrics` is missing, not a
        number, NaN or outside 0–1 (every snapshot metric is a share): a damaged or hand-edited
        snapshot must not pass a comparison (a NaN Δ is never "worse than the margin")."""
        unknown = [m for m in metrics if m not in SNAPSHOT_METRICS]
        if unknown:
            raise RetrievalError(f"metric must be one of {', '.join(SNAPSHOT_METRICS)}, got {unknown[0]!r}")
        if not self.per_query:
            raise RetrievalError(f"Snapshot {self.name!r} has no per-query metrics: it cannot be compared")
        for qid, values in self.per_query.items():
            for metric in metrics:
                value = values.get(metric) if isinstance(values, Mapping) else None
                ok = isinstance(value, int | float) and not isinstance(value, bool) and 0.0 <= value <= 1.0
                if not ok:  # NaN fails both comparisons
                    raise RetrievalError(f"Snapshot {self.name!r} is damaged: its {metric} of query {qid!r} is "
                                         f"{value!r}, not a number between 0 and 1; it cannot be compared "
                                         "(take a new snapshot)")
        return self

    @property
    def rankings(self) -> dict[str, list[str]]:
        return {q: [doc_id for doc_id, _ in hits] for q, hits in self.run.items()}

    @property
    def mean(self) -> dict[str, float]:
        """Each metric's mean over the judged queries."""
        n = len(self.per_query)
        return {m: sum(v[m] for v in self.per_query.values()) / n for m in SNAPSHOT_METRICS} if n else {}

    def to_row(self) -> dict:
        return {"name": self.name, "collection": self.collection, "created": self.created,
                "table_version": self.table_version, "doc_count": self.doc_count, "config": self.config.to_json(),
                "query_set": self.query_set, "queries": json.dumps(self.queries, ensure_ascii=False),
                "qrels": json.dumps(self.qrels, ensure_ascii=False), "judgments_key": self.judgments_key,
                "run": json.dumps(self.run, ensure_ascii=False),
                "per_query": json.dumps(self.per_query, ensure_ascii=False),
                "encoders": None if self.encoders is None else json.dumps(self.encoders, sort_keys=True)}

    @classmethod
    def from_row(cls, row: Mapping) -> Snapshot:
        """The snapshot a row of the table holds. A row that does not read as one (damaged, or
        written around the workbench) is a RetrievalError naming it and what is wrong."""
        name = row.get("name")

        def damaged(why: str) -> RetrievalError:
            return RetrievalError(f"Snapshot {name!r} is damaged ({why}): delete it (snapshot delete {name})")

        def parsed(column: str, shape: str, check: Callable[[Any], bool]) -> Any:
            try:
                value = json.loads(row[column])
            except (KeyError, TypeError, ValueError):
                raise damaged(f"its {column} is not valid JSON") from None
            if not isinstance(value, dict) or not all(isinstance(k, str) and check(v) for k, v in value.items()):
                raise damaged(f"its {column} is not {shape}")
            return value

        try:
            config = SearchConfig.from_json(row["config"])
        except (KeyError, TypeError, ValueError, RetrievalError) as exc:
            raise damaged(f"its config is not valid: {exc}") from None
        queries = parsed("queries", "{query id: text}", lambda v: isinstance(v, str))
        qrels = parsed("qrels", "{query id: {document id: grade}}",
                       lambda v: isinstance(v, dict) and all(type(g) is int for g in v.values()))
        run = parsed("run", "{query id: [[document id, score], …]}",
                     lambda v: isinstance(v, list) and all(isinstance(h, list) and len(h) == 2 and isinstance(h[0], str)
                                                           and _is_number(h[1]) for h in v))
        per_query = parsed("per_query", "{query id: {metric: number}}", lambda v: isinstance(v, dict))
        for qid, values in per_query.items():  # a number each (whether in range, the comparisons check)
            for metric in SNAPSHOT_METRICS:
                if not _is_number(values.get(metric)):
                    raise RetrievalError(f"Snapshot {name!r} is damaged: its {metric} of query {qid!r} is "
                                         f"{values.get(metric)!r}, not a number between 0 and 1; delete it "
                                         f"(snapshot delete {name})")
        encoders = None if row.get("encoders") is None else parsed("encoders", "{model: backend}",
                                                                   lambda v: isinstance(v, str))
        try:
            return cls(name=name, collection=row["collection"], created=row["created"],
                       table_version=int(row["table_version"]), doc_count=int(row["doc_count"]), config=config,
                       query_set=row["query_set"], queries=queries, qrels=qrels,
                       judgments_key=row["judgments_key"],
                       run={q: [(d, float(s)) for d, s in hits] for q, hits in run.items()},
                       per_query=per_query, encoders=encoders)
        except (KeyError, TypeError, ValueError) as exc:
            raise damaged(f"{type(exc).__name__}: {exc}") from None

    def to_json_dict(self) -> dict:
        """The whole snapshot as plain JSON values (what `export_json` writes)."""
        return {"name": self.name, "collection": self.collection, "created": self.created,
                "table_version": self.table_version, "doc_count": self.doc_count, "config": self.config.to_dict(),
                "query_set": self.query_set, "judgments_key": self.judgments_key,
                "encoders": self.encoders,
                "mean": self.mean, "per_query": self.per_query, "queries": self.queries, "qrels": self.qrels,
                "run": {q: [[d, s] for d, s in hits] for q, hits in self.run.items()}}

    def trec_run(self) -> str:
        """The run in TREC format (`qid Q0 doc rank score tag`, `evaluate.trec_run`), the
        snapshot's name as the tag (spaces as '_': a TREC field has none). The scores written are
        rank-based (n − rank + 1, `evaluate.run_from_rankings`), not the scores shown: trec_eval
        orders by score, ties by document id descending, and ignores the rank column, so shown
        scores that tie would be scored in another order than the snapshot's."""
        return trec_run(run_from_rankings(self.rankings), self.name.replace(" ", "_"))


def run_of(workbench, collection: str, queries: Mapping[str, str], config: SearchConfig) -> Scored:
    """Each query searched as a search shows it (the config's plan, explained, cut at the config's
    depth: `evaluate.evaluation_config`): ids best first with the score shown (the reranked score
    for a reranked head, else the fused score)."""
    run: Scored = {}
    for qid, result in zip(queries, searched(workbench, collection, list(queries.values()),
                                             evaluation_config(config)), strict=True):
        run[qid] = [(fused.doc_id, float(reranked.final_score if reranked is not None else fused.score))
                    for fused, reranked in result.final_ranking()]
    return run


def evaluate_scored(workbench, collection: str, queries: Mapping[str, str], qrels: Qrels, config: SearchConfig
                    ) -> tuple[Scored, dict[str, dict[str, float]]]:
    """The judged queries' run (`run_of`) and their metrics."""
    judged = [q for q in qrels if qrels[q] and q in queries]
    if not judged:
        raise RetrievalError("None of the judged queries has a query text")
    run = run_of(workbench, collection, {q: queries[q] for q in judged}, config)
    return run, score_rankings({q: [d for d, _ in hits] for q, hits in run.items()}, {q: qrels[q] for q in judged})


def query_encoders(info: CollectionInfo, config: SearchConfig) -> dict[str, str]:
    """Model → encoder backend (`embed.backend_for`) of each model whose query vectors a run of
    `config` on the collection `info` computes: its model, and its cross-lingual one when
    language-aware fusion can pick it; {} when no source of `config` embeds a query. The same
    config, corpus and judgments give other vectors on another backend, so a diff names it."""
    if not any(SOURCES[name].embeds_query for name in config.sources if name in SOURCES):
        return {}
    models = [info.model, *([info.xl_model] if info.xl_model and config.language_aware else [])]
    return {model: backend_for(model) for model in models}


def _by_name(rows: Sequence[Mapping]) -> dict[str, list[Mapping]]:
    """Rows grouped by their name, in order."""
    groups: dict[str, list[Mapping]] = {}
    for row in rows:
        groups.setdefault(row["name"], []).append(row)
    return groups


def _shared_name(name: str, rows: Sequence[Mapping]) -> RetrievalError:
    """The error for a name `rows` (two or more) share: which one is meant cannot be told."""
    created = ", ".join(sorted(str(r["created"]) for r in rows))
    return RetrievalError(f"{len(rows)} snapshots are named {name!r} (created {created}): 'snapshot delete {name}' "
                          f"deletes {'both' if len(rows) == 2 else 'all of them'}, then take it again")


def take_snapshot(workbench, collection: str, name: str, config: SearchConfig, queries: Mapping[str, str],
                  qrels: Qrels, query_set: str, version: int | None = None) -> Snapshot:
    """Evaluate `config` on the judged queries now, as a `Snapshot` (not kept: `SnapshotStore.add`).
    `query_set` names where the queries came from (a query set, a BEIR folder): diffs pair only
    snapshots of one. The snapshot's table version is the one evaluated (`version`, read with
    the judgments, else now): when a write lands during the evaluation, it is evaluated again at
    that version (time travel)."""
    validate_snapshot_name(name)
    config.validate()
    qrels = {q: dict(d) for q, d in qrels.items() if d and q in queries}
    if not qrels:
        raise RetrievalError(f"{query_set!r} of {collection!r} has no judged query to evaluate")
    version = workbench.store.version(collection) if version is None else version
    run, per_query = evaluate_scored(workbench, collection, queries, qrels, config)
    then = workbench.at_version(collection, version)
    if workbench.store.version(collection) != version:  # versions only grow: equal means no write between
        run, per_query = evaluate_scored(then, collection, queries, qrels, config)
    doc_count = then.info(collection).doc_count  # the version's own row count
    created = datetime.now(UTC).isoformat(timespec="microseconds")  # orders snapshots made within a second
    return Snapshot(name=name, collection=collection, created=created, table_version=int(version),
                    doc_count=doc_count, config=config, query_set=query_set,
                    queries={q: queries[q] for q in qrels}, qrels=qrels, judgments_key=judgments_key(qrels),
                    run=run, per_query=per_query, encoders=query_encoders(then.info(collection), config))


def rerun_at(workbench, collection: str) -> Rerun:
    """How a diff re-runs a config on another version of the collection (`snapshot_diff.causes_of`):
    `run_of` on `Workbench.at_version`, each run kept in the Workbench's run cache. A version a
    compaction removed is a `RetrievalError`."""
    def rerun(config: SearchConfig, version: int, queries: Mapping[str, str]) -> dict[str, list[str]]:
        past = workbench.at_version(collection, version)
        key = (collection, past.state(collection), config.to_json(), tuple(queries.items()))
        run = workbench.caches.runs.get_or_create(key, lambda: run_of(past, collection, queries, config))
        return {q: [doc_id for doc_id, _ in hits] for q, hits in run.items()}

    return rerun


class SnapshotStore:
    """The snapshots of one `Store` (see the module docstring). A damaged row is named, never a
    traceback: `get` refuses it, `list` leaves it out and says why in `problems`, `delete`
    removes it; so are names two rows share (written around `add`, which refuses a taken name);
    a table that cannot be read is one clear error (`KeyedTable`)."""

    def __init__(self, store: Store):
        self.store = store
        self.table = KeyedTable(store, SNAPSHOTS_TABLE, SNAPSHOTS_SCHEMA, "name")
        self.problems: list[str] = []  # what the last `list` left out, and why

    def names(self) -> list[str]:
        """Snapshot names, oldest first."""
        rows = self.table.rows(columns=["name", "created"])
        return [r["name"] for r in sorted(rows, key=lambda r: (str(r["created"]), str(r["name"])))]

    def list(self, collection: str | None = None) -> list[Snapshot]:
        """Every readable snapshot (of `collection`), oldest first; damaged rows and names two
        rows share are left out, each with a sentence in `problems`."""
        rows = self.table.rows(f"collection = {sql_string(collection)}" if collection else None)
        rows.sort(key=lambda r: (str(r["created"]), str(r["name"])))
        self.problems = []
        kept = []
        for name, group in _by_name(rows).items():
            if len(group) > 1:
                self.problems.append(str(_shared_name(name, group)))
                continue
            try:
                kept.append(Snapshot.from_row(group[0]))
            except RetrievalError as exc:
                self.problems.append(str(exc))
        return sorted(kept, key=lambda s: (s.created, s.name))

    def get(self, name: str) -> Snapshot:
        validate_snapshot_name(name)
        rows = self.table.rows(f"name = {sql_string(name)}")
        if not rows:
            known = ", ".join(self.names()) or "none yet"
            raise RetrievalError(f"No snapshot named {name!r} (snapshots: {known})")
        if len(rows) > 1:
            raise _shared_name(name, rows)
        return Snapshot.from_row(rows[0])

    @counts_as_write
    def add(self, snapshot: Snapshot) -> Snapshot:
        """Keep `snapshot`; a name already taken is an error (a snapshot is never overwritten)."""
        with self.table.lock():
            self.check_free(snapshot.name)
            self.table.add(snapshot.to_row())  # an older table gains the columns it lacks first
        return snapshot

    def create(self, workbench, collection: str, name: str, config: SearchConfig | None = None,
               query_set: str = "default", source: str | None = None) -> Snapshot:
        """Evaluate `config` on the collection's query set now and keep it as snapshot `name`;
        `source`: the judgment source (`JudgmentStore.qrels`; None: the raters' consensus), named in
        the snapshot's query set as "SET (SOURCE)" so that only snapshots judged alike are diffed."""
        self.check_free(name)  # before the work; `add` checks again under the lock
        queries, qrels, version = JudgmentStore(workbench.store).judged_state(collection, query_set, source=source)
        return self.add(take_snapshot(workbench, collection, name, config or SearchConfig(), queries, qrels,
                                      judged_label(query_set, source), version))

    def check_free(self, name: str) -> None:
        """A clear error unless `name` is a valid name no snapshot has."""
        validate_snapshot_name(name)
        if self.table.has(name):
            raise RetrievalError(f"A snapshot named {name!r} already exists; snapshots are never overwritten, "
                                 "choose another name")

    @counts_as_write
    def rename(self, name: str, new_name: str) -> None:
        validate_snapshot_name(new_name)
        self.get(name)
        with self.table.lock():
            if self.table.has(new_name):
                raise RetrievalError(f"A snapshot named {new_name!r} already exists")
            self.table.rename(name, new_name)

    @counts_as_write
    def delete(self, name: str) -> None:
        """Remove snapshot `name` (also a damaged one; every row, when two share the name)."""
        validate_snapshot_name(name)
        if not self.table.has(name):
            raise RetrievalError(f"No snapshot named {name!r} (snapshots: {', '.join(self.names()) or 'none yet'})")
        self.table.delete(name)

    def export_json(self, name: str) -> str:
        return json.dumps(self.get(name).to_json_dict(), ensure_ascii=False, indent=2)

    def export_trec(self, name: str) -> str:
        return self.get(name).trec_run()


def judged_label(query_set: str, source: str | None) -> str:
    """How a snapshot names what it was judged with: the set, and a source other than the consensus."""
    return query_set if source in (None, CONSENSUS) else f"{query_set} ({source})"
