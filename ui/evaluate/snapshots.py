"""The Evaluate page's snapshots: keep config A's evaluation of the query set as a named snapshot,
list the collection's snapshots, and diff two of them (`retrieval.evaluation.snapshot_diff.diff`): each side
with its 95 % interval, Δ, p, what changed and each cause's share, winners and losers."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from retrieval.evaluation.paired import bootstrap_ci
from retrieval.evaluation.snapshot_diff import diff, result_lists
from retrieval.evaluation.snapshot_report import report_html
from retrieval.evaluation.snapshots import SNAPSHOT_METRICS, Snapshot, SnapshotStore, judged_label, rerun_at
from retrieval.judging.judgments import QuerySet
from retrieval.search.config import SearchConfig
from ui.evaluate import charts as eval_charts
from ui.evaluate.common import shown_p
from ui.search import views
from ui.state import memo_read


def snapshots_section(workbench, collection: str, qset: QuerySet, config: SearchConfig) -> None:
    snapshots = SnapshotStore(workbench.store)
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    name = c1.text_input("Snapshot name", key="snap.name", max_chars=64,
                         help="A name for this evaluation, e.g. 'before synonyms' or '2026-11 baseline'. Snapshots "
                              "are never overwritten: each name is used once.")
    if c2.button("Keep as snapshot", key="snap.create", type="primary",
                 help="Evaluate config A on this query set now and keep the result: the collection's version, the "
                      "config, the judgments as they are, each query's results and metrics."):
        try:
            with st.spinner("Evaluating…"):
                snap = snapshots.create(workbench, collection, name.strip(), config, qset.name,
                                        source=qset.source)
            st.success(views.markdown_safe(f"Kept snapshot '{snap.name}': {len(snap.per_query)} judged queries, "
                                           f"nDCG@10 {snap.mean['ndcg@10']:.4f}."))
        except Exception as exc:
            views.show_error(exc)
    try:
        kept, problems = memo_read(workbench, ("snapshots", collection),
                                   lambda: (snapshots.list(collection), list(snapshots.problems)))
    except Exception as exc:
        views.show_error(exc)
        return
    for problem in problems:  # a damaged row, or a name two rows share: left out of the list
        st.warning(views.markdown_safe(problem))
    if not kept:
        st.info("No snapshot of this collection yet: name one above to keep config A's evaluation.")
        return
    st.dataframe(pd.DataFrame([{"name": s.name, "created": s.created[:19].replace("T", " "),
                                "version": s.table_version, "documents": s.doc_count, "query set": s.query_set,
                                "queries": len(s.per_query),
                                **{eval_charts.metric_label(m): v for m, v in s.mean.items()}} for s in kept]),
                 hide_index=True, width="stretch")
    if len(kept) < 2:
        st.caption("Keep a second snapshot to compare the two.")
        return
    names = [s.name for s in kept]
    metric = st.selectbox("Metric", list(SNAPSHOT_METRICS), format_func=eval_charts.metric_label, key="snap.metric",
                          help="judged@10: the share of the top 10 that has a judgment.")
    # Snapshots never change (a rename or delete is a write, which clears these memos).
    label = judged_label(qset.name, qset.source)
    points = memo_read(workbench, ("snapshot-trend", collection, label, metric),
                       lambda: trend_points(kept, label, metric))
    trend_chart(points, qset.name, metric)
    c1, c2 = st.columns(2)
    name_a = c1.selectbox("Before (A)", names, index=len(names) - 2, key="snap.a",
                          help="The snapshot the change is measured from.")
    name_b = c2.selectbox("After (B)", names, index=len(names) - 1, key="snap.b",
                          help="The snapshot compared with A: a positive Δ means B is better.")
    by_name = {s.name: s for s in kept}
    try:
        d = memo_read(workbench, ("snapshot-diff", collection, name_a, name_b, metric),
                      lambda: diff(by_name[name_a], by_name[name_b], metric, rerun=rerun_at(workbench, collection)))
    except Exception as exc:
        views.show_error(exc)
        return
    show_diff(d)
    query_lists(d, by_name[name_a], by_name[name_b])
    st.download_button("Download the report (HTML)", report_html(d, by_name[name_a], by_name[name_b]),
                       file_name="snapshot-report.html", mime="text/html", key="snap.report",
                       help="One self-contained page for people without the tool: the change with its interval, "
                            "what changed, where it came from, the biggest wins and losses. Opens offline, "
                            "also on a phone.")


def trend_points(kept: list[Snapshot], query_set: str, metric: str) -> list[dict]:
    """The query set's snapshots, oldest first: name, mean `metric` and its 95 % bootstrap interval."""
    points = []
    for snap in kept:
        if snap.query_set == query_set and snap.per_query:
            values = [v[metric] for v in snap.per_query.values()]
            points.append({"name": snap.name, "value": sum(values) / len(values), "ci95": bootstrap_ci(values)})
    return points


def pair_before(names: list[str], name: str) -> tuple[str, str] | None:
    """(the snapshot before `name` in `names`, `name`): what a click on a point of the trend diffs."""
    i = names.index(name) if name in names else 0
    return (names[i - 1], name) if i > 0 else None


def trend_chart(points: list[dict], query_set: str, metric: str) -> None:
    """The metric across the query set's snapshots (`trend_points`); clicking a point diffs it with
    the one before."""
    if len(points) < 2:
        return
    event = st.plotly_chart(eval_charts.snapshot_trend(points, metric), width="stretch", key="snap.trend",
                            on_select="rerun", selection_mode="points")
    selected = (event or {}).get("selection", {}).get("points", [])
    if selected:
        pair = pair_before([p["name"] for p in points], points[selected[0]["point_index"]]["name"])
        if pair:  # before the pickers are drawn: they open on this pair
            st.session_state["snap.a"], st.session_state["snap.b"] = pair
    st.caption(views.markdown_safe(f"'{query_set}' across its snapshots, with 95 % intervals. Click a point to compare "
                                   "it with the snapshot before it."))


def show_diff(d: dict) -> None:
    cols = st.columns(4)
    for col, side in zip(cols[:2], ("a", "b"), strict=True):
        low, high = d[side]["ci95"]
        col.metric(views.markdown_safe(d[side]["name"]), f"{d[side]['value']:.4f}",
                   help=f"Mean {d['metric']} over the {d['n_queries']} queries judged in both; 95 % bootstrap "
                        f"interval {low:.4f} … {high:.4f}")
    cols[2].metric("Δ (B − A)", f"{d['delta']:+.4f}",
                   help=f"95 % bootstrap interval {d['delta_ci95'][0]:+.4f} … {d['delta_ci95'][1]:+.4f}")
    cols[3].metric("p (randomization)", shown_p(d["p_value"]),
                   help="Paired randomization test, two-sided: how often random swaps of A and B per query give a "
                        "difference at least this large.")
    changed = ", ".join(d["changed"]) or "nothing"
    lines = [f"Changed between the two: {changed}. {d['wins']} queries better, {d['losses']} worse, {d['ties']} equal."]
    if d["causes"]:
        lines.append("Shares of Δ: " + "; ".join(f"{cause} {share:+.4f}" for cause, share in d["causes"].items()))
    st.markdown(views.markdown_safe(" ".join(lines)))
    for note in d.get("notes", ()):
        st.caption(views.markdown_safe(note))
    if d["causes"]:
        st.plotly_chart(eval_charts.causes_waterfall(d), width="stretch")
    rows = [{"": "better" if e["delta"] > 0 else "worse", "query id": e["query_id"], "query": e["query"],
             "A": e["a"], "B": e["b"], "Δ": e["delta"],
             "causes": "; ".join(f"{c} {v:+.4f}" for c, v in e["causes"].items())}
            for e in d["winners"] + d["losers"]]
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                     column_config={"Δ": st.column_config.NumberColumn(format="%+.4f")})


def side_by_side(a: Snapshot, b: Snapshot, query_id: str, k: int = 10) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`snapshot_diff.result_lists` as two frames (an unjudged document's grade: <NA>, shown "—")."""
    frames = []
    for rows, columns in zip(result_lists(a, b, query_id, k), (["rank", "document", "grade"],
                                                               ["rank", "document", "grade", "change"]), strict=True):
        frames.append(pd.DataFrame(rows, columns=columns).astype({"grade": "Int64"}))
    return frames[0], frames[1]


def query_lists(d: dict, a: Snapshot, b: Snapshot) -> None:
    """One winner's or loser's top 10 in both snapshots, side by side with rank changes."""
    entries = d["winners"] + d["losers"]
    if not entries:
        return
    labels = {e["query_id"]: f"{e['delta']:+.4f}  {e['query'] or e['query_id']}" for e in entries}
    query_id = st.selectbox("Results of", list(labels), format_func=labels.get, key="snap.query",
                            help="A query that got better or worse: its top 10 in both snapshots.")
    left, right = st.columns(2)
    frames = side_by_side(a, b, query_id)
    for column, snap, frame in zip((left, right), (a, b), frames, strict=True):
        column.markdown(views.bold(snap.name))
        column.dataframe(frame, hide_index=True, width="stretch", placeholder="—",
                         column_config={"grade": st.column_config.NumberColumn(help="The judgment in this snapshot")})
