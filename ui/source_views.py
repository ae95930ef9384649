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

from retrieval.highlight import escape_markdown
from retrieval.types import SourceResult
from retrieval.workbench import SearchResult

from .results import label

RAW_SCORE_HELP = {
    "bm25": "BM25 score of the query's terms in this document",
    "dense": "cosine similarity between the query and document embeddings",
    "keyword": "total points: name + description + tags + domains + organisation + content",
}
BASE_COLUMNS = ["rank", "id", "title", "raw score"]


def detail_columns(hits: Sequence) -> list[str]:
    """Every key of the hits' `detail`, in first-seen order."""
    return list(dict.fromkeys(key for hit in hits for key in (hit.detail or {})))


def _cell(value: Any) -> Any:
    """Detail values as table cells: scalars as they are, anything else as text."""
    return value if value is None or isinstance(value, (str, int, float)) else str(value)


def source_ranking_frame(result: SourceResult, documents: Mapping[str, Mapping[str, Any]], top_k: int) -> pd.DataFrame:
    """A source's first `top_k` hits: rank, id, title, raw score, then one column per detail key."""
    hits = result.hits[: max(0, top_k)]
    extra = detail_columns(hits)
    records = []
    for hit in hits:
        row = documents.get(hit.doc_id, {})
        record = {"rank": hit.rank, "id": hit.doc_id, "title": row.get("title") or (row.get("text") or "")[:80],
                  "raw score": hit.raw_score}
        record.update({key: _cell((hit.detail or {}).get(key)) for key in extra})
        records.append(record)
    return pd.DataFrame.from_records(records, columns=BASE_COLUMNS + extra)


def source_rankings(result: SearchResult, top_k: int) -> None:
    """One column per source of the config, each with that source's own top-`top_k` ranking."""
    sources = list(result.config.sources)
    st.caption(escape_markdown(
        f"Each source's own top {top_k}, before fusion (a source returns nothing when no document passes "
        f"its own rules, e.g. BM25 needs a whole indexed word, the keyword scorer its minimum relevance)."))
    for source, column in zip(sources, st.columns(len(sources))):
        with column:
            _one_source(source, result.candidates.sources.get(source, SourceResult(source)), result.documents, top_k)


def _one_source(source: str, hits: SourceResult, documents: Mapping[str, Mapping[str, Any]], top_k: int) -> None:
    st.markdown(f"**{escape_markdown(label(source))}**")
    if hits.error:
        st.error(escape_markdown(f"{label(source)} failed: {hits.error}"), icon="⚠️")
        return
    for note in hits.notes:
        st.caption(escape_markdown(note))
    st.caption(f"{len(hits.hits)} candidate(s)")
    frame = source_ranking_frame(hits, documents, top_k)
    st.dataframe(frame, hide_index=True, width="stretch", column_config={
        "raw score": st.column_config.NumberColumn(format="%.4f", help=RAW_SCORE_HELP.get(source, "the source's score")),
    })
