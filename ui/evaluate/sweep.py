"""The Evaluate page's sweep section: a grid of fusion variants around config A, each scored on
the judged queries from the same cached candidates, optionally with rerank variants (λ × top-N
over config A's first stage); the best one can be applied to config A."""

from __future__ import annotations

import json
import time

import streamlit as st

from retrieval.evaluation.evaluate import DEFAULT_METRICS
from retrieval.judging.judgments import QuerySet
from retrieval.search.config import SearchConfig
from ui import state
from ui.evaluate import charts as eval_charts
from ui.evaluate.common import config_label, results, stale_note
from ui.progress import progress_bar
from ui.search import views

RERANK_TOP_NS = (10, 20, 50)


def sweep_section(workbench, collection: str, qset: QuerySet, config: SearchConfig) -> None:
    from retrieval.evaluation.sweep import RERANK_LAMBDAS, default_grid, headline, with_current, with_rerank_grid

    sources = tuple(s for s in state.UI_SOURCES if s in config.weights) or state.UI_SOURCES
    with_rerank = st.checkbox(
        "Add rerank variants", key="sweep.rerank",
        help="Config A's first stage reranked with its reranker, for λ = 0, 0.1, …, 1 (final = λ·first stage + "
             "(1 − λ)·rerank, both min-max normalised over the top-N) and each top-N chosen below, next to config "
             "A's first stage without rerank. The reranker scores each query's top-N once.")
    top_ns: list[int] = []
    if with_rerank:
        options = sorted({*RERANK_TOP_NS, config.rerank_top_n})
        top_ns = st.multiselect("Rerank top-N", options, default=[config.rerank_top_n], key="sweep.rerank_top_ns",
                                help="How many of the first stage's results the reranker reorders (one line each).")
    try:
        variants = default_grid(config, sources=sources)
        first_stage_count = len(variants)
        if with_rerank and top_ns:
            variants = with_rerank_grid(variants, config, RERANK_LAMBDAS, top_ns)
        variants, current = with_current(variants, config)  # config A scored beside the grid
    except Exception as exc:
        views.show_error(exc)
        return
    rerank_choice = (config.reranker, tuple(sorted(top_ns))) if with_rerank and top_ns else None
    key = (collection, qset.name, sweep_base_key(config), qset.fingerprint(), rerank_choice)
    reranked = sum(v.config.rerank for v in variants)  # (the added no-rerank baseline is not one)
    st.caption(views.markdown_safe(
        f"{first_stage_count} variants around config A (fusion, normalisation, combination, BM25 weight, RRF k), "
        f"each scored on the judged queries from the same cached candidates: only fusion runs per variant."
        + (f" Plus {reranked} with rerank ({config.reranker}): the reranker scores each query's top "
           f"{max(top_ns)} once, then each λ and top-N only reorders them." if reranked else "")
        + _left_out_note(config, sources)))
    if st.button("Run the sweep", key="sweep.run", type="primary",
                 help="Evaluate every variant of the grid on this query set and rank them by nDCG@10. Retrieval "
                      "runs once per query; each variant only re-fuses the cached candidates."):
        from retrieval.evaluation.sweep import run_sweep

        try:
            with progress_bar("Sweeping…", "Sweep: {done} of {total}") as progress:
                result = run_sweep(workbench, collection, qset.queries, qset.qrels, variants, progress=progress)
                best = result.best()
        except Exception as exc:
            views.show_error(exc)
            return
        results()["sweep"] = {"key": key, "result": result, "best": best, "when": time.strftime("%H:%M:%S"),
                              "current": current}
    stored = results().get("sweep")
    if stored is None or stored["key"][0] != collection:
        st.info("Press **Run the sweep** to score every variant.")
        return
    stale_note(workbench, "sweep", stored, key)
    result, best = stored["result"], stored["best"]
    rows = list(result.rows)
    names = [m for m in DEFAULT_METRICS if rows and m in rows[0]]
    # Config A as it is now, if the sweep scored it; else config A as it was when the sweep ran.
    now = next((v.label for v in result.variants.values() if v.config == config), None)
    # The headline's randomization test runs once per current config, not on every rerun.
    said = stored.setdefault("headlines", {}).get(now or stored["current"])
    if said is None:
        said = stored["headlines"][now or stored["current"]] = headline(result, now or stored["current"], "ndcg@10")
    st.markdown(views.markdown_safe(said.sentence().replace("Current config", "Config A" if now else
                                                            "Config A when the sweep ran", 1)
                                    + f" Best: {best.label} ({config_label(best.config)})."))
    if len(said.tied) > 1:
        st.caption(views.markdown_safe("Tied at the best: " + "; ".join(said.tied[:20])
                                       + (f" … and {len(said.tied) - 20} more" if len(said.tied) > 20 else "")))
    applied = stored.get("applied")
    st.button("Apply the best config to config A", key="sweep.apply", on_click=_apply_best, args=(best.config,),
              help="Replace config A (the sidebar, shared by every page) with the best variant's config.")
    if applied:
        st.success(views.markdown_safe(f"Config A is now {applied}."))
    st.plotly_chart(eval_charts.sweep_heatmap(rows), width="stretch")
    if eval_charts.rerank_lines(rows):
        st.plotly_chart(eval_charts.rerank_chart(rows, _no_rerank_value(result)), width="stretch")
    column_config = {eval_charts.metric_label(m): st.column_config.NumberColumn(format="%.4f") for m in names}
    column_config.update(normalization=st.column_config.TextColumn("normalisation"),
                         rrf_k=st.column_config.NumberColumn("RRF k"),
                         rerank_top_n=st.column_config.NumberColumn("rerank top-N"),
                         rerank_lambda=st.column_config.NumberColumn("rerank λ", format="%.1f"))
    st.dataframe(eval_charts.sweep_frame(rows, names), hide_index=True, width="stretch", column_config=column_config,
                 placeholder=eval_charts.NOT_USED)


def _no_rerank_value(result) -> float | None:
    """nDCG@10 of the rerank variants' first stage without rerank (None when not in the sweep)."""
    from retrieval.evaluation.sweep import is_first_stage_of

    reranked = next((v.config for v in result.variants.values() if v.config.rerank), None)
    if reranked is None:
        return None
    row = next((r for r in result.rows if is_first_stage_of(result.variants[r["label"]].config, reranked)), None)
    return None if row is None else row.get("ndcg@10")


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
    varied = ("fusion", "weights", "rrf_k", "normalization", "combination", "rerank", "rerank_top_n", "rerank_lambda")
    return json.dumps({k: v for k, v in config.to_dict().items() if k not in varied}, sort_keys=True)


def _apply_best(config: SearchConfig) -> None:
    """on_click: config A becomes (a copy of) the best variant's config, before the next run
    draws the sidebar, so every control shows it."""
    view = state.view()
    view.config_a = state.with_ui_sources(config)
    stored = results().get("sweep")
    if stored is not None:
        stored["applied"] = f"{stored['best'].label} ({config_label(view.config_a)})"
