"""Judging on the Search page: per result a 0–3 rating for the current query, saved at once into
the collection's active query set (`retrieval.judging.judgments.JudgmentStore`).

The active set: the one the session chose on the Evaluate page (or a link's `set=`), else the
sample's set when the query is one of its queries, else "judgments" (created by the first rating).
A rating must not rerun the whole page. Where the results are drawn inside a fragment already
(the Search page's controls-and-results fragment), the widget is drawn plainly and a rating reruns
that fragment: candidates come from the cache, so it costs what a slider move costs. Elsewhere
each widget is its own `st.fragment`. (Ten nested fragments, one per result, made every slider
move on the Search page ~30 ms slower in AppTest and ~200 ms in the browser: see
`benchmarks/bench_ui.py`.)
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from retrieval.judging.judgments import JudgmentStore
from ui import state
from ui.search import views

DEFAULT_SET = "judgments"
CACHE_KEY = "_workbench_judging"  # (collection, chosen set, query) -> (set name, {doc id: grade})
CACHE_SIZE = 256
SAMPLE_SET = "sample"
GRADES = (0, 1, 2, 3)
GRADE_LABELS = {0: "0 · not relevant", 1: "1 · related", 2: "2 · relevant", 3: "3 · perfect"}
RATING_HELP = ("Your relevance judgment of this result for the current query, saved at once into the query "
               "set named above: 0 not relevant, 1 related, 2 relevant, 3 perfect answer. Nothing selected: "
               "not rated. The Evaluate page scores rankings with these grades (nDCG uses them as gains).")


def judging_toggle() -> bool:
    """The Search page's "Rate results" switch (bound to the View, mirrored as `judge=1`)."""
    def write(value: bool) -> None:
        state.view().judging = bool(value)

    return state.bound(st.toggle, "Rate results", "view.judging", lambda: state.view().judging, write,
                       help="Shows a 0–3 rating under each result, saved at once into the query set named "
                            "above the results; the Evaluate page scores rankings with these grades. Off "
                            "while tuning: ten rating widgets make every slider move slower to draw.")


def active_set(judgments, collection: str, query: str, chosen: str | None) -> str:
    """The query set a rating of `query` goes to (see the module doc)."""
    if chosen:
        return chosen
    if SAMPLE_SET in judgments.query_sets(collection) and \
            query.strip() in {t.strip() for t in judgments.queries(collection, SAMPLE_SET).values()}:
        return SAMPLE_SET
    return DEFAULT_SET


@dataclass
class Judge:
    """The rating widgets of one page run: one query, one set, the grades already given."""

    judgments: JudgmentStore
    collection: str
    set_name: str
    query: str
    grades: dict[str, int]
    in_fragment: bool = False
    rater: str = ""  # '' the unnamed rater; the Judge page's name when one was given there

    def __call__(self, doc_id: str) -> None:
        """Draw the rating widget of result `doc_id` (the per-result hook of the result cards)."""
        draw = rating if self.in_fragment else rating_fragment
        draw(self.judgments, self.collection, self.set_name, self.query, doc_id, self.grades.get(doc_id), self.rater)


def judge(workbench, collection: str, query: str, in_fragment: bool = False) -> Judge | None:
    """Prepare the rating widgets for `query` and say where ratings go; None (with the error
    shown) when the judgments cannot be read. `in_fragment`: the caller draws the results inside
    an `st.fragment` already (see the module doc).

    The set and its grades for this query are read once per session and query (~50 ms of
    LanceDB reads), then kept in the session (`CACHE_KEY`, updated by every rating saved here),
    so a slider move on the Search page costs no judgment read."""
    if not query.strip():
        return None
    cache = st.session_state.setdefault(CACHE_KEY, {})
    rater = current_rater()
    key = (collection, state.view().query_set, query, rater)
    if key not in cache:
        try:
            judgments = workbench.judgments
            set_name = active_set(judgments, collection, query, state.view().query_set)
            grades = (judgments.ratings(collection, set_name, query, rater=rater)
                      if set_name in judgments.query_sets(collection) else {})
        except Exception as exc:  # the results still show; judging says why it is off
            views.show_error(exc)
            return None
        if len(cache) >= CACHE_SIZE:
            cache.clear()
        cache[key] = (set_name, dict(grades))
    set_name, grades = cache[key]
    by = f" as {rater}" if rater else ""
    st.caption(views.markdown_safe(
        f"Rate results 0–3 below: ratings go to query set '{set_name}' of '{workbench.label(collection)}'{by} "
        f"({len(grades)} rated for this query) and feed the Evaluate page."))
    return Judge(workbench.judgments, collection, set_name, query, dict(grades), in_fragment, rater)


def current_rater() -> str:
    """The rater the Judge page was given a name for (the View's, from its field or a link), else
    the unnamed rater ('')."""
    from retrieval.judging.raters import validate_rater
    from retrieval.types import RetrievalError

    name = state.view().rater
    try:
        return validate_rater(name) if name else ""
    except RetrievalError:
        return ""


def widget_key(collection: str, set_name: str, query: str, doc_id: str, rater: str = "") -> str:
    import hashlib

    parts = (collection, set_name, query, doc_id) + ((rater,) if rater else ())  # unnamed: the keys as before
    digest = hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:16]
    return f"judge_{digest}"  # [a-zA-Z0-9_-] only: Streamlit puts it as st-key-<key> in the class


def rating(judgments: JudgmentStore, collection: str, set_name: str, query: str, doc_id: str,
           grade: int | None, rater: str = "") -> None:
    """One result's rating widget; the grade is saved by its on_change callback."""
    key = widget_key(collection, set_name, query, doc_id, rater)
    if key not in st.session_state:
        st.session_state[key] = grade
    st.segmented_control(
        "Relevance", options=list(GRADES), format_func=GRADE_LABELS.get,  # no user text in the (hidden) label
        key=key, on_change=_save, args=(judgments, collection, set_name, query, doc_id, key, rater),
        help=RATING_HELP, label_visibility="collapsed",
    )
    message = st.session_state.pop(f"{key}.error", None)
    if message:
        views.show_error(message)


rating_fragment = st.fragment(rating)  # the same widget as its own fragment: a click reruns only it


def _save(judgments: JudgmentStore, collection: str, set_name: str, query: str, doc_id: str, key: str,
          rater: str = "") -> None:
    """on_change: write the new grade (or remove it: 'not rated') before the fragment reruns."""
    grade = st.session_state[key]
    try:
        if grade is None:
            judgments.unrate(collection, set_name, query, doc_id, rater=rater)
        else:
            judgments.rate(collection, set_name, query, doc_id, int(grade), rater=rater)
        _remember(collection, set_name, query, doc_id, grade, rater)
    except Exception as exc:  # bad input or a failing database: readable, the page stays up
        from retrieval.types import RetrievalError

        st.session_state[f"{key}.error"] = (str(exc) if isinstance(exc, RetrievalError)
                                            else f"Unexpected error ({type(exc).__name__}): {exc}")


def _remember(collection: str, set_name: str, query: str, doc_id: str, grade: int | None, rater: str = "") -> None:
    """Keep the session's cached grades (see `judge`) in step with a saved rating."""
    for (c, _, q, r), (name, grades) in st.session_state.get(CACHE_KEY, {}).items():
        if (c, q, name, r) == (collection, query, set_name, rater):
            if grade is None:
                grades.pop(doc_id, None)
            else:
                grades[doc_id] = int(grade)


def forget() -> None:
    """Drop the session's cached grades (after a query set was replaced or uploaded)."""
    st.session_state.pop(CACHE_KEY, None)
