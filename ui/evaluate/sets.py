"""The Evaluate page's query set section: pick the set (bound to the View), its numbers and
judgment downloads, delete it, upload a new one; and on the sample collection, the sample's set
stored on first use. `upload_query_set` is the plain (Streamlit-free) upload step."""

from __future__ import annotations

import streamlit as st

from retrieval.judging.judgments import CONSENSUS, QuerySet
from retrieval.judging.raters import is_implicit_rater
from retrieval.types import RetrievalError
from ui import state
from ui.evaluate import implicit_sources
from ui.judging import rating as judging
from ui.search import views
from ui.state import memo_read

QUERY_TYPES = ["jsonl", "ndjson", "tsv", "csv"]
QRELS_TYPES = ["txt", "tsv", "csv", "qrels", "trec"]
FLASH_KEY = "eval.flash"


# ---- plain steps (no Streamlit) -------------------------------------------------------------
def upload_query_set(judgments, collection: str, name: str, queries_file: tuple[str, bytes] | None,
                     qrels_file: tuple[str, bytes] | None, existing: list[str], replace: bool) -> QuerySet:
    """Parse the uploaded files and store them as query set `name`. All or nothing: any problem
    raises RetrievalError (IngestError for file problems) before anything is written.

    A queries file (which may carry its judgments: a query set exported here) makes the set; a
    qrels file alone adds its judgments to the existing set `name`, whose queries it must name."""
    from retrieval.judging.qrels import read_qrels_file, read_query_set_files

    name = (name or "").strip()
    if not name:
        raise RetrievalError("Give the query set a name")
    if queries_file is None:
        if qrels_file is None:
            raise RetrievalError("Upload a queries file (JSONL, TSV or CSV), or a judgments file for an existing set")
        if name not in existing:
            raise RetrievalError(f"There is no query set {name!r} to add these judgments to: upload its queries "
                                 "file too (judgments need the query texts), or pick an existing set's name")
        qrels = read_qrels_file(qrels_file)
        queries = judgments.queries(collection, name)
        judgments.save_query_set(collection, name, queries, qrels, replace=False)  # merged: nothing removed
        return QuerySet(name, queries, judgments.qrels(collection, name))
    if name in existing and not replace:
        raise RetrievalError(f"Query set {name!r} exists: tick 'Replace' to overwrite it, or pick another name")
    queries, qrels = read_query_set_files(queries_file, qrels_file)
    judgments.save_query_set(collection, name, queries, qrels, replace=True)
    return QuerySet(name, queries, qrels or {})


# ---- the section ----------------------------------------------------------------------------
def flash() -> None:
    """The message a delete or an upload left for the run after its rerun."""
    message = st.session_state.pop(FLASH_KEY, None)
    if message:
        st.success(views.markdown_safe(message))


def query_set_section(workbench, collection: str) -> QuerySet | None:
    """Pick the query set (bound to the View, so Search page ratings go to it too), its
    numbers and exports, and the upload form. Returns the chosen set, None when there is none."""
    try:
        judgments = workbench.judgments
        names = memo_read(workbench, ("sets", collection), lambda: _with_sample_set(workbench, collection))
    except Exception as exc:
        views.show_error(exc)
        return None
    chosen = None
    if names:
        view = state.view()
        if view.query_set not in names:
            view.query_set = judging.SAMPLE_SET if judging.SAMPLE_SET in names else names[0]

        def write(value: str) -> None:
            state.view().query_set = value

        name = state.bound(st.selectbox, "Query set", "eval.set", lambda: state.view().query_set, write,
                           options=names,
                           help="The queries and judgments (qrels) to evaluate with. Ratings given on the Search "
                                "page go into this set too. Each collection has its own sets.")
        try:
            raters = memo_read(workbench, ("raters", collection, name), lambda: judgments.raters(collection, name))
            source = implicit_sources.source_picker(workbench, collection, name, raters)
            with_llm = consensus_note([r for r in raters if not is_implicit_rater(r)]) if source == CONSENSUS \
                else True
            chosen = memo_read(workbench, ("set", collection, name, with_llm, source), lambda: QuerySet(
                name, judgments.queries(collection, name),
                judgments.qrels(collection, name, with_llm=with_llm, source=source), source))
        except Exception as exc:
            views.show_error(exc)
            return None
        st.caption(views.markdown_safe(chosen.summary()))
        _qrels_downloads(workbench, collection, name)
        _delete_form(judgments, collection, name)
    else:
        st.info("This collection has no query set yet: upload queries and judgments below, or rate results "
                "on the Search page (the first rating creates the set 'judgments').")
    _upload_form(judgments, collection, names)
    return chosen


def consensus_note(raters: list[str]) -> bool:
    """Say how several raters' grades become the judgments the metrics use, and (when an LLM is
    among them) whether its grades count: the returned toggle, off until the user turns it on."""
    from retrieval.judging.raters import is_llm_rater

    people = [r for r in raters if not is_llm_rater(r)]
    llms = [r for r in raters if is_llm_rater(r)]
    if len(raters) > 1:
        st.caption(views.markdown_safe(
            f"{len(raters)} raters judged this set ({', '.join(r or '(unnamed)' for r in raters)}). The metrics use "
            "their consensus per (query, document): the adjudicated grade, else the grade more than half of them "
            "gave, else their mean grade rounded half up (the Judge page shows their agreement)."))
    if not llms:
        return True
    return st.toggle("Count the LLM's judgments", value=not people, key="eval.with_llm",
                     help="Off (unless only an LLM judged this set): the metrics use the people's judgments "
                          "only. On: the LLM rater(s) "
                          f"({', '.join(llms)}) count as raters in the consensus. Check their agreement with the "
                          "people on the Judge page first.")


def _with_sample_set(workbench, collection: str) -> list[str]:
    """The collection's set names; on the sample collection of a database made before query
    sets existed, first store the sample's queries and judgments (once per session)."""
    from ui import resources

    names = workbench.judgments.query_sets(collection)
    flag = "eval.sample_set_checked"
    if collection != resources.SAMPLE_COLLECTION or resources.SAMPLE_QUERY_SET in names or st.session_state.get(flag):
        return names
    st.session_state[flag] = True
    from retrieval.indexing.readers.parse import parse_path

    resources.store_sample_queries(workbench, parse_path(resources.sample_dir()))
    return workbench.judgments.query_sets(collection)


def _qrels_downloads(workbench, collection: str, name: str) -> None:
    judgments = workbench.judgments
    whole, left, right, _ = st.columns([1, 1, 1, 2])
    try:
        trec, beir, both = memo_read(workbench, ("qrels", collection, name), lambda: (
            judgments.export_qrels(collection, name, fmt="trec"), judgments.export_qrels(collection, name, fmt="beir"),
            judgments.export_query_set(collection, name)))
    except Exception as exc:
        views.show_error(exc)
        return
    whole.download_button("Query set (JSONL)", both, file_name=f"{collection}-{name}.jsonl",
                          mime="application/x-ndjson", key="eval.queryset_jsonl",
                          help="The whole set, queries and judgments, in one JSONL file: each query's id, text "
                               "and judgments. Upload it into another collection or database, or give it to "
                               "`python -m retrieval queryset import`; BEIR tools read it as a queries file.")
    left.download_button("Judgments (TREC qrels)", trec, file_name=f"{collection}-{name}.qrels", mime="text/plain",
                         key="eval.qrels_trec", help="This set's judgments as TREC qrels: 'qid 0 docid grade' lines.")
    right.download_button("Judgments (BEIR tsv)", beir, file_name=f"{collection}-{name}.tsv",
                          mime="text/tab-separated-values", key="eval.qrels_beir",
                          help="This set's judgments as a BEIR qrels file: query-id, corpus-id, score (tab-separated).")


def _delete_form(judgments, collection: str, name: str) -> None:
    with st.expander("Delete this query set"):
        sure = st.checkbox(views.markdown_safe(f"Yes, delete '{name}' with all its judgments"),
                           key="eval.delete.confirm", help="Confirms the deletion; it cannot be undone.")
        if st.button("Delete query set", key="eval.delete", disabled=not sure,
                     help="Remove the set, its queries and every judgment in it (the documents stay)."):
            try:
                judgments.delete_query_set(collection, name)
            except Exception as exc:
                views.show_error(exc)
                return
            state.view().query_set = None
            judging.forget()
            st.session_state[FLASH_KEY] = f"Deleted query set '{name}'."
            st.session_state.pop("eval.delete.confirm", None)
            st.rerun()


def _upload_form(judgments, collection: str, names: list[str]) -> None:
    with st.expander("Upload a query set"):
        st.caption("Queries: JSONL (`_id`/`id` and `text`/`query`), TSV (`id<TAB>text`) or CSV with a header; a "
                   "query set downloaded here carries its judgments too. Judgments (optional): TREC qrels "
                   "(`qid 0 docid grade`), BEIR tsv (`query-id<TAB>corpus-id<TAB>score`) or CSV with query, "
                   "document and grade columns; alone, they are added to the existing set of that name.")
        name = st.text_input("Query set name", key="eval.upload.name",
                             help="The name the set is stored under in this collection.")
        queries = st.file_uploader("Queries file", type=QUERY_TYPES, key="eval.upload.queries",
                                   help="The query texts with their ids (JSONL, TSV or CSV), or a whole query set "
                                        "(JSONL with judgments).")
        qrels = st.file_uploader("Judgments file (qrels)", type=QRELS_TYPES, key="eval.upload.qrels",
                                 help="Graded relevance per query id and document id: TREC, BEIR tsv or CSV. "
                                      "Optional: without it the queries start unjudged. Without a queries file "
                                      "the judgments are added to the existing set of this name.")
        replace = st.checkbox("Replace a set of the same name", key="eval.upload.replace",
                              help="Overwrite an existing set with this name (its ratings are lost).")
        submitted = st.button("Save query set", key="eval.upload.save",
                              help="Parse both files and store them as the set; nothing is stored when a file "
                                   "has a problem.")
        if submitted:
            try:
                saved = upload_query_set(judgments, collection, name,
                                         (queries.name, queries.getvalue()) if queries else None,
                                         (qrels.name, qrels.getvalue()) if qrels else None, names, replace)
            except Exception as exc:
                views.show_error(exc)
                return
            state.view().query_set = saved.name
            judging.forget()
            st.session_state[FLASH_KEY] = saved.summary().replace("Query set", "Saved query set", 1)
            st.rerun()
