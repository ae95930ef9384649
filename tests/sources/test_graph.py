"""The entity graph source (retrieval/sources/graph.py): seed 002's formulas by hand, a real
Markdown collection with real jieba entities and real embeddings, and RRF fusion of three sources."""

import math

import numpy as np
import pytest

from retrieval.indexing.pipeline import create_collection
from retrieval.models.embed import load_encoder
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.sources.activation import (
    Activated,
    Activation,
    GraphSettings,
    activate,
    activation_trace,
    complete_neighbours,
    final_score,
    jaccard,
    match_ratio,
    match_score,
    preference,
    recency,
    relevance,
    score_events,
)
from retrieval.sources.graph import GRAPH_DEFAULTS, load_index
from retrieval.store import Store
from retrieval.text.chunking import chunk_markdown
from retrieval.types import ParsedCorpus

WEIGHTS = {k: GRAPH_DEFAULTS[k] for k in ("time", "location", "person", "topic", "action", "tag")}


def sets(**kinds):
    return {k: frozenset(v) for k, v in kinds.items()}


# ---- seed 002 §4.3 ---------------------------------------------------------------------------
def test_worked_example_with_the_seeds_expanded_sets():
    a = sets(topic={"大模型", "LLM", "模型", "微调", "fine-tuning"}, action={"部署"}, organization={"302.ai"})
    b = sets(topic={"LLM", "大模型", "微调", "fine-tuning", "训练"}, action={"优化"})
    assert jaccard(a["topic"], b["topic"]) == pytest.approx(4 / 6)
    assert jaccard(a["action"], b["action"]) == 0.0
    # organisation is not shared, so it is in neither sum: (4/6·1.5 + 0·1.2) / (1.5 + 1.2)
    assert relevance(a, b, WEIGHTS) == pytest.approx(1 / 2.7)
    assert round(relevance(a, b, WEIGHTS), 2) == 0.37
    # the seed rounds 4/6 to 0.67 first: 0.67·1.5 / 2.7 = 1.005 / 2.7
    assert round(0.67 * 1.5 / 2.7, 3) == 0.372


def test_worked_example_through_synonym_normalisation():
    from retrieval.text.entities import normalize_name

    synonyms = {"大模型": "LLM", "fine-tuning": "微调"}
    norm = lambda names: frozenset(normalize_name(n, synonyms) for n in names)  # noqa: E731
    a = {"topic": norm({"大模型", "微调"}), "action": norm({"部署"})}
    b = {"topic": norm({"LLM", "微调", "训练"}), "action": norm({"优化"})}
    assert a["topic"] == {"llm", "微调"}
    # topic 2/3, action 0: (2/3·1.5)/2.7 = 1/2.7 again
    assert relevance(a, b, WEIGHTS) == pytest.approx(1 / 2.7)
    assert match_ratio(a, b) == 0.5  # topic matched, action not
    assert match_score(0.5, 1 / 2.7) == pytest.approx(0.4 * 0.5 + 0.6 / 2.7)


def test_relevance_edge_cases():
    assert relevance(sets(person={"曹操"}), sets(location={"官渡"}), WEIGHTS) == 0.0  # no shared type
    assert relevance({}, {}, WEIGHTS) == 0.0
    assert match_ratio({}, sets(person={"x"})) == 0.0
    zero = dict(WEIGHTS, person=0.0)
    assert relevance(sets(person={"a"}), sets(person={"a"}), zero) == 0.0


def test_final_score_mix_by_hand():
    assert recency(30, 0.01) == pytest.approx(math.exp(-0.3))
    assert recency(-5, 0.01) == 1.0  # a future date counts as today
    assert preference({"战役"}, set(), {"战役"}) == pytest.approx(0.8)
    assert preference({"战役"}, {"三国"}, {"战役", "三国"}) == 1.0
    assert preference(set(), set(), set()) == 0.5
    mix = {"match": 0.3, "vector": 0.3, "recency": 0.2, "preference": 0.2}
    # 0.3·0.7 + 0.3·0.8 + 0.2·e^(−0.3) + 0.2·0.8
    expected = 0.21 + 0.24 + 0.2 * 0.7408182206817179 + 0.16
    assert final_score(0.7, 0.8, recency(30, 0.01), 0.8, mix) == pytest.approx(expected)
    settings = GraphSettings(WEIGHTS, mix=mix, decay=0.01, focus=frozenset({"战役"}))
    activation = Activation({}, {"e": Activated("e", 0, 0.7, 1.0, 0.5)})
    [scored] = score_events(activation, {"e": sets(topic={"战役"})}, {"e": 0.8}, {"e": 30}, settings)
    assert scored.score == pytest.approx(expected) and scored.days == 30


def test_neighbour_completion():
    positions = {"d#0": ("d", 0), "d#1": ("d", 1), "d#2": ("d", 2), "d#3": ("d", 3), "x#1": ("x", 1)}
    activated = {"d#0": Activated("d#0", 0, 0.6, 1, 0.5), "d#2": Activated("d#2", 1, 0.2, 0.5, 0.3),
                 "x#1": Activated("x#1", 0, 0.9, 1, 1)}
    [added] = complete_neighbours(activated, positions)
    assert added.event_id == "d#1" and added.completed and added.neighbours == ("d#0", "d#2")
    assert added.activation == 0.2 and added.hop == 1
    activated["d#1"] = Activated("d#1", 0, 0.5, 1, 1)  # already activated: nothing to complete
    assert complete_neighbours(activated, positions) == []


# ---- a small Markdown document, real jieba entities ------------------------------------------
MINI = """# 测试

## 官渡
公元200年，曹操在官渡击败袁绍。

## 赤壁
公元208年，曹操在赤壁败给周瑜。

## 巴丘
公元210年，周瑜在巴丘病逝。

## 五丈原
公元234年，诸葛亮在渭南病逝。
"""
# What the extractor finds (checked in test_mini_entities):
E0 = sets(time={"200年"}, location={"官渡"}, person={"曹操", "袁绍"}, action={"击败"})
E1 = sets(time={"208年"}, location={"赤壁"}, person={"曹操", "周瑜"}, action={"败给"})
E2 = sets(time={"210年"}, location={"巴丘"}, person={"周瑜"}, action={"病逝"})
E3 = sets(time={"234年"}, location={"渭南"}, person={"诸葛亮"}, action={"病逝"})


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    store = Store(str(tmp_path_factory.mktemp("graph_db")))
    create_collection(store, "mini", ParsedCorpus(chunk_markdown(MINI, "mini")))
    return store


def settings(**graph):
    return GraphSettings.from_config(SearchConfig(graph=graph))


def test_mini_entities(mini):
    index = load_index(mini, "mini")
    assert index.from_tables
    assert [index.entities[f"mini#{i}"] for i in range(4)] == [E0, E1, E2, E3]
    assert index.known["官渡"] == {"location"} and index.days["mini#0"] == 0
    assert index.date_sources["mini#0"] == "ingest"


def test_multi_hop_by_hand(mini):
    index = load_index(mini, "mini")
    q, unknown = index.query_entities("袁绍")
    assert q == sets(person={"袁绍"}) and unknown == {}
    # hop 0: mini#0 has 袁绍. ratio 1/1, relevance J_person = 1/2 → a = 0.4 + 0.3 = 0.7
    # hop 1 from #0: #1 shares 曹操. Shared types time, location, person, action (Σw = 4.2);
    #   only person overlaps, J = 1/3 → rel = 1.1/3/4.2 = 0.087302; ratio 1/4;
    #   m = 0.1 + 0.6·0.087302 = 0.152381; a = 0.7·0.152381 = 0.106667
    # hop 2 from #1: #2 shares 周瑜, J = 1/2 → rel = 0.55/4.2 = 0.130952; m = 0.1 + 0.078571;
    #   a = 0.106667·0.178571 = 0.019048
    # hop 3 from #2: #3 shares 病逝 (action, J = 1) → rel = 1.2/4.2 = 0.285714; m = 0.271429
    act = activate(q, index.entities, settings(depth=3, threshold=0.08), index.positions, index.events_of)
    trace = activation_trace(act)
    assert [(t.hop, t.events) for t in trace] == [(0, ("mini#0",)), (1, ("mini#1",)), (2, ("mini#2",)),
                                                  (3, ("mini#3",))]
    assert trace[0].edges == (("query", ("person", "袁绍"), "mini#0"),)
    assert trace[1].edges == (("mini#0", ("person", "曹操"), "mini#1"),)
    assert trace[2].entities == (("person", "周瑜"),)
    assert trace[3].edges == (("mini#2", ("action", "病逝"), "mini#3"),)
    e = act.events
    assert e["mini#0"].activation == pytest.approx(0.7)
    assert e["mini#1"].relevance == pytest.approx(1.1 / 3 / 4.2) and e["mini#1"].match_ratio == 0.25
    assert e["mini#1"].activation == pytest.approx(0.7 * (0.1 + 0.6 * 1.1 / 3 / 4.2))
    assert e["mini#2"].activation == pytest.approx(e["mini#1"].activation * (0.1 + 0.6 * 0.55 / 4.2))
    assert e["mini#3"].relevance == pytest.approx(1.2 / 4.2) and e["mini#3"].parent == "mini#2"
    # depth limits the hops; the threshold stops them (0.0873 < 0.1) and says how close it was
    assert list(activate(q, index.entities, settings(depth=1, threshold=0.08)).events) == ["mini#0", "mini#1"]
    stopped = activate(q, index.entities, settings(depth=3, threshold=0.1))
    assert list(stopped.events) == ["mini#0"] and stopped.best_below[1] == pytest.approx(1.1 / 3 / 4.2)
    # breadth 0 is clamped to 1; depth 0 = direct matches only
    assert list(activate(q, index.entities, settings(depth=0, threshold=0.0)).events) == ["mini#0"]


def test_query_names_found_in_a_short_query_and_completion(mini):
    index = load_index(mini, "mini")
    q, _ = index.query_entities("官渡和巴丘")
    assert q == sets(location={"官渡", "巴丘"})
    act = activate(q, index.entities, settings(depth=0), index.positions, index.events_of)
    # #0 and #2 each match one of two places: ratio 1, J = 1/2 → a = 0.7; #1 lies between them
    assert [(a.event_id, a.hop, a.completed) for a in act.events.values()] == [
        ("mini#0", 0, False), ("mini#2", 0, False), ("mini#1", 0, True)]
    assert act.events["mini#1"].activation == pytest.approx(0.7)
    assert activation_trace(act)[-1].edges == (("mini#0", None, "mini#1"), ("mini#2", None, "mini#1"))
    q2, unknown = index.query_entities("孙权在建业")
    assert q2 == {} and unknown == {"person": ("孙权",), "location": ("建业",)}


def test_source_scores_and_details_by_hand(mini):
    config = SearchConfig(weights={"bm25": 0.5, "dense": 0.5, "graph": 1.0}, graph={"threshold": 0.08},
                          graph_focus="")
    wb = Workbench(mini)
    source = wb.retriever.source("mini", "graph", config)
    hits = source.search("袁绍", 10)
    assert [(h.doc_id, h.detail["hop"]) for h in hits] == [("mini#0", 0), ("mini#1", 1), ("mini#2", 2)]
    encoder = load_encoder(mini.info("mini").model)
    q = encoder.encode_queries(["袁绍"])[0]
    rows = mini.column("mini", ["id", "vector"]).to_pylist()
    vec = {r["id"]: np.asarray(r["vector"]) for r in rows}
    for h in hits:
        cos = float(vec[h.doc_id] @ q / np.linalg.norm(vec[h.doc_id]) / np.linalg.norm(q))
        a = {"mini#0": 0.7, "mini#1": 0.7 * (0.1 + 0.6 * 1.1 / 3 / 4.2)}.get(h.doc_id)
        if a is not None:
            assert h.detail["match"] == pytest.approx(a, abs=1e-6)
        assert h.detail["vector"] == pytest.approx(cos, abs=1e-5)
        assert h.detail["recency"] == 1.0 and h.detail["preference"] == 0.5 and h.detail["days"] == 0
        # 0.3·a + 0.3·cos + 0.2·e^0 + 0.2·0.5
        assert h.raw_score == pytest.approx(0.3 * h.detail["match"] + 0.3 * cos + 0.2 + 0.1, abs=1e-5)
    assert hits[0].detail["matched"] == {"person": ["袁绍"]} and hits[1].detail["via"] == "mini#0"
    # focus raises the preference of chunks whose topics or tags hold it (here none: 0.5 stays)
    assert all(h.detail["preference"] == 0.5 for h in
               wb.retriever.source("mini", "graph",
                         SearchConfig(graph={"threshold": 0.08}, graph_focus="战役")).search("袁绍", 10))


def test_three_sources_fused_by_rrf_with_contributions(mini):
    wb = Workbench(mini)
    config = SearchConfig(fusion="rrf", weights={"bm25": 0.3, "dense": 0.3, "graph": 0.4}, rrf_k=10,
                          graph={"threshold": 0.08})
    result = wb.search("mini", "袁绍", config)
    graph_ranks = {h.doc_id: h.rank for h in result.candidates.sources["graph"].hits}
    assert graph_ranks == {"mini#0": 1, "mini#1": 2, "mini#2": 3}
    for fused in result.outcome.ranked:
        total = 0.0
        for source, w in config.weights.items():
            c = fused.sources[source]
            expected = w / (10 + c.rank) if c.rank is not None else 0.0
            assert c.contribution == pytest.approx(expected)
            total += expected
        assert fused.score == pytest.approx(total)
    top = result.outcome.ranked[0]
    assert top.doc_id == "mini#0" and top.sources["graph"].detail["hop"] == 0
    # a graph slider move re-activates without re-reading tables or re-embedding
    index = wb.retriever.source("mini", "graph", config).index
    moved = SearchConfig(weights=config.weights, rrf_k=10, graph={"threshold": 0.08, "depth": 1})
    again = wb.search("mini", "袁绍", moved)
    assert wb.retriever.source("mini", "graph", moved).index is index
    assert [h.doc_id for h in again.candidates.sources["graph"].hits] == ["mini#0", "mini#1"]


def test_collection_without_tables_is_indexed_in_memory(tmp_path):
    store = Store(str(tmp_path))
    create_collection(store, "old", ParsedCorpus(chunk_markdown(MINI, "mini")))
    for kind in ("entities", "event_entities", "event_times"):
        store.db.drop_table(f"_{kind}__old")
    index = load_index(store, "old")
    assert not index.from_tables and index.entities["mini#1"] == E1


def test_three_kingdoms_sample_spreads_beyond_direct_matches(tmp_path):
    from pathlib import Path

    from retrieval.indexing.readers.parse import parse_path

    store = Store(str(tmp_path))
    corpus = parse_path(Path(__file__).resolve().parents[2] / "sample_data" / "three_kingdoms")
    create_collection(store, "tk", corpus)
    texts = {d.id: d.title + "\n" + d.text for d in corpus.documents}
    source = Workbench(store).retriever.source("tk", "graph", SearchConfig(graph={"threshold": 0.1}))
    activation = source.activation("曹操和刘备的战役")
    assert activation.query_entities == {"person": ("刘备", "曹操"), "topic": ("战役",)}
    # hop 0 = the chunks whose entities hold 曹操, 刘备 or the topic 战役
    hop0 = {a.event_id for a in activation.at_hop(0)}
    assert hop0 == {e for e, s in source.index.entities.items()
                    if s.get("person", set()) & {"曹操", "刘备"} or "战役" in s.get("topic", set())}
    assert all(("曹操" in texts[e] or "刘备" in texts[e]) for e in hop0)
    spread = source.activation("诸葛亮北伐")
    assert spread.max_hop >= 1 and spread.at_hop(1)
    assert all(a.relevance >= 0.1 and a.parent in spread.events for a in spread.at_hop(1))
