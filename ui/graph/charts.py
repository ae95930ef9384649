"""Pure builders for the Graph page: the activation network (plotly) and the activated-events table.

Layout of the network, left to right, one column per step of the activation:

    x = 0        the query's entities (hop 0's entities)
    x = 1        events activated at hop 0
    x = 2h       the entities hop h went through first (shared by a parent event and its child)
    x = 2h + 1   events activated at hop h
    last column  chunks added by neighbour completion (dotted edges to their two neighbours)

An entity is one node, whatever hops went through it and whatever types it was shared as: its
normalised name is its identity on the picture (曹操 shared by the query at hop 0 and again at
hop 1, or a person in one chunk and a place after 在 in another, is one 曹操). It sits in the column
of the first hop that used it; a later hop's edges come back to it.

Events are squares coloured by hop and sized by final score; entities are circles coloured by
their first type (the hover lists every type). Each event point carries its id in `customdata`,
so a click selects it. User text (titles, entity names, ids) is HTML-escaped: plotly renders a
subset of HTML in labels and hover text.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

TYPE_COLORS = {"time": "#0891b2", "location": "#16a34a", "person": "#dc2626", "topic": "#7c3aed",
               "action": "#d97706", "tag": "#db2777"}
HOP_COLORS = ("#1e3a8a", "#2563eb", "#60a5fa", "#93c5fd", "#bfdbfe", "#dbeafe")
COMPLETED_COLOR = "#94a3b8"


def hop_options(trace: Sequence[Any]) -> list:
    """What the hop selector offers: 0 … last hop, then "completed" when there is such a layer."""
    return [t.hop for t in trace]


def _visible(trace: Sequence[Any], upto) -> list:
    if upto == "completed":
        return list(trace)
    return [t for t in trace if t.hop != "completed" and t.hop <= upto]


def _column_positions(items: Sequence, x: float) -> dict:
    n = len(items)
    return {item: (x, (n - 1) / 2 - i) for i, item in enumerate(items)}


def network_layout(trace: Sequence[Any], upto) -> tuple[dict, dict, list, dict]:
    """(event positions, entity-node positions keyed by normalised name, edges as pairs of node
    keys with a style, each entity node's types in order of first use) for the layers up to
    `upto`. One node per name (module docstring): placed in the column of the first hop that
    went through it; an edge drawn twice (the same name shared as two types) is kept once."""
    layers = _visible(trace, upto)
    events: dict[str, tuple[float, float]] = {}
    entities: dict[str, tuple[float, float]] = {}
    types: dict[str, list[str]] = {}
    edges: list[tuple[Any, Any, str]] = []
    last_x = 1
    for layer in layers:
        if layer.hop == "completed":
            x = last_x + 2
            events.update(_column_positions(layer.events, x))
            edges += [(("event", src), ("event", dst), "completed") for src, _, dst in layer.edges if src in events]
            continue
        x_entities, x_events = 2 * layer.hop, 2 * layer.hop + 1
        last_x = x_events
        new = [name for name in dict.fromkeys(name for _, name in layer.entities) if name not in types]
        for kind, name in layer.entities:
            if kind not in types.setdefault(name, []):
                types[name].append(kind)
        entities.update(_column_positions(new, x_entities))
        events.update(_column_positions(layer.events, x_events))
        for src, (_, name), dst in layer.edges:
            node = ("entity", name)
            if src != "query":
                edges.append((("event", src), node, "spread"))
            edges.append((node, ("event", dst), "activate"))
    return events, entities, list(dict.fromkeys(edges)), {name: tuple(kinds) for name, kinds in types.items()}


def activation_network(trace: Sequence[Any], upto, events_info: Mapping[str, Mapping[str, Any]],
                       entity_names: Mapping[tuple[str, str], str] | None = None,
                       selected: str | None = None) -> go.Figure:
    """The activation as a network up to hop `upto` (an int, or "completed" for everything).

    `events_info`: event id -> {"title", "score", "hop", "completed"}; `entity_names`:
    (type, normalised name) -> display name."""
    entity_names = entity_names or {}
    events, entities, edges, types = network_layout(trace, upto)

    def pos(node):
        kind, key = node
        return events.get(key) if kind == "event" else entities.get(key)

    fig = go.Figure()
    for style, dash, color in (("activate", "solid", "#cbd5e1"), ("spread", "solid", "#cbd5e1"),
                               ("completed", "dot", COMPLETED_COLOR)):
        xs, ys = [], []
        for a, b, s in edges:
            pa, pb = pos(a), pos(b)
            if s == style and pa and pb:
                xs += [pa[0], pb[0], None]
                ys += [pa[1], pb[1], None]
        if xs:
            fig.add_scatter(x=xs, y=ys, mode="lines", line=dict(color=color, width=1, dash=dash),
                            hoverinfo="skip", showlegend=False)
    for kind, color in TYPE_COLORS.items():
        keys = [k for k in entities if types[k][0] == kind]
        if not keys:
            continue
        names = [html.escape(entity_names.get((kind, k), k)) for k in keys]
        fig.add_scatter(
            x=[entities[k][0] for k in keys], y=[entities[k][1] for k in keys], mode="markers+text",
            text=names, textposition="top center", name=kind, customdata=[""] * len(keys),
            hovertext=[f"{', '.join(types[k])}: {name}" for k, name in zip(keys, names, strict=True)],
            hoverinfo="text", marker=dict(size=12, color=color, symbol="circle", line=dict(width=1, color="white")),
        )
    groups: dict[Any, list[str]] = {}
    for event in events:
        info = events_info.get(event, {})
        groups.setdefault("completed" if info.get("completed") else info.get("hop", 0), []).append(event)
    for group, ids in sorted(groups.items(), key=lambda kv: (kv[0] == "completed", str(kv[0]))):
        color = COMPLETED_COLOR if group == "completed" else HOP_COLORS[min(int(group), len(HOP_COLORS) - 1)]
        infos = [events_info.get(e, {}) for e in ids]
        hover = [f"{html.escape(e)}<br>{html.escape(str(i.get('title', '')))}<br>score {i.get('score', 0):.4f}"
                 for e, i in zip(ids, infos, strict=True)]
        fig.add_scatter(
            x=[events[e][0] for e in ids], y=[events[e][1] for e in ids], mode="markers+text",
            text=[html.escape(str(i.get("title") or e)[:24]) for e, i in zip(ids, infos, strict=True)],
            textposition="bottom center", customdata=ids, hovertext=hover, hoverinfo="text",
            name="completed" if group == "completed" else f"events, hop {group}",
            marker=dict(symbol="square", color=color,
                        size=[10 + 18 * max(0.0, min(1.0, i.get("score", 0.0))) for i in infos],
                        line=dict(width=[3 if e == selected else 0.5 for e in ids],
                                  color=["#f59e0b" if e == selected else "white" for e in ids])),
        )
    columns = sorted({p[0] for p in list(events.values()) + list(entities.values())})
    fig.update_xaxes(visible=False, range=[min(columns, default=0) - 0.6, max(columns, default=1) + 0.6])
    fig.update_yaxes(visible=False)
    column_sizes = Counter(p[0] for p in list(events.values()) + list(entities.values()))
    height = max(360, 70 * max(column_sizes.values(), default=1))
    fig.update_layout(height=min(height, 1400), margin=dict(l=10, r=10, t=30, b=10), clickmode="event+select",
                      plot_bgcolor="white",
                      legend=dict(orientation="h", y=1.06), dragmode="pan")
    return fig


def events_frame(activation: Any, scored: Sequence[Any], titles: Mapping[str, str]) -> pd.DataFrame:
    """One row per activated event, best final score first: hop, id, title, the score and its parts."""
    rows = []
    for s in scored:
        a = activation.events[s.event_id]
        rows.append({
            "hop": a.hop, "id": s.event_id, "title": titles.get(s.event_id) or "", "score": s.score,
            "match": s.match, "vector": s.vector, "recency": s.recency, "preference": s.preference,
            "relevance": a.relevance, "match ratio": a.match_ratio, "completed": a.completed,
            "via": a.parent or (" + ".join(a.neighbours) if a.completed else "query"),
            "shared entities": "; ".join(f"{k}: {', '.join(v)}" for k, v in a.via.items()),
        })
    columns = ["hop", "id", "title", "score", "match", "vector", "recency", "preference", "relevance",
               "match ratio", "completed", "via", "shared entities"]
    return pd.DataFrame.from_records(rows, columns=columns)
