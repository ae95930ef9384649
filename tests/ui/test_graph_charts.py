"""The Graph page's activation network (ui/graph/charts.py): one node per entity name."""

from types import SimpleNamespace

from retrieval.sources.activation import GraphSettings, activate, activation_trace
from retrieval.text.entities import ENTITY_TYPES, EntityConfig, EntityExtractor
from ui.graph import charts as graph_charts

# 曹操 in two roles: a person where jieba tags him, a place after 在/到 ("在曹操帐下", "到曹操营中").
TEXTS = {
    "guandu": "曹操在官渡击败袁绍。",
    "jiuyan": "曹操与刘备煮酒论英雄。",
    "guanyu": "刘备的兄弟关羽暂时投降在曹操帐下。",
    "xuyou": "许攸连夜投奔到曹操营中。",
}


def entity_nodes(fig) -> list[tuple[str, str]]:
    """(name shown, hover) of every entity circle of the figure."""
    return [(name, hover) for trace in fig.data if trace.marker.symbol == "circle"
            for name, hover in zip(trace.text, trace.hovertext, strict=True)]


def test_an_entity_in_two_roles_is_one_node():
    extractor = EntityExtractor(EntityConfig())
    entities = {event: {kind: frozenset(names) for kind, names in extractor.extract(text).items() if names}
                for event, text in TEXTS.items()}
    # the premise: the extractor gives 曹操 two types, so the core holds two entities of that name
    assert [sorted(k for k, names in entities[e].items() if "曹操" in names) for e in TEXTS] == [
        ["person"], ["person"], ["location"], ["location"]]
    activation = activate({"person": ["曹操"]}, entities, GraphSettings(type_weights=dict.fromkeys(ENTITY_TYPES, 1.0)))
    trace = activation_trace(activation)
    assert [(t.hop, t.events, t.entities) for t in trace] == [
        (0, ("guandu", "jiuyan"), (("person", "曹操"),)),
        (1, ("guanyu",), (("person", "刘备"),)),
        (2, ("xuyou",), (("location", "曹操"),)),  # hop 2 goes through 曹操 again, as a place
    ]
    _, nodes, edges, types = graph_charts.network_layout(trace, 2)
    assert nodes == {"曹操": (0, 0.0), "刘备": (2, 0.0)}  # 曹操 stays in the column of its first hop
    assert types == {"曹操": ("person", "location"), "刘备": ("person",)}
    assert (("event", "guanyu"), ("entity", "曹操"), "spread") in edges  # hop 2's edge comes back to it
    assert (("entity", "曹操"), ("event", "xuyou"), "activate") in edges
    fig = graph_charts.activation_network(trace, 2, {}, {("person", "曹操"): "曹孟德"})
    assert entity_nodes(fig) == [("曹孟德", "person, location: 曹孟德"), ("刘备", "person: 刘备")]


def test_an_entity_two_hops_went_through_is_one_node():
    # as the sample's 赤壁之战 had it: 曹操 shared at hop 1 and again at hop 2, once per column before
    trace = [SimpleNamespace(hop=0, events=("a",), entities=(("tag", "赤壁之战"),),
                             edges=(("query", ("tag", "赤壁之战"), "a"),)),
             SimpleNamespace(hop=1, events=("b", "c"), entities=(("person", "曹操"), ("person", "周瑜")),
                             edges=(("a", ("person", "曹操"), "b"), ("a", ("person", "周瑜"), "c"))),
             SimpleNamespace(hop=2, events=("d",), entities=(("person", "曹操"),),
                             edges=(("b", ("person", "曹操"), "d"),))]
    events, nodes, edges, types = graph_charts.network_layout(trace, 2)
    assert nodes == {"赤壁之战": (0, 0.0), "曹操": (2, 0.5), "周瑜": (2, -0.5)}
    assert events == {"a": (1, 0.0), "b": (3, 0.5), "c": (3, -0.5), "d": (5, 0.0)}
    assert edges.count((("entity", "曹操"), ("event", "d"), "activate")) == 1
    assert types == {"赤壁之战": ("tag",), "曹操": ("person",), "周瑜": ("person",)}
    assert [name for name, _ in entity_nodes(graph_charts.activation_network(trace, 2, {}))].count("曹操") == 1
