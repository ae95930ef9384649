"""The Evaluate page's evaluate section: config A scored on the chosen query set (each source's
ranking and the fused one), the report (metrics, worst queries, per query) and its downloads."""

from __future__ import annotations

import time
from typing import Any

import streamlit as st

from retrieval.evaluation.evaluate import DEFAULT_METRICS
from retrieval.judging.judgments import QuerySet
from retrieval.search.config import SearchConfig
from ui import state
from ui.evaluate import charts as eval_charts
from ui.evaluate.common import config_label, results, stale_note
from ui.progress import progress_bar
from ui.search import views


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def evaluate_section(workbench, collection: str, qset: QuerySet, config: SearchConfig) -> None:
    key = (collection, qset.name, config.to_json(), qset.fingerprint())
    st.caption(views.markdown_safe(f"Config A (sidebar): {config_label(config)}."))
    if st.button("Evaluate config A", key="eval.run", type="primary",
                 help="Run every judged query of the set with config A and score each source's ranking and the "
                      "fused one (nDCG@10, MRR@10, Recall@100, P@10, MAP). Candidates are cached, so a second "
                      "run with other fusion settings only re-fuses."):
        from retrieval.evaluation.candidates import about, estimate_seconds
        from retrieval.evaluation.evaluate import evaluate_collection

        try:
            judged = [qset.queries[q] for q, docs in qset.qrels.items() if docs and q in qset.queries]
            with st.spinner("Timing the first queries…"):
                expected = about(estimate_seconds(workbench, collection, judged, config))
            with progress_bar(f"Evaluating {plural(len(judged), 'query', 'queries')} ({expected} in all)…",
                              "Evaluating: query {done} of {total} (" + expected + " in all)") as progress:
                report = evaluate_collection(workbench, collection, qset.queries, qset.qrels, config,
                                             DEFAULT_METRICS, progress)
        except Exception as exc:
            views.show_error(exc)
            return
        results()["evaluate"] = {"key": key, "report": report, "queries": dict(qset.queries),
                                 "judged": {q: len(d) for q, d in qset.qrels.items()},
                                 "qrels": {q: dict(d) for q, d in qset.qrels.items()},
                                 "when": time.strftime("%H:%M:%S")}
    stored = results().get("evaluate")
    if stored is None:
        st.info("Press **Evaluate config A** to score it on this query set.")
        return
    if stored["key"][0] != collection:
        return
    stale_note(workbench, "evaluation", stored, key)
    _show_report(stored)


def _show_report(stored: dict[str, Any]) -> None:
    report = stored["report"]
    names = [m for m in DEFAULT_METRICS if m in report.metrics.get("hybrid", {})]
    st.markdown(f"**Mean over {plural(report.n_queries, 'judged query', 'judged queries')}**")
    fused = report.metrics.get("hybrid", {})
    for column, metric in zip(st.columns(len(names)), names, strict=True):
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
        f"{i}. [{views.markdown_safe(' '.join(row['query'].split()))}]({row['open']}) — nDCG@10 {row['nDCG@10']:.4f}"
        for i, row in enumerate(worst.to_dict("records"), start=1)))
    st.markdown("**Per query** (click a column header to sort)")
    column_config = {eval_charts.metric_label(m): st.column_config.NumberColumn(format="%.4f") for m in names}
    column_config["open"] = st.column_config.LinkColumn(
        "open", display_text="Search ↗", help="Opens the Search page with this query and the evaluated config")
    st.dataframe(frame, hide_index=True, width="stretch", column_config=column_config)
    _recall_gaps(stored, view)
    _report_downloads(report)


def _recall_gaps(stored: dict[str, Any], view: state.View) -> None:
    """Per query the judged-relevant documents no source returned within the depth, and those
    retrieved but ranked below 10 in the fused run, each linking to the Search page's "why not"."""
    from retrieval.search.whynot.recall_gaps import recall_gaps
    from ui.search import whynot

    report = stored["report"]
    qrels = {q: grades for q, grades in stored.get("qrels", {}).items() if q in report.runs.get("hybrid", {})}
    gaps = recall_gaps(report.runs, qrels)
    unretrieved = sum(1 for g in gaps if not g.retrieved)
    st.markdown("**Recall gaps**")
    st.caption(f"Judged-relevant documents no source returned within the depth ({report.config.depth}): "
               f"{unretrieved}; retrieved but not in the fused top 10: {len(gaps) - unretrieved}. Each opens the "
               "Search page's “Why not this document?” for that query and this config.")
    if not gaps:
        return

    def link(query: str, doc_id: str) -> str:
        return eval_charts.search_url(view, query, report.config, why=doc_id)

    st.dataframe(whynot.gaps_frame(gaps, stored["queries"], link), hide_index=True, width="stretch",
                 column_config={"why not": st.column_config.LinkColumn(
                     "why not", display_text="Why not? ↗",
                     help="Opens the Search page on this query with “Why not this document?” for it")})


def _report_downloads(report) -> None:
    from retrieval.evaluation.evaluate import metrics_csv, trec_run

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
