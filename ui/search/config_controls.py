"""Drawing the SearchConfig controls (`knobs.py`) for config A or B, the Graph page's graph
parameters alone, and Compare's shortcuts for config B.

Every control is bound to the session's View (`state.bound`), so it keeps its value across
pages and is mirrored in the URL.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from retrieval.search.config import SearchConfig
from retrieval.search.fusion.methods import FUSION_METHODS, method_of, method_params
from retrieval.search.rerank import measured_effect
from retrieval.search.workbench import Workbench
from retrieval.sources import label
from retrieval.types import RetrievalError
from ui import state
from ui.search import views
from ui.search.filter_controls import filter_controls
from ui.search.knobs import (
    ADVANCED_KNOBS,
    EXTRA_SOURCES,
    EXTRA_WEIGHT_KNOBS,
    GRAPH_KNOBS,
    MAIN_KNOBS,
    SOURCE_KNOBS,
    SOURCES_KNOB,
    Knob,
    outside_knobs,
)
from ui.search.rule_controls import rule_controls
from ui.search.views import markdown_safe

# Config fields some fusion method reads: a control of one the current method does not read is greyed out.
METHOD_PARAMS = method_params()
B_DONE_KEY = "b.done"  # what a Compare shortcut just did to config B, said once


def _method(config: SearchConfig):
    """The config's fusion method; an unknown name (a config being edited) reads as the default's."""
    return method_of(config) if config.fusion in FUSION_METHODS else method_of(SearchConfig())


def _draw(knob: Knob, which: str, **extra: Any) -> Any:
    key = f"{which}.{knob.key}"
    return state.bound(knob.widget, knob.label, key,
                       lambda: knob.read(state.view().config(which)),
                       lambda value: state.view().set_config(which, knob.write(state.view().config(which), value)),
                       help=knob.help, **knob.kwargs, **extra)


def config_b_actions(workbench: Workbench, container: Any = None) -> None:
    """Compare's shortcuts for config B: copy config A into it, load a saved config into it, or
    reset it to its defaults (each a callback, so B's controls show the new config at once)."""
    def set_b(config: SearchConfig, what: str) -> None:
        state.view().config_b = state.with_ui_sources(config)
        st.session_state[B_DONE_KEY] = f"Config B is now {what}."

    with container if container is not None else st:
        done = st.session_state.pop(B_DONE_KEY, None)
        if done:
            st.success(markdown_safe(done))
        st.button("Copy A → B", key="b.copy_a", on_click=lambda: set_b(state.view().config_a, "a copy of config A"),
                  help="Config B becomes a copy of config A (the sidebar), to change one thing from there.")
        try:
            saved = workbench.configs.names()
        except Exception as exc:
            views.show_error(exc)
            saved = []
        if saved:
            name = st.selectbox("Saved config", saved, key="b.saved", help="A config saved on the Evaluate page.")

            def load() -> None:
                try:
                    set_b(workbench.configs.load(name), f"the saved config '{name}'")
                except RetrievalError as exc:  # e.g. deleted meanwhile
                    st.session_state[B_DONE_KEY] = f"Config B is unchanged: {exc}"

            st.button("Load into B", key="b.load", on_click=load, help="Config B becomes the saved config.")
        st.button("Reset B to defaults", key="b.reset",
                  on_click=lambda: set_b(state.default_config_b(), "the default RRF k = 60, BM25 0.5 / vector 0.5"),
                  help="Config B goes back to its defaults: RRF k = 60, BM25 0.5, vector 0.5.")


def in_sentence(label: str) -> str:
    """A control's label inside a sentence: 'Score normalisation' → 'score normalisation', an
    acronym kept ('RRF k')."""
    return label if label[:2].isupper() else label[:1].lower() + label[1:]


def graph_controls(which: str = "a", container: Any = None) -> SearchConfig:
    """The entity graph's parameters alone (the same `GRAPH_KNOBS`, bound to the same keys as in
    `config_controls`), for the Graph page; returns the View's config."""
    with container if container is not None else st.sidebar:
        st.subheader("Entity graph")
        for knob in GRAPH_KNOBS:
            _draw(knob, which)
    return state.view().config(which)


def config_controls(which: str = "a", container: Any = None, title: str | None = None,
                    rerank_always: bool = False) -> SearchConfig:
    """Draw every config control for config `which` ('a' or 'b') in `container` (default the
    sidebar); return the View's config, which now holds exactly what the controls show.

    `rerank_always`: the page reranks whatever the toggle says, so top-N stays enabled."""
    container = container if container is not None else st.sidebar
    config = state.view().config(which)
    with container:
        if title:
            st.subheader(title)
        learned_note(which)
        for knob in MAIN_KNOBS:
            config = state.view().config(which)
            unused = knob.key in METHOD_PARAMS and not _method(config).uses(knob.key)
            rerank_off = knob.key in ("rerank_top_n", "rerank_lambda") and not (config.rerank or rerank_always)
            _draw(knob, which, **({"disabled": True} if unused or rerank_off else {}))
            if unused:  # say why it is greyed out, beside it
                st.caption(markdown_safe(f"Greyed out: {_method(config).short} does not use the "
                                         f"{in_sentence(knob.label)} ({_method(config).help})"))
            elif rerank_off:
                st.caption("Greyed out: turn “Rerank” on to use it.")
            if knob.key == "rerank":  # what reranking did where it was measured, beside its switch
                st.caption(markdown_safe(measured_effect(state.view().config(which))))
        _draw(SOURCES_KNOB, which)
        for source in EXTRA_SOURCES:
            if source in state.view().config(which).weights:
                _draw(EXTRA_WEIGHT_KNOBS[source], which)
                with st.expander(f"{label(source).capitalize()} parameters"):
                    for knob in SOURCE_KNOBS[source]:
                        _draw(knob, which)
        outside_controls(which)
        filter_controls(which)
        rule_controls(which)
        with st.expander("Advanced"):
            for knob in ADVANCED_KNOBS:
                _draw(knob, which)
    return state.view().config(which)


def outside_controls(which: str) -> None:
    """The registered outside engines (`knobs.outside_knobs`): a picker, and each picked one's weight."""
    from ui import resources

    try:
        names = tuple(resources.workbench().outside_sources().names())
    except RetrievalError as exc:
        views.show_error(exc)
        return
    if not names:
        return
    picker, weights = outside_knobs(names)
    _draw(picker, which)
    for name in names:
        if name in state.view().config(which).weights:
            _draw(weights[name], which)


def learned_note(which: str) -> None:
    """Say what a learned config (the Evaluate page's Optimise tab) does beyond the sliders, with
    a button that drops it and keeps the rest."""
    config = state.view().config(which)
    if config.query_weights:
        first, second = (label(s) for s in config.query_weights["sources"])
        st.caption(markdown_safe(f"Query-dependent weights (learned): each query's {first}/{second} split is set from "
                                 "its features; the weight sliders set only their total. Each search says what set "
                                 "its split."))
        st.button("Use fixed weights", key=f"{which}.drop_query_weights", on_click=_drop, args=(which, "query_weights"),
                  help="Drop the learned split and rank with the weights the sliders show.")
    if config.ranker:
        st.caption(markdown_safe(f"Learned ranker {config.ranker}: it reorders the fused candidates by its own "
                                 "score; each result lists what its features added."))
        st.button("Drop the learned ranker", key=f"{which}.drop_ranker", on_click=_drop, args=(which, "ranker"),
                  help="Rank by the fusion again.")


def _drop(which: str, field_name: str) -> None:
    view = state.view()
    view.set_config(which, view.config(which).edited(**{field_name: type(getattr(view.config(which), field_name))()}))
