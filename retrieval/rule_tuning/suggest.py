"""Rules proposed from the judgments, each measured before anyone accepts it.

**Synonyms.** A judged query *misses* when a judged-relevant document is not in its first
`MISS_CUTOFF` results. For each miss, a word w of its relevant documents (as written, analysed to a
term the query lacks: `text.tokenize`) scores

    share(w) = (relevant documents holding w) / (relevant documents)
             − (non-relevant documents of its first `POOL` results holding w) / `POOL`

(vocabulary the relevant documents share and the documents it wrongly ranks do not; words of
letters only; on a tie the longer word first). The best `WORDS_PER_MISS` words each make a rule
`t => SYNONYM: w` for the query's `INPUTS_PER_MISS` longest terms t (a term input, so it fires on
every query with t, not only the miss), leaving out terms in more than `COMMON_QUERY_SHARE` of the
judged queries ('what', 'how': a synonym of those fires everywhere). A pair found for several
misses adds their shares: evidence from several queries is measured first.

**Pins.** A navigational query, one judged-relevant document (the highest grade, held by one
document), ranked below 1: `"query" => PIN: doc` (the whole query as input, so nothing else fires).

Each candidate is measured on every judged query it fires on (the config's rules plus it, against
the config's rules alone; lean rankings, `evaluation.evaluate.ranked_lean`): Δ = mean over those
queries of m(with) − m(without). Only candidates with Δ > 0 are returned, largest Σ Δ first. A
pin's gain is measured on the one query that chose it; a synonym chosen on some queries and
measured on the same ones is in-sample too: `held_out` measures the synonyms chosen on k − 1 folds
on the queries of the fold left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.evaluation.evaluate import QrelsEvaluator, ranked_lean
from retrieval.search.config import SearchConfig
from retrieval.search.plan import evaluation_config
from retrieval.search.rules import parse_rules
from retrieval.search.rules.model import normalize_term, query_terms
from retrieval.text.tokenize import tokenize
from retrieval.types import RetrievalError

MISS_CUTOFF = 10
POOL = 20
WORDS_PER_MISS = 3
INPUTS_PER_MISS = 2
CANDIDATES_MAX = 400  # candidate rules measured at most (the best-scored first)
COMMON_QUERY_SHARE = 0.05  # an input term in more of the judged queries than this (and in > 3) is too common
_PLAIN_WORD = re.compile(r"^\w[\w'-]*$")  # a word a rule can hold as it is (no '=>', '#', '"', '*' …)


@dataclass
class Suggestion:
    kind: str  # "synonym" or "pin"
    text: str  # the rule in common-rules text
    touched: list[str]  # judged query ids it fires on
    before: float  # mean metric over `touched` without it
    after: float  # and with it
    why: str  # the evidence, in words
    per_query: dict[str, float] = field(default_factory=dict)  # Δ per touched query

    @property
    def delta(self) -> float:
        return self.after - self.before

    def to_json_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "rule": self.text, "touched": self.touched, "before": self.before,
                "after": self.after, "delta": self.delta, "why": self.why, "per_query": self.per_query}


class _Judge:
    """Rankings and per-query metric values of one config's rules plus candidates, on the judged queries."""

    def __init__(self, workbench, collection: str, queries: Mapping[str, str], qrels, config: SearchConfig,
                 metric: str):
        self.workbench, self.collection, self.queries, self.metric = workbench, collection, queries, metric
        self.judged = [q for q in qrels if qrels[q] and q in queries]
        if not self.judged:
            raise RetrievalError("None of the judged queries has a query text")
        self.qrels = {q: qrels[q] for q in self.judged}
        self.evaluator = QrelsEvaluator(self.qrels)
        self.config = evaluation_config(config)
        self.base = self.rankings(self.config.rules, self.judged)
        self.scores = self.per_query(self.base)

    def rankings(self, rules: str, ids: Sequence[str]) -> dict[str, list[str]]:
        ranked = ranked_lean(self.workbench, self.collection, [self.queries[q] for q in ids],
                             self.config.replace(rules=rules))
        return {q: fused for q, (_, fused) in zip(ids, ranked, strict=True)}

    def per_query(self, rankings: Mapping[str, list[str]]) -> dict[str, float]:
        return {q: v[self.metric] for q, v in self.evaluator.evaluate_rankings(rankings, [self.metric])[1].items()}

    def measure(self, kind: str, rule: str, why: str, among: Sequence[str] | None = None) -> Suggestion | None:
        """`rule` added to the config's rules, measured on the queries (of `among`) it fires on."""
        added = parse_rules(rule)
        pool = self.judged if among is None else among
        touched = [q for q in pool if added.matches(self.queries[q])]
        if not touched:
            return None
        rules = self.config.rules + ("" if not self.config.rules or self.config.rules.endswith("\n") else "\n")
        with_rule = self.per_query({**self.base, **self.rankings(rules + rule, touched)})
        deltas = {q: with_rule[q] - self.scores[q] for q in touched}
        before = sum(self.scores[q] for q in touched) / len(touched)
        return Suggestion(kind, rule, touched, before, before + sum(deltas.values()) / len(touched), why, deltas)


def suggest_rules(workbench, collection: str, queries: Mapping[str, str], qrels, config: SearchConfig,
                  metric: str = "ndcg@10", limit: int = 10, among: Sequence[str] | None = None) -> list[Suggestion]:
    """Synonym and pin rules that raise `metric` on the judged queries they touch (the module
    docstring), largest total gain first, at most `limit`. `among`: choose and measure on these
    query ids only (a training fold)."""
    judge = _Judge(workbench, collection, queries, qrels, config, metric)
    chosen = [q for q in judge.judged if among is None or q in set(among)]
    candidates = synonym_candidates(judge, chosen)[:CANDIDATES_MAX] + pin_candidates(judge, chosen)
    found = [s for kind, rule, why in candidates if (s := judge.measure(kind, rule, why, chosen)) and s.delta > 0]
    found.sort(key=lambda s: (-s.delta * len(s.touched), s.text))
    return found[:limit]


def misses(judge: _Judge, ids: Sequence[str]) -> list[str]:
    """The queries of `ids` with a judged-relevant document outside their first `MISS_CUTOFF` results."""
    return [q for q in ids if {d for d, g in judge.qrels[q].items() if g > 0} - set(judge.base[q][:MISS_CUTOFF])]


def synonym_candidates(judge: _Judge, ids: Sequence[str]) -> list[tuple[str, str, str]]:
    """(kind, rule text, why) of the synonym candidates of the misses among `ids`, best share first."""
    scored: dict[tuple[str, str], tuple[float, str, int]] = {}  # (term, word) -> (Σ share, why, misses)
    in_queries: dict[str, int] = {}
    for q in judge.judged:
        for term in set(query_terms(judge.queries[q])):
            in_queries[term] = in_queries.get(term, 0) + 1
    common = max(3, COMMON_QUERY_SHARE * len(judge.judged))
    for q in misses(judge, ids):
        relevant = [d for d, g in judge.qrels[q].items() if g > 0]
        pool = [d for d in judge.base[q][:POOL] if d not in set(relevant)]
        rows = judge.workbench.documents(judge.collection, relevant + pool)
        asked = set(tokenize(judge.queries[q]))
        words = {d: _words(rows.get(d, {})) for d in relevant + pool}
        counts: dict[str, int] = {}
        for d in relevant:
            for word, terms in words[d].items():
                if terms and not terms & asked:
                    counts[word] = counts.get(word, 0) + 1
        share = {w: c / len(relevant) - sum(w in words[d] for d in pool) / POOL for w, c in counts.items()}
        # ties (a single relevant document: every word of it shares 1): the longer, more specific word first
        best = sorted((w for w in share if share[w] > 0 and w.isalpha()), key=lambda w: (-share[w], -len(w), w))
        best = best[:WORDS_PER_MISS]
        inputs = sorted({t for t in query_terms(judge.queries[q])
                         if tokenize(t) and _PLAIN_WORD.match(t) and in_queries.get(t, 0) <= common},
                        key=lambda t: (-len(t), t))
        for term in inputs[:INPUTS_PER_MISS]:
            for word in best:
                why = (f"{word!r} is in {counts[word]} of query {q}'s {len(relevant)} relevant document(s) and in "
                       f"{sum(word in words[d] for d in pool)} of its first {POOL} non-relevant results")
                total, first, n = scored.get((term, word), (0.0, why, 0))
                scored[(term, word)] = (total + share[word], first, n + 1)
    ordered = sorted(scored.items(), key=lambda item: (-item[1][0], item[0]))
    return [("synonym", f"{term} =>\n  SYNONYM: {word}\n",
             why + (f" (and {n - 1} other missed queries)" if n > 1 else "")) for (term, word), (_, why, n) in ordered]


def pin_candidates(judge: _Judge, ids: Sequence[str]) -> list[tuple[str, str, str]]:
    """(kind, rule text, why) of a pin per navigational query of `ids` not already answered first."""
    found = []
    for q in ids:
        grades = judge.qrels[q]
        top = max(grades.values())
        best = [d for d, g in grades.items() if g == top]
        terms = query_terms(judge.queries[q])
        if (len(best) != 1 or not terms or judge.base[q][:1] == best or "," in best[0]
                or not all(_PLAIN_WORD.match(t) for t in terms)):
            continue
        found.append(("pin", f'"{" ".join(terms)}" =>\n  PIN: {best[0]}\n',
                      f"query {q} has one most relevant document, {best[0]}, ranked "
                      + (f"{judge.base[q].index(best[0]) + 1}" if best[0] in judge.base[q] else "nowhere")))
    return found


def _words(row: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """Each word of a document's title and text (as rules compare words) and its analysed terms."""
    text = f"{row.get('title') or ''} {row.get('text') or ''}"
    return {w: frozenset(tokenize(w)) for w in {normalize_term(t) for t in text.split()} if w}


def held_out(workbench, collection: str, queries: Mapping[str, str], qrels, config: SearchConfig,
             metric: str = "ndcg@10", folds: int = 5, limit: int = 10) -> list[dict[str, Any]]:
    """Per fold (judged queries split in `folds` by position), the synonyms `suggest_rules` chooses
    on the other folds, each measured on the queries of the held-out fold it fires on."""
    judged = [q for q in qrels if qrels[q] and q in queries]
    out = []
    for k in range(folds):
        test = judged[k::folds]
        train = [q for q in judged if q not in set(test)]
        chosen = [s for s in suggest_rules(workbench, collection, queries, qrels, config, metric, limit * 3, train)
                  if s.kind == "synonym"][:limit]
        judge = _Judge(workbench, collection, queries, {q: qrels[q] for q in test}, config, metric)
        for s in chosen:
            measured = judge.measure(s.kind, s.text, s.why, test)
            out.append({"fold": k, "rule": s.text, "train_delta": s.delta, "train_touched": len(s.touched),
                        "test_delta": measured.delta if measured else None,
                        "test_touched": len(measured.touched) if measured else 0})
    return out
