"""The Judge tab: the queue's pairs shown one document at a time and graded.

Blind by default (no source, score or rank; a query's documents in an order shuffled per rater,
`queue.current_pair`). Grades 0–3, "can't tell" and skip, each on a key (0 1 2 3 X S, U undoes);
the query's information need and guidelines, written per query; progress per query set.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import streamlit as st

from ui.judging.queue import (
    NEXT,
    current_pair,
    full_queue,
    judged_set,
    pending_pairs,
    progress_text,
    queue_controls,
    queue_window,
)
from ui.search import views

GRADE_BUTTONS = ((0, "0 · not relevant"), (1, "1 · related"), (2, "2 · relevant"), (3, "3 · perfect"))
SCALE_GUIDELINES = """\
- **3 · perfect**: the document is dedicated to the query and answers it fully; nothing else is needed.
- **2 · relevant**: it answers the query, but with other matter around it or only in part.
- **1 · related**: it is on the query's topic but does not answer it.
- **0 · not relevant**: it has nothing to do with the query.
- **Can't tell** (X): you cannot decide (missing context, a language you do not read); nothing is counted and
  the pair is not asked of you again. **Skip** (S) moves it to the end of the queue.
"""
ABSENT = object()  # undo: the rater had not rated the pair before
SESSION_KEY = "judge.session"


@dataclass
class Session:
    """What the page remembers while a rater works: skipped pairs and what undo restores."""

    owner: tuple = ()  # (collection, query set, rater): another one starts a new session
    skipped: list[tuple[str, str]] = field(default_factory=list)
    undo: list[tuple[str, str, object]] = field(default_factory=list)  # (query, doc, previous grade | ABSENT)
    message: str = ""


def session(owner: tuple | None = None) -> Session:
    """This browser session's judging state; a new one when `owner` changed."""
    work = st.session_state.get(SESSION_KEY)
    if work is None or (owner is not None and work.owner != owner):
        work = st.session_state[SESSION_KEY] = Session(owner or ())
    return work


def judging_session(workbench, collection: str, set_name: str, rater: str) -> None:
    judgments = workbench.judgments
    selection, names, budget, others, blind = queue_controls(workbench)
    if selection == NEXT and len(names) < 2:
        st.info("Pick two or more configs to compare, or the depth-10 pool.")
        return
    if not names:
        st.info("Pick at least one config whose top 10s make the pool.")
        return
    try:
        queries, notes, ratings, consensus = judged_set(workbench, collection, set_name)
        queue = full_queue(workbench, collection, set_name, selection, names, consensus)
    except Exception as exc:
        views.show_error(exc)
        return
    mine = {(r.query_id, r.doc_id): r.grade for r in ratings if r.rater == rater}
    others_judged = {(r.query_id, r.doc_id) for r in ratings if r.rater != rater and r.grade is not None}
    work = session((collection, set_name, rater))
    window = queue_window(queue, others_judged, others, budget)
    pending = pending_pairs(window, mine, work.skipped)
    done = len(window) - len(pending)
    st.progress(done / len(window) if window else 1.0,
                text=progress_text(done, len(window), rater, sum(1 for q in queries if consensus.get(q)),
                                   len(queries), set_name))
    if work.message:
        st.caption(views.markdown_safe(work.message))
    pair = current_pair(pending, rater, set_name, blind, work.skipped)
    buttons_disabled = pair is None
    if pair is None:
        st.success("Nothing left in this queue. Raise the budget, compare other configs, or look at the raters' "
                   "agreement.")
    else:
        show_pair(workbench, collection, set_name, pair, queries, notes, pending, blind)
    grade_buttons(judgments, collection, set_name, rater, pair, mine, buttons_disabled)
    with st.expander("Grading guidelines"):
        st.markdown(SCALE_GUIDELINES)


def show_pair(workbench, collection: str, set_name: str, pair, queries: dict, notes: dict, pending: list,
              blind: bool) -> None:
    left_in_query = sum(1 for c in pending if c.query_id == pair.query_id)
    st.caption(views.markdown_safe(f"Query {pair.query_id} · {left_in_query} document(s) of it left in the queue"))
    st.subheader(views.markdown_safe(queries.get(pair.query_id, pair.query_id)))
    need, guidelines = notes.get(pair.query_id, ("", ""))
    if need:
        st.markdown(views.labelled("Information need:", need))
    if guidelines:
        st.markdown(views.labelled("Guidelines for this query:", guidelines))
    notes_form(workbench, collection, set_name, pair.query_id, need, guidelines)
    try:
        row = workbench.documents(collection, [pair.doc_id]).get(pair.doc_id)
    except Exception as exc:
        views.show_error(exc)
        return
    with st.container(border=True):
        if row is None:
            st.warning(views.markdown_safe(f"Document {pair.doc_id} is no longer in the collection."))
            return
        title = (row.get("title") or "").strip()
        if title:
            st.markdown(views.bold(title))
        st.markdown(views.markdown_safe(row.get("text") or ""))
        if not blind:
            ranks = ", ".join(f"config {i + 1}: {'–' if r is None else r}" for i, r in enumerate(pair.ranks))
            st.caption(views.markdown_safe(f"{pair.doc_id} · ranks {ranks} · weight {pair.weight:.3f}"))


def notes_form(workbench, collection: str, set_name: str, query_id: str, need: str, guidelines: str) -> None:
    with st.expander("Edit this query's information need and guidelines"), \
            st.form(f"judge.notes.{hashlib.sha1(query_id.encode()).hexdigest()[:12]}"):
        new_need = st.text_area("Information need", value=need, max_chars=4000,
                                help="What the person asking wants to know: every rater reads it above the document.")
        new_guidelines = st.text_area("Guidelines", value=guidelines, max_chars=4000,
                                      help="What counts as relevant for this query, e.g. 'a dosage is a 3'.")
        if st.form_submit_button("Save"):
            try:
                workbench.judgments.set_notes(collection, set_name, query_id, new_need, new_guidelines)
            except Exception as exc:
                views.show_error(exc)
            else:
                st.rerun()  # drawn above the form: show what was just saved


def grade_buttons(judgments, collection: str, set_name: str, rater: str, pair, mine: dict, disabled: bool) -> None:
    columns = st.columns(7)
    target = None if pair is None else (pair.query_id, pair.doc_id)
    for column, (grade, label) in zip(columns, GRADE_BUTTONS, strict=False):
        column.button(label, key=f"judge.grade{grade}", shortcut=str(grade), disabled=disabled,
                      on_click=_rate, args=(judgments, collection, set_name, rater, target, grade, mine),
                      use_container_width=True)
    columns[4].button("Can't tell", key="judge.cant", shortcut="X", disabled=disabled, use_container_width=True,
                      on_click=_rate, args=(judgments, collection, set_name, rater, target, None, mine))
    columns[5].button("Skip", key="judge.skip", shortcut="S", disabled=disabled, use_container_width=True,
                      on_click=_skip, args=(target,))
    columns[6].button("Undo", key="judge.undo", shortcut="U", disabled=not session().undo, use_container_width=True,
                      on_click=_undo, args=(judgments, collection, set_name, rater))


def _rate(judgments, collection: str, set_name: str, rater: str, target, grade, mine: dict) -> None:
    work = session()
    try:
        judgments.rate_many(collection, set_name, {target: grade}, rater=rater)
    except Exception as exc:
        work.message = f"Not saved: {exc}"
        return
    work.undo.append((*target, mine.get(target, ABSENT)))
    if target in work.skipped:
        work.skipped.remove(target)
    said = "can't tell" if grade is None else f"grade {grade}"
    work.message = f"Saved {said} for {target[1]} (query {target[0]}). U undoes it."


def _skip(target) -> None:
    work = session()
    if target not in work.skipped:
        work.skipped.append(target)
    work.message = f"Skipped {target[1]}: it comes back at the end of the queue."


def _undo(judgments, collection: str, set_name: str, rater: str) -> None:
    work = session()
    if not work.undo:
        return
    query_id, doc_id, previous = work.undo[-1]
    try:
        if previous is ABSENT:
            judgments.unrate_many(collection, set_name, [(query_id, doc_id)], rater=rater)
        else:
            judgments.rate_many(collection, set_name, {(query_id, doc_id): previous}, rater=rater)
    except Exception as exc:
        work.message = f"Undo failed: {exc}"
        return
    work.undo.pop()
    work.message = f"Undone: {doc_id} (query {query_id}) is back in the queue."

