"""Snapshots (retrieval/evaluation/snapshots.py) and their diff (retrieval/evaluation/snapshot_diff.py) on a real
six-document collection with real models: what a snapshot keeps equals the evaluation's own
figures, the names and exports behave, and the diff's causes name what changed and add up."""

from __future__ import annotations

import json

import pytest
from corpora import ANIMALS

from retrieval.evaluation.evaluate import evaluate_collection
from retrieval.evaluation.snapshot_diff import diff, diff_many, result_lists
from retrieval.evaluation.snapshots import (
    SNAPSHOT_METRICS,
    SnapshotStore,
    judged_at,
    judgments_key,
    rerun_at,
    score_rankings,
)
from retrieval.indexing.pipeline import add_documents, create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.judging.judgments import JudgmentStore
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.types import RetrievalError

RATINGS = [("small animals that hunt mice", "cat", 2), ("small animals that hunt mice", "fox", 1),
           ("what sees well at night", "owl", 2), ("what sees well at night", "cat", 1),
           ("who makes honey", "bee", 2)]
BM25_ONLY = SearchConfig(weights={"bm25": 1.0, "dense": 0.0})
MORE = b"id,title,text\nbat,Bats,\"Bats hunt insects at night with echoes.\"\n"


@pytest.fixture
def workbench(tmp_path):
    wb = Workbench(Store(str(tmp_path / "db")))
    create_collection(wb.store, "animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    judgments = JudgmentStore(wb.store)
    for query, doc_id, grade in RATINGS:
        judgments.rate("animals", "default", query, doc_id, grade)
    return wb


def test_a_snapshot_keeps_what_the_evaluation_computed(workbench):
    snapshots = SnapshotStore(workbench.store)
    config = SearchConfig(top_k=3)
    snap = snapshots.create(workbench, "animals", "before", config)
    judgments = JudgmentStore(workbench.store)
    queries, qrels = judgments.queries("animals", "default"), judgments.qrels("animals", "default")
    report = evaluate_collection(workbench, "animals", queries, qrels, config, explained=True)
    assert snap.rankings == {q: sorted(r, key=r.get, reverse=True) for q, r in report.runs["hybrid"].items()}
    for q, values in snap.per_query.items():
        for metric in ("ndcg@10", "recall@100"):
            assert values[metric] == pytest.approx(report.per_query["hybrid"][q][metric], abs=1e-12)
        assert values["judged@10"] == len(set(snap.rankings[q][:10]) & set(qrels[q])) / 10
    # the depth cut, not top-K: all six documents are ranked, each with the score the search showed
    assert all(len(hits) == 6 for hits in snap.run.values())
    shown = workbench.search("animals", "who makes honey", SearchConfig(top_k=6)).outcome.results
    bee_query = judgments.query_id("animals", "default", "who makes honey")
    assert snap.run[bee_query] == [(r.doc_id, pytest.approx(r.score)) for r in shown]
    assert (snap.table_version, snap.doc_count) == (workbench.store.table("animals").version, 6)
    assert snap.judgments_key == judgments_key(qrels) and snap.config == config
    assert snapshots.get("before") == snap  # what was stored is what was made
    assert set(snap.mean) == set(SNAPSHOT_METRICS)


def test_a_snapshot_taken_during_a_write_keeps_the_state_after_it(workbench):
    """A snapshot reads the judgments and the version under the collection's writer lock: one taken
    while a write holds it (here a rating and an add, between their commits) waits for it and keeps
    what it committed, never the half between."""
    import threading

    store, judgments = workbench.store, JudgmentStore(workbench.store)
    holding, release = threading.Event(), threading.Event()

    def write():
        with store.writer_lock("animals"):
            judgments.rate("animals", "default", "what hunts at night", "owl", 2)
            holding.set()
            release.wait(30)
            add_documents(store, "animals", parse_bytes(MORE, "more.csv"))

    writer = threading.Thread(target=write)
    writer.start()
    holding.wait(30)
    taken: list = []
    snapshot = threading.Thread(
        target=lambda: taken.append(SnapshotStore(store).create(workbench, "animals", "during")))
    snapshot.start()
    snapshot.join(0.5)
    assert snapshot.is_alive() and not taken  # waiting for the write
    release.set()
    writer.join(60)
    snapshot.join(60)
    snap = taken[0]
    assert (snap.table_version, snap.doc_count) == (store.version("animals"), 7)
    assert len(snap.per_query) == 4 and snap.judgments_key == judgments_key(judgments.qrels("animals", "default"))
    # a write that holds the collection longer (an ingest) is not waited for: the snapshot says so
    refused: list = []

    def snapshot_with_short_wait():
        try:
            judgments.judged_state("animals", "default", wait=0.2)
        except RetrievalError as exc:
            refused.append(str(exc))

    with store.writer_lock("animals"):
        other = threading.Thread(target=snapshot_with_short_wait)
        other.start()
        other.join(30)
    assert refused == ["A write to 'animals' is in progress (an ingest, a clear …): take the snapshot when it has "
                       "finished"]


def test_judged_at_ten_by_hand():
    assert judged_at(["a", "x", "b", "y"], {"a", "b", "z"}) == 0.2
    assert judged_at([f"d{i}" for i in range(12)], {"d10", "d11"}) == 0.0  # past the first ten


def test_names_are_unique_and_snapshots_are_renamed_deleted_and_exported(workbench):
    snapshots = SnapshotStore(workbench.store)
    snapshots.create(workbench, "animals", "base line", SearchConfig())
    with pytest.raises(RetrievalError, match="'base line' already exists; snapshots are never overwritten"):
        snapshots.create(workbench, "animals", "base line", BM25_ONLY)
    with pytest.raises(RetrievalError, match=r"Invalid snapshot name '\.\./x'"):
        snapshots.create(workbench, "animals", "../x")
    with pytest.raises(RetrievalError, match="No query set named 'other'"):
        snapshots.create(workbench, "animals", "other", query_set="other")
    snapshots.rename("base line", "v1")
    assert snapshots.names() == ["v1"]
    with pytest.raises(RetrievalError, match=r"No snapshot named 'base line' \(snapshots: v1\)"):
        snapshots.get("base line")
    trec = snapshots.export_trec("v1").splitlines()
    first = trec[0].split()
    assert len(first) == 6 and first[1] == "Q0" and first[3] == "1" and first[5] == "v1"
    exported = json.loads(snapshots.export_json("v1"))
    assert exported["name"] == "v1" and exported["config"] == SearchConfig().to_dict()
    assert set(exported["mean"]) == set(SNAPSHOT_METRICS)
    snapshots.delete("v1")
    assert snapshots.names() == []
    with pytest.raises(RetrievalError, match="No snapshot named 'v1' \\(snapshots: none yet\\)"):
        snapshots.delete("v1")


def test_a_snapshot_against_itself_changes_nothing(workbench):
    snap = SnapshotStore(workbench.store).create(workbench, "animals", "a")
    same = diff(snap, snap)
    assert (same["delta"], same["p_value"], same["causes"], same["changed"]) == (0.0, 1.0, {}, [])
    assert same["a"]["ci95"] == same["b"]["ci95"] and same["ties"] == 3


def test_a_config_change_is_the_whole_cause(workbench):
    snapshots = SnapshotStore(workbench.store)
    a = snapshots.create(workbench, "animals", "hybrid")
    b = snapshots.create(workbench, "animals", "bm25", BM25_ONLY)
    d = diff(a, b, "ndcg@10")
    expected = sum(b.per_query[q]["ndcg@10"] - a.per_query[q]["ndcg@10"] for q in a.per_query) / 3
    assert d["delta"] == pytest.approx(expected)
    assert d["changed"] == ["config"] and d["causes"] == {"config": pytest.approx(expected)}
    assert d["a"]["ci95"][0] <= d["a"]["value"] <= d["a"]["ci95"][1]
    for entry in d["winners"] + d["losers"]:
        assert entry["delta"] == pytest.approx(entry["b"] - entry["a"])
        assert entry["causes"] == {"config": entry["delta"]}


SPAM = (b"id,title,text\nspam,All of them,\"Small animals that hunt mice, what sees well at night, "
        b"who makes honey: all of them, here.\"\n")


def test_corpus_config_and_judgments_changed_each_cause_has_its_share(workbench):
    """The end-to-end case: snapshot; add a document, change the config, change judgments; snapshot
    again. A: one candidate per source (a bad config). B: the default config (better), a page that
    matches every query and is relevant to none (worse), and the honey query's only relevant
    document re-rated 0 (worse: nothing relevant is left to find). The three shares have those
    signs and add up to Δ, and each of the eight mixes is the metric of a real run."""
    snapshots = SnapshotStore(workbench.store)
    a = snapshots.create(workbench, "animals", "before", SearchConfig(depth=1))
    add_documents(workbench.store, "animals", parse_bytes(SPAM, "spam.csv"))
    judgments = JudgmentStore(workbench.store)
    judgments.rate("animals", "default", "who makes honey", "bee", 0)
    b = snapshots.create(workbench, "animals", "after", SearchConfig())
    d = diff(a, b, "ndcg@10", rerun=rerun_at(workbench, "animals"))
    assert d["changed"] == ["config", "corpus", "judgments"] and d["notes"] == []
    causes = d["causes"]
    assert list(causes) == ["config", "corpus", "judgments"]
    assert causes["config"] > 0 > causes["corpus"] and causes["judgments"] < 0
    assert sum(causes.values()) == pytest.approx(d["delta"], abs=1e-12)
    # The mixes, by hand: A's config on B's corpus is a search of today's collection; B's config
    # on A's corpus a search of version `a.table_version`.
    common = list(a.per_query)
    queries = {q: a.queries[q] for q in common}
    runs = {frozenset(): a.rankings, frozenset({"config", "corpus"}): b.rankings,
            frozenset({"corpus"}): {q: [r.doc_id for r in workbench.search("animals", text, SearchConfig(
                depth=1, top_k=100)).outcome.results] for q, text in queries.items()},
            frozenset({"config"}): {q: [r.doc_id for r in workbench.at_version("animals", a.table_version).search(
                "animals", text, SearchConfig(top_k=100)).outcome.results] for q, text in queries.items()}}

    def f(mix: frozenset) -> float:
        judged_by = b if "judgments" in mix else a
        scored = score_rankings(runs[mix - {"judgments"}], {q: judged_by.qrels[q] for q in common})
        return sum(scored[q]["ndcg@10"] for q in common) / len(common)

    config, corpus, judged = (frozenset({x}) for x in ("config", "corpus", "judgments"))
    # φ_config = Σ over the orders: weights 1/3 (nothing before), 1/6 (one of two before), 1/3 (both before)
    phi_config = (f(config) - f(frozenset())) / 3 + (f(config | corpus) - f(corpus)) / 6 \
        + (f(config | judged) - f(judged)) / 6 + (f(config | corpus | judged) - f(corpus | judged)) / 3
    assert causes["config"] == pytest.approx(phi_config, abs=1e-12)
    assert f(frozenset()) == pytest.approx(d["a"]["value"]) and f(config | corpus | judged) == pytest.approx(
        d["b"]["value"])
    for entry in d["winners"] + d["losers"]:
        assert sum(entry["causes"].values()) == pytest.approx(entry["delta"], abs=1e-12)
    honey = judgments.query_id("animals", "default", "who makes honey")
    [honey_entry] = [e for e in d["losers"] if e["query_id"] == honey]
    assert min(honey_entry["causes"], key=honey_entry["causes"].get) == "judgments"  # got worse by the re-rating
    # Without a search the two retrieval causes stay one, and the diff says why.
    merged = diff(a, b, "ndcg@10")
    assert set(merged["causes"]) == {"config+corpus", "judgments"}
    assert merged["notes"] == ["config and corpus not told apart (re-running one config on the other version: "
                               "no search was allowed)"]
    assert sum(merged["causes"].values()) == pytest.approx(d["delta"], abs=1e-12)


def test_snapshots_that_cannot_be_paired_are_refused(workbench):
    snapshots = SnapshotStore(workbench.store)
    a = snapshots.create(workbench, "animals", "a")
    JudgmentStore(workbench.store).rate("animals", "other", "who makes honey", "bee", 1)
    b = snapshots.create(workbench, "animals", "b", query_set="other")
    with pytest.raises(RetrievalError, match="evaluated different query sets \\('default', 'other'\\)"):
        diff(a, b)
    with pytest.raises(RetrievalError, match="metric must be one of"):
        diff(a, a, "ndcg@7")
    with pytest.raises(RetrievalError, match="at least two snapshots"):
        diff_many([a])


def test_snapshots_outlive_their_collection_and_say_so(workbench, capsys):
    """A snapshot is a record: after its collection is deleted the diff still runs on the kept runs
    and judgments, and says why config and corpus cannot be told apart; a new snapshot of it is a
    clear error."""
    from retrieval.cli import main as cli

    snapshots = SnapshotStore(workbench.store)
    snapshots.create(workbench, "animals", "a", SearchConfig(depth=1))
    add_documents(workbench.store, "animals", parse_bytes(MORE, "more.csv"))
    snapshots.create(workbench, "animals", "b")
    workbench.delete("animals")
    db = workbench.store.uri
    assert cli.main(["--db", db, "snapshot", "diff", "a", "b"]) == 0
    out = capsys.readouterr().out
    assert "  config+corpus: " in out
    assert "  note: config and corpus not told apart (re-running one config on the other version: No collection " \
           "named 'animals'" in out
    assert cli.main(["--db", db, "snapshot", "create", "animals", "--name", "c"]) == 2
    assert "No collection named 'animals'" in capsys.readouterr().err


def test_several_snapshots_get_holm_adjusted_p_values(workbench):
    snapshots = SnapshotStore(workbench.store)
    a = snapshots.create(workbench, "animals", "a")
    b = snapshots.create(workbench, "animals", "b", BM25_ONLY)
    c = snapshots.create(workbench, "animals", "c", SearchConfig(weights={"bm25": 0.0, "dense": 1.0}))
    diffs = diff_many([a, b, c])
    ps = sorted(d["p_value"] for d in diffs)
    assert sorted(d["p_holm"] for d in diffs) == pytest.approx([min(1, 2 * ps[0]), min(1, max(2 * ps[0], ps[1]))])


def test_the_cli_creates_lists_diffs_and_exports(workbench, capsys, tmp_path):
    from retrieval.cli import main as cli

    db = workbench.store.uri
    config = tmp_path / "bm25.json"
    config.write_text(BM25_ONLY.to_json(), encoding="utf-8")
    assert cli.main(["--db", db, "snapshot", "create", "animals", "--name", "hybrid"]) == 0
    assert cli.main(["--db", db, "snapshot", "create", "animals", "--name", "bm25", "--config", str(config)]) == 0
    capsys.readouterr()
    assert cli.main(["--db", db, "snapshot", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in listed] == ["hybrid", "bm25"]
    assert cli.main(["--db", db, "snapshot", "diff", "hybrid", "bm25", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    store = SnapshotStore(Store(db))
    expected = diff(store.get("hybrid"), store.get("bm25"))
    assert printed == json.loads(json.dumps({**expected, "p_holm": expected["p_value"]}))  # Holm of one test: p
    assert {"metric", "a", "b", "delta", "p_value", "winners", "losers", "causes"} <= set(printed)
    assert set(printed["a"]) == {"name", "value", "ci95"} and printed["causes"] == {"config": printed["delta"]}
    assert cli.main(["--db", db, "snapshot", "export", "bm25", "--trec"]) == 0
    assert capsys.readouterr().out == store.get("bm25").trec_run()
    assert cli.main(["--db", db, "snapshot", "diff", "hybrid", "nope"]) == 2
    assert "No snapshot named 'nope' (snapshots: hybrid, bm25)" in capsys.readouterr().err
    assert cli.main(["--db", db, "snapshot", "create", "animals"]) == 2
    assert "'snapshot create' needs --name NAME" in capsys.readouterr().err


@pytest.fixture
def beir_folder(tmp_path):
    """The bundled sample's first 12 English paragraphs and the questions judged on them: a BEIR folder."""
    from pathlib import Path

    source = Path(__file__).resolve().parents[2] / "sample_data" / "xquad"
    folder = tmp_path / "xq12"
    (folder / "qrels").mkdir(parents=True)
    docs = [line for line in (source / "corpus.jsonl").read_text("utf-8").splitlines()
            if json.loads(line)["_id"].startswith("en-")][:12]
    keep = {json.loads(d)["_id"] for d in docs}
    qrel_lines = (source / "qrels" / "test.tsv").read_text("utf-8").splitlines()
    kept = [line for line in qrel_lines[1:] if line.split("\t")[1] in keep]
    asked = {line.split("\t")[0] for line in kept}
    queries = [q for q in (source / "queries.jsonl").read_text("utf-8").splitlines() if json.loads(q)["_id"] in asked]
    (folder / "corpus.jsonl").write_text("\n".join(docs) + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("\n".join([qrel_lines[0], *kept]) + "\n", encoding="utf-8")
    return folder


def test_the_ci_gate_exits_0_when_as_good_and_2_when_worse(tmp_path, beir_folder, capsys):
    from retrieval.cli import main as cli

    db = str(tmp_path / "gate-db")
    run = lambda *extra: cli.main(["--db", db, "evaluate", str(beir_folder), *extra])  # noqa: E731
    assert run("--snapshot", "base") == 0
    assert "kept snapshot 'base'" in capsys.readouterr().err
    assert run("--baseline", "base", "--fail-if-worse", "0.01") == 0  # the same config: Δ = 0, p = 1
    assert "(Δ +0.0000" in capsys.readouterr().err
    # One candidate per source (a config saved by name): every query whose first relevant
    # paragraph was below rank 1 loses.
    Workbench(Store(db)).configs.save("one candidate", SearchConfig(depth=1))
    assert run("--baseline", "base", "--fail-if-worse", "0.01", "--config", "one candidate", "--snapshot",
               "shallow") == 2
    err = capsys.readouterr().err
    assert "worse than the baseline by more than 0.01 (p < 0.05)" in err
    store = SnapshotStore(Store(db))
    d = diff(store.get("base"), store.get("shallow"))
    assert d["delta"] < -0.01 and d["p_value"] < 0.05 and d["losers"]
    assert all(f"  {e['delta']:+.4f}  {e['query_id']}  {e['query']}" in err for e in d["losers"])  # named
    # …but not when the margin is larger than the fall
    assert run("--baseline", "base", "--fail-if-worse", "0.99", "--depth", "1") == 0
    assert run("--fail-if-worse", "0.01") == 2
    assert "--fail-if-worse needs --baseline NAME" in capsys.readouterr().err
    assert run("--baseline", "nope") == 2
    err = capsys.readouterr().err
    assert "No snapshot named 'nope' (snapshots: base, shallow)" in err and "queries" not in err  # before the work
    assert run("--snapshot", "base") == 2
    assert "A snapshot named 'base' already exists" in capsys.readouterr().err


def test_a_damaged_baseline_is_an_error_not_a_pass(tmp_path, beir_folder, capsys):
    import dataclasses

    from retrieval.cli import main as cli

    db = str(tmp_path / "gate-db")
    run = lambda *extra: cli.main(["--db", db, "evaluate", str(beir_folder), *extra])  # noqa: E731
    assert run("--snapshot", "base") == 0
    store = SnapshotStore(Store(db))
    base = store.get("base")
    first = next(iter(base.per_query))
    for name, value in (("nan-base", float("nan")), ("minus-base", -1.0), ("text-base", "0.5")):
        per_query = {**base.per_query, first: {**base.per_query[first], "ndcg@10": value}}
        store.add(dataclasses.replace(base, name=name, per_query=per_query))
    capsys.readouterr()
    for name, shown in (("nan-base", "nan"), ("minus-base", "-1.0"), ("text-base", "'0.5'")):
        assert run("--baseline", name, "--fail-if-worse", "0.01") == 2
        err = capsys.readouterr().err
        assert (f"Snapshot {name!r} is damaged: its ndcg@10 of query {first!r} is {shown}, not a number between 0 "
                "and 1") in err
        assert "queries" not in err and "Δ" not in err  # refused before the work, never a "Δ +nan"
    assert run("--baseline", "base", "--metric", "ndcg@7") == 2
    assert "metric must be one of ndcg@10, precision@10, recall@100, mrr, judged@10, got 'ndcg@7'" in \
        capsys.readouterr().err
    with pytest.raises(RetrievalError, match="'nan-base' is damaged"):
        diff(store.get("nan-base"), base)
    assert diff(store.get("minus-base"), base, metric="mrr")["n_queries"] == len(base.per_query)  # only its metric


def test_a_gate_that_cannot_fail_says_so_and_fails(tmp_path, beir_folder, capsys):
    from retrieval.cli import main as cli
    from retrieval.evaluation.paired import gate_blind_spot

    db = str(tmp_path / "gate-db")
    run = lambda *extra: cli.main(["--db", db, "evaluate", str(beir_folder), "--max-queries", "2", *extra])  # noqa: E731
    assert run("--snapshot", "two") == 0
    Workbench(Store(db)).configs.save("one candidate", SearchConfig(depth=1))
    capsys.readouterr()
    # 2 paired queries: the smallest p the sign-flip test can give is 2/4 = 0.5, so no fall can fail the gate
    assert run("--baseline", "two", "--fail-if-worse", "0.01", "--config", "one candidate") == 2
    err = capsys.readouterr().err
    assert ("The gate cannot fail: 2 queries are paired with the baseline and 2 of them can fall (score above 0): "
            "the smallest p the paired randomization test can give on 2 is 0.5, not below the gate's 0.05") in err
    assert "--allow-underpowered" in err
    assert run("--baseline", "two", "--fail-if-worse", "0.01", "--config", "one candidate",
               "--allow-underpowered") == 0
    assert "warning: the gate cannot fail" in capsys.readouterr().err
    assert run("--baseline", "two", "--allow-underpowered") == 2
    assert "--allow-underpowered needs --fail-if-worse MARGIN" in capsys.readouterr().err
    # by hand: 5 queries that can fall give 2/32 ≥ 0.05, 6 give 2/64 < 0.05; a query at 0 cannot fall
    assert gate_blind_spot([0.5] * 5, 0.05) is not None and gate_blind_spot([0.5] * 6, 0.05) is None
    assert gate_blind_spot([0.5] * 5 + [0.0] * 10, 0.05).startswith("15 queries are paired with the baseline and 5")


def test_the_waterfall_axis_starts_near_the_levels_not_at_zero():
    """A +0.0176 change on 0.9 drew as a 2-pixel sliver on an axis from 0: the axis now spans
    the levels A, A + each share, B (`waterfall_range`), and the report says where it starts."""
    import re

    from retrieval.evaluation.snapshot_report import waterfall_range, waterfall_svg

    d = {"metric": "ndcg@10", "a": {"name": "A", "value": 0.9}, "b": {"name": "B", "value": 0.9176},
         "causes": {"config": 0.0176}}
    low, high = waterfall_range(d)
    assert (low, high) == (pytest.approx(0.9 - 0.0176), pytest.approx(0.9176 + 0.0176 / 4))
    assert waterfall_range({**d, "b": {"name": "B", "value": 0.9}, "causes": {"config": 0.0}}) == (
        pytest.approx(0.89), pytest.approx(0.9025))  # no change: a span of 0.01
    assert waterfall_range({**d, "a": {"name": "A", "value": 0.001}, "b": {"name": "B", "value": 0.002},
                            "causes": {"config": 0.001}})[0] == 0.0  # never below 0
    svg = waterfall_svg(d)
    heights = [float(h) for h in re.findall(r'<rect [^>]*height="([0-9.]+)"', svg)]
    plot = 236 - 76
    assert heights[1] == pytest.approx(plot * 0.0176 / (high - low), abs=0.1) and heights[1] > plot / 3
    assert "nDCG@10 axis from 0.8824 (not from 0)" in svg


def test_the_html_report_stands_alone_and_keeps_user_text_literal(workbench, tmp_path, capsys):
    import re

    from retrieval.cli import main as cli
    from retrieval.evaluation.snapshot_report import report_html

    db = workbench.store.uri
    assert cli.main(["--db", db, "snapshot", "create", "animals", "--name", "hybrid"]) == 0
    assert cli.main(["--db", db, "snapshot", "create", "animals", "--name", "bm25", "--weights",
                     "bm25=1,dense=0"]) == 0
    out = tmp_path / "report.html"
    assert cli.main(["--db", db, "snapshot", "report", "hybrid", "bm25", "--html", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    store = SnapshotStore(Store(db))
    a, b = store.get("hybrid"), store.get("bm25")
    d = diff(a, b)
    assert page == report_html(d, a, b)
    assert f"{d['a']['value']:.4f} → {d['b']['value']:.4f} (Δ {d['delta']:+.4f}, worse)" in page
    # in the app's words: the sources' labels, not a Python dict with 'dense'; the metric as the app spells it
    assert "Config: weights: BM25 0.4, vector 0.6 → BM25 1, vector 0." in page
    assert "dense" not in page and "{" not in page.split("<body>")[-1]
    assert f"<h1>nDCG@10: {a.name} → {b.name}</h1>" in page and "ndcg@10" not in page
    assert "Corpus: unchanged" in page and "Judgments: unchanged (3 queries, 5 judgments)." in page
    assert "<svg" in page and page.count("<rect") == 3  # A, the config's share, B
    # nothing to fetch: no script, no external reference of any kind
    assert not re.search(r"<script|src=|href=|url\(|@import|https?:", page)
    loser = d["losers"][0]
    _, after = result_lists(a, b, loser["query_id"], k=5)  # B's side carries each document's move
    moved = [r for r in after if r["change"] != "="]
    assert moved and all(f" {r['change']}</li>" in page for r in moved)
    marked = {**d, "losers": [{**loser, "query": "<img src=x onerror=alert(1)> **q**"}]}
    assert "&lt;img src=x onerror=alert(1)&gt; **q**" in report_html(marked, a, b)
    assert cli.main(["--db", db, "snapshot", "report", "hybrid", "bm25"]) == 2
    assert "'snapshot report' needs --html FILE" in capsys.readouterr().err


def test_a_snapshot_records_the_backend_of_its_query_vectors(workbench):
    """What computed the query vectors is kept (the same config, corpus and judgments give other
    vectors on another backend); a BM25-only run computes none."""
    snapshots = SnapshotStore(workbench.store)
    hybrid = snapshots.create(workbench, "animals", "hybrid")
    # the collection's model, and its cross-lingual one (language-aware fusion may pick it)
    both = {"all-MiniLM-L6-v2": "onnx-int8", "multilingual-e5-small": "onnx-int8"}
    assert hybrid.encoders == both == snapshots.get("hybrid").encoders
    assert json.loads(snapshots.export_json("hybrid"))["encoders"] == both
    unaware = snapshots.create(workbench, "animals", "unaware", SearchConfig(language_aware=False))
    assert unaware.encoders == {"all-MiniLM-L6-v2": "onnx-int8"}
    bm25 = SearchConfig(weights={"bm25": 1.0})
    assert snapshots.create(workbench, "animals", "bm25", bm25).encoders == {}
    assert snapshots.get("bm25").encoders == {}


def test_an_older_snapshots_table_gains_the_encoders_column_and_reads_none(workbench):
    from retrieval.evaluation.snapshots import SNAPSHOTS_TABLE

    snapshots = SnapshotStore(workbench.store)
    snapshots.create(workbench, "animals", "old")
    db = workbench.store.db
    rows = db.open_table(SNAPSHOTS_TABLE).to_arrow().drop_columns(["encoders"])  # as written before it
    db.drop_table(SNAPSHOTS_TABLE)
    db.create_table(SNAPSHOTS_TABLE, rows)
    assert snapshots.get("old").encoders is None  # not recorded
    new = snapshots.create(workbench, "animals", "new")  # the add adds the column, null for "old"
    assert "encoders" in db.open_table(SNAPSHOTS_TABLE).schema.names
    assert snapshots.get("old").encoders is None and snapshots.get("new").encoders == new.encoders
    d = diff(snapshots.get("old"), new)
    assert d["changed"] == [] and d["notes"] == [
        "'old' does not record its query encoder backend (taken before snapshots did: torch, unless "
        "$WORKBENCH_ENCODER_BACKEND was set); 'new''s: all-MiniLM-L6-v2 on onnx-int8, multilingual-e5-small on "
        "onnx-int8; a change of backend "
        "would be part of Δ, not told apart"]


def test_an_encoder_change_is_a_cause_and_is_not_split_from_a_config_change(workbench):
    """Two snapshots whose query vectors came from different backends: alone, the encoder is the
    whole cause; with a config change too, one factor "config+encoder" (a re-run could only use
    this process's encoder), and a note says so."""
    import dataclasses

    snapshots = SnapshotStore(workbench.store)
    a = snapshots.create(workbench, "animals", "int8")
    honey = next(q for q, text in a.queries.items() if text == "who makes honey")
    worse = {q: dict(v) for q, v in a.per_query.items()}
    worse[honey]["ndcg@10"] -= 0.3  # as if the other backend had ranked the bee lower
    b = dataclasses.replace(a, name="torch", encoders={**a.encoders, "all-MiniLM-L6-v2": "torch"}, per_query=worse)
    d = diff(a, b, "ndcg@10", rerun=rerun_at(workbench, "animals"))
    assert d["changed"] == ["encoder"] and d["causes"] == {"encoder": pytest.approx(-0.1)}
    assert d["notes"] == ["the query vectors came from other encoder backends ('int8': all-MiniLM-L6-v2 on "
                          "onnx-int8, multilingual-e5-small on onnx-int8; 'torch': all-MiniLM-L6-v2 on torch, "
                          "multilingual-e5-small on onnx-int8)"]
    c = dataclasses.replace(b, name="torch bm25", config=BM25_ONLY)
    d = diff(a, c, "ndcg@10", rerun=rerun_at(workbench, "animals"))
    assert d["changed"] == ["config", "encoder"] and d["causes"] == {"config+encoder": pytest.approx(-0.1)}
    assert d["notes"][1] == "config and encoder not told apart (a re-run can only use this process's encoder)"


def test_config_and_corpus_are_not_split_by_a_rerun_on_another_encoder(workbench, monkeypatch):
    """Both snapshots encoded their queries on int8; a process set to torch cannot re-run either
    config as it ran, so config and corpus share one factor and the note says why."""

    from retrieval.models import embed

    snapshots = SnapshotStore(workbench.store)
    a = snapshots.create(workbench, "animals", "before", SearchConfig(depth=1))
    add_documents(workbench.store, "animals", parse_bytes(MORE, "more.csv"))
    b = snapshots.create(workbench, "animals", "after")
    assert a.encoders == b.encoders
    monkeypatch.setenv(embed.BACKEND_ENV, "torch")
    d = diff(a, b, "ndcg@10", rerun=rerun_at(workbench, "animals"))
    assert list(d["causes"]) == ["config+corpus"]
    assert d["notes"] == ["config and corpus not told apart (re-running one config on the other version: this "
                          "process encodes queries with all-MiniLM-L6-v2 on torch, multilingual-e5-small on torch, "
                          "the snapshots with all-MiniLM-L6-v2 on onnx-int8, multilingual-e5-small on onnx-int8)"]
    monkeypatch.delenv(embed.BACKEND_ENV)
    assert list(diff(a, b, "ndcg@10", rerun=rerun_at(workbench, "animals"))["causes"]) == ["config", "corpus"]


def test_the_trec_export_scores_in_trec_eval_as_in_the_workbench():
    import pytrec_eval

    from retrieval.evaluation.snapshots import Snapshot

    # the search showed d-a and d-b tied at 0.5, d-a first: trec_eval would put d-b (id descending) first
    qrels = {"q": {"d-a": 1}}
    rankings = {"q": ["d-a", "d-b", "d-c"]}
    snap = Snapshot(name="tied run", collection="c", created="2026-01-01T00:00:00", table_version=1, doc_count=3,
                    config=SearchConfig(), query_set="default", queries={"q": "x"}, qrels=qrels,
                    judgments_key=judgments_key(qrels), run={"q": [("d-a", 0.5), ("d-b", 0.5), ("d-c", 0.25)]},
                    per_query=score_rankings(rankings, qrels))
    assert snap.per_query["q"]["ndcg@10"] == 1.0
    exported = snap.trec_run()
    assert exported == "q Q0 d-a 1 3 tied_run\nq Q0 d-b 2 2 tied_run\nq Q0 d-c 3 1 tied_run\n"
    run: dict[str, dict[str, float]] = {}
    for line in exported.splitlines():
        qid, _, doc_id, _, score, _ = line.split()
        run.setdefault(qid, {})[doc_id] = float(score)
    measured = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recip_rank"}).evaluate(run)["q"]
    assert measured["ndcg_cut_10"] == snap.per_query["q"]["ndcg@10"]
    assert measured["recip_rank"] == snap.per_query["q"]["mrr"]
