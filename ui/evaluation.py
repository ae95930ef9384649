"""The Evaluate page's sections: query sets (pick, upload, export), evaluate config A, the sweep,
the A/B test between two saved configs, and saved configs (save, load, export, import).

Long runs (evaluate, sweep, A/B) happen only on a button press; their results are kept in the
session (`RESULTS_KEY`) with the inputs they were computed from, so a rerun redraws them without
re-querying, and says so when the config or the judgments have changed since.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

import streamlit as st

from retrieval.config import SearchConfig
from retrieval.evaluate import DEFAULT_METRICS
from retrieval.types import RetrievalError

from . import eval_charts, judging, state, views

RESULTS_KEY = "_workbench_eval_results"
QUERY_TYPES = ["jsonl", "ndjson", "tsv", "csv"]
QRELS_TYPES = ["txt", "tsv", "csv", "qrels", "trec"]
AB_TESTS = {"t-test": "paired t-test", "randomization": "paired randomization test"}


# ---- plain steps (no Streamlit) -------------------------------------------------------------
@dataclass
class QuerySet:
    name: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]

    @property
    def judged(self) -> list[str]:
        """Query ids with at least one judgment and a text: the ones evaluation scores."""
        return [q for q, docs in self.qrels.items() if docs and q in self.queries]

    def fingerprint(self) -> str:
        data = json.dumps([self.queries, self.qrels], sort_keys=True, ensure_ascii=False)
        return hashlib.sha1(data.encode()).hexdigest()

    def summary(self) -> str:
        n_judgments = sum(len(d) for d in self.qrels.values())
        relevant = sum(1 for d in self.qrels.values() for g in d.values() if g > 0)
        return (f"Query set '{self.name}': {plural(len(self.queries), 'query', 'queries')}, "
                f"{len(self.judged)} of them judged ({plural(n_judgments, 'judgment')}, {relevant} relevant).")


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def upload_query_set(judgments, collection: str, name: str, queries_file: tuple[str, bytes] | None,
                     qrels_file: tuple[str, bytes] | None, existing: list[str], replace: bool) -> QuerySet:
    """Parse the uploaded files and store them as query set `name`. All or nothing: any problem
    raises RetrievalError (IngestError for file problems) before anything is written."""
    from retrieval.encoding import decode_bytes
    from retrieval.qrels import parse_qrels, parse_queries
    from retrieval.types import IngestError

    name = (name or "").strip()
    if not name:
        raise RetrievalError("Give the query set a name")
    if name in existing and not replace:
        raise RetrievalError(f"Query set {name!r} exists: tick 'Replace' to overwrite it, or pick another name")
    if queries_file is None:
        raise RetrievalError("Upload a queries file (JSONL, TSV or CSV): judgments need the query texts")
    queries = parse_queries(queries_file[1], queries_file[0])
    qrels = None
    if qrels_file is not None:
        try:
            text, _ = decode_bytes(qrels_file[1])
            qrels = parse_qrels(text)
        except IngestError as exc:
            raise IngestError(f"{qrels_file[0]}: {exc}") from exc  # str(exc) lists the problems already
    judgments.save_query_set(collection, name, queries, qrels, replace=True)
    return QuerySet(name, queries, qrels or {})


def config_label(config: SearchConfig) -> str:
    """A short description of a config: 'RRF k=60, BM25 0.5, vector 0.5, depth 100'."""
    from .results import label

    weights = ", ".join(f"{label(s)} {w:g}" for s, w in config.weights.items())
    if config.fusion == "rrf":
        head = f"RRF k={config.rrf_k:g}"
    else:
        head = f"weighted sum ({config.normalization}, {config.combination})"
    return f"{head}, {weights}, depth {config.depth}" + (", rerank" if config.rerank else "")


# ---- session results ------------------------------------------------------------------------
def results() -> dict[str, dict[str, Any]]:
    if RESULTS_KEY not in st.session_state:
        st.session_state[RESULTS_KEY] = {}
    return st.session_state[RESULTS_KEY]


def _stale_note(kind: str, stored: dict[str, Any], key: tuple) -> None:
    if stored["key"] != key:
        st.info(views.markdown_safe(
            f"Shown: the {kind} of {stored['when']} (query set '{stored['key'][1]}' on "
            f"'{stored['key'][0]}'). The config, the collection or the judgments changed since: run it again "
            "to update."), icon="🕒")


# ---- reads -----------------------------------------------------------------------------------
READS_KEY = "_workbench_eval_reads"


def memo_read(store, key: tuple, read):
    """`read()`'s result, kept in the session until the next write through the Store
    (`Store.writes`: ratings, uploads, saved configs, ingests …), so a rerun of this page, e.g.
    a sidebar slider move, reads nothing from the database."""
    memo = st.session_state.setdefault(READS_KEY, {})
    full_key = (store.uri, store.writes) + key
    if full_key not in memo:
        if len(memo) >= 64:
            memo.clear()
        memo[full_key] = read()
    return memo[full_key]


# ---- query sets -----------------------------------------------------------------------------
def query_set_section(workbench, collection: str) -> QuerySet | None:
    """Pick the query set (bound to the View, so Search page ratings go to it too), its
    numbers and exports, and the upload form. Returns the chosen set, None when there is none."""
    try:
        judgments = judging.judgment_store(workbench.store)
        names = memo_read(workbench.store, ("sets", collection),
                          lambda: _with_sample_set(judgments, workbench.store, collection))
    except Exception as exc:
        views.show_error(exc)
        return None
    chosen = None
    if names:
        view = state.view()
        if view.query_set not in names:
            view.query_set = judging.SAMPLE_SET if judging.SAMPLE_SET in names else names[0]

        def write(value: str) -> None:
            state.view().query_set = value

        name = state.bound(st.selectbox, "Query set", "eval.set", lambda: state.view().query_set, write,
                           options=names,
                           help="The queries and judgments (qrels) to evaluate with. Ratings given on the Search "
                                "page go into this set too. Each collection has its own sets.")
        try:
            chosen = memo_read(workbench.store, ("set", collection, name), lambda: QuerySet(
                name, judgments.queries(collection, name), judgments.qrels(collection, name)))
        except Exception as exc:
            views.show_error(exc)
            return None
        st.caption(views.markdown_safe(chosen.summary()))
        _qrels_downloads(judgments, collection, name)
        _delete_form(judgments, collection, name)
    else:
        st.info("This collection has no query set yet: upload queries and judgments below, or rate results "
                "on the Search page (the first rating creates the set 'judgments').")
    _upload_form(judgments, collection, names)
    return chosen


def _with_sample_set(judgments, store, collection: str) -> list[str]:
    """The collection's set names; on the sample collection of a database made before query
    sets existed, first store the sample's queries and judgments (once per session)."""
    from . import resources

    names = judgments.query_sets(collection)
    flag = "eval.sample_set_checked"
    if collection != resources.SAMPLE_COLLECTION or resources.SAMPLE_QUERY_SET in names or st.session_state.get(flag):
        return names
    st.session_state[flag] = True
    from retrieval.ingest import parse_path

    resources.store_sample_queries(store, parse_path(resources.sample_dir()))
    return judgments.query_sets(collection)


def _qrels_downloads(judgments, collection: str, name: str) -> None:
    left, right, _ = st.columns([1, 1, 3])
    try:
        trec, beir = memo_read(judgments.store, ("qrels", collection, name), lambda: (
            judgments.export_qrels(collection, name, fmt="trec"), judgments.export_qrels(collection, name, fmt="beir")))
    except Exception as exc:
        views.show_error(exc)
        return
    left.download_button("Judgments (TREC qrels)", trec, file_name=f"{collection}-{name}.qrels", mime="text/plain",
                         key="eval.qrels_trec", help="This set's judgments as TREC qrels: 'qid 0 docid grade' lines.")
    right.download_button("Judgments (BEIR tsv)", beir, file_name=f"{collection}-{name}.tsv",
                          mime="text/tab-separated-values", key="eval.qrels_beir",
                          help="This set's judgments as a BEIR qrels file: query-id, corpus-id, score (tab-separated).")


def _delete_form(judgments, collection: str, name: str) -> None:
    with st.expander("Delete this query set"):
        sure = st.checkbox(f"Yes, delete '{name}' with all its judgments", key="eval.delete.confirm",
                           help="Confirms the deletion; it cannot be undone.")
        if st.button("Delete query set", key="eval.delete", disabled=not sure,
                     help="Remove the set, its queries and every judgment in it (the documents stay)."):
            try:
                judgments.delete_query_set(collection, name)
            except Exception as exc:
                views.show_error(exc)
                return
            state.view().query_set = None
            judging.forget()
            st.session_state["eval.flash"] = f"Deleted query set '{name}'."
            st.session_state.pop("eval.delete.confirm", None)
            st.rerun()


def _upload_form(judgments, collection: str, names: list[str]) -> None:
    with st.expander("Upload a query set"):
        st.caption("Queries: JSONL (`_id`/`id` and `text`/`query`), TSV (`id<TAB>text`) or CSV with a header. "
                   "Judgments (optional): TREC qrels (`qid 0 docid grade`), BEIR tsv "
                   "(`query-id<TAB>corpus-id<TAB>score`) or CSV with query, document and grade columns.")
        name = st.text_input("Query set name", key="eval.upload.name",
                             help="The name the set is stored under in this collection.")
        queries = st.file_uploader("Queries file", type=QUERY_TYPES, key="eval.upload.queries",
                                   help="The query texts with their ids (JSONL, TSV or CSV).")
        qrels = st.file_uploader("Judgments file (qrels)", type=QRELS_TYPES, key="eval.upload.qrels",
                                 help="Graded relevance per query id and document id: TREC, BEIR tsv or CSV. "
                                      "Optional: without it the queries start unjudged.")
        replace = st.checkbox("Replace a set of the same name", key="eval.upload.replace",
                              help="Overwrite an existing set with this name (its ratings are lost).")
        submitted = st.button("Save query set", key="eval.upload.save",
                              help="Parse both files and store them as the set; nothing is stored when a file "
                                   "has a problem.")
        if submitted:
            try:
                saved = upload_query_set(judgments, collection, name,
                                         (queries.name, queries.getvalue()) if queries else None,
                                         (qrels.name, qrels.getvalue()) if qrels else None, names, replace)
            except Exception as exc:
                views.show_error(exc)
                return
            state.view().query_set = saved.name
            judging.forget()
            st.session_state["eval.flash"] = saved.summary().replace("Query set", "Saved query set", 1)
            st.rerun()


def flash() -> None:
    message = st.session_state.pop("eval.flash", None)
    if message:
        st.success(views.markdown_safe(message))


# ---- evaluate -------------------------------------------------------------------------------
def evaluate_section(workbench, collection: str, qset: QuerySet, config: SearchConfig) -> None:
    key = (collection, qset.name, config.to_json(), qset.fingerprint())
    st.caption(views.markdown_safe(f"Config A (sidebar): {config_label(config)}."))
    if st.button("Evaluate config A", key="eval.run", type="primary",
                 help="Run every judged query of the set with config A and score each source's ranking and the "
                      "fused one (nDCG@10, MRR@10, Recall@100, P@10, MAP). Candidates are cached, so a second "
                      "run with other fusion settings only re-fuses."):
        from retrieval.evaluate import evaluate_collection

        bar = st.progress(0.0, text="Evaluating…")

        def progress(done: int, total: int) -> None:
            bar.progress(min(1.0, done / max(total, 1)), text=f"Evaluating: query {done} of {total}")

        try:
            report = evaluate_collection(workbench, collection, qset.queries, qset.qrels, copy.deepcopy(config),
                                         DEFAULT_METRICS, progress)
        except Exception as exc:
            bar.empty()
            views.show_error(exc)
            return
        bar.empty()
        results()["evaluate"] = {"key": key, "report": report, "queries": dict(qset.queries),
                                 "judged": {q: len(d) for q, d in qset.qrels.items()},
                                 "when": time.strftime("%H:%M:%S")}
    stored = results().get("evaluate")
    if stored is None:
        st.info("Press **Evaluate config A** to score it on this query set.")
        return
    if stored["key"][0] != collection:
        return
    _stale_note("evaluation", stored, key)
    _show_report(stored)


def _show_report(stored: dict[str, Any]) -> None:
    report = stored["report"]
    names = [m for m in DEFAULT_METRICS if m in report.metrics.get("hybrid", {})]
    st.markdown(f"**Mean over {plural(report.n_queries, 'judged query', 'judged queries')}**")
    fused = report.metrics.get("hybrid", {})
    for column, metric in zip(st.columns(len(names)), names):
        column.metric(eval_charts.metric_label(metric), f"{fused[metric]:.4f}",
                      help=eval_charts.METRIC_HELP.get(metric))
    st.dataframe(eval_charts.metrics_frame(report.metrics, names), hide_index=True, width="stretch",
                 column_config={eval_charts.metric_label(m): st.column_config.NumberColumn(
                     format="%.4f", help=eval_charts.METRIC_HELP.get(m)) for m in names})
    st.plotly_chart(eval_charts.metrics_chart(report.metrics, names), width="stretch")

    view = state.view()
    config = report.config

    def link(query: str) -> str:
        return eval_charts.search_url(view, query, config)

    frame = eval_charts.per_query_frame(report.per_query, stored["queries"], names, link, stored["judged"])
    worst = frame.head(5)
    st.markdown("**Worst queries** (fused nDCG@10), each opens the Search page with that query and this config:")
    st.markdown("\n".join(
        f"{i}. [{views.markdown_safe(row['query'])}]({row['open']}) — nDCG@10 {row['nDCG@10']:.4f}"
        for i, row in enumerate(worst.to_dict("records"), start=1)))
    st.markdown("**Per query** (click a column header to sort)")
    column_config = {eval_charts.metric_label(m): st.column_config.NumberColumn(format="%.4f") for m in names}
    column_config["open"] = st.column_config.LinkColumn(
        "open", display_text="Search ↗", help="Opens the Search page with this query and the evaluated config")
    st.dataframe(frame, hide_index=True, width="stretch", column_config=column_config)
    _report_downloads(report)


def _report_downloads(report) -> None:
    from retrieval.evaluate import metrics_csv, trec_run

    systems = eval_charts.ordered_systems(list(report.runs))
    left, middle, right = st.columns([1, 1, 1])
    system = left.selectbox("Run to download", systems, index=len(systems) - 1, format_func=eval_charts.system_label,
                            key="eval.download_system",
                            help="Which ranking the TREC run and the metrics CSV hold: one source's or the fused one.")
    tag = f"{report.collection}-{system}"
    try:
        run_text = trec_run(report.runs[system], tag)
        csv_text = metrics_csv(report.per_query[system], [m for m in DEFAULT_METRICS
                                                          if m in report.metrics.get(system, {})], mean_row=True)
    except Exception as exc:
        views.show_error(exc)
        return
    middle.download_button("Run (TREC format)", run_text, file_name=f"{tag}.run", mime="text/plain",
                           key="eval.download_run",
                           help="The chosen ranking for every evaluated query: 'qid Q0 docid rank score tag' lines.")
    right.download_button("Metrics (CSV)", csv_text, file_name=f"{tag}-metrics.csv", mime="text/csv",
                          key="eval.download_metrics",
                          help="Per query the metric values of the chosen ranking, and a last row with their means.")


# ---- sweep ----------------------------------------------------------------------------------
def sweep_section(workbench, collection: str, qset: QuerySet, config: SearchConfig) -> None:
    from retrieval.sweep import default_grid

    sources = tuple(s for s in state.UI_SOURCES if s in config.weights) or state.UI_SOURCES
    try:
        variants = default_grid(copy.deepcopy(config), sources=sources)
    except Exception as exc:
        views.show_error(exc)
        return
    key = (collection, qset.name, sweep_base_key(config), qset.fingerprint())
    st.caption(views.markdown_safe(
        f"{len(variants)} variants around config A (fusion, normalisation, combination, BM25 weight, RRF k), "
        f"each scored on the judged queries from the same cached candidates: only fusion runs per variant."
        + _left_out_note(config, sources)))
    if st.button("Run the sweep", key="sweep.run", type="primary",
                 help="Evaluate every variant of the grid on this query set and rank them by nDCG@10. Retrieval "
                      "runs once per query; each variant only re-fuses the cached candidates."):
        from retrieval.sweep import run_sweep

        bar = st.progress(0.0, text="Sweeping…")

        def progress(done: int, total: int) -> None:
            bar.progress(min(1.0, done / max(total, 1)), text=f"Sweep: {done} of {total}")

        try:
            result = run_sweep(workbench, collection, qset.queries, qset.qrels, variants, progress=progress)
            best = result.best()
        except Exception as exc:
            bar.empty()
            views.show_error(exc)
            return
        bar.empty()
        results()["sweep"] = {"key": key, "result": result, "best": best, "when": time.strftime("%H:%M:%S")}
    stored = results().get("sweep")
    if stored is None or stored["key"][0] != collection:
        st.info("Press **Run the sweep** to score every variant.")
        return
    _stale_note("sweep", stored, key)
    result, best = stored["result"], stored["best"]
    rows = list(result.rows)
    names = [m for m in DEFAULT_METRICS if rows and m in rows[0]]
    top = rows[0] if rows else {}
    st.markdown(views.markdown_safe(
        f"Best of {len(rows)} variants: {best.label} — nDCG@10 {top.get('ndcg@10', float('nan')):.4f} "
        f"({config_label(best.config)})."))
    applied = stored.get("applied")
    st.button("Apply the best config to config A", key="sweep.apply", on_click=_apply_best, args=(best.config,),
              help="Replace config A (the sidebar, shared by every page) with the best variant's config.")
    if applied:
        st.success(views.markdown_safe(f"Config A is now {applied}."))
    st.plotly_chart(eval_charts.sweep_heatmap(rows), width="stretch")
    st.dataframe(eval_charts.sweep_frame(rows, names), hide_index=True, width="stretch",
                 column_config={eval_charts.metric_label(m): st.column_config.NumberColumn(format="%.4f")
                                for m in names})


def _left_out_note(config: SearchConfig, sources: tuple[str, ...]) -> str:
    """Say which of config A's sources the grid (two sources) leaves out, and so does applying it."""
    others = [s for s in config.weights if s not in sources]
    if not others:
        return ""
    return (f" The grid fuses {' and '.join(sources)} only: {', '.join(others)} "
            f"{'is' if len(others) == 1 else 'are'} left out of every variant and of the config it applies.")


def sweep_base_key(config: SearchConfig) -> str:
    """What a sweep result depends on in config A: everything but the fields the grid varies
    (so applying the best variant does not make the sweep it came from stale)."""
    varied = ("fusion", "weights", "rrf_k", "normalization", "combination", "rerank")
    return json.dumps({k: v for k, v in config.to_dict().items() if k not in varied}, sort_keys=True)


def _apply_best(config: SearchConfig) -> None:
    """on_click: config A becomes (a copy of) the best variant's config, before the next run
    draws the sidebar, so every control shows it."""
    view = state.view()
    view.config_a = state.with_ui_sources(copy.deepcopy(config))
    stored = results().get("sweep")
    if stored is not None:
        stored["applied"] = f"{stored['best'].label} ({config_label(view.config_a)})"


# ---- A/B ------------------------------------------------------------------------------------
def ab_section(workbench, collection: str, qset: QuerySet) -> None:
    configs = config_store(workbench.store)
    try:
        names = memo_read(workbench.store, ("configs",), configs.names)
    except Exception as exc:
        views.show_error(exc)
        return
    if len(names) < 2:
        st.info("Save at least two configs (in **Configs** below) to compare them here.")
        return
    c1, c2, c3, c4 = st.columns(4)
    name_a = c1.selectbox("Config A (baseline)", names, index=0, key="ab.a",
                          help="The saved config the deltas are measured from.")
    name_b = c2.selectbox("Config B (candidate)", names, index=1, key="ab.b",
                          help="The saved config compared against A: a positive delta means B is better.")
    metric = c3.selectbox("Metric", list(DEFAULT_METRICS), format_func=eval_charts.metric_label, key="ab.metric",
                          help="The per-query metric whose differences are tested.")
    test = c4.selectbox("Significance test", list(AB_TESTS), format_func=AB_TESTS.get, key="ab.test",
                        help="Paired t-test on the per-query differences, or a paired randomization test "
                             "(randomly swaps A and B per query); both two-sided.")
    key = (collection, qset.name, name_a, name_b, metric, test, qset.fingerprint())
    if st.button("Compare A and B", key="ab.run", type="primary",
                 help="Evaluate both saved configs on the judged queries and test the per-query differences."):
        from retrieval.abtest import compare
        from retrieval.evaluate import evaluate_collection

        bar = st.progress(0.0, text="Comparing…")
        try:
            runs = []
            for i, name in enumerate((name_a, name_b)):
                def progress(done: int, total: int, i=i) -> None:
                    bar.progress(min(1.0, (i * total + done) / max(2 * total, 1)),
                                 text=f"Config {'AB'[i]}: query {done} of {total}")

                report = evaluate_collection(workbench, collection, qset.queries, qset.qrels, configs.load(name),
                                             DEFAULT_METRICS, progress)
                runs.append(report.runs["hybrid"])
            judged = {q: qset.qrels[q] for q in qset.judged}
            outcome = compare(judged, runs[0], runs[1], metric=metric, test=test)
        except Exception as exc:
            bar.empty()
            views.show_error(exc)
            return
        bar.empty()
        results()["ab"] = {"key": key, "result": outcome, "queries": dict(qset.queries),
                           "when": time.strftime("%H:%M:%S")}
    stored = results().get("ab")
    if stored is None or stored["key"][0] != collection:
        return
    _stale_note("A/B test", stored, key)
    _show_ab(stored)


def _show_ab(stored: dict[str, Any]) -> None:
    _, set_name, name_a, name_b, metric, test, _ = stored["key"]
    result = stored["result"]
    label = eval_charts.metric_label(metric)
    cols = st.columns(5)
    cols[0].metric(f"{label} A", f"{result.mean_a:.4f}", help=f"Mean {label} of '{name_a}'")
    cols[1].metric(f"{label} B", f"{result.mean_b:.4f}", delta=f"{result.mean_b - result.mean_a:+.4f}",
                   help=f"Mean {label} of '{name_b}' and its difference to A")
    cols[2].metric("win / tie / loss", f"{result.wins} / {result.ties} / {result.losses}",
                   help="Queries where B scores higher / the same / lower than A")
    cols[3].metric("p-value", f"{result.p_value:.4g}", help=f"{AB_TESTS.get(test, test)}, two-sided")
    cols[4].metric(f"significant (p < {result.alpha:g})", "yes" if result.significant else "no",
                   help=f"Whether the difference is unlikely under 'A and B are equally good' at the "
                        f"{result.alpha:.0%} level")
    st.plotly_chart(eval_charts.delta_chart(result.deltas, stored["queries"], metric), width="stretch")
    st.dataframe(eval_charts.delta_frame(result.deltas, stored["queries"]), hide_index=True, width="stretch",
                 column_config={"delta (B − A)": st.column_config.NumberColumn(format="%+.4f")})


# ---- saved configs --------------------------------------------------------------------------
def config_store(store):
    from retrieval.configs import ConfigStore

    return ConfigStore(store)


def configs_section(workbench) -> None:
    configs = config_store(workbench.store)
    view = state.view()
    message = st.session_state.pop("configs.flash", None)
    if message:
        st.success(views.markdown_safe(message))
    left, right = st.columns(2)
    with left:
        st.markdown("**Save config A**")
        name = st.text_input("Config name", key="configs.name",
                             help="The name config A (the sidebar) is saved under; saved configs can be loaded "
                                  "later and compared in the A/B test.")
        overwrite = st.checkbox("Overwrite a config of the same name", key="configs.overwrite",
                                help="Replace a saved config with this name.")
        if st.button("Save", key="configs.save", help="Save config A as it is now under the name above."):
            try:
                configs.save((name or "").strip(), copy.deepcopy(view.config_a), overwrite=overwrite)
            except Exception as exc:  # bad name or a failing database: readable, the page stays up
                views.show_error(exc)
            else:  # st.rerun raises: outside the try
                st.session_state["configs.flash"] = f"Saved config A as '{name.strip()}'."
                st.rerun()
        st.download_button("Export config A (JSON)", view.config_a.to_json(), file_name="config-a.json",
                           mime="application/json", key="configs.export_a",
                           help="Config A as a JSON file (the CLI reads it with --config FILE.json).")
        imported = st.file_uploader("Import a config (JSON)", type=["json"], key="configs.import_file",
                                    help="A config JSON file (as exported here or written by hand); loading it "
                                         "replaces config A.")
        if st.button("Load the file into config A", key="configs.import", disabled=imported is None,
                     help="Read the JSON file and make it config A; an invalid file changes nothing."):
            try:
                config = SearchConfig.from_json(imported.getvalue().decode("utf-8-sig"))
                view.config_a = state.with_ui_sources(config)
                st.session_state["configs.flash"] = f"Config A loaded from {imported.name}: {config_label(config)}."
                st.rerun()
            except UnicodeDecodeError:
                views.show_error(RetrievalError(f"{imported.name} is not UTF-8 text"))
            except RetrievalError as exc:
                views.show_error(exc)
            except (TypeError, ValueError, AttributeError) as exc:  # e.g. "depth": "ten"
                views.show_error(RetrievalError(f"{imported.name} is not a valid search config: {exc}"))
    with right:
        st.markdown("**Saved configs**")
        try:
            names = memo_read(configs.store, ("configs",), configs.names)
        except Exception as exc:
            views.show_error(exc)
            return
        if not names:
            st.caption("None saved yet.")
            return
        chosen = st.selectbox("Saved config", names, key="configs.saved",
                              help="A saved config to load into config A, export or delete.")
        try:
            config = memo_read(configs.store, ("config", chosen), lambda: configs.load(chosen))
        except Exception as exc:
            views.show_error(exc)
            return
        st.caption(views.markdown_safe(config_label(config)))
        if st.button("Load into config A", key="configs.load",
                     help="Replace config A (the sidebar, shared by every page) with this saved config."):
            view.config_a = state.with_ui_sources(copy.deepcopy(config))
            st.session_state["configs.flash"] = f"Config A is now '{chosen}': {config_label(config)}."
            st.rerun()
        st.download_button("Export (JSON)", config.to_json(), file_name=f"{chosen}.json", mime="application/json",
                           key="configs.export", help="This saved config as a JSON file.")
        if st.button("Delete", key="configs.delete", help="Remove this saved config (config A is not changed)."):
            try:
                configs.delete(chosen)
            except Exception as exc:
                views.show_error(exc)
            else:
                st.session_state["configs.flash"] = f"Deleted config '{chosen}'."
                st.rerun()
