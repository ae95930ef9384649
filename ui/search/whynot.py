"""The Search page's "Why not this document?" section and the Evaluate page's recall gaps.

Pick a document by id, by title, or among the judged-relevant documents of the current query
(the active query set, as the rating widgets use it); the section draws
`Workbench.explain_document`: per source its score, whole-collection rank, ties, position and
whether it passes the minimum, the first stage that dropped it, and the smallest single change,
with an Apply button that writes that config into the sidebar's controls (config A) so the
document enters the top-K. The picked id is the View's `why` (URL `why=ID`), so the Evaluate
page's recall gaps link straight to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import streamlit as st

from retrieval.search.config import SearchConfig
from retrieval.search.whynot.explain import Explanation
from retrieval.search.whynot.recall_gaps import RecallGap
from retrieval.search.whynot.standing import SHOWN, standing_cells
from retrieval.search.whynot.trials import REQUERY
from retrieval.sources import label
from retrieval.text.highlight import escape_markdown
from ui import state
from ui.judging import rating as judging
from ui.search import views

MEMO_KEY = "_whynot_memo"
PICK_MODES = ("id", "title", "judged")
PICK_LABELS = {"id": "By id", "title": "By title", "judged": "Judged relevant"}
TITLE_MATCHES = 20
STAGE_LABELS = {"filter": "the filter", "depth": "the candidate depth", "min raw": "the per-source minimum raw score",
                "min fused score": "the minimum fused score", "min display score": "the minimum display score",
                "top-k": "the top-K cut", "rerank": "the rerank"}


def whynot_section(workbench, collection: str, query: str, config: SearchConfig) -> None:
    """The expander below the Search page's results (open when the link names a document)."""
    view = state.view()
    with st.expander("Why not this document?", expanded=bool(view.why)):
        doc_id = _picker(workbench, collection, query)
        if not doc_id:
            st.caption("Pick a document to see where it stands in each source for this query, the first stage "
                       "that dropped it, and the smallest single change that brings it into the top-K.")
            return
        explanation = _explain(workbench, collection, query, config, doc_id)
        if explanation is not None:
            draw(explanation)


def _set_why(value: str | None) -> None:
    state.view().why = (value or "").strip() or None


def _picker(workbench, collection: str, query: str) -> str | None:
    mode = st.radio("Pick the document", PICK_MODES, format_func=PICK_LABELS.get, horizontal=True, key="why.mode",
                    help="By id: type a document id. By title: search titles (and ids) for a phrase. Judged "
                         "relevant: the documents rated above 0 for this query in the active query set.")
    if mode == "id":
        state.bound(st.text_input, "Document id", "why.id", lambda: state.view().why or "", _set_why,
                    placeholder="e.g. a document id from the results or the Evaluate page",
                    help="The id of any document in the collection: its score and whole-collection rank in "
                         "each source, the stage that dropped it, and the smallest change that brings it back.")
    elif mode == "title":
        text = st.text_input("Title contains", key="why.title", placeholder="a word of the title",
                             help="Part of a title or id (case ignored); pick one of the matches below.")
        matches = workbench.reads.find_documents(collection, text, TITLE_MATCHES) if text.strip() else []
        if text.strip() and not matches:
            st.caption(views.markdown_safe(f"No title or id contains “{text.strip()}”."))
        _choose("why.title_pick", [i for i, _ in matches], dict(matches))
    else:
        relevant = _judged_relevant(workbench, collection, query)
        if relevant is not None:
            if not relevant:
                st.caption("No document of this query is rated above 0 in the active query set.")
            titles = workbench.documents(collection, [d for d, _ in relevant])
            _choose("why.judged_pick", [d for d, _ in relevant],
                    {d: " · ".join(filter(None, (f"grade {g}", (titles.get(d) or {}).get("title"))))
                     for d, g in relevant})
    return state.view().why


def _choose(key: str, ids: Sequence[str], about: dict[str, str]) -> None:
    if not ids:
        return
    # Bound one way (`bind`, not `bound`): an empty choice must not clear a document picked elsewhere.
    st.selectbox("Document", options=list(ids), placeholder="choose a document",
                 help="The document to explain: per source its score and whole-collection rank, the stage "
                      "that dropped it, and the smallest change that brings it into the top-K.",
                 format_func=lambda i: f"{i} — {about.get(i, '')}".rstrip(" —"),
                 **state.bind(key, lambda: state.view().why if state.view().why in ids else None, _set_why))


def _judged_relevant(workbench, collection: str, query: str) -> list[tuple[str, int]] | None:
    """(doc id, grade) rated above 0 for `query` in the active query set, best grade first."""
    try:
        judgments = workbench.judgments
        set_name = judging.active_set(judgments, collection, query, state.view().query_set)
        grades = (judgments.ratings(collection, set_name, query)
                  if set_name in judgments.query_sets(collection) else {})
    except Exception as exc:
        views.show_error(exc)
        return None
    st.caption(views.markdown_safe(f"Query set '{set_name}'."))
    return sorted(((d, g) for d, g in grades.items() if g > 0), key=lambda item: (-item[1], item[0]))


def _explain(workbench, collection: str, query: str, config: SearchConfig, doc_id: str) -> Explanation | None:
    """`Workbench.explain_document`, remembered for the session's last (collection, query, config,
    document, writes): a rerun that changes none of them (a rating, a widget elsewhere) costs nothing."""
    key = (collection, query, config.to_json(), doc_id, workbench.writes)
    memo = st.session_state.get(MEMO_KEY)
    if memo is not None and memo[0] == key:
        return memo[1]
    try:
        with st.spinner("Trying single changes…"):
            explanation = workbench.explain_document(collection, query, config, doc_id)
    except Exception as exc:  # an unknown id, a failing source: said, the page stays up
        views.show_error(exc)
        return None
    st.session_state[MEMO_KEY] = (key, explanation)
    return explanation


def draw(e: Explanation) -> None:
    title = f" — {escape_markdown(e.title)}" if e.title else ""
    st.markdown(f"**{escape_markdown(e.doc_id)}**{title}")  # ids and titles are user text: escaped
    if e.stage == SHOWN:
        st.success(views.markdown_safe(e.reason))
    else:
        st.warning(views.markdown_safe(f"First stage that dropped it: {STAGE_LABELS.get(e.stage, e.stage)}. "
                                       f"{e.reason}"))
    if e.over_whole_collection:
        st.caption("The filters remove it: the scores and ranks below are over the whole collection.")
    frame = pd.DataFrame([standing_cells(s, e.config.depth) for s in e.standings])
    st.dataframe(frame, hide_index=True, width="stretch")
    st.caption("score: the source's raw score (BM25, cosine, keyword points, graph score). rank: 1 + the "
               "documents the source scores strictly higher, over the whole collection; ties: other documents "
               "with the same score. position: its place in the source's own order (ties by id), what the "
               "candidate depth cuts.")
    if e.stage == SHOWN:
        return
    best = e.best
    if best is None:
        st.info(f"None of the {e.tried} single changes tried brings it into the top {e.config.top_k}.")
        return
    st.markdown(f"**Smallest change** ({e.tried} tried, each a real fusion of the cached candidates): "
                + escape_markdown(best.describe()))
    if best.kind == REQUERY:
        st.caption("This change retrieves candidates again (a moment), then they are cached.")
    st.button("Apply", key="why.apply", type="primary", on_click=apply_change, args=(best.config,),
              help="Write this change into the sidebar's controls (config A) and search again.")
    if len(e.changes) > 1:
        st.caption(views.markdown_safe("Other single changes that work: "
                                       + "; ".join(c.describe() for c in e.changes[1:])))


def apply_change(config: SearchConfig) -> None:
    """on_click: config A becomes the changed config before the next run draws the controls."""
    state.view().config_a = state.with_ui_sources(config)


# ---- Evaluate: recall gaps -----------------------------------------------------------------------
def gaps_frame(gaps: Sequence[RecallGap], queries: dict[str, str], link: Callable[[str, str], str],
               cutoff: int = 10) -> pd.DataFrame:
    """One row per gap: query, document, grade, what happened to it, and a 'why not' link."""
    def where(gap: RecallGap) -> str:
        if not gap.retrieved:
            return "no source returned it within the depth"
        sources = ", ".join(label(s) for s in gap.retrieved_by)
        if gap.fused_rank is None:
            return f"retrieved by {sources}, not fused (under a minimum)"
        return f"retrieved by {sources}, fused rank {gap.fused_rank} (below {cutoff})"

    records = [{"query id": g.query_id, "query": queries.get(g.query_id, ""), "document": g.doc_id,
                "grade": g.grade, "where": where(g), "why not": link(queries.get(g.query_id, ""), g.doc_id)}
               for g in gaps]
    return pd.DataFrame.from_records(records, columns=["query id", "query", "document", "grade", "where", "why not"])
