"""Plain data types shared by every stage of the pipeline.

Kept free of behaviour (and of LanceDB, torch or Streamlit) so that any module, a test or the UI
can build and read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


class RetrievalError(Exception):
    """A problem the user can fix (bad input, unknown collection, …); the message says what."""


class NameBeingCreated(RetrievalError):
    """Another writer is creating a collection of this display name right now
    (`Store.claim_display_name`)."""


class IngestError(RetrievalError):
    """Input rejected before anything was written; `problems` lists each offending row or field.
    `skippable`: every problem is a record that skipping invalid records would leave out (the
    front end then names its way to do so: the CLI's --skip-invalid, the Corpus page's checkbox)."""

    def __init__(self, message: str, problems: list[str] | None = None, skippable: bool = False):
        self.problems = list(problems or [])
        self.skippable = skippable
        detail = "".join(f"\n  - {p}" for p in self.problems[:20])
        more = f"\n  … and {len(self.problems) - 20} more" if len(self.problems) > 20 else ""
        super().__init__(message + detail + more)


@dataclass(frozen=True)
class Document:
    """One retrievable unit (a record, a paragraph or a Markdown chunk).

    `metadata` holds every input column that is not id/title/text (category, tags, date …).
    Chunk fields are set when the document is a chunk of a larger source document.
    """

    id: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    parent_id: str | None = None
    chunk_index: int | None = None
    start_line: int | None = None
    end_line: int | None = None


@dataclass
class ParsedCorpus:
    """The result of parsing input files: documents plus what the parser decided."""

    documents: list[Document]
    encoding: str | None = None  # e.g. "utf-8", "utf-8-sig", "gb18030"; None for non-text input
    format: str = ""  # csv, tsv, json, jsonl, text, markdown, beir
    notes: list[str] = field(default_factory=list)
    queries: dict[str, str] = field(default_factory=dict)  # BEIR queries.jsonl, if present
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)  # query id -> doc id -> grade
    # With `ParseOptions.skip_invalid`: each record left out and why ("corpus.jsonl: line 7: text is empty").
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Hit:
    """One document in one source's ranked list. `rank` starts at 1.

    `detail` is the source's own explanation of the score (e.g. the keyword scorer's points per
    field, the graph's hop and shared entities): JSON-friendly values, shown next to the result.
    """

    doc_id: str
    raw_score: float
    rank: int
    detail: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    # LanceDB's row id of the document at the table version searched (sources searching the table
    # give it): its row is then read by row id, not looked up by id (`Store.documents`).
    row_id: int | None = field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class SourceResult:
    """What one source returned for one query: its ranked hits, or why it returned nothing."""

    source: str
    hits: tuple[Hit, ...] = ()
    error: str | None = None  # set when the source raised; hits is then empty
    notes: tuple[str, ...] = ()  # e.g. "2 hits with non-finite scores dropped"
    backend: str = ""  # what served it, e.g. "rank-bm25 (k1 0.9, b 0.4)" (`Source.backend`)
    # (the query's analysed terms, how many of them some document holds), from a source that keeps a
    # vocabulary (the in-memory BM25); None where it is not known. A query feature (query_features.py).
    coverage: tuple[int, int] | None = None


@dataclass(frozen=True)
class SourceContribution:
    """One source's part in one fused result.

    `contribution` is what this source added to the fused score; over all sources of a result
    the contributions sum to `FusedResult.score`.
    """

    source: str
    raw_score: float | None  # None: the document is not in this source's candidates
    normalized: float | None
    rank: int | None
    contribution: float
    note: str = ""
    detail: dict[str, Any] | None = None  # the source's own explanation (`Hit.detail`)


@dataclass(frozen=True)
class FusedResult:
    doc_id: str
    rank: int
    score: float  # the fused score, as the formula gives it
    display_score: float  # score rescaled for reading (RRF: rank 1 everywhere reads 1.0)
    sources: dict[str, SourceContribution]
    tie_value: float | None = None  # the configured quality field, used to break ties
    # With a learned ranker: each feature's contribution to `score` and 'bias' (they add up to it).
    learned: dict[str, float] | None = None
    # What query rules did to it, in words ("UP 1.5 by rule 7: category=guide", "pinned at 1 by rule
    # 3"); an UP/DOWN is in `score`, beside the sources' contributions (`search.rules.apply`).
    rules: tuple[str, ...] = ()


@dataclass
class FusionOutcome:
    """Every candidate fused and ranked, the thresholded results, and what each threshold removed.

    The fused-score thresholds and the top-K cut each remove a tail of the ranking, so `results`
    is always a prefix of `ranked` and ranks agree between the two.
    """

    # All candidates that survived the per-source minimums (`fusion.fuse.ExplainedRanking`: each result
    # explained when first read).
    ranked: Sequence[FusedResult]
    results: list[FusedResult]  # what passes every threshold
    n_candidates: int  # distinct documents over all sources before any threshold
    removed: dict[str, int]  # threshold name -> how many candidates it removed
    method: str
    notes: list[str] = field(default_factory=list)
    display_factor: float = 1.0  # display score = fused score × this, for this query (`fusion.methods`)


@dataclass(frozen=True)
class RerankedResult:
    doc_id: str
    rank: int
    first_stage_rank: int
    rerank_score: float
    fused: FusedResult
    # Interpolation (`rerank.interpolate`): min-max of the fused and of the rerank scores over the
    # reranked head, and final = λ·first_stage_norm + (1 − λ)·rerank_norm, what the order follows.
    first_stage_norm: float = 0.0
    rerank_norm: float = 0.0
    final_score: float = 0.0
    first_stage_weight: float = 0.0  # λ

    @property
    def rank_change(self) -> int:
        """Positive: moved up by that many places."""
        return self.first_stage_rank - self.rank
