"""The text of a document that the encoders, BM25 and the rerankers see: title and text together,
as BEIR systems index them. One definition for the write side (what is embedded and tokenised at
ingest) and the read side (what a reranker re-scores), so the two never drift apart."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.types import Document


def title_and_text(title: str | None, text: str) -> str:
    """`title + "\\n" + text`, or the one of them there is (a document may be a title alone)."""
    return f"{title}\n{text}" if title and text else title or text


def embedding_text(doc: Document) -> str:
    """What the encoder and BM25 see of a document: `title_and_text(doc.title, doc.text)`."""
    return title_and_text(doc.title, doc.text)


def embedding_text_of(row: Mapping[str, Any]) -> str:
    """Title and text of a stored row, joined as at ingest."""
    return title_and_text(row.get("title") or "", row["text"])
