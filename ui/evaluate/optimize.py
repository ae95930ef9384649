"""The Evaluate page's Optimise tab: the optimiser (`retrieval.evaluation.optimize`) run in the background on
the query set — Bayesian search, query-dependent fusion or LambdaMART, k-fold over queries — with
a progress bar, the best-so-far curve and Stop (the run returns at once with the best trial so
far, without the grid row); then each method run this session beside config A
and the best grid variant, all held out on the same folds, with the gain's CI and a paired
randomization test; the learned config can become config A or be saved."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import streamlit as st

from retrieval.judging.judgments import QuerySet
from retrieval.search.config import SearchConfig
from retrieval.types import RetrievalError
from ui import state
from ui.evaluate import charts as eval_charts
from ui.evaluate.common import config_label, shown_p
from ui.search import views

RUN_KEY = "_workbench_optimize_run"
CHOICES_KEY = "_workbench_optimize_choices"  # the last trials/folds/seconds chosen
DONE_KEY = "_workbench_optimize_done"  # (collection, set, fingerprint) -> method -> Finished
METHOD_LABELS = {"bayes": "Bayesian search (TPE)", "query-dependent": "Query-dependent fusion",
                 "lambdamart": "LambdaMART (learned ranker)"}
METHOD_HELP = ("Bayesian search: Optuna's TPE tries weights, fusion method, normalisation, combination, RRF k, "
               "depth and per-source minimums, each trial re-fusing the cached candidates. Query-dependent: the "
               "same, with the BM25/vector split set per query from its length, script, unknown terms and how far "
               "BM25's top score stands above its 10th. LambdaMART: a LightGBM ranker over each candidate's "
               "scores, ranks, the query's features, document length and title match, reordering config A's "
               "candidates.")


@dataclass
class Background:
    """One optimisation in a thread of its own: the page polls it; Stop sets `stop`."""

    thread: threading.Thread
    stop: threading.Event
    key: tuple
    method: str
    events: list[dict[str, Any]] = field(default_factory=list)  # the progress reports, in order
    stage: str = "Fetching every query's candidates…"
    finished: Finished | None = None
    error: str = ""


@dataclass
class Finished:
    """A finished run: the result, the grid's held-out values on the same folds, when."""

    result: Any  # optimize.OptimizeResult
    grid: Any  # sweep.HeldOut, or None when the grid could not run
    grid_label: str
    when: str
    p_value: float  # paired randomization test, held-out values against config A's


def optimize_section(workbench, collection: str, qset: QuerySet, config: SearchConfig) -> None:
    st.caption("Searches the fusion on this query set's judgments and says what it is worth on queries it never "
               "saw: k-fold cross-validation over queries, each fold's choice scored on the fold it was not "
               "chosen on. Candidates are fetched once per query; a trial only re-fuses them.")
    key = (collection, qset.name, qset.fingerprint(), config.to_json())
    running: Background | None = st.session_state.get(RUN_KEY)
    if running is not None and running.thread.is_alive():
        progress_panel()
        return
    if running is not None:
        st.session_state.pop(RUN_KEY)
        if running.error:
            views.show_error(running.error)
        elif running.finished is not None:
            st.session_state.setdefault(DONE_KEY, {}).setdefault(running.key[:3], {})[running.method] = (
                running.finished, running.key[3])
    kept = st.session_state.setdefault(CHOICES_KEY, {"trials": 40, "folds": 5, "seconds": 0})
    cols = st.columns(4)
    method = cols[0].selectbox("Method", list(METHOD_LABELS), format_func=METHOD_LABELS.get, key="optimize.method",
                               help=METHOD_HELP)
    trials = cols[1].number_input("Trials per study", 5, 1000, kept["trials"], key="optimize.trials",
                                  disabled=method == "lambdamart",
                                  help="Each of the k + 1 studies (one per fold, one on all queries) tries this many "
                                       "configs; the first is config A.")
    folds = cols[2].number_input("Folds", 2, 10, kept["folds"], key="optimize.folds",
                                 help="Cross-validation over queries: each fold's queries are scored by the config "
                                      "chosen on the other folds (at least 2 judged queries per fold).")
    seconds = cols[3].number_input("Time budget (s, 0 = none)", 0, 36_000, kept["seconds"], key="optimize.seconds",
                                   help="Stops the run after this long, keeping the best so far.")
    # the boxes are not drawn while a run goes on, and Streamlit forgets an undrawn widget's value:
    # the user's choices are kept here, beside the widgets, and drawn again after the run
    kept.update(trials=int(trials), folds=int(folds), seconds=int(seconds))
    if st.button("Optimise", key="optimize.start", type="primary",
                 help="Runs in the background; the page stays usable and Stop keeps the best so far."):
        start(workbench, collection, qset, config, method, int(trials), int(folds), float(seconds) or None, key)
        st.rerun()
    show_results(workbench, collection, qset, config)


def start(workbench, collection: str, qset: QuerySet, config: SearchConfig, method: str, trials: int, folds: int,
          seconds: float | None, key: tuple) -> None:
    from retrieval.evaluation.optimize import cross_validate, query_folds
    from retrieval.evaluation.study import prepare
    from retrieval.evaluation.sweep import default_grid, held_out_estimate, run_sweep

    stop = threading.Event()
    run = Background(threading.Thread(daemon=True, name="optimise"), stop, key, method)

    def work() -> None:
        try:
            base = state.with_ui_sources(config)
            ready = prepare(workbench, collection, qset.queries, qset.qrels, base, method=method)
            run.stage = "Searching…"
            result = cross_validate(ready, trials, folds, seconds=seconds, should_stop=stop.is_set,
                                    progress=run.events.append)
            grid, grid_label = None, ""
            if result.stopped:  # Stop returns at once with the best so far: no grid row
                run.finished = Finished(result, grid, grid_label, time.strftime("%H:%M:%S"), significance(result))
                return
            run.stage = "Scoring the grid on the same folds…"
            try:
                ids = sorted(ready.qrels)
                sweep = run_sweep(workbench, collection, qset.queries, {q: qset.qrels[q] for q in ids},
                                  default_grid(base), ("ndcg@10",))
                grid = held_out_estimate(sweep, "ndcg@10", fold_ids=query_folds(ids, folds, result.seed))
                grid_label = sweep.best().label
            except RetrievalError:
                pass  # a config the grid cannot express (one source, say): no grid row
            run.finished = Finished(result, grid, grid_label, time.strftime("%H:%M:%S"), significance(result))
        except Exception as exc:  # shown by the page when it polls
            run.error = str(exc) if isinstance(exc, RetrievalError) else f"{type(exc).__name__}: {exc}"

    run.thread = threading.Thread(target=work, daemon=True, name="optimise")
    st.session_state[RUN_KEY] = run
    run.thread.start()


def significance(result) -> float:
    """Paired randomization p of the held-out values against config A's, per query."""
    from retrieval.evaluation.paired import randomization_p

    ids = sorted(result.per_query["default"])
    return randomization_p([result.per_query["cv"][q] - result.per_query["default"][q] for q in ids])


@st.fragment(run_every=1.0)
def progress_panel() -> None:
    run: Background | None = st.session_state.get(RUN_KEY)
    if run is None:
        return
    if not run.thread.is_alive():
        st.rerun()  # the whole page: the result
    last = run.events[-1] if run.events else None
    if last is None:
        st.progress(0.0, text=run.stage)
    else:
        per_study = max(last["trials"], 1)
        done = (last["study"] - 1) * per_study + last["trial"]
        st.progress(min(done / (last["studies"] * per_study), 1.0),
                    text=f"{METHOD_LABELS[run.method]}: {last['label']}, trial {last['trial']} of {last['trials']} "
                         f"— best so far {last['best']:.4f}" + ("" if run.stage == "Searching…" else f" · {run.stage}"))
        st.line_chart(best_so_far(run.events), x_label="trial", y_label="best nDCG@10 so far", height=220)
    if st.button("Stop", key="optimize.stop", help="Stops after the current trial; the best so far is kept."):
        run.stop.set()


def best_so_far(events: list[dict[str, Any]]) -> dict[str, list[float | None]]:
    """One line per study: its best value after each trial."""
    lines: dict[str, list[float | None]] = {}
    for event in events:
        lines.setdefault(event["label"], []).append(event["best"])
    width = max((len(v) for v in lines.values()), default=0)
    return {label: values + [None] * (width - len(values)) for label, values in lines.items()}


def show_results(workbench, collection: str, qset: QuerySet, config: SearchConfig) -> None:
    done = st.session_state.get(DONE_KEY, {}).get((collection, qset.name, qset.fingerprint()), {})
    if not done:
        st.info("Press **Optimise** to search the fusion on this query set.")
        return
    first = next(iter(done.values()))[0]
    ids = sorted(first.result.per_query["default"])
    default = [first.result.per_query["default"][q] for q in ids]
    rows = [_row("config A", default, None, first.result.default["value"], None)]
    grid = next((f for f, _ in done.values() if f.grid is not None), None)
    if grid is not None:
        rows.append(_row("best grid variant", [grid.grid.per_query[q] for q in ids], default, grid.grid.in_sample,
                         None))
    for method, (finished, config_json) in done.items():
        r = finished.result
        if config_json != config.to_json():
            st.caption(views.markdown_safe(f"{METHOD_LABELS[method]} ran from config A as it was at {finished.when}."))
        rows.append(_row(METHOD_LABELS[method], [r.per_query["cv"][q] for q in ids],
                         [r.per_query["default"][q] for q in ids], r.in_sample["value"], finished.p_value,
                         f"{r.seconds['total']:.1f} s" + (" (stopped)" if r.stopped else ""), r.gain["ci95"]))
    st.dataframe(results_frame(rows), hide_index=True, width="stretch")
    st.caption(views.markdown_safe(
        "Held out: each query scored by the config chosen on the other folds. In-sample: chosen and scored on the "
        "same queries — optimistic. Gain: held out minus config A, paired per query; its 95 % CI for a method "
        "includes the tuning's own variance (corrected resampled t over the folds, Nadeau & Bengio), for the grid a "
        "bootstrap over queries; p: paired randomization test."
        + (f" Best grid variant: {grid.grid_label}, chosen on all queries." if grid is not None else "")))
    for method, (finished, _) in done.items():
        result_details(workbench, method, finished)


# What a reader compares first (the held-out value, the gain, p, the time) before the intervals and the
# optimistic in-sample value: all of them in sight in a 1400-pixel window.
COLUMNS = ("", "nDCG@10 held out", "gain over config A", "p", "time", "95 % CI", "in-sample")


def results_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows in `COLUMNS`' order (a column no row has is left out; an empty cell reads "")."""
    columns = [c for c in COLUMNS if any(c in row for row in rows)]
    return pd.DataFrame.from_records(rows, columns=columns).fillna("")


def _row(name: str, values: list[float], base: list[float] | None, in_sample: float, p: float | None,
         seconds: str = "", gain_ci: list[float] | None = None) -> dict[str, Any]:
    """One row of the table; `gain_ci`: the optimiser's interval of the gain (with the tuning's
    variance), else the queries' bootstrap."""
    from retrieval.evaluation.optimize import mean_ci

    held = mean_ci(values)
    row = {"": name, "nDCG@10 held out": round(held["value"], 4),
           "95 % CI": f"{held['ci95'][0]:.4f} … {held['ci95'][1]:.4f}", "in-sample": round(in_sample, 4)}
    if base is not None:
        gain = mean_ci([v - b for v, b in zip(values, base, strict=True)])
        gain["ci95"] = gain_ci or gain["ci95"]
        row["gain over config A"] = f"{gain['value']:+.4f} ({gain['ci95'][0]:+.4f} … {gain['ci95'][1]:+.4f})"
    if p is not None:
        row["p"] = shown_p(p)
    if seconds:
        row["time"] = seconds
    return row


def result_details(workbench, method: str, finished: Finished) -> None:
    r = finished.result
    with st.expander(f"{METHOD_LABELS[method]}: the learned config, warnings, what mattered"):
        for warning in r.warnings:
            st.warning(views.markdown_safe(warning))
        st.markdown(views.markdown_safe(r.summary().split("\n")[0]))
        st.caption(views.markdown_safe("Learned (on all queries): " + config_label(r.config)
                                       + (f", learned ranker {r.config.ranker}" if r.config.ranker else "")
                                       + (", query-dependent weights" if r.config.query_weights else "")))
        if r.full.importance:
            what = "share of the trees' gain" if method == "lambdamart" else "parameter importance (PED-ANOVA)"
            st.plotly_chart(eval_charts.importance_chart(r.importance_labels(), what), width="stretch")
        if r.config.query_weights:
            weights = r.config.query_weights
            st.caption(views.markdown_safe(
                f"{weights['sources'][0]}'s share of the weight = σ({weights['intercept']:+.2f} "
                + " ".join(f"{a:+.2f}·z({f})" for f, a in weights["coefficients"].items())
                + "); each search's explanation says what set its query's split."))
        cols = st.columns(2)
        cols[0].button("Use as config A", key=f"optimize.apply.{method}", on_click=_apply, args=(workbench, r),
                       help="Replace config A (the sidebar, shared by every page) with the learned config.")
        with cols[1].form(f"optimize.save.{method}", border=False):
            name = st.text_input("Save as", key=f"optimize.save_name.{method}", placeholder="a config name")
            if st.form_submit_button("Save"):
                try:
                    save(workbench, r, name.strip())
                    st.success(views.markdown_safe(f"Saved as {name.strip()!r}."))
                except Exception as exc:
                    views.show_error(exc)


def _keep_model(workbench, result) -> None:
    """A learned ranker's model goes into the store before a config names it."""
    if result.model_text:
        from retrieval.search.ranker_models import RankerModels

        RankerModels(workbench.store).save(result.model_text)


def _apply(workbench, result) -> None:
    """on_click: config A becomes the learned config, before the next run draws the sidebar."""
    _keep_model(workbench, result)
    state.view().config_a = result.config


def save(workbench, result, name: str) -> None:
    _keep_model(workbench, result)
    workbench.configs.save(name, result.config)
