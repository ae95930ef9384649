"""The Graph page's drawing: the entity graph source's activation for one query, hop by hop.

Everything shown is what `retrieval.sources.graph` (with `retrieval.sources.activation`) computes for the
sidebar's graph parameters (the same sliders as the Search page's entity graph parameters, config A).
"""

from __future__ import annotations

import html
from typing import Any

import streamlit as st

from retrieval.limits import EXCERPT_CHARS, TITLE_CHARS
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.sources.activation import activation_trace
from retrieval.sources.graph import GraphSource, PendingGraph
from ui.graph import charts as graph_charts
from ui.search.views import bounded, full_text_button, markdown_safe, show_error

HOP_KEY = "graph.hop"
EVENT_KEY = "graph.event"
CLICK_KEY = "graph.last_click"
CHART_KEY = "graph.network"
OPTIONS_KEY = "graph.hop_options"


def graph_source(workbench: Workbench, collection: str, config: SearchConfig) -> GraphSource | PendingGraph | None:
    """The built graph source for the collection's version and these parameters (cached)."""
    try:
        config.validate()
        return workbench.retriever.source(collection, "graph", config)
    except Exception as exc:  # bad parameters, a missing model: readable, and the page stays up
        show_error(exc)
        return None


def build_status(workbench: Workbench, collection: str, source: GraphSource | PendingGraph | None) -> None:
    """Where the collection's entity graph stands when it is not built (`source` is the pending
    graph), and the explicit job that builds it in the background (a search never does: it only
    reads); nothing once it is built, without reading the catalogue again on every rerun (the
    source is cached per collection state)."""
    if not isinstance(source, PendingGraph):
        return
    status = workbench.graph.status(collection)
    if status.state == "current":
        return
    st.info(markdown_safe(status.note))
    if status.state in ("pending", "off", "failed"):
        if st.button("Build the entity graph", key="graph.build",
                     help="Find every document's entities and write the graph tables, in the background: "
                          "searches go on meanwhile, and this page says how far the build is."):
            workbench.graph.start(collection)
            st.rerun()
    elif st.button("Refresh", key="graph.refresh", help="Show how far the build is."):
        st.rerun()


def _entities_line(entities: dict[str, tuple[str, ...]]) -> str:
    return " · ".join(f"{kind}: {', '.join(names)}" for kind, names in entities.items()) or "none"


def activation_view(workbench: Workbench, collection: str, query: str,
                    source: GraphSource | PendingGraph | None) -> None:
    if source is None:
        return
    if isinstance(source, PendingGraph):  # a large collection's graph, not built yet: `build_status` says so
        return
    try:
        activation = source.activation(query)
        scored = source.scored(query)
    except Exception as exc:
        show_error(exc)
        return
    st.markdown("**Query entities** (known to this collection): "
                + markdown_safe(_entities_line(activation.query_entities)))
    if activation.unknown:
        st.caption(markdown_safe("Found in the query but not in the collection (cannot activate anything): "
                                 + _entities_line(activation.unknown)))
    if not activation.events:
        st.info("No chunk shares an entity with the query. Try names of people, places or years of this "
                "collection (on sample-three-kingdoms: “诸葛亮北伐”, “赤壁之战”, “曹操和刘备的战役”).")
        return
    trace = activation_trace(activation)
    settings = source.settings
    for hop, best in sorted(activation.best_below.items()):
        if hop > activation.max_hop:
            st.info(markdown_safe(
                f"Hop {hop}: no chunk reached the hop relevance threshold {settings.threshold:g}; the closest "
                f"had relevance {best:.3f}. Lower the threshold (sidebar) to let activation spread further."))
    counts = ", ".join(f"hop {t.hop}: {len(t.events)}" for t in trace)
    st.caption(f"{len(activation.events)} chunks activated ({counts}). Depth {settings.depth}, breadth "
               f"{settings.breadth} per chunk, threshold {settings.threshold:g}.")

    options = graph_charts.hop_options(trace)
    if len(options) > 1:
        previous = st.session_state.get(OPTIONS_KEY) or []
        # Showing every hop stays so when a slider adds or removes hops; a hop no longer there resets.
        if st.session_state.get(HOP_KEY) not in options or (previous and st.session_state.get(HOP_KEY) == previous[-1]):
            st.session_state[HOP_KEY] = options[-1]
        st.session_state[OPTIONS_KEY] = options
        upto = st.select_slider("Show activation up to hop", options=options, key=HOP_KEY,
                                help="Step through the activation: hop 0 is the chunks sharing an entity with the "
                                     "query; each further hop adds the chunks reached from the previous hop through "
                                     "shared entities; 'completed' adds chunks between two activated neighbours.")
    else:
        upto = options[0]

    titles = source.index.titles
    info = {s.event_id: {"title": titles.get(s.event_id), "score": s.score,
                         "hop": activation.events[s.event_id].hop,
                         "completed": activation.events[s.event_id].completed} for s in scored}
    ranked_ids = [s.event_id for s in scored]
    selected = st.session_state.get(EVENT_KEY) if st.session_state.get(EVENT_KEY) in ranked_ids else ranked_ids[0]
    figure = graph_charts.activation_network(trace, upto, info, source.index.names, selected)
    event = st.plotly_chart(figure, width="stretch", on_select="rerun", selection_mode="points", key=CHART_KEY)
    clicked = _clicked_event(event, ranked_ids)
    if clicked is not None and clicked != st.session_state.get(CLICK_KEY):
        st.session_state[CLICK_KEY] = clicked
        st.session_state[EVENT_KEY] = clicked
    if st.session_state.get(EVENT_KEY) not in ranked_ids:
        st.session_state[EVENT_KEY] = ranked_ids[0]

    st.subheader("Activated chunks")
    frame = graph_charts.events_frame(activation, scored, titles)
    mix = settings.mix
    st.dataframe(frame, hide_index=True, width="stretch", column_config={
        "score": st.column_config.NumberColumn(
            format="%.4f", help=f"{mix['match']:g}·match + {mix['vector']:g}·vector + {mix['recency']:g}·recency "
                                f"+ {mix['preference']:g}·preference"),
        "match": st.column_config.NumberColumn(
            format="%.4f", help="Activation a(e): 0.4·match ratio + 0.6·relevance to the query (hop 0), "
                                "times the parent's a (hops ≥ 1)"),
        "vector": st.column_config.NumberColumn(format="%.4f", help="Cosine similarity of query and chunk"),
        "recency": st.column_config.NumberColumn(format="%.4f", help="e^(−λ·days) from the chunk's date"),
        "preference": st.column_config.NumberColumn(format="%.2f", help="0.5, +0.3 focus topic, +0.2 focus tag"),
        "relevance": st.column_config.NumberColumn(format="%.4f",
                                                   help="Weighted Jaccard of the edge that activated it"),
        "match ratio": st.column_config.NumberColumn(format="%.3f", help="Share of the source's entity types matched"),
    })

    st.subheader("Chunk text")
    chosen = st.selectbox("Activated chunk", options=ranked_ids, key=EVENT_KEY,
                          format_func=lambda e: f"{e} · {titles.get(e) or ''}",
                          help="The chunk whose text is shown below; clicking a square in the network selects it too.")
    chunk_details(workbench, collection, chosen, activation, source)


def _clicked_event(event: Any, ids: list[str]) -> str | None:
    """The event id of the first clicked point that is an event (entities carry an empty id)."""
    try:
        points = event.selection.points if event is not None else []
    except AttributeError:
        points = (event or {}).get("selection", {}).get("points", [])
    for point in points or []:
        data = point.get("customdata") if isinstance(point, dict) else None
        data = data[0] if isinstance(data, (list, tuple)) and data else data
        if isinstance(data, str) and data in ids:
            return data
    return None


def chunk_details(workbench: Workbench, collection: str, event_id: str, activation, source: GraphSource) -> None:
    """The chunk's title and text (escaped; the text's first `limits.EXCERPT_CHARS` characters, the
    rest behind a "Full text" button), its entities by type and how it was activated."""
    try:  # the workbench's document cache: a slider move reads nothing from the table
        row = workbench.documents(collection, [event_id]).get(event_id)
    except Exception as exc:  # a failing database: readable, the page stays up
        show_error(exc)
        return
    if row is None:
        st.warning("This chunk is no longer in the collection.")
        return
    a = activation.events[event_id]
    how = ("completed: lies between activated chunks " + " and ".join(a.neighbours) if a.completed else
           f"hop {a.hop}, " + ("from the query" if a.parent is None else f"from {a.parent}") + " through "
           + _entities_line(dict(a.via)))
    entities = source.index.entities.get(event_id, {})
    names = source.index.names
    entity_rows = "".join(
        f"<tr><td>{html.escape(kind)}</td>"
        f"<td>{html.escape(', '.join(names.get((kind, n), n) for n in sorted(ns)))}</td></tr>"
        for kind, ns in entities.items())
    position = ", ".join(f"{k} {row.get(k)}" for k in ("parent_id", "chunk_index", "start_line", "end_line")
                         if row.get(k) is not None)
    text = row.get("text") or ""
    st.html(
        f"<div><b>{html.escape((row.get('title') or '')[:TITLE_CHARS])}</b> "
        f"<span style='color:#64748b'>{html.escape(event_id)} · {html.escape(position)}</span></div>"
        f"<div style='color:#64748b'>{html.escape(how)}</div>"
        f"<div style='white-space:pre-wrap'>{html.escape(bounded(text))}</div>"
        f"<table class='wb-explain'><thead><tr><th>type</th><th>entities</th></tr></thead>"
        f"<tbody>{entity_rows}</tbody></table>"
    )
    if len(text) > EXCERPT_CHARS:  # the first EXCERPT_CHARS characters above; the rest on demand
        full_text_button(event_id, text, prefix="graph_fulltext")
