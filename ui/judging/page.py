"""The Judge page: hours of judging made bearable, and several raters made measurable.

One query set and one rater name at the head of the page, then three tabs:

- **Judge** (`grading.py`, its queue in `queue.py`): unjudged (query, document) pairs, one document
  at a time, blind by default, graded by key.
- **Raters and agreement** (`agreement.py`, `ratings_files.py`): agreement between raters, the
  disagreements settled by an adjudicated grade; import and export of ratings.
- **LLM judge** (`llm.py`): an OpenAI-compatible endpoint judges the same queue as a rater of its own.

Ratings go into the query set under the rater's name (`JudgmentStore.rate_many`); the metrics
read the raters' consensus (`raters.consensus`), as the Evaluate page says.
"""

from __future__ import annotations

import streamlit as st

from retrieval.judging.judgments import UNNAMED
from retrieval.judging.raters import validate_rater
from retrieval.types import RetrievalError
from ui import state
from ui.judging.agreement import raters_section
from ui.judging.grading import judging_session
from ui.judging.llm import llm_section
from ui.search import views
from ui.state import memo_read


def judge_page(workbench, collection: str) -> None:
    st.title("Judge")
    judgments = workbench.judgments
    try:
        sets = memo_read(workbench, ("sets", collection), lambda: judgments.query_sets(collection))
    except Exception as exc:
        views.show_error(exc)
        return
    if not sets:
        st.info("This collection has no query set yet: upload queries on the Evaluate page, or rate results on "
                "the Search page (the first rating creates the set 'judgments').")
        return
    view = state.view()
    if view.query_set not in sets:
        view.query_set = sets[0]

    def write_set(value: str) -> None:
        state.view().query_set = value

    left, right = st.columns(2)
    with left:
        set_name = state.bound(st.selectbox, "Query set", "judge.set", lambda: state.view().query_set, write_set,
                               options=sets, help="The queries judged here; ratings go into this set, and the "
                                                  "Evaluate page scores rankings with the raters' consensus.")
    with right:
        rater = rater_input()
    if rater is None:
        return
    tab_judge, tab_raters, tab_llm = st.tabs(["Judge", "Raters and agreement", "LLM judge"])
    with tab_judge:
        judging_session(workbench, collection, set_name, rater)
    with tab_raters:
        raters_section(workbench, collection, set_name)
    with tab_llm:
        llm_section(workbench, collection, set_name)


def rater_input() -> str | None:
    """Your name as a rater ('' is the unnamed rater of the Search page), bound to the View (URL
    `rater=NAME`: each rater can be sent a link); None when the name is not valid."""
    def write(value: str) -> None:
        state.view().rater = value.strip()

    name = state.bound(st.text_input, "Your name (rater)", "judge.rater", lambda: state.view().rater, write,
                       max_chars=64, help="Ratings are kept per rater, so several people can judge the same pairs "
                                          "and their agreement can be measured. Empty: the unnamed rater, the same "
                                          "as the Search page's ratings. No login: a name is all it takes (and "
                                          "the link of this page carries it).").strip()
    if not name:
        return UNNAMED
    try:
        return validate_rater(name)
    except RetrievalError as exc:
        views.show_error(exc)
        return None
