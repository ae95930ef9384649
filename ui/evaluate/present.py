"""The Present page: a stakeholder view of one change — no sidebar, large type, the headline metric
before and after (two snapshots, `snapshot_diff.diff`) in plain words, and one question's results
before and after, by title, with each document's move. Everything shown is the diff's own numbers."""

from __future__ import annotations

import streamlit as st

from retrieval.evaluation.evaluate import metric_label
from retrieval.evaluation.snapshot_diff import diff, result_lists
from retrieval.evaluation.snapshots import Snapshot, SnapshotStore, rerun_at
from ui.evaluate import charts as eval_charts
from ui.search import views
from ui.state import memo_read

# Constant CSS, no user text: hide the sidebar and its toggle, and set large type.
PRESENTATION_CSS = """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"]
  { display: none !important; }
.stMainBlockContainer, .block-container { max-width: 1200px; font-size: 1.35rem; }
.stMainBlockContainer p, .stMainBlockContainer li { font-size: 1.35rem; }
[data-testid="stMetricValue"], [data-testid="stMetricValue"] div, [data-testid="stMetricValue"] p
  { font-size: 3.2rem !important; line-height: 1.2; }
[data-testid="stMetricLabel"] p { font-size: 1.35rem !important; }
</style>"""


# The short columns narrow, the title takes the rest of the table's width.
COLUMNS = {"#": st.column_config.NumberColumn(width="small"), "move": st.column_config.TextColumn(width="small"),
           "document": st.column_config.TextColumn(width="large")}


def headline_words(d: dict) -> str:
    """The change in one sentence for people: the metric before and after, how many questions
    improved and worsened, and whether the change is more than noise (randomization test, 0.05)."""
    better = "better" if d["delta"] > 0 else "worse" if d["delta"] < 0 else "unchanged"
    verdict = ("a real change (p < 0.05)" if d["p_value"] < 0.05 else
               "within the noise: it could be chance (p ≥ 0.05)")
    return (f"Search got {better}: {metric_label(d['metric'])} {d['a']['value']:.2f} → {d['b']['value']:.2f} over "
            f"{d['n_queries']} judged questions — {d['wins']} improved, {d['losses']} got worse, {d['ties']} "
            f"unchanged; {verdict}.")


def titled(workbench, collection: str, rows: list[dict]) -> list[dict]:
    """Result rows as people read them: each document by its title, else the start of its text
    (its id when it is gone from the collection). The rank and the move come before the title, so
    a long title never pushes the move out of sight (`COLUMNS`)."""
    found = workbench.documents(collection, [r["document"] for r in rows]) if workbench.exists(collection) else {}
    return [{"#": r["rank"], **({"move": r["change"]} if "change" in r else {}),
             "document": document_words(found.get(r["document"]), r["document"])} for r in rows]


def document_words(row: dict | None, doc_id: str, chars: int = 90) -> str:
    """A document for people: its title, else its text's first `chars` characters, else its id."""
    if not row:
        return doc_id
    if (row.get("title") or "").strip():
        return row["title"].strip()
    text = " ".join((row.get("text") or "").split())
    return (text[:chars].rstrip() + "…" if len(text) > chars else text) or doc_id


def present(workbench, collection: str) -> None:
    st.html(PRESENTATION_CSS)
    st.title("Search, before and after")
    try:
        kept = memo_read(workbench, ("snapshots", collection), lambda: SnapshotStore(workbench.store).list(collection))
    except Exception as exc:
        views.show_error(exc)
        return
    if len(kept) < 2:
        st.info("Keep two snapshots of this collection first (Evaluate → Snapshots: one before the change, one "
                "after); this page then shows the change for people without the tool.")
        st.page_link("pages/5_Evaluate.py", label="Go to Evaluate")
        return
    names = [s.name for s in kept]
    c1, c2 = st.columns(2)
    name_a = c1.selectbox("Before", names, index=len(names) - 2, key="present.a",
                          help="The snapshot from before the change (Evaluate → Snapshots keeps them).")
    name_b = c2.selectbox("After", names, index=len(names) - 1, key="present.b",
                          help="The snapshot from after the change.")
    by_name: dict[str, Snapshot] = {s.name: s for s in kept}
    a, b = by_name[name_a], by_name[name_b]
    try:
        d = memo_read(workbench, ("snapshot-diff", collection, name_a, name_b, "ndcg@10"),
                      lambda: diff(a, b, "ndcg@10", rerun=rerun_at(workbench, collection)))
    except Exception as exc:
        views.show_error(exc)
        return
    left, middle, right = st.columns(3)
    left.metric(f"Before: {views.markdown_safe(a.name)}", f"{d['a']['value']:.2f}")
    middle.metric(f"After: {views.markdown_safe(b.name)}", f"{d['b']['value']:.2f}", f"{d['delta']:+.2f}")
    right.metric("Questions improved / worse", f"{d['wins']} / {d['losses']}")
    st.markdown(views.markdown_safe(headline_words(d)))
    if d["causes"]:
        st.plotly_chart(eval_charts.causes_waterfall(d), width="stretch")
    entries = d["winners"] + d["losers"]
    if not entries:
        return
    labels = {e["query_id"]: f"{'▲' if e['delta'] > 0 else '▼'} {e['query'] or e['query_id']}" for e in entries}
    query_id = st.selectbox("Question", list(labels), format_func=labels.get, key="present.query",
                            help="The questions that changed most, best first, then the worst.")
    before, after = result_lists(a, b, query_id, k=5)
    lists = st.columns(2)
    for column, title, rows in zip(lists, ("Before", "After"), (before, after), strict=True):
        column.subheader(title)
        column.dataframe(titled(workbench, collection, rows), hide_index=True, width="stretch", column_config=COLUMNS)
    st.caption("▲ / ▼: the document's move after the change; new: it was not in the top 5 before.")
