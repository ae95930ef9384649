"""Import and export of a query set's ratings: CSV with raters, Quepid, TREC (on the Raters and
agreement tab)."""

from __future__ import annotations

import streamlit as st

from retrieval.judging.judgments import UNNAMED
from ui.search import views


def ratings_files(workbench, collection: str, set_name: str) -> None:
    from retrieval.judging.raters import Rating
    from retrieval.judging.rating_formats import format_quepid_csv, format_ratings_csv

    judgments = workbench.judgments
    st.subheader("Import and export")
    try:
        ratings = judgments.ratings_of(collection, set_name)
        consensus = judgments.qrels(collection, set_name)
        queries = judgments.queries(collection, set_name)
    except Exception as exc:
        views.show_error(exc)
        return
    left, middle, right = st.columns(3)
    left.download_button("Ratings (CSV, every rater)", format_ratings_csv(ratings), file_name=f"{set_name}-ratings.csv",
                         mime="text/csv", key="judge.export_csv",
                         help="query, doc, grade, rater per line; 'can't tell' has an empty grade.")
    middle.download_button("Quepid ratings (CSV)", format_quepid_csv(
        queries, [Rating(q, d, "quepid", g) for q, docs in consensus.items() for d, g in docs.items()]),
        file_name=f"{set_name}-quepid.csv", mime="text/csv", key="judge.export_quepid",
        help="Quepid's ratings import format: one grade per query text and document (the consensus).")
    right.download_button("TREC qrels (consensus)", judgments.export_qrels(collection, set_name, "trec"),
                          file_name=f"{set_name}.qrels", mime="text/plain", key="judge.export_trec")
    with st.form("judge.import", clear_on_submit=True):
        upload = st.file_uploader("Import ratings", type=["csv", "txt", "qrels", "tsv"], key="judge.import_file",
                                  help="A CSV with columns query, doc, grade, rater (as exported here), Quepid's "
                                       "ratings CSV (query text, doc id, rating), or TREC qrels.")
        fmt = st.radio("Format", ("csv", "quepid", "trec"), horizontal=True, key="judge.import_format")
        replace = st.checkbox("Replace the set's ratings", key="judge.import_replace")
        if st.form_submit_button("Import") and upload is not None:
            try:
                saved = import_ratings(judgments, collection, set_name, upload.name, upload.getvalue(), fmt, replace)
                st.success(f"Imported {saved} ratings.")
            except Exception as exc:
                views.show_error(exc)


def import_ratings(judgments, collection: str, set_name: str, filename: str, data: bytes, fmt: str,
                   replace: bool) -> int:
    """Read a ratings file of format `fmt` and save it into the set (`JudgmentStore.save_ratings`)."""
    from retrieval.judging.qrels import read_qrels_file
    from retrieval.judging.raters import Rating
    from retrieval.judging.rating_formats import parse_quepid_csv, parse_ratings_csv
    from retrieval.text.encoding import decode_bytes

    queries = None
    if fmt == "trec":
        qrels = read_qrels_file((filename, data))
        ratings = [Rating(q, d, UNNAMED, g) for q, docs in qrels.items() for d, g in docs.items()]
    elif fmt == "csv":
        ratings = parse_ratings_csv(decode_bytes(data)[0], default_rater=UNNAMED)
    else:
        known = judgments.queries(collection, set_name) if set_name in judgments.query_sets(collection) else {}
        queries, ratings = parse_quepid_csv(decode_bytes(data)[0], {t: q for q, t in known.items()})
    return judgments.save_ratings(collection, set_name, ratings, queries=queries, replace=replace)
