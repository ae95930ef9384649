"""Each source's own ranking, side by side (the Compare page's "sources" mode).

Fusion hides what each source thought on its own: here every source of the config shows its own
ranked candidates with its raw score (BM25 score, cosine similarity, keyword points …) and the
source's own explanation (`Hit.detail`: the keyword scorer's points per field), so a user sees
where substring matching, word matching and embeddings disagree (e.g. "chin" hitting "machine"
for the keyword scorer only). `source_ranking_frame` is pure; `source_rankings` draws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from retrieval.search.workbench import SearchResult
from retrieval.sources import label
from retrieval.text.highlight import escape_markdown
from retrieval.types import SourceResult

RAW_SCORE_HELP = {
    "bm25": "BM25 score of the query's terms in this document",
    "dense": "cosine similarity between the query and document embeddings",
    "keyword": "total points: name + description + tags + domains + organisation + content",
}
# Score and title first: three rankings share the page's width, and the id is the least telling.
LEADING_COLUMNS = ["rank", "raw score", "title"]


def detail_columns(hits: Sequence) -> list[str]:
    """Every key of the hits' `detail`, in first-seen order."""
    return list(dict.fromkeys(key for hit in hits for key in (hit.detail or {})))


def _cell(value: Any) -> Any:
    """Detail values as table cells: scalars as they are, anything else as text."""
    return value if value is None or isinstance(value, (str, int, float)) else str(value)


def source_ranking_frame(result: SourceResult, documents: Mapping[str, Mapping[str, Any]], top_k: int,
                         with_detail: bool = True) -> pd.DataFrame:
    """A source's first `top_k` hits: rank, raw score, title, one column per detail key (when
    `with_detail`), id."""
    hits = result.hits[: max(0, top_k)]
    extra = detail_columns(hits) if with_detail else []
    records = []
    for hit in hits:
        row = documents.get(hit.doc_id, {})
        record = {"rank": hit.rank, "raw score": hit.raw_score,
                  "title": row.get("title") or (row.get("text") or "")[:80]}
        record.update({key: _cell((hit.detail or {}).get(key)) for key in extra})
        record["id"] = hit.doc_id
        records.append(record)
    return pd.DataFrame.from_records(records, columns=LEADING_COLUMNS + extra + ["id"])


def source_rankings(result: SearchResult, top_k: int) -> None:
    """One column per source of the config, each with that source's own top-`top_k` ranking;
    below them, full width, the explanation of each source that gives one (keyword points per field)."""
    sources = list(result.config.sources)
    found = {s: result.candidates.sources.get(s, SourceResult(s)) for s in sources}
    result.candidates.rows(h.doc_id for s in sources for h in found[s].hits[:top_k])  # their titles, in one read
    st.caption(escape_markdown(
        f"Each source's own top {top_k}, before fusion (a source returns nothing when no document passes "
        f"its own rules, e.g. BM25 needs a whole indexed word, the keyword scorer its minimum relevance)."))
    for source, column in zip(sources, st.columns(len(sources)), strict=True):
        with column:
            _one_source(source, found[source], result.documents, top_k)
    for source in sources:
        if detail_columns(found[source].hits[:top_k]):
            st.markdown(f"**{escape_markdown(label(source))}: why each document scored what it did**")
            st.dataframe(source_ranking_frame(found[source], result.documents, top_k), hide_index=True,
                         width="stretch", column_config=_score_config(source))


def _score_config(source: str) -> dict:
    return {"raw score": st.column_config.NumberColumn(
        format="%.4f", help=RAW_SCORE_HELP.get(source, "the source's score"))}


def _one_source(source: str, hits: SourceResult, documents: Mapping[str, Mapping[str, Any]], top_k: int) -> None:
    st.markdown(f"**{escape_markdown(label(source))}**")
    if hits.error:
        st.error(escape_markdown(f"{label(source)} failed: {hits.error}"), icon=":material/error:")
        return
    for note in hits.notes:
        st.caption(escape_markdown(note))
    st.caption(f"{len(hits.hits)} candidate(s)")
    frame = source_ranking_frame(hits, documents, top_k, with_detail=False)
    st.dataframe(frame, hide_index=True, width="stretch", column_config=_score_config(source))
