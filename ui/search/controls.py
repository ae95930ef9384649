"""Shared controls: the collection picker, the query box and the SearchConfig controls.

Every control is bound to the session's View (`state.bound`), so it keeps its value across
pages and is mirrored in the URL. Each has a `help=` saying what it does to the scores.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from retrieval.search.config import BM25_BACKENDS, NORMALIZATIONS, SearchConfig
from retrieval.search.fusion.methods import (
    COMBINATIONS,
    FUSION_METHODS,
    display_help,
    method_of,
    method_params,
    methods_help,
)
from retrieval.search.rerank import measured_effect
from retrieval.search.workbench import Workbench
from retrieval.sources import SOURCES, Param, label
from retrieval.text.highlight import escape_markdown
from retrieval.types import RetrievalError
from ui import resources, state
from ui.corpus import actions as corpus
from ui.search import views
from ui.search.views import markdown_safe

FUSION_LABELS = {name: method.label for name, method in FUSION_METHODS.items()}
NORMALIZATION_LABELS = {"minmax": "min-max", "zscore": "z-score", "l2": "l2 (x / ‖x‖)", "none": "none (raw scores)"}
COMBINATION_LABELS = {name: combination.label for name, combination in COMBINATIONS.items()}
# Config fields some fusion method reads: a control of one the current method does not read is greyed out.
METHOD_PARAMS = method_params()
B_DONE_KEY = "b.done"  # what a Compare shortcut just did to config B, said once


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


@dataclass(frozen=True)
class Knob:
    """One config control: a widget, how to read its value from a config, and the config with a
    new value written (configs are frozen: `write` returns the edited copy)."""

    key: str
    label: str
    help: str
    widget: Callable[..., Any]
    read: Callable[[SearchConfig], Any]
    write: Callable[[SearchConfig, Any], SearchConfig]
    kwargs: dict[str, Any] = field(default_factory=dict)


def _set(name: str, cast: Callable[[Any], Any] = lambda v: v) -> Callable[[SearchConfig, Any], SearchConfig]:
    return lambda config, value: config.edited(**{name: cast(value)})


def _weight_knob(source: str) -> Knob:
    def write(config: SearchConfig, value: float) -> SearchConfig:
        return config.edited(weights={**config.weights, source: float(value)})

    return Knob(f"w_{source}", f"{label(source)} weight", SOURCES[source].weight_help, st.slider,
                lambda c: _clamp(float(c.weights.get(source, 0.0)), 0.0, 1.0), write,
                dict(min_value=0.0, max_value=1.0, step=0.05))


def _min_raw_knob(source: str) -> Knob:
    param = SOURCES[source].min_raw
    low, high, step = param.low, param.high, param.step

    def write(config: SearchConfig, value: float) -> SearchConfig:
        rest = {k: v for k, v in config.min_raw.items() if k != source}
        return config.edited(min_raw={**rest, source: float(value)} if value > low else rest)

    return Knob(f"min_raw_{source}", param.label, param.help, st.slider,
                lambda c: _clamp(float(c.min_raw.get(source, low)), low, high), write,
                dict(min_value=low, max_value=high, step=step))


def _param_knob(param: Param) -> Knob:
    """A slider over one source parameter: a config field (`bm25_k1`) or an entry of a source's
    parameter dict (`keyword.tag`, `graph.depth`), as its descriptor states it."""
    whole = all(float(v).is_integer() for v in (param.low, param.high, param.step))
    cast = int if whole else float
    group, key = param.group, param.key

    def read(config: SearchConfig) -> Any:
        value = getattr(config, group)[key] if group else getattr(config, key)
        return cast(_clamp(value, param.low, param.high))

    def write(config: SearchConfig, value: Any) -> SearchConfig:
        if group:
            return config.edited(**{group: {**getattr(config, group), key: float(value)}})
        return config.edited(**{key: float(value)})

    return Knob(param.path, param.label, param.help, st.slider, read, write,
                dict(min_value=cast(param.low), max_value=cast(param.high), step=cast(param.step)))


# BM25 and vector are always retrieved (weight 0 keeps their ranks visible); optional sources join
# the fusion when picked, with a weight and their own parameters.
CORE_SOURCES = tuple(name for name, spec in SOURCES.items() if not spec.optional)
EXTRA_SOURCES = tuple(name for name, spec in SOURCES.items() if spec.optional)
EXTRA_SOURCE_DEFAULT_WEIGHT = 0.5


MAIN_KNOBS: tuple[Knob, ...] = (
    Knob("fusion", "Fusion method",
         "How the ranked lists become one score. " + methods_help(),
         st.selectbox, lambda c: c.fusion, _set("fusion"),
         dict(options=list(FUSION_METHODS), format_func=FUSION_LABELS.get)),
    *(_weight_knob(source) for source in CORE_SOURCES),
    Knob("rrf_k", "RRF k",
         "RRF only: each source adds w/(k + rank). A small k makes rank 1 worth far more than rank 10 "
         "(k=1: 1/2 vs 1/11); a large k flattens the curve (k=60: 1/61 vs 1/70), which squeezes raw "
         "fused scores into 0.014–0.016. The display score rescales by (k + 1)/Σw so rank 1 everywhere reads 1.0. "
         "Greyed out for a method that does not use k.",
         st.slider, lambda c: round(_clamp(c.rrf_k, 1, 200)), _set("rrf_k", float),
         dict(min_value=1, max_value=200, step=1)),
    Knob("normalization", "Score normalisation",
         "Weighted sum: puts each source's raw scores on one scale before weighting, over this query's "
         "candidates. min-max: (x − min)/(max − min) in [0, 1]; z-score: (x − mean)/std; none: raw values "
         "(BM25's 0–30 would swamp cosine's 0–1). Greyed out for a fusion method that does not use it "
         "(one that ranks, or normalises in its own way: see the fusion method's help).",
         st.selectbox, lambda c: c.normalization, _set("normalization"),
         dict(options=list(NORMALIZATIONS), format_func=NORMALIZATION_LABELS.get)),
    Knob("combination", "Combination",
         "Weighted sum only: how the weighted, normalised scores combine. "
         + " ".join(c.help for c in COMBINATIONS.values())
         + " Harmonic and geometric leave out a source whose normalised score is 0 or missing for that document.",
         st.selectbox, lambda c: c.combination, _set("combination"),
         dict(options=list(COMBINATIONS), format_func=COMBINATION_LABELS.get)),
    Knob("min_display", "Minimum fused score (display scale)",
         "Cuts results whose display score is below this (0 = off); ranks above the cut do not change. "
         "The display score is the fused score as a share of the best possible for this query, a document "
         "every source ranks first: " + display_help() + ". So 1.0 is the best possible result and 0.5 keeps "
         "results with at least half of its fused score.",
         st.slider, lambda c: _clamp(c.min_display_score or 0.0, 0.0, 1.0),
         _set("min_display_score", lambda v: float(v) if v > 0 else None),
         dict(min_value=0.0, max_value=1.0, step=0.01)),
    *(_min_raw_knob(source) for source in CORE_SOURCES if SOURCES[source].min_raw is not None),
    Knob("top_k", "Top-K results",
         "How many fused results are shown, after the thresholds. Cuts the tail only: no score changes.",
         st.slider, lambda c: int(_clamp(c.top_k, 1, 100)), _set("top_k", int),
         dict(min_value=1, max_value=100, step=1)),
    Knob("depth", "Candidate depth (per source)",
         "How many candidates each source retrieves. A document outside a source's depth adds 0 from that "
         "source, and normalisation is computed over these candidates. Retrieved once per query and cached: "
         "lowering it reuses the cache, raising it retrieves again.",
         st.slider, lambda c: int(_clamp(c.depth, 1, 500)), _set("depth", int),
         dict(min_value=1, max_value=500, step=1)),
    Knob("language_aware", "Language-aware fusion",
         "When the query's script differs from the collection's (Chinese question, English documents or the "
         "reverse), word-matching sources (BM25, keyword) cannot match anything real, so their weight drops to 0 "
         "for the fusion; they are still retrieved and shown, and the explanation says so. Off: they count.",
         st.toggle, lambda c: bool(c.language_aware), _set("language_aware", bool)),
    Knob("rerank", "Rerank",
         "Re-scores the first top-N fused results with a second model and reorders them by "
         "final = λ·norm(fused) + (1 − λ)·norm(rerank); fused scores stay as they were and are still shown.",
         st.toggle, lambda c: bool(c.rerank), _set("rerank", bool)),
    Knob("rerank_top_n", "Rerank top-N",
         "How many of the best fused results the reranker re-scores; results below them keep their fused "
         "order (marked 'not reranked').",
         st.slider, lambda c: int(_clamp(c.rerank_top_n, 1, 100)), _set("rerank_top_n", int),
         dict(min_value=1, max_value=100, step=1)),
    Knob("rerank_lambda", "Rerank interpolation λ",
         "final = λ·norm(fused) + (1 − λ)·norm(rerank), both min-max over the reranked top-N: 0 replaces the "
         "fused order by the reranker's, 1 keeps the fused order. Only reorders: no new retrieval.",
         st.slider, lambda c: float(_clamp(c.rerank_lambda, 0.0, 1.0)), _set("rerank_lambda", float),
         dict(min_value=0.0, max_value=1.0, step=0.05)),
)

ADVANCED_KNOBS: tuple[Knob, ...] = (
    Knob("min_score", "Minimum fused score (raw scale)",
         "Cuts results whose fused score, before display rescaling, is below this; empty = off. RRF scores "
         "are at most Σw/(k + 1), e.g. 0.0164 at k = 60.",
         st.number_input, lambda c: c.min_score, _set("min_score", lambda v: None if v is None else float(v)),
         dict(value=None, min_value=None, step=0.001, format="%.5f", placeholder="off")),
    Knob("bm25_backend", "BM25 backend",
         "Which BM25 implementation scores the text: auto (rank_bm25 below the scale threshold, "
         "WORKBENCH_SCALE_DOCS, default 50,000 documents; the native index from there on), rank_bm25 in memory "
         "with the k1 and b below, or LanceDB's native full-text index (its own fixed k1 = 1.2, b = 0.75, "
         "milliseconds at a million documents). Retrieves BM25 candidates again.",
         st.selectbox, lambda c: c.bm25_backend, _set("bm25_backend"), dict(options=list(BM25_BACKENDS))),
    *(_param_knob(p) for source in CORE_SOURCES for p in SOURCES[source].params),
    Knob("reranker", "Reranker",
         "'e5' re-scores with multilingual-e5-small (offline); or a CrossEncoder folder inside a folder the "
         "server allows (WORKBENCH_MODEL_DIRS). Changes only the rerank score and the reranked order.",
         st.text_input, lambda c: c.reranker, _set("reranker", lambda v: (v or "").strip() or "e5")),
)


def _pick_sources(config: SearchConfig, picked: list[str]) -> SearchConfig:
    kept = {name: w for name, w in config.weights.items() if name not in EXTRA_SOURCES or name in picked}
    kept.update({name: EXTRA_SOURCE_DEFAULT_WEIGHT for name in picked if name not in kept})
    return config.edited(weights=kept)


SOURCES_KNOB = Knob(
    "extra_sources", "Extra sources",
    " ".join(["Adds another retrieval system as a third (or fourth) fused source.",
              *(SOURCES[s].description for s in EXTRA_SOURCES),
              "Each adds w/(k + its rank) in RRF, or w × its normalised score."]),
    st.multiselect, lambda c: [s for s in EXTRA_SOURCES if s in c.weights], _pick_sources,
    dict(options=list(EXTRA_SOURCES), format_func=label))

EXTRA_WEIGHT_KNOBS = {source: _weight_knob(source) for source in EXTRA_SOURCES}
SOURCE_KNOBS: dict[str, tuple[Knob, ...]] = {
    source: tuple(_param_knob(p) for p in SOURCES[source].params) for source in EXTRA_SOURCES
}
SOURCE_KNOBS["graph"] += (
    Knob("graph_focus", "Focus topics",
         "Comma-separated topics or tags a user cares about; a chunk whose topics or tags include one gets a "
         "higher preference score.", st.text_input, lambda c: c.graph_focus,
         _set("graph_focus", lambda v: (v or "").strip())),
)
GRAPH_KNOBS = SOURCE_KNOBS["graph"]


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
                                         f"{knob.label.lower()} ({_method(config).help})"))
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
        filter_controls(which)
        with st.expander("Advanced"):
            for knob in ADVANCED_KNOBS:
                _draw(knob, which)
    return state.view().config(which)


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


FILTER_VALUES_SHOWN = 30  # most frequent values per field offered in the picker


def _split_filters(filters: list[str]) -> tuple[list[str], list[str]]:
    """Equality filters as one "field=value" entry per value (what the picker shows), and the
    rest (ranges) as written."""
    picked, other = [], []
    for text in filters:
        field, op, value = text.partition("=")
        if op and not any(c in field for c in "<>") and value:
            picked += [f"{field.strip()}={v.strip()}" for v in value.split("|")]
        else:
            other.append(text)
    return picked, other


def _join_filters(picked: list[str], other: list[str]) -> list[str]:
    """Picked "field=value" entries, values of one field joined by | (any of them), then the rest."""
    by_field: dict[str, list[str]] = {}
    for entry in picked:
        field, _, value = entry.partition("=")
        by_field.setdefault(field, []).append(value)
    return [f"{field}={'|'.join(values)}" for field, values in by_field.items()] + other


def filter_controls(which: str) -> None:
    """Metadata filters for config `which`, from the current collection's metadata fields (each
    value with how many documents have it); ranges typed as text. Applied before ranking."""
    collection = state.view().collection
    try:
        fields = resources.workbench().reads.metadata_fields(collection) if collection else {}
    except Exception:  # no collection yet, or it cannot be read: the page says why elsewhere
        fields = {}
    config = state.view().config(which)
    with st.expander(f"Filters ({len(config.filters)})" if config.filters else "Filters"):
        counts = {f"{field}={value}": n for field, entry in sorted(fields.items())
                  for value, n in entry["values"][:FILTER_VALUES_SHOWN]}
        picked, _ = _split_filters(config.filters)
        options = list(dict.fromkeys([*counts, *picked]))

        def write_picked(values: list[str]) -> None:
            cfg = state.view().config(which)
            state.view().set_config(which, cfg.edited(filters=_join_filters(values, _split_filters(cfg.filters)[1])))

        def write_other(text: str) -> None:
            cfg = state.view().config(which)
            typed = [line.strip() for line in (text or "").splitlines() if line.strip()]
            state.view().set_config(which, cfg.edited(filters=_join_filters(_split_filters(cfg.filters)[0], typed)))

        state.bound(st.multiselect, "Metadata values", f"{which}.filter_values",
                    lambda: _split_filters(state.view().config(which).filters)[0], write_picked,
                    options=options, format_func=lambda o: f"{o} ({counts[o]})" if o in counts else o,
                    help="Keep only documents with these metadata values, before any source ranks: depth "
                         "then counts matching documents. Values of one field: any of them; different "
                         "fields: all. A list field (tags) matches when it contains the value. BM25 keeps "
                         "the whole collection's statistics.")
        state.bound(st.text_area, "Other filters (one per line)", f"{which}.filter_other",
                    lambda: "\n".join(_split_filters(state.view().config(which).filters)[1]), write_other,
                    placeholder="year>=2010\ndate<2024-01-01", height=68,
                    help="Ranges on numbers or ISO dates: FIELD>=, >, <=, < VALUE. Fields: "
                         + (escape_markdown(", ".join(f"{k} ({'/'.join(sorted(v['kinds']))})"
                                                      for k, v in sorted(fields.items())))  # metadata keys: user text
                            or "this collection has no metadata"))


def collection_picker(workbench: Workbench) -> str | None:
    """The sidebar collection picker shared by every page; None when there is no collection."""
    view = state.view()
    names = corpus.caches_last(workbench.collection_names())
    if not names:
        view.collection = None
        st.sidebar.info("No collection yet: add one on the Corpus page.")
        return None
    labels = workbench.labels()
    if view.collection not in names and view.collection is not None:
        with contextlib.suppress(RetrievalError):  # unknown or ambiguous: the fallback below says so
            view.collection = workbench.resolve(view.collection)  # a link may give the display name
    if view.collection not in names:
        fallback = resources.default_collection(names)
        if view.collection is not None:
            view.notices.append(f"Collection {view.collection!r} does not exist (any more); "
                                f"showing {labels.get(fallback, fallback)!r}.")
        view.switch_collection(fallback)
    return state.bound(st.sidebar.selectbox, "Collection", "view.collection", lambda: state.view().collection,
                       lambda value: state.view().switch_collection(value), options=names,
                       format_func=lambda n: labels.get(n, n),
                       help="The collection every page searches and charts (shared by all pages). "
                            "Each collection has its own documents, BM25 index and embedding model.")


def version_picker(workbench: Workbench, collection: str, today: bool = True, container=None) -> int | None:
    """The version of `collection` to search: None for today's, else one of its earlier table
    versions (read-only, `Workbench.at_version`). `today` False: an earlier one must be chosen
    (Compare's "today vs an earlier version"); None then when there is none yet."""
    from retrieval.store import listed_versions, version_label

    container = container or st
    view = state.view()
    try:  # read again when the table moved on
        listed = state.memo_read(workbench, ("versions-listed", collection, workbench.store.version(collection)),
                                 lambda: listed_versions(workbench.store, collection))
    except Exception as exc:
        views.show_error(exc)
        return None
    latest = listed[-1]["version"]
    earlier = [v["version"] for v in reversed(listed) if v["version"] != latest]
    labels = {v["version"]: version_label(v) for v in listed}
    labels[None] = f"today ({labels[latest]})"
    options = ([None] if today else []) + earlier
    if view.version is not None and view.version not in earlier:
        container.warning(f"Version {view.version} of this collection is not kept (a compaction removes old "
                          "versions; each collection numbers its own); showing today's.")
        view.version = None
    if not options:
        container.info("This collection has one version yet: every write (an ingest, an add, a clear) makes a new "
                       "one, and each earlier version stays searchable here.")
        return None
    if view.version is None and not today:
        view.version = earlier[0]

    def write_version(value: int | None) -> None:
        state.view().version = value

    return state.bound(container.selectbox, "Version", "view.version", lambda: state.view().version, write_version,
                       options=options, format_func=labels.get,
                       help="Search the collection as it was at an earlier version of its table (LanceDB time "
                            "travel), read-only, with any config: the same documents, indexes and scores as then.")



def query_box() -> str:
    """The query text box (bound to the View)."""
    def write(value: str) -> None:
        state.view().query = value or ""

    return state.bound(st.text_input, "Query", "view.query", lambda: state.view().query, write,
                       placeholder="Type a question or keywords and press Enter",
                       help="BM25 matches its words after stemming (English) and jieba segmentation (Chinese); "
                            "the vector source embeds the whole query. A new query retrieves new candidates "
                            "(then cached); moving any slider only re-fuses them.")


def compare_mode() -> str:
    from ui.state import COMPARE_MODES

    def write(value: str) -> None:
        state.view().compare_mode = value

    return state.bound(st.radio, "Compare", "view.compare_mode", lambda: state.view().compare_mode, write,
                       options=list(COMPARE_MODES), horizontal=True,
                       format_func={"rerank": "First stage vs reranked", "configs": "Config A vs config B",
                                    "sources": "Each source's own ranking",
                                    "versions": "Today vs an earlier version"}.get,
                       help="First stage vs reranked: config A's fused ranking against the same list after the "
                            "reranker re-scored its top-N. Config A vs B: two fusion configs on the same query "
                            "(B's controls are in the right-hand column). Each source's own ranking: every "
                            "source of config A side by side, before fusion, with its raw scores (and the "
                            "keyword scorer's points per field). Today vs an earlier version: config A on the "
                            "collection as it was at an earlier version, beside today's.")


def rrf_ks() -> list[int]:
    from ui.state import RRF_K_CHOICES

    def write(value: list[int]) -> None:
        state.view().rrf_ks = sorted(value)

    return state.bound(st.multiselect, "RRF k values to draw", "view.rrf_ks", lambda: list(state.view().rrf_ks),
                       write, options=list(RRF_K_CHOICES),
                       help="Curves of the RRF term 1/(k + rank) to compare; the sidebar's current k is always "
                            "drawn (thicker). Smaller k: steeper curve, rank 1 dominates; larger k: flatter "
                            "curve and raw scores squeezed together.")
