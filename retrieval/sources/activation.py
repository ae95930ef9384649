"""Entity activation, seed 002's maths without an LLM: pure functions of entity sets and settings.

The entity graph source (`sources/graph.py`) reads the collection's entities once and calls these
on every query and slider move; the Graph page draws `activation_trace`.

Each chunk is an event (no LLM splits events, see `retrieval.text.entities`); `E(x)_t` is the set of
normalised entity names of type t of an event x (or of the query), `w_t` the type weight
(`config.graph`, seed defaults time 0.9, location 1.0, person 1.1, topic 1.5, action 1.2, tag 1.0).

    J_t(A, B)          = |A_t ∩ B_t| / |A_t ∪ B_t|                       (Jaccard per type)
    relevance(A, B)    = Σ_{t∈S} w_t·J_t(A, B) / Σ_{t∈S} w_t             S = types both A and B have
                                                                         (0 when S is empty)
    match_ratio(A, B)  = |{t : A_t ∩ B_t ≠ ∅}| / |{t : A_t ≠ ∅}|         share of A's types B matches
    match(A, B)        = 0.4·match_ratio(A, B) + 0.6·relevance(A, B)

Activation (multi-hop BFS):

- hop 0: every event sharing at least one entity with the query Q is activated with
  a(e) = match(Q, e);
- hop h = 1 … depth: for each event p activated at hop h − 1, best a(p) first, the not yet
  activated events sharing an entity with p whose relevance(p, c) ≥ threshold, best match(p, c)
  first, at most `breadth` of them, are activated with a(c) = a(p)·match(p, c) (activation fades
  with every hop);
- completion: when chunks i − 1 and i + 1 of one article are activated and chunk i is not,
  chunk i is added (`completed`), with a(i) = min(a(i − 1), a(i + 1)).

Final score of an activated event e (weights from `config.graph`, seed 0.3/0.3/0.2/0.2):

    score(e) = w_match·a(e) + w_vector·cos(q, v_e) + w_recency·e^(−λ·days_e) + w_preference·pref(e)
    pref(e)  = min(1, 0.5 + 0.3·[F ∩ topics_e ≠ ∅] + 0.2·[F ∩ tags_e ≠ ∅])     F = focus topics

`q` is the query embedded by the collection's own encoder (cached per query, so a slider never
re-embeds), `v_e` the chunk's stored vector. `days_e` = whole days from the chunk's date (its
metadata `date`/`created`/… field, else the day it was ingested; table `event_times`) to the day
the collection's index was first loaded in this process (`load_index`), never negative.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from retrieval.text.entities import ENTITY_TYPES, default_extractor, normalize_name

EntitySets = Mapping[str, frozenset]  # type -> normalised names
MATCH_RATIO_SHARE, RELEVANCE_SHARE = 0.4, 0.6


# ---- pure scoring functions ------------------------------------------------------------------
def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """|A ∩ B| / |A ∪ B| (0 for two empty sets)."""
    a, b = set(a), set(b)
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def relevance(a: EntitySets, b: EntitySets, weights: Mapping[str, float]) -> float:
    """Σ_{t∈S} w_t·J_t / Σ_{t∈S} w_t over the types S both sides have (a missing weight is 1)."""
    total = weighted = 0.0
    for kind, names in a.items():
        if names and b.get(kind):
            w = weights.get(kind, 1.0)
            total += w
            weighted += w * jaccard(names, b[kind])
    return weighted / total if total > 0 else 0.0


def match_ratio(a: EntitySets, b: EntitySets) -> float:
    """Share of A's (non-empty) types in which B has at least one of A's names."""
    kinds = [k for k, names in a.items() if names]
    if not kinds:
        return 0.0
    return sum(1 for k in kinds if a[k] & b.get(k, frozenset())) / len(kinds)


def match_score(ratio: float, rel: float) -> float:
    """Seed 002's multi-dimensional match: 0.4·match_ratio + 0.6·relevance."""
    return MATCH_RATIO_SHARE * ratio + RELEVANCE_SHARE * rel


def recency(days: float, decay: float) -> float:
    """Time decay e^(−λ·days)."""
    return math.exp(-decay * max(0.0, days))


def preference(topics: Iterable[str], tags: Iterable[str], focus: Iterable[str]) -> float:
    """min(1, 0.5 + 0.3·[focus ∩ topics] + 0.2·[focus ∩ tags])."""
    focus = set(focus)
    score = 0.5 + (0.3 if focus & set(topics) else 0.0) + (0.2 if focus & set(tags) else 0.0)
    return min(score, 1.0)


def final_score(match: float, vector: float, recent: float, pref: float, weights: Mapping[str, float]) -> float:
    """w_match·match + w_vector·vector + w_recency·recency + w_preference·preference."""
    return (weights["match"] * match + weights["vector"] * vector + weights["recency"] * recent
            + weights["preference"] * pref)


def shared(a: EntitySets, b: EntitySets) -> dict[str, tuple[str, ...]]:
    """The names A and B share, by type (sorted)."""
    out = {}
    for kind, names in a.items():
        common = names & b.get(kind, frozenset())
        if common:
            out[kind] = tuple(sorted(common))
    return out


# ---- settings --------------------------------------------------------------------------------
@dataclass(frozen=True)
class GraphSettings:
    """The graph parameters of a `SearchConfig` (`config.graph`, `config.graph_focus`)."""

    type_weights: Mapping[str, float]
    depth: int = 2
    breadth: int = 5
    threshold: float = 0.1
    mix: Mapping[str, float] = field(default_factory=lambda: {"match": 0.3, "vector": 0.3, "recency": 0.2,
                                                              "preference": 0.2})
    decay: float = 0.01
    focus: frozenset = frozenset()

    @classmethod
    def from_config(cls, config) -> GraphSettings:
        g = config.graph
        normalize = default_extractor().normalize if config.graph_focus else normalize_name
        focus = frozenset(filter(None, (normalize(f) for f in re.split(r"[,，;；]", config.graph_focus or ""))))
        return cls(type_weights={t: g[t] for t in ENTITY_TYPES}, depth=round(g["depth"]),
                   breadth=max(1, round(g["breadth"])), threshold=g["threshold"],
                   mix={k: g[k] for k in ("match", "vector", "recency", "preference")}, decay=g["decay"],
                   focus=focus)


# ---- activation (pure) -----------------------------------------------------------------------
@dataclass(frozen=True)
class Activated:
    """How one event was activated."""

    event_id: str
    hop: int
    activation: float  # a(e)
    match_ratio: float  # of the edge that activated it (query → e at hop 0, parent → e later)
    relevance: float
    parent: str | None = None  # the event it spread from (hops ≥ 1)
    via: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # shared entities on that edge
    completed: bool = False
    neighbours: tuple[str, ...] = ()  # chunks i − 1 and i + 1, for a completed chunk


@dataclass
class Activation:
    """Every activated event in activation order, and the query's entities."""

    query_entities: dict[str, tuple[str, ...]]
    events: dict[str, Activated]
    unknown: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # hop -> the highest relevance of a candidate the threshold turned away at that hop
    best_below: dict[int, float] = field(default_factory=dict)

    @property
    def max_hop(self) -> int:
        return max((a.hop for a in self.events.values() if not a.completed), default=-1)

    def at_hop(self, hop: int) -> list[Activated]:
        return [a for a in self.events.values() if a.hop == hop and not a.completed]

    def completed(self) -> list[Activated]:
        return [a for a in self.events.values() if a.completed]


def _as_sets(entities: Mapping[str, Iterable[str]]) -> dict[str, frozenset]:
    return {k: frozenset(v) for k, v in entities.items() if v}


def inverted(entities: Mapping[str, EntitySets]) -> dict[tuple[str, str], frozenset]:
    """(type, name) -> the events that have it."""
    index: dict[tuple[str, str], set] = {}
    for event, sets in entities.items():
        for kind, names in sets.items():
            for name in names:
                index.setdefault((kind, name), set()).add(event)
    return {k: frozenset(v) for k, v in index.items()}


def activate(query: Mapping[str, Iterable[str]], entities: Mapping[str, EntitySets], settings: GraphSettings,
             positions: Mapping[str, tuple[str | None, int | None]] | None = None,
             events_of: Mapping[tuple[str, str], frozenset] | None = None) -> Activation:
    """Hop 0, BFS hops and neighbour completion (formulas in the module docstring).

    `entities`: event -> type -> names; `positions`: event -> (article id, chunk index) for
    completion; `events_of`: the inverted index, built when not given.
    """
    q = _as_sets(query)
    events_of = events_of if events_of is not None else inverted(entities)
    weights = settings.type_weights
    activated: dict[str, Activated] = {}

    def neighbours_of(sets: EntitySets) -> set[str]:
        out: set[str] = set()
        for kind, names in sets.items():
            for name in names:
                out |= events_of.get((kind, name), frozenset())
        return out

    for event in sorted(neighbours_of(q)):
        ratio, rel = match_ratio(q, entities[event]), relevance(q, entities[event], weights)
        activated[event] = Activated(event, 0, match_score(ratio, rel), ratio, rel, via=shared(q, entities[event]))
    frontier = _best_first(activated[e] for e in activated)
    best_below: dict[int, float] = {}
    for hop in range(1, settings.depth + 1):
        nxt = []
        for parent in frontier:
            p_sets = entities[parent.event_id]
            scored = []
            for cand in neighbours_of(p_sets) - activated.keys():
                rel = relevance(p_sets, entities[cand], weights)
                if rel >= settings.threshold:
                    ratio = match_ratio(p_sets, entities[cand])
                    scored.append((match_score(ratio, rel), rel, ratio, cand))
                else:
                    best_below[hop] = max(best_below.get(hop, 0.0), rel)
            scored.sort(key=lambda s: (-s[0], -s[1], s[3]))
            for m, rel, ratio, cand in scored[: settings.breadth]:
                a = Activated(cand, hop, parent.activation * m, ratio, rel, parent=parent.event_id,
                              via=shared(p_sets, entities[cand]))
                activated[cand] = a
                nxt.append(a)
        if not nxt:
            break
        frontier = _best_first(nxt)
    if positions:
        for a in complete_neighbours(activated, positions):
            activated[a.event_id] = a
    return Activation({k: tuple(sorted(v)) for k, v in q.items()}, activated, best_below=best_below)


def _best_first(items: Iterable[Activated]) -> list[Activated]:
    return sorted(items, key=lambda a: (-a.activation, a.event_id))


def complete_neighbours(activated: Mapping[str, Activated],
                        positions: Mapping[str, tuple[str | None, int | None]]) -> list[Activated]:
    """Chunk i of an article when chunks i − 1 and i + 1 are activated and i is not.

    The added chunk gets hop max(hops of the two), activation min(a(i − 1), a(i + 1)), completed.
    """
    at = {(p, i): e for e, (p, i) in positions.items() if p is not None and i is not None}
    added = []
    for event in sorted(activated):
        parent, index = positions.get(event, (None, None))
        if parent is None or index is None:
            continue
        middle, right = at.get((parent, index + 1)), at.get((parent, index + 2))
        if middle is None or right is None or middle in activated or right not in activated:
            continue
        left_a, right_a = activated[event], activated[right]
        added.append(Activated(middle, max(left_a.hop, right_a.hop), min(left_a.activation, right_a.activation),
                               0.0, 0.0, completed=True, neighbours=(event, right)))
    return added


@dataclass(frozen=True)
class Scored:
    event_id: str
    score: float
    match: float
    vector: float
    recency: float
    preference: float
    days: int


def score_events(activation: Activation, entities: Mapping[str, EntitySets], vector_sims: Mapping[str, float],
                 days: Mapping[str, int], settings: GraphSettings) -> list[Scored]:
    """Every activated event's final score, best first (ties by id)."""
    out = []
    for event, a in activation.events.items():
        sets = entities.get(event, {})
        d = days.get(event, 0)
        parts = (a.activation, float(vector_sims.get(event, 0.0)), recency(d, settings.decay),
                 preference(sets.get("topic", ()), sets.get("tag", ()), settings.focus))
        out.append(Scored(event, final_score(*parts, settings.mix), *parts, d))
    out.sort(key=lambda s: (-s.score, s.event_id))
    return out


def hit_detail(a: Activated, s: Scored, date_source: str = "") -> dict:
    """The per-result explanation shown next to a graph hit (JSON-friendly)."""
    return {
        "hop": a.hop, "completed": a.completed, "via": a.parent,
        "matched": {k: list(v) for k, v in a.via.items()},
        "match_ratio": round(a.match_ratio, 6), "relevance": round(a.relevance, 6),
        "match": round(s.match, 6), "vector": round(s.vector, 6), "recency": round(s.recency, 6),
        "days": s.days, "date_source": date_source, "preference": round(s.preference, 6),
        **({"neighbours": list(a.neighbours)} if a.completed else {}),
    }


# ---- activation trace for the Graph page (pure) ----------------------------------------------
@dataclass(frozen=True)
class HopTrace:
    """What one hop activated: its events, the entities it went through and the edges used.

    Edges are (from, entity, to): from is "query" at hop 0, the parent event later; entity is
    (type, name), or None for the neighbour edges of completed chunks (hop "completed")."""

    hop: int | str
    events: tuple[str, ...]
    entities: tuple[tuple[str, str], ...]
    edges: tuple[tuple[str, tuple[str, str] | None, str], ...]


def activation_trace(activation: Activation) -> list[HopTrace]:
    """Per hop (0, 1, …, then "completed" if any): activated events, entities and edges."""
    traces = []
    for hop in range(activation.max_hop + 1):
        acts = activation.at_hop(hop)
        edges, ents = [], []
        for a in acts:
            src = "query" if hop == 0 else a.parent
            for kind, names in a.via.items():
                for name in names:
                    edges.append((src, (kind, name), a.event_id))
                    ents.append((kind, name))
        traces.append(HopTrace(hop, tuple(a.event_id for a in acts), tuple(dict.fromkeys(ents)), tuple(edges)))
    done = activation.completed()
    if done:
        edges = tuple((n, None, a.event_id) for a in done for n in a.neighbours)
        traces.append(HopTrace("completed", tuple(a.event_id for a in done), (), edges))
    return traces
