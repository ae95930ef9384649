"""What a search hands back: the candidates of one query (`CandidateSet`: each source's hits at one
collection state, and the rows of those read so far) and the search's result (`SearchResult`:
the candidates, the fused outcome, the reranked head and the query rules that fired, with the
final order shown)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from retrieval.search.config import SearchConfig
from retrieval.search.rules import QueryRules, pinned_entries
from retrieval.sources.external import outside_rows
from retrieval.types import FusedResult, FusionOutcome, RerankedResult, SourceResult


@dataclass
class CandidateSet:
    """Per-source candidates for one query on one collection version, plus the rows of those
    candidates read so far.

    Rows are read when something needs them (`rows`), not with the candidates: a search shows
    top-K of up to depth × sources candidates, and at 1M documents reading 200 rows took 31 ms of
    a 73 ms hybrid search (docs/experiments/scale.md). `Workbench.search` reads the rows of what
    it shows (and of the rerank head); a view of more candidates asks for theirs.
    """

    collection: str
    version: tuple[str, int]  # Store.state_key: handle id and table version
    query: str
    depth: int
    sources: dict[str, SourceResult]
    documents: dict[str, dict[str, Any]]  # rows (no vector) of the candidates read so far, by id
    seconds: dict[str, float] = field(default_factory=dict)  # retrieval time per source
    from_cache: bool = False
    filtered: tuple[int, int] | None = None  # (documents the filters left, documents in all)
    language: str | None = None  # the collection's language ('en', 'zh', 'mixed'): `retrieval.search.language`
    rules: QueryRules | None = None  # the config's query rules that fire on `query` (`search.rules`)
    # Reads rows by id at this set's collection state (the row cache); None: `documents` is all there is.
    reader: Callable[[set[str]], dict[str, dict[str, Any]]] | None = field(default=None, repr=False, compare=False)

    def rows(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """`documents`, after reading the rows of those of `ids` not read yet (one batch)."""
        missing = {i for i in ids if i not in self.documents}
        if missing and self.reader is not None:
            self.documents.update(self.reader(missing))
        outside = [i for i in missing if i not in self.documents]
        if outside:  # an outside engine's hit the collection lacks: what the engine said of it
            self.documents.update(outside_rows(self.sources, outside))
        return self.documents

    def all_ids(self) -> set[str]:
        """Every candidate's id (of every source)."""
        return {h.doc_id for r in self.sources.values() for h in r.hits}


@dataclass
class SearchResult:
    query: str
    config: SearchConfig
    candidates: CandidateSet
    outcome: FusionOutcome
    reranked: list[RerankedResult] | None = None
    reranker_name: str | None = None
    reranker_kind: str | None = None
    rules: QueryRules | None = None  # the query rules that fired, pins checked (`RankingPlan.pinnable`)

    @property
    def documents(self) -> dict[str, dict[str, Any]]:
        return self.candidates.documents

    def eligible(self) -> list[FusedResult]:
        """Fused results that passed the score thresholds, before the top-K cut: what rerank sees."""
        outcome = self.outcome
        return outcome.ranked[: len(outcome.results) + outcome.removed.get("top-k", 0)]

    def final_ranking(self) -> list[tuple[FusedResult, RerankedResult | None]]:
        """What is shown, best first, at most top-K: without rerank the fused results; with rerank
        the reranked top-N, then (when N < K) the next first-stage results, not reranked."""
        rules = self.rules if self.rules is not None and (self.rules.pins or self.rules.hides) else None
        if self.reranked is None:
            if rules is None:
                return [(r, None) for r in self.outcome.results]
            ordered = [(r, None) for r in self.eligible()]
        else:
            reranked_ids = {r.doc_id for r in self.reranked}
            ordered = [(r.fused, r) for r in self.reranked]
            ordered += [(r, None) for r in self.eligible() if r.doc_id not in reranked_ids]
        if rules is not None:  # pins and hides act last (`RankingPlan.final_ids` does the same)
            ordered = pinned_entries(ordered, self.outcome.ranked, rules)
        return ordered[: self.config.top_k]

