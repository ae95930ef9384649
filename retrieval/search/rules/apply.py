"""What a rule set does to one query, and the ranking stages that apply it.

`query_rules(rules, query)` collects the rules that fire on a query into a `QueryRules`:

* **Rewrites.** The lexical sources (`SourceSpec.lexical`: BM25, the keyword scorer) search
  `lexical`: the query's words without those a DELETE removes, then each SYNONYM's terms. The
  other sources (the vector, the entity graph: they embed the query) search `vector`: the query
  without the deleted words and without synonyms (an embedding already places 'job' near
  'employment'; appended words would move the query vector away from what was asked). A weighted
  synonym is applied by repetition: BM25 adds a repeated query term's score again (rank-bm25's
  arithmetic, `sources/bm25.py`), so with any weight ≠ 1 every kept word is written 4 times and a
  synonym of weight w round(4·w) times (w in quarters), all counts divided by their common divisor:
  `SYNONYM(0.5): employment` on 'job' searches 'job job employment'. The rewritten texts are what the
  candidate cache keys on (`Retriever`), so a rule change never serves another text's candidates.
* **FILTER** filters join the config's metadata filters for this query (before ranking, in every
  source, as `search.filters` describes).
* **UP(w) / DOWN(w)** on documents passing a metadata filter: `boosted_scores`, after the fused
  score (or a learned ranker's), before the order and the thresholds:

      score' = score + (Σ w_UP − Σ w_DOWN) · u,   u = 1 / display factor

  u is the fused score of a document every source ranks first (`FusionMethod.display_factor`; 1
  with a learned ranker), so UP(w) adds exactly w to the display score whatever the fusion: UP(1)
  is worth one "first everywhere".
* **PIN / HIDE** act last (`pinned_order`), after the thresholds and the rerank, before top-K:
  hidden documents leave the list, pinned ones (that exist in the collection and pass the filters)
  go first in rule order; a document both pinned and hidden is hidden.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from retrieval.search.filters import Filter
from retrieval.search.rules.model import Match, RuleSet, normalize_term
from retrieval.search.rules.text import parse_rules
from retrieval.types import FusedResult

QUARTERS = 4  # synonym weights are applied in steps of 1/QUARTERS (by repetition)


@dataclass(frozen=True)
class QueryRules:
    """The rules that fire on one query and what they do (see the module docstring)."""

    query: str
    matches: tuple[Match, ...]
    lexical: str  # what the lexical sources search
    vector: str  # what the other sources search (deletes only)
    filters: tuple[tuple[int, Filter], ...]  # (rule number, filter)
    boosts: tuple[tuple[int, float, Filter], ...]  # (rule number, signed weight, filter)
    pins: tuple[tuple[int, str], ...]  # (rule number, doc id), in pinning order
    hides: tuple[tuple[int, str], ...]
    rewrites: tuple[str, ...]  # per SYNONYM / DELETE instruction, what it did, in words

    @property
    def filter_texts(self) -> list[str]:
        return [str(f) for _, f in self.filters]

    def text_for(self, lexical: bool) -> str:
        return self.lexical if lexical else self.vector

    def notes(self) -> list[str]:
        """What the rules did to the query, in words (the search's notes)."""
        rules = ", ".join(f"{m.rule.number} ({m.rule.input_text})" for m in self.matches)
        notes = [f"rules fired: {rules}"]
        notes.extend(self.rewrites)
        if self.lexical != self.query:
            notes.append(f"lexical sources searched {self.lexical!r}")
        notes.append(f"vector text {'unchanged' if self.vector == self.query else repr(self.vector)}"
                     + ("" if self.vector == self.query else " (rule DELETE)"))
        notes.extend(f"FILTER {f} by rule {n}" for n, f in self.filters)
        return notes


def query_rules(rules: RuleSet | None, query: str) -> QueryRules | None:
    """What `rules` do to `query`; None when no rule fires (or there are none)."""
    found = rules.matches(query) if rules is not None else []
    if not found:
        return None
    words = [(w, normalize_term(w)) for w in query.split()]
    words = [(w, n) for w, n in words if n]  # the positions `Match.start` counts
    deleted: set[int] = set()
    synonyms: dict[str, float] = {}
    filters, boosts, pins, hides, rewrites = [], [], [], [], []
    for match in found:
        rule = match.rule
        for ins in rule.instructions:
            if ins.kind == "DELETE":
                span = range(match.start, match.start + len(rule.terms))
                deleted.update(i for i in span if words[i][1] in ins.terms)
                rewrites.append(f"DELETE {' '.join(ins.terms)} by rule {rule.number}")
            elif ins.kind == "SYNONYM":
                for term in ins.terms:
                    synonyms[term] = max(synonyms.get(term, 0.0), ins.effective_weight)
                weight = f" ({ins.effective_weight:g})" if ins.weight is not None else ""
                rewrites.append(f"SYNONYM {' '.join(ins.terms)}{weight} by rule {rule.number}")
            elif ins.kind == "FILTER":
                filters.append((rule.number, ins.filter))
            elif ins.kind in ("UP", "DOWN"):
                sign = 1.0 if ins.kind == "UP" else -1.0
                boosts.append((rule.number, sign * ins.effective_weight, ins.filter))
            elif ins.kind == "PIN":
                pins.extend((rule.number, d) for d in ins.doc_ids)
            elif ins.kind == "HIDE":
                hides.extend((rule.number, d) for d in ins.doc_ids)
    kept = [w for i, (w, _) in enumerate(words) if i not in deleted]
    synonyms = {t: w for t, w in synonyms.items() if t not in {n for _, n in words}}  # already searched
    lexical = lexical_text(kept, synonyms) if (deleted or synonyms) else query
    vector = " ".join(kept) if deleted and kept else query
    seen: set[str] = set()
    pins = [(n, d) for n, d in pins if not (d in seen or seen.add(d))]
    return QueryRules(query, tuple(found), lexical, vector, tuple(filters), tuple(boosts), tuple(pins),
                      tuple({d: (n, d) for n, d in hides}.values()), tuple(rewrites))


def rules_for(text: str, queries: Sequence[str]) -> list[QueryRules | None]:
    """Per query, what the rules of `text` (a config's `rules`) do to it (None: no rule fires)."""
    if not text:
        return [None] * len(queries)
    rules = parse_rules(text)
    return [query_rules(rules, q) for q in queries]


def lexical_text(kept: Sequence[str], synonyms: Mapping[str, float]) -> str:
    """The query words `kept` and the `synonyms` (term → weight) as one text, weights applied by
    repetition (the module docstring): all weights 1 → 'job employment'; employment 0.5 →
    'job job employment'."""
    if all(w == 1.0 for w in synonyms.values()):
        return " ".join([*kept, *synonyms])
    counts = {t: max(1, round(w * QUARTERS)) for t, w in synonyms.items()}
    divisor = math.gcd(QUARTERS, *counts.values())
    words = [w for w in kept for _ in range(QUARTERS // divisor)]
    words += [t for t, c in counts.items() for _ in range(c // divisor)]
    return " ".join(words)


def boosted_scores(scores: Mapping[str, float], rules: QueryRules, unit: float,
                   members: Callable[[Filter], frozenset[str]]) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Each candidate's score after the UP/DOWN rules (score + Σ signed w · `unit`, the module
    docstring's formula), and per boosted candidate what each rule did, in words.
    `members(filter)`: the ids of the collection passing `filter`."""
    boosted = dict(scores)
    effects: dict[str, list[str]] = {}
    for number, weight, flt in rules.boosts:
        passing = members(flt)
        label = f"{'UP' if weight > 0 else 'DOWN'} {abs(weight):g} by rule {number}: {flt}"
        for doc_id in (passing & boosted.keys() if len(passing) > len(boosted) else
                       [d for d in passing if d in boosted]):
            boosted[doc_id] += weight * unit
            effects.setdefault(doc_id, []).append(label)
    return boosted, effects


def pinned_order(ids: Sequence[str], rules: QueryRules, exists: Callable[[str], bool] | None = None
                 ) -> tuple[list[str], dict[str, list[str]]]:
    """`ids` (best first) with the hidden documents removed and the pinned ones first, in pinning
    order (a pinned id `exists` refuses is left out), and per pinned document what did it."""
    hidden = {d for _, d in rules.hides}
    pinned = [(n, d) for n, d in rules.pins if d not in hidden and (exists is None or exists(d))]
    first = {d for _, d in pinned}
    order = [d for _, d in pinned] + [d for d in ids if d not in hidden and d not in first]
    effects = {d: [f"pinned at {i} by rule {n}"] for i, (n, d) in enumerate(pinned, start=1)}
    return order, effects


def pinned_entries(ordered: list[tuple[FusedResult, Any]], ranked, rules: QueryRules
                   ) -> list[tuple[FusedResult, Any]]:
    """`ordered` ((fused result, rerank result or None), best first) after PIN/HIDE (`pinned_order`):
    a pinned document keeps its fused result (from `ranked`, every candidate, when not in
    `ordered`; with no score when it is no candidate) and says which rule pinned it."""
    entries = {fused.doc_id: (fused, reranked) for fused, reranked in ordered}
    order, effects = pinned_order(list(entries), rules)
    positions = {doc_id: i for i, doc_id in enumerate(getattr(ranked, "ids", ()))}
    out = []
    for doc_id in order:
        fused, reranked = entries.get(doc_id, (None, None))
        if fused is None:
            fused = ranked[positions[doc_id]] if doc_id in positions else FusedResult(doc_id, 0, 0.0, 0.0, {})
        if doc_id in effects:
            fused = replace(fused, rules=fused.rules + tuple(effects[doc_id]))
        out.append((fused, reranked))
    return out
