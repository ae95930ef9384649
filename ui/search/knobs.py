"""The SearchConfig controls as data: one `Knob` per control (its widget, label and help, how it
reads its value from a config and writes an edited copy), the source controls built from the
source descriptors (`retrieval.sources`). Each has a `help=` saying what it does to the scores.
`config_controls.py` draws them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from retrieval.search.config import BM25_BACKENDS, NORMALIZATIONS, SearchConfig
from retrieval.search.config_help import FIELD_HELP
from retrieval.search.fusion.methods import COMBINATIONS, FUSION_METHODS
from retrieval.sources import SOURCES, Param, label

FUSION_LABELS = {name: method.label for name, method in FUSION_METHODS.items()}
NORMALIZATION_LABELS = {"minmax": "min-max", "zscore": "z-score", "l2": "l2 (x / ‖x‖)", "none": "none (raw scores)"}
COMBINATION_LABELS = {name: combination.label for name, combination in COMBINATIONS.items()}


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

    weight_help = (SOURCES[source].weight_help if source in SOURCES else
                   "Multiplies this outside engine's part of the fused score: RRF adds w/(k + its rank), weighted sum "
                   "adds w × its normalised score (docs/sources.md).")
    return Knob(f"w_{source}", f"{label(source)} weight", weight_help, st.slider,
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
    Knob("fusion", *FIELD_HELP["fusion"],
         st.selectbox, lambda c: c.fusion, _set("fusion"),
         dict(options=list(FUSION_METHODS), format_func=FUSION_LABELS.get)),
    *(_weight_knob(source) for source in CORE_SOURCES),
    Knob("rrf_k", *FIELD_HELP["rrf_k"],
         st.slider, lambda c: round(_clamp(c.rrf_k, 1, 200)), _set("rrf_k", float),
         dict(min_value=1, max_value=200, step=1)),
    Knob("normalization", *FIELD_HELP["normalization"],
         st.selectbox, lambda c: c.normalization, _set("normalization"),
         dict(options=list(NORMALIZATIONS), format_func=NORMALIZATION_LABELS.get)),
    Knob("combination", *FIELD_HELP["combination"],
         st.selectbox, lambda c: c.combination, _set("combination"),
         dict(options=list(COMBINATIONS), format_func=COMBINATION_LABELS.get)),
    Knob("min_display", *FIELD_HELP["min_display_score"],
         st.slider, lambda c: _clamp(c.min_display_score or 0.0, 0.0, 1.0),
         _set("min_display_score", lambda v: float(v) if v > 0 else None),
         dict(min_value=0.0, max_value=1.0, step=0.01)),
    *(_min_raw_knob(source) for source in CORE_SOURCES if SOURCES[source].min_raw is not None),
    Knob("top_k", *FIELD_HELP["top_k"],
         st.slider, lambda c: int(_clamp(c.top_k, 1, 100)), _set("top_k", int),
         dict(min_value=1, max_value=100, step=1)),
    Knob("depth", *FIELD_HELP["depth"],
         st.slider, lambda c: int(_clamp(c.depth, 1, 500)), _set("depth", int),
         dict(min_value=1, max_value=500, step=1)),
    Knob("language_aware", *FIELD_HELP["language_aware"],
         st.toggle, lambda c: bool(c.language_aware), _set("language_aware", bool)),
    Knob("rerank", *FIELD_HELP["rerank"],
         st.toggle, lambda c: bool(c.rerank), _set("rerank", bool)),
    Knob("rerank_top_n", *FIELD_HELP["rerank_top_n"],
         st.slider, lambda c: int(_clamp(c.rerank_top_n, 1, 100)), _set("rerank_top_n", int),
         dict(min_value=1, max_value=100, step=1)),
    Knob("rerank_lambda", *FIELD_HELP["rerank_lambda"],
         st.slider, lambda c: float(_clamp(c.rerank_lambda, 0.0, 1.0)), _set("rerank_lambda", float),
         dict(min_value=0.0, max_value=1.0, step=0.05)),
)

ADVANCED_KNOBS: tuple[Knob, ...] = (
    Knob("min_score", *FIELD_HELP["min_score"],
         st.number_input, lambda c: c.min_score, _set("min_score", lambda v: None if v is None else float(v)),
         dict(value=None, min_value=None, step=0.001, format="%.5f", placeholder="off")),
    Knob("bm25_backend", *FIELD_HELP["bm25_backend"],
         st.selectbox, lambda c: c.bm25_backend, _set("bm25_backend"), dict(options=list(BM25_BACKENDS))),
    *(_param_knob(p) for source in CORE_SOURCES for p in SOURCES[source].params),
    Knob("reranker", *FIELD_HELP["reranker"],
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


def outside_knobs(names: tuple[str, ...]) -> tuple[Knob, dict[str, Knob]]:
    """The "Outside engines" picker over `names` (registered outside engines, `docs/sources.md`)
    and a weight slider per engine."""
    def pick(config: SearchConfig, picked: list[str]) -> SearchConfig:
        kept = {name: w for name, w in config.weights.items() if name not in names or name in picked}
        kept.update({name: EXTRA_SOURCE_DEFAULT_WEIGHT for name in picked if name not in kept})
        return config.edited(weights=kept)

    picker = Knob("outside_sources", "Outside engines",
                  "Fuses a registered outside search engine (the Corpus page registers them) as one more source: "
                  "its hits are joined to this collection's documents by id; its answers are cached, so moving a "
                  "slider never asks it again.",
                  st.multiselect, lambda c: [s for s in names if s in c.weights], pick, dict(options=list(names)))
    return picker, {name: _weight_knob(name) for name in names}
SOURCE_KNOBS: dict[str, tuple[Knob, ...]] = {
    source: tuple(_param_knob(p) for p in SOURCES[source].params) for source in EXTRA_SOURCES
}
SOURCE_KNOBS["graph"] += (
    Knob("graph_focus", *FIELD_HELP["graph_focus"], st.text_input, lambda c: c.graph_focus,
         _set("graph_focus", lambda v: (v or "").strip())),
)
GRAPH_KNOBS = SOURCE_KNOBS["graph"]
