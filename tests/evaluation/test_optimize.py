"""The optimiser (retrieval/evaluation/optimize.py) on the shared small corpus (60 English paragraphs, 20
English and 10 Chinese judged questions): folds, reproducibility, one search per query whatever
the number of trials, scores equal to the evaluation of the configs, guard rails, Stop, the CLI."""

import dataclasses
import json
import shutil

import pytest
from counting import CountingWorkbench

from retrieval.cli import main as cli
from retrieval.evaluation.evaluate import evaluate_collection
from retrieval.evaluation.optimize import cross_validate, judgment_warnings, param_label, query_folds
from retrieval.evaluation.study import SearchSpace, prepare
from retrieval.search.config import SearchConfig
from retrieval.store import Store
from retrieval.types import RetrievalError

N_QUERIES = 30


@pytest.fixture(scope="module")
def prepared(xsmall):
    workbench = CountingWorkbench(xsmall.store)
    return workbench, prepare(workbench, "xsmall", xsmall.queries, xsmall.qrels, SearchConfig())


def test_folds_never_share_a_query_and_follow_the_seed():
    ids = [f"q{i}" for i in range(23)]
    folds = query_folds(reversed(ids), 5, seed=3)
    assert sorted(q for fold in folds for q in fold) == sorted(ids)  # every query once
    assert [len(f) for f in folds] == [5, 5, 5, 4, 4]
    assert all(not set(a) & set(b) for i, a in enumerate(folds) for b in folds[i + 1:])
    assert query_folds(ids, 5, seed=3) == folds  # the input's order does not matter
    assert query_folds(ids, 5, seed=4) != folds
    with pytest.raises(RetrievalError, match="5 folds need at least 10 judged queries"):
        query_folds(ids[:9], 5)
    with pytest.raises(RetrievalError, match="at least 2 folds"):
        query_folds(ids, 1)


def test_one_search_per_query_and_a_seed_gives_the_same_result(prepared, xsmall):
    workbench, ready = prepared
    assert workbench.calls == N_QUERIES and ready.queries_fetched == N_QUERIES
    first = cross_validate(ready, trials=12, folds=3, seed=7)
    second = cross_validate(ready, trials=12, folds=3, seed=7)
    assert workbench.calls == N_QUERIES  # 2 × 4 studies × 12 trials, and not one more search
    assert first.config == second.config and first.fold_configs == second.fold_configs
    assert first.per_query == second.per_query
    assert [h["value"] for h in first.full.history] == [h["value"] for h in second.full.history]
    assert len(first.studies) == 4 and all(len(s.history) == 12 for s in first.studies)
    # best so far never falls, and the first trial of every study is the base config (on the
    # queries it tunes on: a quarter of its training queries are held back to check the result)
    best = [h["best"] for h in first.full.history]
    assert best == sorted(best) and len(first.full.query_ids) == N_QUERIES - 8
    start = ready.values(ready.space.base, first.full.query_ids)
    assert first.full.history[0]["value"] == pytest.approx(sum(start.values()) / len(start), abs=1e-12)
    assert first.in_sample["value"] >= first.default["value"]
    # the gain's interval: the corrected resampled t over the three folds' mean gains (Nadeau & Bengio)
    folds = query_folds(sorted(ready.qrels), 3, 7)
    by_fold = [sum(first.per_query["cv"][q] - first.per_query["default"][q] for q in ids) / len(ids) for ids in folds]
    mean = sum(by_fold) / 3
    variance = sum((g - mean) ** 2 for g in by_fold) / 2
    half = 4.302652729911275 * ((1 / 3 + 1 / 2) * variance) ** 0.5  # t_{2, 0.975}; n_test / n_train = 1/2
    assert first.gain["ci95"] == pytest.approx([mean - half, mean + half], abs=1e-12)


def test_scores_are_the_evaluation_of_the_configs(prepared, xsmall):
    workbench, ready = prepared
    result = cross_validate(ready, trials=10, folds=2, seed=1)
    for config, key in ((result.config, "in_sample"), (SearchConfig(), "default")):
        report = evaluate_collection(workbench, "xsmall", xsmall.queries, xsmall.qrels, config)
        assert report.metrics["hybrid"]["ndcg@10"] == pytest.approx(result.__dict__[key]["value"], abs=1e-12)
        for qid, values in report.per_query["hybrid"].items():
            assert result.per_query[key][qid] == pytest.approx(values["ndcg@10"], abs=1e-12)
    # each held-out value is the value of the config its fold's study chose
    folds = query_folds(ready.qrels, 2, seed=1)
    for fold, config in zip(folds, result.fold_configs, strict=True):
        report = evaluate_collection(workbench, "xsmall", {q: xsmall.queries[q] for q in fold},
                                     {q: xsmall.qrels[q] for q in fold}, config)
        assert result.cv["value"] != 0
        for qid in fold:
            assert result.per_query["cv"][qid] == pytest.approx(report.per_query["hybrid"][qid]["ndcg@10"], abs=1e-12)
    as_json = result.to_json()
    assert set(as_json) >= {"method", "cv", "in_sample", "default", "config", "seconds"}
    assert set(as_json["cv"]) == {"ndcg@10", "ci95"} and as_json["method"] == "bayes"
    low, high = as_json["cv"]["ci95"]
    assert low <= as_json["cv"]["ndcg@10"] <= high
    assert SearchConfig.from_dict(as_json["config"]) == result.config
    # the importance under the app's words (the page's chart), same values, same order
    assert result.sources == ("bm25", "dense") and result.full.importance
    labelled = result.importance_labels()
    assert list(labelled.items()) == [(param_label(k, result.sources), v) for k, v in result.full.importance.items()]
    assert "Fusion method" in labelled and not {"share", "fusion", "depth"} & set(labelled)


def test_the_optimiser_does_not_end_below_its_start_on_held_out_queries(prepared):
    from retrieval.evaluation.optimize import inner_split

    _, ready = prepared
    # Without the inner check, seed 1's studies keep configs that fit their training queries and
    # lose on their held-out fold: cross-validated 0.8595 against the start's 0.8718.
    unchecked = cross_validate(ready, trials=12, folds=3, seed=1, inner_validation=False)
    assert unchecked.cv["value"] < unchecked.default["value"] - 0.01
    result = cross_validate(ready, trials=12, folds=3, seed=1)
    assert result.cv["value"] >= result.default["value"]
    folds = query_folds(ready.qrels, 3, seed=1)
    for index, study in enumerate(result.studies):
        train = sorted(ready.qrels) if index == 3 else [q for f, ids in enumerate(folds) if f != index for q in ids]
        tuned_on, checked_on = inner_split(train, 1 + index)
        assert study.query_ids == tuned_on and sorted(tuned_on + checked_on) == sorted(train)
        assert len(checked_on) == study.validation["queries"] == -(-len(train) // 4)  # one in 4, rounded up
        # the choice is the comparison on the held-back queries, recomputed here
        start = ready.values(ready.space.base, checked_on)
        assert study.validation["start"] == pytest.approx(sum(start.values()) / len(start), abs=1e-12)
        tuned_better = study.validation["tuned"] > study.validation["start"]
        assert study.validation["kept"] == ("tuned" if tuned_better else "start")
        if study.validation["kept"] == "start":
            assert study.config == ready.space.base
            for q in (folds[index] if index < 3 else []):  # its held-out queries score as the start's
                assert result.per_query["cv"][q] == result.per_query["default"][q]
    assert result.to_json()["validation"] == [s.validation for s in result.studies]
    assert inner_split([f"q{i}" for i in range(7)], 0) == ([f"q{i}" for i in range(7)], [])  # too few to check


def test_parameters_and_features_read_in_the_apps_words():
    """The importance chart's names: the sources as the app calls them (dense is 'vector'), the
    config fields and fusion parameters by their control's label; never an internal key."""
    sources = ("bm25", "dense")
    assert [param_label(n, sources) for n in (
        "share", "w.dense", "fusion", "weighted.normalization", "weighted.combination", "rrf.rrf_k", "depth",
        "min_q.dense", "lambda", "qw.intercept", "qw.bm25_gap")] == [
        "BM25 share of the weight", "Vector weight", "Fusion method", "Normalisation (weighted sum)",
        "Combination (weighted sum)", "RRF k", "Candidate depth (per source)", "Minimum vector raw score",
        "Rerank interpolation λ", "BM25 share: intercept", "BM25 share: BM25's top score above its 10th"]
    assert param_label("share", ("dense", "bm25")) == "Vector share of the weight"  # the space's first source
    assert param_label("something.new") == "something.new"  # unknown: as it is
    from retrieval.search.learned_ranker import feature_label, feature_names

    assert [feature_label(n) for n in feature_names(["dense"])] == [
        "Vector raw score", "Vector normalised score", "Vector rank", "Fused score", "Query length",
        "Chinese characters", "Terms no document holds", "BM25's top score above its 10th", "Document length",
        "Query terms in the title"]


def test_guard_rails():
    qrels = {f"q{i}": {"d": 1 if i >= 4 else 0} for i in range(12)}
    folds = [["q0", "q1", "q2", "q3"], ["q4", "q5", "q6", "q7"], ["q8", "q9", "q10", "q11"]]
    warnings = judgment_warnings(qrels, folds)
    assert any("Only 4 judged queries in the smallest fold" in w for w in warnings)
    assert any(w.startswith("Fold(s) 1 hold no query with a relevant document") for w in warnings)
    assert judgment_warnings({f"q{i}": {"d": 1} for i in range(20)},
                             [[f"q{i}" for i in range(10)], [f"q{i}" for i in range(10, 20)]]) == []


def test_too_few_queries_and_a_gain_inside_the_noise_are_said(prepared, xsmall):
    _, ready = prepared
    with pytest.raises(RetrievalError, match="20 folds need at least 40 judged queries"):
        cross_validate(ready, trials=2, folds=20)
    with pytest.raises(RetrievalError, match="maximises one of"):
        prepare(prepared[0], "xsmall", xsmall.queries, xsmall.qrels, SearchConfig(), metric="ndcg@7")
    # one trial per study: every study keeps the base config, the gain is exactly 0
    result = cross_validate(ready, trials=1, folds=3, seed=0)
    assert result.gain["value"] == 0 and result.gain["inside_noise"]
    assert any("inside the noise" in w for w in result.warnings)
    assert result.config == SearchConfig.from_dict({**SearchConfig().to_dict(), "weights": {"bm25": 0.4, "dense": 0.6}})


def test_stop_keeps_the_best_so_far(prepared):
    _, fetched = prepared
    # a start BM25 leans on (it cannot cross to the Chinese queries), so a study's trials beat it
    start = SearchConfig.from_dict({**SearchConfig().to_dict(), "weights": {"bm25": 0.95, "dense": 0.05}})
    ready = dataclasses.replace(fetched, space=SearchSpace.of(start, fetched.space.sources), _evaluators={},
                                _scores={}, _features=None, _groups={})
    seen = []

    def stop() -> bool:  # pressed once a study's best so far beats its first trial, the base config
        first = next(e for e in seen if e["study"] == seen[-1]["study"]) if seen else None
        return first is not None and seen[-1]["best"] > first["value"]

    scored = []  # every config scored after the Stop
    values = ready.values

    def counted(config, query_ids, learned=None):
        if stop():
            scored.append(config)
        return values(config, query_ids, learned)

    ready.values = counted
    result = cross_validate(ready, trials=40, folds=2, seed=0, should_stop=stop, progress=seen.append,
                            inner_validation=False)
    assert result.stopped
    index = seen[-1]["study"] - 1
    interrupted = result.studies[index]
    n = len(interrupted.history)
    assert 1 < n < 40 and index < 2, seen[-1]
    # Stop returns at once: not one more trial, in this study or the next
    assert len(seen) == 40 * index + n
    assert [len(s.history) for s in result.studies] == [40] * index + [n] + [0] * (1 - index) + [n]
    assert seen[-1] == {"study": index + 1, "studies": 3, "label": f"fold {index + 1}/2", "trial": n, "trials": 40,
                        "value": interrupted.history[-1]["value"], "best": interrupted.value}
    assert interrupted.value == max(h["value"] for h in interrupted.history) > interrupted.history[0]["value"]
    # the learned config is the best trial's (the best so far shown), not the base config
    assert result.config == interrupted.config != ready.space.base
    # after the Stop only what the table needs: the interrupted fold's held-out values (its best),
    # the base config on all queries (a fold not reached is held out by the base), the learned in-sample
    assert scored == [interrupted.config, ready.space.base, interrupted.config]
    untouched = [q for i, fold in enumerate(query_folds(sorted(ready.qrels), 2, 0)) if i > index for q in fold]
    assert all(result.per_query["cv"][q] == result.per_query["default"][q] for q in untouched)
    assert any(w.startswith("Stopped: 1 of 2 folds were not tuned") for w in result.warnings) == (index == 0)


def test_cli_optimize_saves_the_learned_config(xsmall, tmp_path, capsys):
    db = tmp_path / "db"
    shutil.copytree(xsmall.store.uri, db)
    Store(str(db))  # opens
    from retrieval.search.workbench import Workbench

    workbench = Workbench(Store(str(db)))
    workbench.judgments.save_query_set("xsmall", "questions", xsmall.queries, xsmall.qrels)
    code = cli.main(["--db", str(db), "optimize", "xsmall", "--queryset", "questions", "--trials", "6", "--folds",
                     "3", "--seed", "2", "--save", "tuned", "--json"])
    assert code == 0
    printed = capsys.readouterr()
    out = json.loads(printed.out)
    assert out["method"] == "bayes" and out["folds"] == 3 and out["queries"] == N_QUERIES
    assert out["skipped"] == 0 and out["skipped_records"] == []  # a query set: nothing left out
    # long work says how long first (30 queries: timed on 16)
    assert f"{N_QUERIES} queries: about " in printed.err and "then 6 trials per study" in printed.err
    assert set(out["in_sample"]) == {"ndcg@10", "ci95"} and "ndcg@10" in out["default"]
    assert Workbench(Store(str(db))).configs.load("tuned") == SearchConfig.from_dict(out["config"])
    # in words: the metric and the parameters as the app names them, never the trial's names (10
    # trials: the fewest that give an importance)
    assert cli.main(["--db", str(db), "optimize", "xsmall", "--queryset", "questions", "--trials", "10", "--folds",
                     "2", "--seed", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("bayes: nDCG@10 cross-validated (2-fold) ")
    importance = next(line for line in lines if line.startswith("parameter importance: "))
    shown = [part.rsplit(" ", 1)[0] for part in importance.removeprefix("parameter importance: ").split(", ")]
    assert shown and all(name[:1].isupper() and "." not in name and "_" not in name for name in shown), shown
    # a taken name is refused before the work; bad input is one line
    assert cli.main(["--db", str(db), "optimize", "xsmall", "--queryset", "questions", "--save", "tuned"]) == 2
    assert "exists; add --overwrite" in capsys.readouterr().err
    assert cli.main(["--db", str(db), "optimize", "xsmall", "--queryset", "questions", "--folds", "16"]) == 2
    assert "16 folds need at least 32 judged queries" in capsys.readouterr().err


def test_query_dependent_weights_score_the_same_explained(xsmall):
    workbench = CountingWorkbench(xsmall.store)
    ready = prepare(workbench, "xsmall", xsmall.queries, xsmall.qrels, SearchConfig(), method="query-dependent")
    # the tuned model itself, not the inner check's choice (on 30 queries it keeps the start)
    result = cross_validate(ready, trials=10, folds=2, seed=3, inner_validation=False)
    assert workbench.calls == N_QUERIES and result.method == "query-dependent"
    model = result.config.query_weights
    assert model["sources"] == ["bm25", "dense"] and set(model["coefficients"]) <= {"length", "cjk", "oov", "bm25_gap"}
    assert result.full.history[0]["value"] == pytest.approx(result.default["value"], abs=1e-12)  # the base first
    # the learned config through the Search page's path (explained), query by query
    report = evaluate_collection(workbench, "xsmall", xsmall.queries, xsmall.qrels, result.config, explained=True)
    for qid, values in report.per_query["hybrid"].items():
        assert result.per_query["in_sample"][qid] == pytest.approx(values["ndcg@10"], abs=1e-12)
    searched = workbench.search("xsmall", xsmall.queries["en-0"] if "en-0" in xsmall.queries
                                else next(iter(xsmall.queries.values())), result.config)
    assert searched.outcome.notes[0].startswith("query-dependent weights: bm25 ")
    with pytest.raises(RetrievalError, match="splits weight between two sources"):
        prepare(workbench, "xsmall", xsmall.queries, xsmall.qrels, SearchConfig(weights={"bm25": 1.0}),
                method="query-dependent")
