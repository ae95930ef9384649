"""Evaluate page and judging: ratings on the Search page feed the metrics, evaluation shows the
core's exact values, the sweep's best config becomes config A, A/B and configs, uploads that fail
change nothing.

Expected values come from the retrieval core on the very Workbench the app uses.
"""

import json

import pytest

# At module level: tests/browser has a conftest too, and a later `from conftest import` would get it.
from conftest import APP, COLLECTION, QUERY, REPO, TIMEOUT, all_widgets, open_page, plain

from retrieval.evaluation.evaluate import DEFAULT_METRICS, evaluate_collection
from retrieval.indexing.readers.parse import parse_path
from retrieval.judging.judgments import JudgmentStore
from retrieval.search.config import SearchConfig
from ui.evaluate import charts as eval_charts
from ui.evaluate.common import shown_p
from ui.state import VIEW_KEY, with_ui_sources

SEARCH = "pages/1_Search.py"
EVALUATE = "pages/5_Evaluate.py"
LABELS = [eval_charts.metric_label(m) for m in DEFAULT_METRICS]


@pytest.fixture(scope="module")
def small_set(app_db):
    """Query set 'small-eval' on the test collection: 6 English and 6 Chinese sample queries
    whose relevant paragraph is in the collection."""
    sample = parse_path(REPO / "sample_data" / "xquad")
    in_collection = {f"{lang}-{i:03d}" for lang in ("en", "zh") for i in range(1, 9)}
    picked = []
    for lang in ("en", "zh"):
        ids = [q for q, docs in sample.qrels.items() if q.startswith(lang) and set(docs) <= in_collection]
        picked += ids[:: max(1, len(ids) // 6)][:6]
    queries = {q: sample.queries[q] for q in picked}
    qrels = {q: dict(sample.qrels[q]) for q in picked}
    from retrieval.store import Store

    JudgmentStore(Store(app_db.uri)).save_query_set(COLLECTION, "small-eval", queries, qrels)
    return queries, qrels


def frame_records(frame):
    return frame.to_dict("records")


def test_evaluating_shows_the_core_metrics_and_reruns_do_not_requery(small_set, workbench, monkeypatch):
    queries, qrels = small_set
    at = open_page(EVALUATE, set="small-eval")
    assert at.selectbox(key="eval.set").value == "small-eval"
    assert any("'small-eval': 12 queries, 12 of them judged" in plain(c.value) for c in at.caption)
    at.button(key="eval.run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]

    expected = evaluate_collection(workbench, COLLECTION, queries, qrels, SearchConfig(), DEFAULT_METRICS)
    means = at.dataframe[0].value
    assert list(means["system"]) == ["BM25", "vector", "fused"]
    for system, row in zip(("bm25", "dense", "hybrid"), frame_records(means), strict=True):
        assert [row[label] for label in LABELS] == [expected.metrics[system][m] for m in DEFAULT_METRICS]
    assert [m.value for m in at.metric][:5] == [f"{expected.metrics['hybrid'][m]:.4f}" for m in DEFAULT_METRICS]

    per_query = at.dataframe[1].value
    fused = expected.per_query["hybrid"]
    order = sorted(fused, key=lambda q: (fused[q]["ndcg@10"], q))
    assert list(per_query["query id"]) == order
    assert list(per_query["nDCG@10"]) == [fused[q]["ndcg@10"] for q in order]
    assert list(per_query["BM25 nDCG@10"]) == [expected.per_query["bm25"][q]["ndcg@10"] for q in order]
    # the worst query opens the Search page with that query and the evaluated config
    worst_link = per_query["open"][0]
    assert worst_link.startswith("Search?")
    from urllib.parse import parse_qs, urlsplit

    params = {k: v[0] for k, v in parse_qs(urlsplit(worst_link).query).items()}
    assert params["q"] == queries[order[0]] and params["collection"] == COLLECTION
    assert params["set"] == "small-eval" and params["rrf_k"] == "60.0"
    assert any(f"]({worst_link})" in m.value for m in at.markdown)

    # a rerun (another widget moved) redraws the stored result without querying again
    calls = []
    monkeypatch.setattr(workbench, "search", lambda *a, **k: calls.append(a) or pytest.fail("re-queried"))
    monkeypatch.setattr(workbench, "candidates", lambda *a, **k: calls.append(a) or pytest.fail("re-queried"))
    at.selectbox(key="eval.download_system").set_value("bm25").run()
    assert calls == [] and not at.exception
    assert list(at.dataframe[0].value["system"]) == ["BM25", "vector", "fused"]
    assert {b.key for b in at.get("download_button")} >= {"eval.download_run", "eval.download_metrics"}

    # changing config A marks the shown result as stale, still without querying or reading
    # the query set, its judgments or the saved configs again
    from retrieval.search.saved_configs import ConfigStore

    for cls, names in ((JudgmentStore, ("query_sets", "queries", "qrels", "export_qrels")), (ConfigStore, ("names",))):
        for name in names:
            monkeypatch.setattr(cls, name, lambda *a, _n=name, **k: calls.append(_n) or pytest.fail(f"{_n} read again"))
    at.slider(key="a.w_bm25").set_value(0.2).run()
    assert calls == [] and not at.exception
    assert any("changed since" in i.value for i in at.info)


def test_judging_on_the_search_page_saves_and_feeds_the_metric(workbench):
    judgments = JudgmentStore(workbench.store)
    at = open_page(SEARCH, q=QUERY, set="rated-here")
    ids = list(at.dataframe[0].value["id"])
    ratings = at.segmented_control
    assert len(ratings) == len(ids)
    assert all(r.value is None for r in ratings)  # not rated yet
    assert all(r.help for r in ratings)
    assert any("query set 'rated\\-here'" in c.value for c in at.caption)

    ratings[0].set_value(3).run()
    assert not at.exception and not at.error
    assert judgments.ratings(COLLECTION, "rated-here", QUERY) == {ids[0]: 3}

    # the Evaluate page (same session) scores the set with that judgment
    at.switch_page(EVALUATE).run()
    assert at.selectbox(key="eval.set").value == "rated-here"
    at.button(key="eval.run").click().run()
    queries, qrels = judgments.queries(COLLECTION, "rated-here"), judgments.qrels(COLLECTION, "rated-here")
    assert list(queries.values()) == [QUERY] and list(qrels.values()) == [{ids[0]: 3}]
    first = evaluate_collection(workbench, COLLECTION, queries, qrels, SearchConfig(), DEFAULT_METRICS)
    fused_row = frame_records(at.dataframe[0].value)[2]
    assert fused_row["nDCG@10"] == first.metrics["hybrid"]["ndcg@10"] == 1.0  # the top result is the relevant one

    # back on Search: the first result is judged not relevant, the third perfect
    at.switch_page(SEARCH).run()
    assert at.segmented_control[0].value == 3  # the saved grade is shown
    at.segmented_control[0].set_value(0).run()
    at.segmented_control[2].set_value(3).run()
    assert judgments.ratings(COLLECTION, "rated-here", QUERY) == {ids[0]: 0, ids[2]: 3}
    at.switch_page(EVALUATE).run()
    at.button(key="eval.run").click().run()
    second = evaluate_collection(workbench, COLLECTION, judgments.queries(COLLECTION, "rated-here"),
                                 judgments.qrels(COLLECTION, "rated-here"), SearchConfig(), DEFAULT_METRICS)
    fused_row = frame_records(at.dataframe[0].value)[2]
    assert fused_row["nDCG@10"] == second.metrics["hybrid"]["ndcg@10"] == pytest.approx(0.5)  # 1/log2(3 + 1)
    assert fused_row["MRR@10"] == second.metrics["hybrid"]["mrr@10"] == pytest.approx(1 / 3)


def test_a_new_query_is_judged_into_the_default_set(workbench):
    judgments = JudgmentStore(workbench.store)
    query = "Who won Super Bowl 50?"
    at = open_page(SEARCH, q=query)
    assert at.segmented_control.len == 0  # rating is off until switched on
    at.toggle(key="view.judging").set_value(True).run()
    assert any("query set 'judgments'" in c.value for c in at.caption)
    doc = at.dataframe[0].value["id"][1]
    at.segmented_control[1].set_value(2).run()
    assert "judgments" in judgments.query_sets(COLLECTION)
    assert judgments.ratings(COLLECTION, "judgments", query) == {doc: 2}
    at.segmented_control[1].set_value(None).run()  # back to 'not rated': the grade is removed
    assert not at.error
    assert judgments.ratings(COLLECTION, "judgments", query) == {}
    assert at.segmented_control[1].value is None


def test_the_first_run_stores_the_sample_queries_and_judgments(tmp_path, monkeypatch):
    import json

    from streamlit.testing.v1 import AppTest

    from retrieval.store import Store

    sample = tmp_path / "sample"
    (sample / "qrels").mkdir(parents=True)
    texts = ["The Panthers defense gave up just 308 points.", "Denver won the Super Bowl.", "Tea is a drink."]
    (sample / "corpus.jsonl").write_text("\n".join(json.dumps({"_id": f"d{i}", "text": t})
                                                   for i, t in enumerate(texts)))
    (sample / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "Panthers points"}) + "\n"
                                          + json.dumps({"_id": "q2", "text": "Who won?"}))
    (sample / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td0\t1\nq2\td1\t2\n")
    db = tmp_path / "db"
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    monkeypatch.setenv("WORKBENCH_SAMPLE", str(sample))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.switch_page(EVALUATE)
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    judgments = JudgmentStore(Store(str(db)))
    assert judgments.query_sets("sample-xquad") == ["sample"]
    assert judgments.queries("sample-xquad", "sample") == {"q1": "Panthers points", "q2": "Who won?"}
    assert judgments.qrels("sample-xquad", "sample") == {"q1": {"d0": 1}, "q2": {"d1": 2}}
    assert at.selectbox(key="eval.set").value == "sample"  # ready to evaluate out of the box


def test_applying_the_sweep_best_changes_config_a(small_set, workbench):
    from retrieval.evaluation.sweep import default_grid, headline, run_sweep

    queries, qrels = small_set
    at = open_page(EVALUATE, set="small-eval")
    at.button(key="sweep.run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    expected = run_sweep(workbench, COLLECTION, queries, qrels, default_grid(SearchConfig()))
    best = expected.best()
    assert len(expected.rows) >= 82
    table = next(d.value for d in at.dataframe if "label" in d.value.columns)
    assert list(table["label"]) == [r["label"] for r in expected.rows]
    assert list(table["nDCG@10"]) == [r["ndcg@10"] for r in expected.rows]
    heat = next(c for c in at.get("plotly_chart"))
    assert heat is not None
    assert best.config != SearchConfig(), "the premise: the best variant is not the default config"
    said = headline(expected, "weighted l2 arithmetic bm25=0.4 dense=0.6")  # config A, a grid point
    assert any(plain(m.value).startswith(said.sentence().replace("Current config", "Config A", 1))
               for m in at.markdown), [m.value for m in at.markdown]

    at.button(key="sweep.apply").click().run()
    assert not at.exception
    view = at.session_state[VIEW_KEY]
    assert view.config_a == with_ui_sources(best.config)
    assert at.selectbox(key="a.fusion").value == best.config.fusion
    assert at.slider(key="a.w_bm25").value == best.config.weights.get("bm25", 0.0)
    assert at.slider(key="a.w_dense").value == best.config.weights.get("dense", 0.0)
    if best.config.fusion == "rrf":
        assert at.slider(key="a.rrf_k").value == best.config.rrf_k
    else:
        assert at.selectbox(key="a.normalization").value == best.config.normalization
    assert at.query_params["fusion"] == best.config.fusion
    assert any("Config A is now" in s.value for s in at.success)
    assert not any("changed since" in i.value for i in at.info)  # the sweep is still the current one


def test_the_sweep_with_rerank_variants_shows_them_beside_the_first_stage(small_set, workbench):
    from retrieval.evaluation.sweep import RERANK_LAMBDAS, default_grid, run_sweep, with_rerank_grid

    queries, qrels = small_set
    at = open_page(EVALUATE, set="small-eval")
    at.checkbox(key="sweep.rerank").check().run()
    assert at.multiselect(key="sweep.rerank_top_ns").value == [SearchConfig().rerank_top_n]
    at.multiselect(key="sweep.rerank_top_ns").set_value([10, 20]).run()
    assert any("Plus 22 with rerank (e5)" in plain(c.value) for c in at.caption)
    at.button(key="sweep.run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    expected = run_sweep(workbench, COLLECTION, queries, qrels,
                         with_rerank_grid(default_grid(SearchConfig()), SearchConfig(), RERANK_LAMBDAS, [10, 20]))
    assert len(expected.rows) == 132 + 22  # config A's first stage is in the grid: no extra baseline
    table = next(d.value for d in at.dataframe if "label" in d.value.columns)
    assert list(table["label"]) == [r["label"] for r in expected.rows]
    assert list(table["nDCG@10"]) == [r["ndcg@10"] for r in expected.rows]
    reranked = table[table["rerank_lambda"].notna()]
    assert sorted(zip(reranked["rerank_top_n"], reranked["rerank_lambda"], strict=True)) == sorted(
        (n, lam) for n in (10, 20) for lam in RERANK_LAMBDAS)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    lines = next(c for c in charts if "rerank variants" in c["layout"]["title"]["text"])
    assert [trace["name"] for trace in lines["data"]] == ["top-10", "top-20"]
    assert lines["data"][0]["x"] == list(RERANK_LAMBDAS)
    by_label = {r["label"]: r for r in expected.rows}
    assert lines["data"][1]["y"] == [by_label[f"rerank e5 top-20 λ={lam:g} · weighted l2 arithmetic bm25=0.4 "
                                              f"dense=0.6"]["ndcg@10"] for lam in RERANK_LAMBDAS]
    first_stage = by_label["weighted l2 arithmetic bm25=0.4 dense=0.6"]["ndcg@10"]
    assert lines["layout"]["shapes"][0]["y0"] == first_stage  # the dashed no-rerank line


def test_an_invalid_upload_shows_an_error_and_changes_nothing(workbench):
    judgments = JudgmentStore(workbench.store)
    before = {name: (judgments.queries(COLLECTION, name), judgments.qrels(COLLECTION, name))
              for name in judgments.query_sets(COLLECTION)}
    at = open_page(EVALUATE)
    at.text_input(key="eval.upload.name").set_value("broken")
    at.file_uploader(key="eval.upload.queries").set_value(
        [("q.tsv", b"q1\tHow many points?\nq2\tWho won?\n", "text/tab-separated-values")])
    at.file_uploader(key="eval.upload.qrels").set_value(
        [("bad.qrels", b"q1 0 en-001 1\nq2 0 en-002 high\n", "text/plain")])
    at.button(key="eval.upload.save").click().run()
    assert not at.exception
    assert at.error, "a malformed qrels line is refused"
    message = plain(at.error[0].value)
    assert "bad.qrels" in message and "line 2" in message and "'high' is not an integer" in message
    after = {name: (judgments.queries(COLLECTION, name), judgments.qrels(COLLECTION, name))
             for name in judgments.query_sets(COLLECTION)}
    assert after == before and "broken" not in after


def test_a_valid_upload_is_stored_and_selected(workbench):
    judgments = JudgmentStore(workbench.store)
    at = open_page(EVALUATE)
    at.text_input(key="eval.upload.name").set_value("uploaded")
    at.file_uploader(key="eval.upload.queries").set_value(
        [("q.jsonl", b'{"_id": "q1", "text": "How many points did the Panthers defense surrender?"}\n'
                     b'{"_id": "q2", "text": "Who won Super Bowl 50?"}\n', "application/json")])
    at.file_uploader(key="eval.upload.qrels").set_value(
        [("j.csv", b"query_id,doc_id,relevance\nq1,en-001,2\nq2,en-002,1\nq2,en-003,0\n", "text/csv")])
    at.button(key="eval.upload.save").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert judgments.queries(COLLECTION, "uploaded") == {
        "q1": "How many points did the Panthers defense surrender?", "q2": "Who won Super Bowl 50?"}
    assert judgments.qrels(COLLECTION, "uploaded") == {"q1": {"en-001": 2}, "q2": {"en-002": 1, "en-003": 0}}
    assert at.selectbox(key="eval.set").value == "uploaded"
    assert any("Saved query set 'uploaded'" in plain(s.value) for s in at.success)
    # deleting needs the confirmation
    assert at.button(key="eval.delete").disabled
    at.checkbox(key="eval.delete.confirm").check().run()
    at.button(key="eval.delete").click().run()
    assert "uploaded" not in judgments.query_sets(COLLECTION)
    assert any("Deleted query set 'uploaded'" in plain(s.value) for s in at.success)


def test_ab_test_of_two_saved_configs_is_the_core_comparison(small_set, workbench):
    from retrieval.evaluation.abtest import compare
    from retrieval.search.saved_configs import ConfigStore

    queries, qrels = small_set
    configs = ConfigStore(workbench.store)
    a, b = SearchConfig(), SearchConfig(fusion="weighted", weights={"bm25": 0.3, "dense": 0.7})
    configs.save("ab-base", a, overwrite=True)
    configs.save("ab-cand", b, overwrite=True)
    at = open_page(EVALUATE, set="small-eval")
    at.selectbox(key="ab.a").set_value("ab-base")
    at.selectbox(key="ab.b").set_value("ab-cand")
    at.button(key="ab.run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    run_a = evaluate_collection(workbench, COLLECTION, queries, qrels, a).runs["hybrid"]
    run_b = evaluate_collection(workbench, COLLECTION, queries, qrels, b).runs["hybrid"]
    expected = compare(qrels, run_a, run_b, metric="ndcg@10", test="t-test")
    shown = {m.label: m.value for m in at.metric}
    assert shown["nDCG@10 A"] == f"{expected.mean_a:.4f}" and shown["nDCG@10 B"] == f"{expected.mean_b:.4f}"
    assert shown["win / tie / loss"] == f"{expected.wins} / {expected.ties} / {expected.losses}"
    assert shown["p-value"] == shown_p(expected.p_value)
    deltas = next(d.value for d in at.dataframe if "delta (B − A)" in d.value.columns)
    assert dict(zip(deltas["query id"], deltas["delta (B − A)"], strict=True)) == dict(expected.deltas)
    # beside it: how far the judgments can be trusted, the core's own figures
    from retrieval.evaluation.trust import flip_check, trust_metrics

    rank = lambda run: {q: sorted(d, key=d.get, reverse=True) for q, d in run.items()}  # noqa: E731
    trust = next(d.value for d in at.dataframe if "bpref" in d.value.columns)
    for row, run in zip(trust.to_dict("records"), (run_a, run_b), strict=True):
        means = trust_metrics(rank(run), qrels)[0]
        assert row == {"config": row["config"], **{k: round(v, 4) for k, v in means.items()}}
    flip = flip_check(rank(run_a), rank(run_b), qrels)
    said = flip.sentence()
    assert any(plain(x.value) == said for x in [*at.warning, *at.caption]), said
    # one verdict, from the test and the holes together: never "yes" when the holes could reverse it
    from retrieval.evaluation.abtest import verdict

    assert shown["verdict"] == verdict(expected, flip).answer
    assert shown["verdict"] != "yes" or not flip.can_flip
    assert any(plain(x.value) == f"Verdict: {verdict(expected, flip).sentence}." for x in [*at.warning, *at.caption])


def test_configs_save_load_and_import(workbench):
    from retrieval.search.saved_configs import ConfigStore

    configs = ConfigStore(workbench.store)
    at = open_page(EVALUATE, fusion="rrf", rrf_k="7", weights="bm25=0.2,dense=0.8")
    at.text_input(key="configs.name").set_value("k7").run()
    at.checkbox(key="configs.overwrite").check()
    at.button(key="configs.save").click().run()
    assert not at.error, [e.value for e in at.error]
    saved = configs.load("k7")
    assert saved.rrf_k == 7.0 and saved.weights == {"bm25": 0.2, "dense": 0.8}

    at.slider(key="a.rrf_k").set_value(30).run()
    at.selectbox(key="configs.saved").set_value("k7").run()
    at.button(key="configs.load").click().run()
    assert at.slider(key="a.rrf_k").value == 7
    # an invalid import changes nothing
    at.file_uploader(key="configs.import_file").set_value([("c.json", b'{"rrf_k": 0}', "application/json")]).run()
    at.button(key="configs.import").click().run()
    assert any("rrf_k must be" in plain(e.value) for e in at.error)
    assert at.slider(key="a.rrf_k").value == 7
    at.file_uploader(key="configs.import_file").set_value([("d.json", b'{"depth": "ten"}', "application/json")]).run()
    at.button(key="configs.import").click().run()
    assert any("depth must be a whole number, got 'ten'" in plain(e.value) for e in at.error)  # names the field
    assert at.slider(key="a.rrf_k").value == 7 and at.slider(key="a.depth").value == 100
    text = SearchConfig(fusion="weighted", normalization="zscore").to_json().encode()
    at.file_uploader(key="configs.import_file").set_value([("w.json", text, "application/json")]).run()
    at.button(key="configs.import").click().run()
    assert at.selectbox(key="a.fusion").value == "weighted"
    assert at.selectbox(key="a.normalization").value == "zscore"


def test_every_evaluate_control_has_help(small_set):
    at = open_page(EVALUATE, set="small-eval")
    at.button(key="eval.run").click().run()
    widgets = all_widgets(at)
    assert widgets
    assert [getattr(w, "key", None) or w.label for w in widgets if not (w.help or "").strip()] == []


def test_the_optimiser_runs_in_the_background_and_its_config_becomes_config_a(small_set, workbench):
    """Optimise: the run goes to a thread, Stop keeps the best so far, the table holds the core's
    held-out figures, and 'Use as config A' applies the learned config."""
    from retrieval.evaluation.optimize import cross_validate
    from retrieval.evaluation.study import prepare
    from ui.evaluate.optimize import DONE_KEY, RUN_KEY

    queries, qrels = small_set
    at = open_page(EVALUATE, set="small-eval")
    at.number_input(key="optimize.trials").set_value(6)
    at.number_input(key="optimize.folds").set_value(2)
    at.button(key="optimize.start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    run = at.session_state[RUN_KEY]
    run.thread.join(timeout=TIMEOUT)
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    expected = cross_validate(prepare(workbench, COLLECTION, queries, qrels, with_ui_sources(SearchConfig())),
                              trials=6, folds=2)
    table = next(d.value for d in at.dataframe if "nDCG@10 held out" in d.value.columns)
    rows = {r[""]: r for r in frame_records(table)}
    assert rows["config A"]["nDCG@10 held out"] == round(expected.default["value"], 4)
    learned = rows["Bayesian search (TPE)"]
    assert learned["nDCG@10 held out"] == round(expected.cv["value"], 4)
    assert learned["in-sample"] == round(expected.in_sample["value"], 4)
    assert "best grid variant" in rows
    # what a reader compares first comes first: in sight in a 1400-pixel window
    assert list(table.columns) == ["", "nDCG@10 held out", "gain over config A", "p", "time", "95 % CI", "in-sample"]
    assert rows["config A"]["gain over config A"] == rows["config A"]["p"] == ""  # no "None"
    assert any(plain(c.value).startswith("Held out: each query") and "Best grid variant: " in plain(c.value)
               for c in at.caption)
    # the boxes keep the user's values after the run (they are not drawn while it runs)
    assert (at.number_input(key="optimize.trials").value, at.number_input(key="optimize.folds").value) == (6, 2)
    at.button(key="optimize.apply.bayes").click().run()
    assert at.session_state[VIEW_KEY].config_a == expected.config

    # Stop: a long run stopped from the page keeps its best so far and says it was stopped
    at.number_input(key="optimize.trials").set_value(1000)
    at.button(key="optimize.start").click().run()
    run = at.session_state[RUN_KEY]
    at.button(key="optimize.stop").click().run()
    run.thread.join(timeout=TIMEOUT)
    at.run()
    assert not at.exception
    finished = next(iter(at.session_state[DONE_KEY].values()))["bayes"][0]
    assert finished.result.stopped and all(len(s.history) < 1000 for s in finished.result.studies)
    # Stop returns at once: the grid is not scored; the config offered is the best trial so far
    assert finished.grid is None
    assert finished.result.config == finished.result.full.config
    assert (at.number_input(key="optimize.trials").value, at.number_input(key="optimize.folds").value) == (1000, 2)
    table = next(d.value for d in at.dataframe if "nDCG@10 held out" in d.value.columns)
    assert any("(stopped)" in str(r.get("time", "")) for r in frame_records(table))


def test_an_implicit_list_is_a_judgment_source_with_its_agreement_and_ab_on_it(small_set, workbench):
    from retrieval.evaluation.abtest import compare
    from retrieval.judging.implicit.grading import ImplicitJudgment, ImplicitList
    from retrieval.judging.implicit.source import agreement_with_explicit, save_implicit
    from retrieval.search.saved_configs import ConfigStore

    queries, qrels = small_set
    judgments = workbench.judgments
    judgments.save_query_set(COLLECTION, "clicks-eval", queries, qrels)
    # a click model's list: the explicit grades, one in three changed, and one more document per query
    rows = []
    for i, (q, docs) in enumerate(qrels.items()):
        for j, (d, g) in enumerate(docs.items()):
            rows.append(ImplicitJudgment(queries[q], d, 0.5, (g + 1) % 4 if (i + j) % 3 == 0 else g, 3, 20, 0))
        rows.append(ImplicitJudgment(queries[q], "unsafe-1", 0.0, 0, 0, 20, 5))
    listed = ImplicitList("coec", "position_ctr", {0: 0.5}, (0.5, 1, 2), rows)
    save_implicit(judgments, COLLECTION, "clicks-eval", listed)
    implicit_qrels = judgments.qrels(COLLECTION, "clicks-eval", source="implicit:coec")
    agreement = agreement_with_explicit(judgments.ratings_of(COLLECTION, "clicks-eval"), "implicit:coec")

    configs = ConfigStore(workbench.store)
    a, b = SearchConfig(), SearchConfig(fusion="weighted", weights={"bm25": 0.3, "dense": 0.7})
    configs.save("ab-base", a, overwrite=True)
    configs.save("ab-cand", b, overwrite=True)
    at = open_page(EVALUATE, set="clicks-eval")
    table = next(d.value for d in at.dataframe if "weighted κ" in d.value.columns)
    (row,) = table.to_dict("records")
    assert row["judgments"] == "implicit:coec" and row["pairs"] == len(rows)
    assert row["pairs also judged explicitly"] == agreement.pairs[0].n == len(rows) - len(qrels)
    assert row["κ"] == pytest.approx(agreement.pairs[0].cohen_kappa)
    assert row["α"] == pytest.approx(agreement.krippendorff_alpha)
    picker = at.selectbox(key=f"eval.source.{COLLECTION}.clicks-eval")
    assert picker.options[1].startswith("implicit:coec: from click logs")
    picker.set_value("implicit:coec").run()
    assert any(f"{sum(len(d) for d in implicit_qrels.values())} judgments" in plain(c.value) for c in at.caption)
    at.selectbox(key="ab.a").set_value("ab-base")
    at.selectbox(key="ab.b").set_value("ab-cand")
    at.button(key="ab.run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    run_a = evaluate_collection(workbench, COLLECTION, queries, implicit_qrels, a).runs["hybrid"]
    run_b = evaluate_collection(workbench, COLLECTION, queries, implicit_qrels, b).runs["hybrid"]
    expected = compare(implicit_qrels, run_a, run_b, metric="ndcg@10", test="t-test")
    shown = {m.label: m.value for m in at.metric}
    assert shown["nDCG@10 A"] == f"{expected.mean_a:.4f}" and shown["nDCG@10 B"] == f"{expected.mean_b:.4f}"


def test_ab_test_of_an_outside_engine_against_the_local_default(small_set, workbench, app_db):
    from search_engine import Engine, descriptor

    from retrieval.evaluation.abtest import compare, verdict
    from retrieval.evaluation.paired import p_text
    from retrieval.evaluation.trust import flip_check
    from retrieval.sources.external import close_engines, parse_descriptor

    queries, qrels = small_set
    at = open_page(EVALUATE, set="small-eval")
    at.radio(key="ab.mode").set_value("outside").run()
    assert any("No outside engine is registered" in plain(i.value) for i in at.info)
    docs = workbench.documents(app_db.collection, [f"{lang}-{i:03d}" for lang in ("en", "zh") for i in range(1, 9)])
    engine = Engine({i: (row["title"], row["text"]) for i, row in docs.items()})
    base = engine.start()
    workbench.outside_sources().add(parse_descriptor(descriptor(base, name="team")))
    try:
        at = open_page(EVALUATE, set="small-eval")
        at.radio(key="ab.mode").set_value("outside").run()
        assert at.selectbox(key="ab.engine").value == "team"
        at.button(key="ab.run").click().run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        run_a = evaluate_collection(workbench, COLLECTION, queries, qrels, SearchConfig()).runs["hybrid"]
        run_b = evaluate_collection(workbench, COLLECTION, queries, qrels,
                                    SearchConfig(weights={"team": 1.0})).runs["hybrid"]
        expected = compare(qrels, run_a, run_b, metric="ndcg@10", test="t-test")
        assert expected.mean_a != expected.mean_b
        shown = {m.label: m.value for m in at.metric}
        assert shown["nDCG@10 A"] == f"{expected.mean_a:.4f}" and shown["nDCG@10 B"] == f"{expected.mean_b:.4f}"
        assert shown["p-value"] == shown_p(expected.p_value)
        low, high = expected.delta_ci
        assert any(plain(c.value) == f"Δ nDCG@10 (B − A) = {expected.mean_delta:+.4f}, 95 % interval {low:+.4f} … "
                   f"{high:+.4f} (bootstrap over the {len(qrels)} queries); paired t-test, {p_text(expected.p_value)}."
                   for c in at.caption), [c.value for c in at.caption]
        rank = lambda run: {q: sorted(d, key=d.get, reverse=True) for q, d in run.items()}  # noqa: E731
        said = verdict(expected, flip_check(rank(run_a), rank(run_b), qrels))
        assert shown["verdict"] == said.answer
        trust = next(d.value for d in at.dataframe if "bpref" in d.value.columns)
        assert list(trust["config"]) == ["local default", "team"]
        # an engine failing on every query: named with its first error, counted as retrieving nothing
        workbench.outside_sources().add(parse_descriptor(descriptor(base, name="broken", path="/broken")))
        at.run()  # the picker lists it from the next run on
        at.selectbox(key="ab.engine").set_value("broken").run()
        at.button(key="ab.run").click().run()
        assert not at.exception
        assert [plain(w.value) for w in at.warning if "failed on" in w.value] == [
            f"'broken' failed on {len(qrels)} of {len(qrels)} queries (first: ExternalError: {base} answered HTTP "
            '500: {"error": "index unavailable"}); each counts as retrieving nothing.']
        assert {m.label: m.value for m in at.metric}["nDCG@10 B"] == "0.0000"
    finally:
        for name in {"team", "broken"} & set(workbench.outside_sources().names()):
            workbench.outside_sources().remove(name)
        engine.stop()
        close_engines()
