"""Evaluate page, Snapshots tab: keep config A's evaluation, list, diff two; values are the
core's (`SnapshotStore`, `snapshot_diff.diff`) on the very database the app uses."""

import json

import pytest
from conftest import COLLECTION, REPO, open_page, plain

from retrieval.evaluation.snapshot_diff import diff
from retrieval.evaluation.snapshots import SnapshotStore
from retrieval.indexing.readers.parse import parse_path
from retrieval.judging.judgments import JudgmentStore
from retrieval.store import Store
from ui.evaluate.common import shown_p
from ui.evaluate.snapshots import side_by_side

EVALUATE = "pages/5_Evaluate.py"
SET = "snap-set"


@pytest.fixture(scope="module")
def snap_set(app_db):
    """Query set 'snap-set': four English and four Chinese sample questions whose paragraph is in
    the collection (which holds each paragraph in both languages)."""
    sample = parse_path(REPO / "sample_data" / "xquad")
    in_collection = {f"{lang}-{i:03d}" for lang in ("en", "zh") for i in range(1, 9)}
    picked = [q for lang in ("en", "zh") for q in [q for q, docs in sample.qrels.items()
                                                   if q.startswith(lang) and set(docs) <= in_collection][:4]]
    JudgmentStore(Store(app_db.uri)).save_query_set(COLLECTION, SET, {q: sample.queries[q] for q in picked},
                                                    {q: dict(sample.qrels[q]) for q in picked})
    return SnapshotStore(Store(app_db.uri))


def keep(at, name: str):
    at.text_input(key="snap.name").set_value(name).run()
    at.button(key="snap.create").click().run()
    assert not at.exception
    return at


def test_keep_two_snapshots_and_diff_them(snap_set):
    at = keep(open_page(EVALUATE, set=SET), "hybrid now")
    first = snap_set.get("hybrid now")
    assert first.query_set == SET and len(first.per_query) == 8
    assert any(plain(s.value) == f"Kept snapshot 'hybrid now': 8 judged queries, nDCG@10 {first.mean['ndcg@10']:.4f}."
               for s in at.success)
    table = next(d.value for d in at.dataframe if "version" in d.value.columns)
    assert list(table["name"]) == ["hybrid now"] and list(table["nDCG@10"]) == [first.mean["ndcg@10"]]

    # the vectors' first candidate alone: a question's top 1 may be its paragraph's translation
    at = keep(open_page(EVALUATE, set=SET, weights="bm25=0.0,dense=1.0", depth="1"), "vector top 1")
    second = snap_set.get("vector top 1")
    assert (second.config.weights, second.config.depth) == ({"bm25": 0.0, "dense": 1.0}, 1)
    expected = diff(first, second, "ndcg@10")
    values = {m.label: m.value for m in at.metric}
    assert values["hybrid now"] == f"{expected['a']['value']:.4f}"
    assert values["vector top 1"] == f"{expected['b']['value']:.4f}"
    assert values["Δ (B − A)"] == f"{expected['delta']:+.4f}"
    assert values["p (randomization)"] == shown_p(expected["p_value"])
    assert any(plain(m.value).startswith("Changed between the two: config.") for m in at.markdown)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    trend = next(c for c in charts if c["data"][0]["type"] == "scatter")
    assert trend["data"][0]["y"] == [first.mean["ndcg@10"], second.mean["ndcg@10"]]
    fall = next(c for c in charts if c["data"][0]["type"] == "waterfall")["data"][0]  # A, the config's share, B
    assert fall["y"][:2] == [expected["a"]["value"], expected["causes"]["config"]]

    entries = expected["winners"] + expected["losers"]
    assert entries
    # the first one's top 10 in both, side by side with rank changes
    assert at.selectbox(key="snap.query").value == entries[0]["query_id"]
    shown = next(d.value for d in at.dataframe if "change" in d.value.columns)
    assert list(shown["change"]) == list(side_by_side(first, second, entries[0]["query_id"])[1]["change"])

    at = keep(at, "vector top 1")  # a name is used once
    assert any("'vector top 1' already exists" in plain(e.value) for e in at.error)

    # a damaged row (written around the workbench) is named, the others still listed
    snap_set.table.add({**first.to_row(), "name": "damaged", "run": "{not json"})
    try:
        at = open_page(EVALUATE, set=SET)
        assert not at.exception
        assert [plain(w.value) for w in at.warning if "damaged" in plain(w.value)] == [
            "Snapshot 'damaged' is damaged (its run is not valid JSON): delete it (snapshot delete damaged)"]
        table = next(d.value for d in at.dataframe if "version" in d.value.columns)
        assert list(table["name"]) == ["hybrid now", "vector top 1"]
    finally:
        snap_set.delete("damaged")


def test_the_present_page_shows_the_change_for_people(snap_set, workbench):
    """No sidebar, the headline in plain words, one question's results before and after by title:
    every number the diff's own."""
    from retrieval.evaluation.snapshot_diff import result_lists
    from retrieval.search.config import SearchConfig
    from ui.evaluate.present import PRESENTATION_CSS, document_words, headline_words

    before = snap_set.create(workbench, COLLECTION, "present before", SearchConfig(depth=1), SET)
    after = snap_set.create(workbench, COLLECTION, "present after", SearchConfig(), SET)
    at = open_page("pages/7_Present.py")
    at.selectbox(key="present.a").set_value("present before").run()
    at.selectbox(key="present.b").set_value("present after").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    expected = diff(before, after, "ndcg@10")
    values = {m.label: (m.value, m.proto.delta) for m in at.metric}
    assert values["Before: present before"][0] == f"{expected['a']['value']:.2f}"
    assert values["After: present after"] == (f"{expected['b']['value']:.2f}", f"{expected['delta']:+.2f}")
    assert values["Questions improved / worse"][0] == f"{expected['wins']} / {expected['losses']}"
    assert any(plain(m.value) == headline_words(expected) for m in at.markdown)
    # the metric as the app spells it everywhere (evaluate.metric_label), not its internal key
    assert headline_words(expected).startswith(("Search got better: nDCG@10 ", "Search got worse: nDCG@10 "))
    assert any(h.proto.body == PRESENTATION_CSS for h in at.get("html"))  # the sidebar hidden, large type
    first = (expected["winners"] + expected["losers"])[0]["query_id"]
    assert at.selectbox(key="present.query").value == first
    shown = [d.value for d in at.dataframe if "#" in d.value.columns]
    a_rows, b_rows = result_lists(before, after, first, k=5)
    rows = workbench.documents(COLLECTION, [r["document"] for r in a_rows + b_rows])
    assert list(shown[0]["document"]) == [document_words(rows.get(r["document"]), r["document"]) for r in a_rows]
    assert list(shown[1]["move"]) == [r["change"] for r in b_rows]
    # the rank and the move before the title: a long title never pushes the move out of sight
    assert [list(frame.columns) for frame in shown] == [["#", "document"], ["#", "move", "document"]]
