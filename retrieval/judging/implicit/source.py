"""An implicit judgment list as a judgment source of a query set, and its agreement with the
explicit judgments.

`save_implicit` stores a list's grades in a collection's query set under the rater name
`implicit:<model>` (`ImplicitList.rater`), replacing that source's earlier grades and nothing else.
Log queries are matched to the set's queries by their text (surrounding spaces ignored); when the
set does not exist yet it is made from the log's queries (ids `ui-<8 hex of sha1(text)>`, as a
rating from the Search page gets), otherwise a log query the set lacks is counted and left out, so
a set of curated queries is never flooded with the log's long tail. Documents the collection does
not hold are left out (the caller passes `known_docs`, `grading.implicit_judgments`).

An implicit list is never part of the raters' consensus (`raters.is_implicit_rater`): it is chosen
as a whole wherever judgments are (`JudgmentStore.qrels(…, source=…)`). `agreement_with_explicit`
measures it against the consensus of the explicit raters with the raters module's κ (plain and
quadratic-weighted) and Krippendorff's α (ordinal), over the pairs both judged.
"""

from __future__ import annotations

from dataclasses import dataclass

from retrieval.judging.implicit.grading import ImplicitList
from retrieval.judging.judgments import JudgmentStore
from retrieval.judging.raters import Agreement, Rating, agreement, consensus_qrels, is_implicit_rater
from retrieval.judging.validation import ui_query_id
from retrieval.types import RetrievalError

EXPLICIT = "explicit"  # the name the explicit consensus goes by in an agreement


@dataclass(frozen=True)
class SavedImplicit:
    """What `save_implicit` wrote: the source's name, the judgments saved, the queries of the log
    that matched the set, those it lacked (left out) and the queries it added (a new set)."""

    rater: str
    saved: int
    queries_matched: int
    queries_not_in_set: int
    queries_added: int

    def to_json(self) -> dict:
        return {"rater": self.rater, "saved": self.saved, "queries_matched": self.queries_matched,
                "queries_not_in_set": self.queries_not_in_set, "queries_added": self.queries_added}


def save_implicit(store: JudgmentStore, collection: str, set_name: str, implicit: ImplicitList) -> SavedImplicit:
    """Save `implicit` in the set as the source `implicit:<model>` (module docstring)."""
    existing = store.queries(collection, set_name) if set_name in store.query_sets(collection) else None
    texts = sorted({j.query for j in implicit.judgments})
    added: dict[str, str] = {}
    if existing is None:
        for text in texts:
            added[ui_query_id(text, added)] = text
        by_text = {t: q for q, t in added.items()}
    else:
        by_text = {}
        for query_id, text in existing.items():
            by_text.setdefault(text.strip(), query_id)
    ratings = [Rating(by_text[j.query], j.doc, implicit.rater, j.grade) for j in implicit.judgments
               if j.query in by_text]
    matched = sum(1 for t in texts if t in by_text)
    if existing is None and not added:
        raise RetrievalError(f"The {implicit.model} list has no judgments to save (every pair was left out: "
                             f"{implicit.skipped})")
    store.save_ratings(collection, set_name, ratings, queries=added or None, replace_rater=implicit.rater)
    return SavedImplicit(implicit.rater, len(ratings), matched, len(texts) - matched, len(added))


def agreement_with_explicit(ratings: list[Rating], source: str) -> Agreement:
    """κ and α of the implicit source `source` against the consensus of the explicit raters
    (every rater that is neither implicit nor `source`), over the pairs both graded."""
    explicit = consensus_qrels(ratings, exclude_raters=is_implicit_rater)
    pairs = [Rating(q, d, EXPLICIT, g) for q, docs in explicit.items() for d, g in docs.items()]
    pairs += [r for r in ratings if r.rater == source]
    return agreement(pairs)


def coverage(ratings: list[Rating]) -> dict[str, int]:
    """Pairs graded per judgment source: each implicit list, and "explicit" (pairs with an
    explicit consensus)."""
    counts = {EXPLICIT: sum(len(d) for d in consensus_qrels(ratings, exclude_raters=is_implicit_rater).values())}
    for r in ratings:
        if is_implicit_rater(r.rater) and r.grade is not None:
            counts[r.rater] = counts.get(r.rater, 0) + 1
    return counts
