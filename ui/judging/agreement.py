"""The Raters and agreement tab: who rated, and how far the raters agree.

Agreement per pair of raters (Cohen's κ, plain and weighted) and overall (Krippendorff's α), per
query; the disagreements, each settled here by an adjudicated grade; then the ratings' import and
export (`ratings_files.py`).
"""

from __future__ import annotations

import streamlit as st

from retrieval.judging.judgments import UNNAMED
from retrieval.judging.raters import ADJUDICATED, agreement, disagreements
from ui.judging.grading import GRADE_BUTTONS
from ui.judging.ratings_files import ratings_files
from ui.search import views
from ui.state import memo_read


def raters_section(workbench, collection: str, set_name: str) -> None:
    judgments = workbench.judgments
    try:
        ratings = memo_read(workbench, ("judge.ratings", collection, set_name),
                            lambda: judgments.ratings_of(collection, set_name))
    except Exception as exc:
        views.show_error(exc)
        return
    counts: dict[str, int] = {}
    for r in ratings:
        counts[r.rater] = counts.get(r.rater, 0) + 1
    st.caption(views.markdown_safe(
        "Raters: " + (", ".join(f"{rater_label(n)} ({c})" for n, c in sorted(counts.items())) or "none yet") +
        ". The metrics use the consensus per (query, document): the adjudicated grade, else the grade more than "
        "half the raters gave, else the mean grade rounded half up."))
    result = agreement(ratings)
    if result.pairs:
        st.dataframe([{"raters": " vs ".join(rater_label(n) for n in p.raters), "documents both graded": p.n,
                       "Cohen's κ": p.cohen_kappa, "weighted κ (quadratic)": p.weighted_kappa} for p in result.pairs],
                     hide_index=True, use_container_width=True)
        alpha = result.krippendorff_alpha
        shown = "undefined" if alpha is None else f"{alpha:.3f}"
        st.markdown(f"Krippendorff's α (ordinal) over every rater: **{shown}**"
                    " — 1 is perfect agreement, 0 what chance gives, below 0.667 is usually too low to rely on.")
        with st.expander("Agreement per query"):
            st.dataframe([{"query": q, "α": a.alpha, "documents": a.n_units, "disagreements": a.n_disagreements}
                          for q, a in result.per_query.items()], hide_index=True, use_container_width=True)
    else:
        st.info("Agreement needs two raters who graded the same documents: ask a second person to judge with "
                "'Also pairs other raters judged' on.")
    adjudication(workbench, collection, set_name, ratings)
    ratings_files(workbench, collection, set_name)


def rater_label(name: str) -> str:
    return "(unnamed)" if name == UNNAMED else name


def adjudication(workbench, collection: str, set_name: str, ratings) -> None:
    found = disagreements(ratings)
    st.subheader("Disagreements")
    if not found:
        st.caption("No disagreement left to settle.")
        return
    st.dataframe([{"query": d.query_id, "document": d.doc_id, "spread": d.spread,
                   "grades": ", ".join(f"{rater_label(r)} {g}" for r, g in d.grades.items())} for d in found],
                 hide_index=True, use_container_width=True)
    with st.form("judge.adjudicate"):
        options = [f"{d.query_id} · {d.doc_id}" for d in found]
        chosen = st.selectbox("Settle", range(len(found)), format_func=options.__getitem__,
                              help="The adjudicated grade is the consensus the metrics use, whatever the raters gave.")
        grade = st.radio("Adjudicated grade", [g for g, _ in GRADE_BUTTONS], format_func=dict(GRADE_BUTTONS).get,
                         index=2, horizontal=True, key="judge.adjudicated_grade")
        if st.form_submit_button("Adjudicate"):
            d = found[chosen]
            try:
                workbench.judgments.rate_many(collection, set_name, {(d.query_id, d.doc_id): int(grade)},
                                              rater=ADJUDICATED)
                st.success(views.markdown_safe(f"{d.doc_id} for query {d.query_id}: adjudicated {grade}."))
            except Exception as exc:
                views.show_error(exc)
