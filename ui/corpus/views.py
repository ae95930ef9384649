"""The Corpus page's sections: upload → preview → map → ingest, and delete/clear with a
confirmation. The work itself is done by `ui.corpus.actions` (no Streamlit there)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from retrieval import limits
from retrieval.search.workbench import Workbench
from retrieval.store import collection_versions
from ui import state
from ui.corpus import actions as corpus
from ui.search import views
from ui.state import memo_read

FLASH_KEY = "corpus.flash"
INGESTED_KEY = "corpus.ingested"  # the last ingest's message, shown under the Ingest button
PENDING_KEY = "corpus.pending"
CACHES_PENDING_KEY = "corpus.caches_pending"


def flash() -> None:
    """Show (once) the message of the last successful write; writes end with st.rerun() so that
    the sidebar picker and the table show the new state."""
    message = st.session_state.pop(FLASH_KEY, None)
    if message:
        st.success(views.markdown_safe(message))


def _done(message: str) -> None:
    st.session_state[FLASH_KEY] = message
    st.rerun()


def collections_table(workbench: Workbench) -> None:
    """The collections with their stats, then a line per collection whose documents the encoder
    truncated (BM25 indexes all of their text)."""
    frame = corpus.collections_frame(workbench)
    if frame.empty:
        st.info("No collection yet.")
        return
    st.dataframe(frame, hide_index=True, width="stretch", column_config={
        "collection": st.column_config.TextColumn(help="The name given at creation, in any script."),
        "table": st.column_config.TextColumn(help="The safe name its tables are stored under; the command "
                                                  "line accepts either name."),
        "truncated": st.column_config.NumberColumn(
            help="Documents longer than the embedding model's token window: embedded from their first "
                 "tokens only, while BM25 indexes all of their text. Empty: not counted (ingested before "
                 "the workbench counted them)."),
        "graph index": st.column_config.TextColumn(
            help="The entity graph source's tables: built at ingest below WORKBENCH_GRAPH_INLINE_MAX documents; "
                 "from that size on built after the ingest, in the background (or with the Graph page's “Build "
                 "the entity graph”, or `python -m retrieval collections graph NAME`); until then the graph "
                 "source returns nothing and says so. A search never builds it."),
    })
    for note in corpus.truncation_notes(workbench):
        st.caption(views.markdown_safe(note))
    for note in corpus.graph_notes(workbench):
        st.caption(views.markdown_safe(note))


def eval_caches(workbench: Workbench) -> None:
    """The evaluation caches (`python -m retrieval evaluate` makes them), apart from the collections
    in a collapsed expander, and one button that deletes them all after a confirmation. Nothing
    when there are none."""
    frame = corpus.eval_caches_frame(workbench)
    if frame.empty:
        return
    names = list(frame["cache"])
    pending = st.session_state.get(CACHES_PENDING_KEY)
    with st.expander(f"Evaluation caches ({len(names)})", expanded=bool(pending)):
        st.caption("Collections that `python -m retrieval evaluate` made to cache the BEIR corpora it evaluated. "
                   "They are not listed with the collections; the next evaluate run re-creates what it needs.")
        st.dataframe(frame, hide_index=True, width="stretch")
        if st.button(f"Delete all {len(names)} evaluation caches…", key="corpus.caches_delete",
                     help="Delete every evaluation cache listed here (a confirmation follows)."):
            st.session_state[CACHES_PENDING_KEY] = pending = names
        if not pending:
            return
        _confirm(CACHES_PENDING_KEY, ("corpus.caches_confirm", "corpus.caches_cancel"),
                 f"Really delete {len(pending)} evaluation caches? This cannot be undone.",
                 f"Yes, delete {len(pending)} caches", "Delete the evaluation caches listed when you asked (nothing "
                 "else).", "Keep the evaluation caches.",
                 lambda: f"Deleted {len(corpus.delete_eval_caches(workbench, pending))} evaluation caches.")


def upload_form(workbench: Workbench) -> None:
    uploaded = st.file_uploader(
        "Files (csv, tsv, json, jsonl, xlsx, txt, md)", type=corpus.UPLOAD_TYPES, accept_multiple_files=True,
        key="corpus.files",
        help="One or many files; ids must be unique across them. Tables need a text column; every other "
             "column becomes metadata. Text files split into paragraphs, Markdown into heading chunks.")
    st.caption(corpus.SPREADSHEET_HINT + " " + corpus.LARGE_FILES_HINT)
    files = [(f.name, f.getvalue()) for f in uploaded or []]
    c1, c2 = st.columns(2)
    text_mode = c1.selectbox(
        "Text files (.txt)", ["paragraphs", "file"], key="corpus.text_mode",
        help="paragraphs: one document per blank-line-separated paragraph (finer BM25 and vector matches); "
             "file: one document per file (one score for the whole file).")
    max_chars = c2.number_input(
        "Markdown chunk size (characters)", min_value=100, max_value=20000, value=1500, step=100,
        key="corpus.md_chars",
        help="Markdown is split at # and ## headings, then into chunks of at most this many characters: smaller "
             "chunks give sharper scores but less context per result.")
    if not files:
        ingested()
        st.caption("Upload files to preview them, map their columns and ingest them.")
        return
    base = corpus.parse_options(text_mode=text_mode, markdown_max_chars=max_chars)
    previews = corpus.preview_files(files, base)
    for p in previews:
        with st.expander(views.markdown_safe(f"Preview of {p.name}"), expanded=len(previews) == 1):
            if p.error:
                views.show_error(p.error)
            else:
                st.dataframe(p.rows, hide_index=True)
    columns = corpus.mapping_columns(previews)
    mapping = {"id": corpus.DETECT, "title": corpus.DETECT, "text": corpus.DETECT}
    if columns:
        st.markdown("**Columns** (detected by name unless you pick one)")
        cols = st.columns(3)
        for col, (name, what) in zip(cols, [
            ("id", "the document id (default: file name and row number)"),
            ("title", "the title, embedded and BM25-indexed together with the text"),
            ("text", "the text that BM25 indexes and the model embeds"),
        ], strict=True):
            mapping[name] = col.selectbox(f"{name} column", [corpus.DETECT] + columns, key=f"corpus.map_{name}",
                                          help=f"Which column holds {what}.")
        plan, warnings = corpus.column_plan(previews, corpus.parse_options(
            mapping["id"], mapping["title"], mapping["text"], text_mode, max_chars))
        if plan:
            st.caption(views.markdown_safe("Will use: " + "; ".join(plan)))
        for warning in warnings:
            st.warning(views.markdown_safe(warning))
    _target_and_ingest(workbench, files, mapping, text_mode, max_chars)


def _target_and_ingest(workbench: Workbench, files, mapping, text_mode, max_chars) -> None:
    existing = corpus.caches_last([i.name for i in workbench.collections()])
    labels = workbench.labels()
    target = st.radio("Into", ["new collection", "existing collection"], horizontal=True, key="corpus.target",
                      help="A new collection gets its own BM25 index and embedding model; adding keeps the "
                           "collection's model, so old and new documents are scored alike.")
    add = target == "existing collection"
    c1, c2 = st.columns(2)
    if add:
        if not existing:
            st.info("There is no collection to add to yet.")
            return
        name = c1.selectbox("Collection", existing, key="corpus.add_to", format_func=lambda n: labels.get(n, n),
                            help="The collection to add the documents to (ids must be new).")
        c2.caption("Documents are embedded with the collection's own model (and its cross-lingual one, if any).")
        model_choice, model_path, cross_lingual, graph = corpus.MODEL_AUTO, "", None, "auto"
    else:
        name = c1.text_input("New collection name", key="corpus.new_name", placeholder="e.g. my-docs or 中文集合",
                             help="1–64 characters in any script. It is shown everywhere; a name that is not "
                                  "only a–z, 0–9, '_' and '-' is also given a safe table name (its ASCII letters "
                                  "and digits, else 'c-' and a hash). Searching then uses its own index.")
        model_choice = c2.selectbox(
            "Embedding model", corpus.MODEL_CHOICES, key="corpus.model",
            help="Decides the vector scores. auto: all-MiniLM-L6-v2 for English, multilingual-e5-small for "
                 "Chinese or mixed text; or a local sentence-transformers folder.")
        model_path = ""
        if model_choice == corpus.MODEL_PATH:
            model_path = c2.text_input("Model folder", key="corpus.model_path",
                                       help="Path of a sentence-transformers model folder inside a folder "
                                            "the server allows (WORKBENCH_MODEL_DIRS).")
        cross_lingual = None if c2.checkbox(
            "Cross-lingual vectors", value=True, key="corpus.cross_lingual",
            help="An English (or all-Chinese) collection whose model reads one language also gets "
                 "multilingual-e5-small vectors, searched when a question is in the other language "
                 "(Chinese questions over English XQuAD: nDCG@10 0.82 instead of 0.10). Costs about "
                 "3× the ingest time; by default only below 20,000 documents. Off: one model only.") else False
        graph = c1.selectbox(
            "Entity graph", ("auto", "on", "off"), key="corpus.graph",
            help="The graph source's entities (people, places, times …). on: found at ingest; off: none now, "
                 "the Graph page builds them when you ask; auto: off for flat records (CSV, JSONL) of "
                 f"{limits.GRAPH_AUTO_FLAT_MAX:,} documents or more, else on. Finding entities took most of a "
                 "large ingest's time.")
    skip_invalid = st.checkbox(
        "Skip invalid records", key="corpus.skip_invalid",
        help="Off (the default): a file with any problem — a record with neither a title nor a text, a "
             "repeated id — loads nothing, and every problem is listed. On: those records are left out, "
             "the rest loads, and what was skipped is listed with the result.")
    if st.button("Ingest", type="primary", key="corpus.ingest",
                 help="Parse, tokenise and embed everything, then write it in one commit: on any error "
                      "nothing is written."):
        bar = st.progress(0.0, text="Parsing…")
        stages = corpus.StageProgress()

        def progress(stage: str, done: int, total: int) -> None:
            bar.progress(*stages(stage, done, total))

        try:
            options = corpus.parse_options(mapping["id"], mapping["title"], mapping["text"], text_mode, max_chars,
                                           skip_invalid)
            report = corpus.ingest(workbench, files, options, name, add=add,
                                   model=corpus.model_name(model_choice, model_path), progress=progress,
                                   cross_lingual=cross_lingual, graph=graph)
        except Exception as exc:  # every core error is shown; the store wrote nothing
            bar.empty()
            views.show_error(exc)
            if getattr(exc, "skippable", False) and not skip_invalid:
                st.caption("Tick “Skip invalid records” above to leave out the records with a problem (each is "
                           "listed) and load the rest.")
            return
        state.view().switch_collection(report.info.name)
        st.session_state[INGESTED_KEY] = report.message
        st.rerun()
    ingested()


def ingested() -> None:
    """Under the Ingest button, once: what the last ingest wrote, and the way to search it."""
    message = st.session_state.pop(INGESTED_KEY, None)
    if message:
        st.success(views.markdown_safe(message))
        st.page_link("pages/1_Search.py", label="Search it now", icon=":material/search:")


def versions(workbench: Workbench) -> None:
    """A collection's versions, newest first, with what each changed (`retrieval.store.versions`)."""
    names = corpus.caches_last([i.name for i in workbench.collections()])
    if not names:
        return
    labels = workbench.labels()
    name = st.selectbox("Collection", names, key="corpus.versions", format_func=lambda n: labels.get(n, n),
                        index=corpus.index_of(names, state.view().collection),
                        help="Every write (an ingest, an add, a clear, an index build) makes a new version of the "
                             "collection's table; snapshots record the version they evaluated.")
    try:  # read again when the table moved on (also by another process's write)
        rows = memo_read(workbench, ("versions", name, workbench.store.table(name).version),
                         lambda: collection_versions(workbench.store, name))
    except Exception as exc:
        views.show_error(exc)
        return
    st.dataframe(pd.DataFrame([{"version": v.version, "time": v.timestamp.replace("T", " "),
                                "documents": v.documents, "change": v.summary} for v in rows]),
                 hide_index=True, width="stretch")


def manage(workbench: Workbench) -> None:
    names = corpus.caches_last([i.name for i in workbench.collections()])
    if not names:
        return
    labels = workbench.labels()
    c1, c2, c3 = st.columns([2, 1, 1])
    name = c1.selectbox("Collection", names, key="corpus.manage", format_func=lambda n: labels.get(n, n),
                        index=corpus.index_of(names, state.view().collection),
                        help="The collection to clear (remove every document, keep its settings) or delete.")
    if c2.button("Clear…", key="corpus.clear", help="Remove every document but keep the collection and its model."):
        st.session_state[PENDING_KEY] = ("clear", name)
    if c3.button("Delete…", key="corpus.delete", help="Remove the collection with its documents and indexes."):
        st.session_state[PENDING_KEY] = ("delete", name)
    pending = st.session_state.get(PENDING_KEY)
    if not pending:
        return
    action, target = pending
    shown = labels.get(target, target)

    def act() -> str:
        workbench.delete(target) if action == "delete" else workbench.clear(target)
        return f"{'Deleted' if action == 'delete' else 'Cleared'} '{shown}'."

    _confirm(PENDING_KEY, ("corpus.confirm", "corpus.cancel"), f"Really {action} '{shown}'? This cannot be undone.",
             f"Yes, {action} '{shown}'", f"{action.capitalize()} the collection now.",
             "Keep the collection as it is.", act)


def _confirm(pending_key: str, keys: tuple[str, str], question: str, yes: str, yes_help: str,
             cancel_help: str, act: Callable[[], str]) -> None:
    """The confirmation of a pending destructive action: the question, "yes" (widget key
    `keys[0]`) runs `act()`, whose return value is the success message (an error is shown and
    nothing else happens), "Cancel" (`keys[1]`) drops it. User text is escaped."""
    st.warning(views.markdown_safe(question))
    y, n = st.columns(2)
    if y.button(views.markdown_safe(yes), key=keys[0], type="primary", help=yes_help):
        del st.session_state[pending_key]
        try:
            message = act()
        except Exception as exc:  # a failing database: readable, the page stays up
            views.show_error(exc)
            return
        _done(message)
    if n.button("Cancel", key=keys[1], help=cancel_help):
        del st.session_state[pending_key]
        st.rerun()
