"""The Evaluate page's A/B test: two sides evaluated on the judged queries, their per-query
differences in one metric tested for significance (paired t-test or randomization), Δ with its
95 % interval, and the one verdict (`abtest.verdict`). The sides are two saved configs, or an
outside engine (`docs/sources.md`) evaluated alone (weights NAME=1) against the local default
config: the same comparison, so the team's own engine is measured beside the workbench's."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import streamlit as st

from retrieval.evaluation.evaluate import DEFAULT_METRICS
from retrieval.judging.judgments import QuerySet
from retrieval.search.config import SearchConfig
from ui.evaluate import charts as eval_charts
from ui.evaluate.common import config_label, results, shown_p, stale_note
from ui.progress import progress_bar
from ui.search import views
from ui.state import memo_read

AB_TESTS = {"t-test": "paired t-test", "randomization": "paired randomization test"}
AB_MODES = {"configs": "two saved configs", "outside": "an outside engine against the local default"}
LOCAL_DEFAULT = "local default"
Side = tuple[str, Callable[[], SearchConfig]]  # a side's name as shown, and its config (read on the run)


def ab_section(workbench, collection: str, qset: QuerySet) -> None:
    mode = st.radio("Compare", list(AB_MODES), format_func=AB_MODES.get, key="ab.mode", horizontal=True,
                    help="Two saved configs, or a registered outside engine (the Corpus page registers them) "
                         "evaluated alone against the local default config (what a new Search page uses).")
    sides = _saved_sides(workbench) if mode == "configs" else _outside_sides(workbench)
    if sides is None:
        return
    (name_a, config_a), (name_b, config_b) = sides
    c3, c4 = st.columns(2)
    metric = c3.selectbox("Metric", list(DEFAULT_METRICS), format_func=eval_charts.metric_label, key="ab.metric",
                          help="The per-query metric whose differences are tested.")
    test = c4.selectbox("Significance test", list(AB_TESTS), format_func=AB_TESTS.get, key="ab.test",
                        help="Paired t-test on the per-query differences, or a paired randomization test "
                             "(randomly swaps A and B per query); both two-sided.")
    key = (collection, qset.name, name_a, name_b, metric, test, qset.fingerprint(), mode)
    if st.button("Compare A and B", key="ab.run", type="primary",
                 help="Evaluate both sides on the judged queries and test the per-query differences."):
        from retrieval.evaluation.abtest import compare
        from retrieval.evaluation.evaluate import evaluate_collection
        from retrieval.evaluation.trust import judgment_trust

        try:
            with progress_bar("Comparing…", "Side {part}: query {done} of {total}", parts=("A", "B")) as progress:
                runs, errors = [], {}
                for i, config in enumerate((config_a, config_b)):
                    report = evaluate_collection(workbench, collection, qset.queries, qset.qrels, config(),
                                                 DEFAULT_METRICS, progress.part(i))
                    runs.append(report.runs["hybrid"])
                    errors.update(report.errors)
                judged = {q: qset.qrels[q] for q in qset.judged}
                outcome = compare(judged, runs[0], runs[1], metric=metric, test=test)
                trust = judgment_trust(runs[0], runs[1], judged, metric)
        except Exception as exc:
            views.show_error(exc)
            return
        results()["ab"] = {"key": key, "result": outcome, "queries": dict(qset.queries), "trust": trust,
                           "errors": errors, "when": time.strftime("%H:%M:%S")}
    stored = results().get("ab")
    if stored is None or stored["key"][0] != collection:
        return
    stale_note(workbench, "A/B test", stored, key)
    _show_ab(stored)


def _saved_sides(workbench) -> tuple[Side, Side] | None:
    try:
        configs = workbench.configs
        names = memo_read(workbench, ("configs",), configs.names)
    except Exception as exc:
        views.show_error(exc)
        return None
    if len(names) < 2:
        st.info("Save at least two configs (in **Configs** below) to compare them here.")
        return None
    c1, c2 = st.columns(2)
    name_a = c1.selectbox("Config A (baseline)", names, index=0, key="ab.a",
                          help="The saved config the deltas are measured from.")
    name_b = c2.selectbox("Config B (candidate)", names, index=1, key="ab.b",
                          help="The saved config compared against A: a positive delta means B is better.")
    return (name_a, lambda: configs.load(name_a)), (name_b, lambda: configs.load(name_b))


def _outside_sides(workbench) -> tuple[Side, Side] | None:
    try:
        names = workbench.outside_sources().names()
    except Exception as exc:
        views.show_error(exc)
        return None
    if not names:
        st.info("No outside engine is registered: register one on the Corpus page (“Outside engines”) to "
                "measure it here against the local default.")
        return None
    name = st.selectbox("Outside engine (B)", names, key="ab.engine",
                        help="A registered outside engine, evaluated alone (weights NAME=1: its own ranking, cut at "
                             "the default depth). A is the local default config; a positive delta means the "
                             "engine is better.")
    default = SearchConfig()
    st.caption(views.markdown_safe(f"A: the local default ({config_label(default)}); B: '{name}' alone."))
    return (LOCAL_DEFAULT, lambda: default), (name, lambda: SearchConfig(weights={name: 1.0}))


def _show_trust(trust: dict[str, Any], name_a: str, name_b: str) -> None:
    flip = trust["flip"]
    (st.warning if flip.can_flip else st.caption)(views.markdown_safe(flip.sentence()))
    st.dataframe([{"config": name, **{k: round(v, 4) for k, v in trust[side].items()}}
                  for side, name in (("A", name_a), ("B", name_b))], hide_index=True, width="stretch",
                 column_config={
                     "judged@10": st.column_config.NumberColumn(help="The share of the top 10 that has a judgment"),
                     "ndcg'@10": st.column_config.NumberColumn(help="nDCG@10 with the unjudged documents removed "
                                                                    "(condensed list, Sakai 2007)"),
                     "bpref": st.column_config.NumberColumn(help="Relevant documents ranked above judged "
                                                                 "non-relevant ones; unjudged ones ignored "
                                                                 "(trec_eval's bpref)")})


def _show_ab(stored: dict[str, Any]) -> None:
    from retrieval.evaluation.abtest import verdict
    from retrieval.evaluation.paired import p_text

    _, _, name_a, name_b, metric, test, _, _ = stored["key"]
    result = stored["result"]
    label = eval_charts.metric_label(metric)
    for source, (failed, first) in stored.get("errors", {}).items():
        st.warning(views.markdown_safe(f"'{source}' failed on {failed} of {result.n_queries} queries (first: "
                                       f"{first}); each counts as retrieving nothing."))
    cols = st.columns(5)
    cols[0].metric(f"{label} A", f"{result.mean_a:.4f}", help=views.markdown_safe(f"Mean {label} of '{name_a}'"))
    cols[1].metric(f"{label} B", f"{result.mean_b:.4f}", delta=f"{result.mean_b - result.mean_a:+.4f}",
                   help=views.markdown_safe(f"Mean {label} of '{name_b}' and its difference to A"))
    cols[2].metric("win / tie / loss", f"{result.wins} / {result.ties} / {result.losses}",
                   help="Queries where B scores higher / the same / lower than A")
    cols[3].metric("p-value", shown_p(result.p_value), help=f"{AB_TESTS.get(test, test)}, two-sided")
    said = verdict(result, stored["trust"]["flip"] if "trust" in stored else None)
    cols[4].metric("verdict", said.answer,
                   help=views.markdown_safe(f"Whether to believe the difference: {said.sentence}. Significant "
                                            f"means unlikely under 'A and B are equally good' at the "
                                            f"{result.alpha:.0%} level; a result the judgments' holes could "
                                            "reverse is not believed yet."))
    if result.delta_ci is not None:
        low, high = result.delta_ci
        st.caption(f"Δ {label} (B − A) = {result.mean_delta:+.4f}, 95 % interval {low:+.4f} … {high:+.4f} "
                   f"(bootstrap over the {result.n_queries} queries); {AB_TESTS.get(test, test)}, "
                   f"{p_text(result.p_value)}.")
    (st.warning if result.significant and not said.believed else st.caption)(
        views.markdown_safe(f"Verdict: {said.sentence}."))
    if "trust" in stored:
        _show_trust(stored["trust"], name_a, name_b)
    st.plotly_chart(eval_charts.delta_chart(result.deltas, stored["queries"], metric), width="stretch")
    st.dataframe(eval_charts.delta_frame(result.deltas, stored["queries"]), hide_index=True, width="stretch",
                 column_config={"delta (B − A)": st.column_config.NumberColumn(format="%+.4f")})
