"""What to judge next: the unjudged (query, document) pairs of the top k of the configs being
compared, ordered by how much one judgment can change their comparison — the minimal test
collection idea of Carterette, Allan & Sitaraman (SIGIR 2006) for nDCG@k — and, as the plain
alternative, the depth-k pool. Pure functions: rankings and judgments in, a queue out.

Under nDCG@k as `evaluate` computes it (`evaluation/metrics.py`, linear gain: a grade g ≥ 1 gains g, lower grades
0), with disc(r) = 1/log2(r + 1) for a rank r ≤ k and 0 outside the top k,

    Δ = mean nDCG@k(B) − mean nDCG@k(A)
      = 1/n · Σ_q 1/IDCG@k(q) · Σ_d g(q, d) · (disc(r_B(q, d)) − disc(r_A(q, d)))

so judging d for q moves Δ by g(q, d) · (disc_B − disc_A) / (n · IDCG@k(q)), and not at all when
d is not relevant. Before the judgment only the ranks are known; the MTC weight of d is

    w(d) = |disc(r_A(d)) − disc(r_B(d))|                 two configs
    w(d) = Σ over pairs i < j of |disc(r_i(d)) − disc(r_j(d))|   more configs

e.g. rank 1 in A and rank 3 in B: |1/log2 2 − 1/log2 4| = 0.5; rank 2 in A's top 10 only:
1/log2 3 ≈ 0.631; the same rank in both: 0.

That holds with IDCG@k fixed, which only the full qrels know. The workbench normalises by the
IDCG of the judgments so far, and a relevant grade raises it, rescaling the query's whole term of
Δ: a document both configs rank alike can then move Δ, even flip its sign. So a pair's weight
(`change_weight`) is how far its grade can move the query's term given the query's judgments —
the MTC weight when the query has none, and not 0 for a same-rank document once the configs'
judged documents differ and its grade would raise the ideal DCG. Pairs that cannot move Δ are
queued last, with weight 0, since the metric's own value still needs them. The order depends on
the judgments passed: re-made after each judgment it adapts (the benchmark does so).

Only a relevant document moves Δ, and a document high in either list is likelier relevant, so
`next_to_judge` orders the unjudged pairs by

    priority(d) = w(d) · disc(best rank of d in any config)

highest first, ties by query order (the order the queries first appear in the rankings), then by
the best rank, then by config order. E.g. the rank-1-in-A, rank-3-in-B document above (0.5 · 1 =
0.5) comes before the rank-2-in-A-only one (0.631 · 0.631 ≈ 0.398). The order depends on the
ranks and the judgments passed in; the Judge page re-makes it after every judgment
(`judging_queue.page_queue`, with a memo so only the judged query is weighed again). Queries
with no judgment yet are eligible: `qrels` is the judgments so far, not the set of queries to
judge.

Measured with the normaliser the workbench computes (benchmarks/bench_judging.py, loaded
machine, docs/experiments/judging.md), re-made after each judgment: on xquad-en the right sign
after 8 judgments against the pool's 239 (within 0.01 after 46 against 6,918); not better than the
pool on nfcorpus (17 against 69 in the set's query order, 84 against 26 shuffled) nor vaswani (17
against 3, shuffled 20 against 48), though nearer where the judged pool ends sooner (within 0.01
after 2,835 against 3,183 and 800 against 1,277).

Measured earlier with the normaliser held at its full-qrels value (an oracle; same benchmark:
BM25 alone against the default hybrid, qrels revealed one pair at a time), against w alone the discount of the best
rank cut the judgments needed to bring Δ within 0.01 of its full-qrels value from 1,906 to 1,551
on nfcorpus, 828 to 767 on vaswani and 416 to 46 on xquad-en (cmrc2018-dev's |Δ| is below 0.01:
none needed), with the same number for the sign on all four. Tried there and not kept, each
worse on at least one set: dividing by the query's normaliser estimated from its revealed
grades (IDCG@k, at least 1 — Δ is a mean of per-query ratios, so a query whose ideal DCG is small
weighs more; nfcorpus 2,616 against w's 1,906); multiplying by the query's expected gain from its
revealed grades ((Σ gains + 1) / (judged + 2); the sign took 130 judgments on nfcorpus, not 17);
and per-query adaptive stopping, a query whose sign of ΔDCG its judged documents already decide
whatever the rest turn out moved behind the others or halved (nfcorpus 2,793 and 2,763). The
adaptive ones re-rank after every judgment.

`depth_pool` is the depth-k pool (TREC's): queries in order, for each rank 1 … depth every
config's document at that rank in config order, each unjudged pair once. `random_order` is the
same pairs shuffled with a seed. All three give `Candidate`s with the MTC weight filled in, so a
queue can show it whatever the order.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations

JUDGE_K = 10

Rankings = Sequence[Mapping[str, Sequence[str]]]


@dataclass(frozen=True)
class Candidate:
    """An unjudged (query, document) pair: its MTC weight and its 1-based rank in each config's
    top k (None where it is outside)."""

    query_id: str
    doc_id: str
    weight: float
    ranks: tuple[int | None, ...]

    @cached_property
    def best_rank(self) -> int:
        """The highest place (smallest rank) any config gives the document."""
        return min(r for r in self.ranks if r is not None)

    @cached_property
    def priority(self) -> float:
        """`next_to_judge`'s order: weight · 1/log2(best rank + 1) (kept once computed: a queue
        re-made from a memo sorts the same candidates again)."""
        return self.weight / math.log2(self.best_rank + 1)


def discount(rank: int | None, k: int = JUDGE_K) -> float:
    """nDCG@k's discount of a 1-based rank: 1/log2(rank + 1) within the top k, else 0."""
    if rank is None or rank > k:
        return 0.0
    return 1.0 / math.log2(rank + 1)


def mtc_weight(ranks: Sequence[int | None], k: int = JUDGE_K) -> float:
    """Σ over pairs of configs of |disc(rank in one) − disc(rank in the other)|."""
    return sum(abs(discount(a, k) - discount(b, k)) for a, b in combinations(ranks, 2))


def gain(grade: int) -> float:
    """The metrics' linear gain (relevance level 1): the grade when ≥ 1, else 0."""
    return float(grade) if grade >= 1 else 0.0


def ideal_dcg(grades: Iterable[int], k: int = JUDGE_K) -> float:
    """IDCG@k of the judged grades: the best k gains in order, each × disc(its rank); 0 if none."""
    gains = sorted((gain(g) for g in grades if gain(g) > 0), reverse=True)[:k]
    return sum(g * discount(rank, k) for rank, g in enumerate(gains, start=1))


def change_weight(ranks: Sequence[int | None], dcgs: Sequence[float], grades: Iterable[int], k: int = JUDGE_K,
                  top_grade: int = 1) -> float:
    """How far judging one document relevant can move the comparison, nDCG normalised by the
    judgments so far (what the workbench computes): with D_ij = DCG_i − DCG_j over the query's
    judged documents, I = max(1, IDCG@k of its judged grades) and I′ the same with the new grade g,

        max over g = 1 … top_grade of Σ_{i<j} |(D_ij + g·(disc(r_i) − disc(r_j))) / I′ − D_ij / I|

    With nothing judged (D = 0, I′ = g) this is the MTC weight Σ |disc(r_i) − disc(r_j)|; a
    document both configs rank alike still counts when the query's configs already differ (D ≠ 0)
    and the grade would raise its ideal DCG, which rescales the query's term of Δ."""
    grades = list(grades)
    before = max(ideal_dcg(grades, k), 1.0)
    best = 0.0
    for g in range(1, max(top_grade, 1) + 1):
        after = max(ideal_dcg([*grades, g], k), 1.0)
        moved = sum(abs((dcgs[i] - dcgs[j] + g * (discount(ranks[i], k) - discount(ranks[j], k))) / after
                        - (dcgs[i] - dcgs[j]) / before)
                    for i, j in combinations(range(len(ranks)), 2))
        best = max(best, moved)
    return best


def judged_dcgs(tops: Sequence[Mapping[str, int]], judged: Mapping[str, int], k: int = JUDGE_K) -> list[float]:
    """Each config's DCG@k of one query over its judged documents (`tops`: document → rank)."""
    return [sum(gain(g) * discount(top.get(d), k) for d, g in judged.items()) for top in tops]


def query_order(rankings: Rankings) -> list[str]:
    """The query ids in the order they first appear: the first config's, then any only a later
    config ranked."""
    return list(dict.fromkeys(q for ranking in rankings for q in ranking))


def top_ranks(ranking: Sequence[str], k: int = JUDGE_K) -> dict[str, int]:
    """{document: 1-based rank} of the first k distinct documents of `ranking`."""
    return {doc_id: rank for rank, doc_id in enumerate(list(dict.fromkeys(ranking))[:k], start=1)}


def unjudged_pairs(rankings: Rankings, qrels: Mapping[str, Mapping[str, int]], k: int = JUDGE_K,
                   top_grade: int | None = None, memo: dict | None = None,
                   queries: Iterable[str] | None = None) -> list[Candidate]:
    """Every unjudged pair of the configs' top k, in pool order: queries in `query_order`, then
    rank 1 … k, at each rank the configs in order; each pair once (where it first appears); its
    weight is `change_weight` given the judgments so far (`top_grade` None: the highest grade in
    `qrels`, at least 1). `memo`, a dict kept by the caller for these same rankings, holds each
    query's pairs per (its judgments, k, top grade): re-made after a judgment, only the judged
    query is weighed again (unless the top grade rose). `queries`: only these queries' pairs
    (None: all)."""
    if top_grade is None:
        top_grade = max((g for docs in qrels.values() for g in docs.values()), default=1)
    out: list[Candidate] = []
    order = query_order(rankings)
    if queries is not None:
        wanted = set(queries)
        order = [q for q in order if q in wanted]
    for qid in order:
        judged = qrels.get(qid, {})
        if memo is None:
            out.extend(_query_pairs(rankings, qid, judged, k, top_grade))
            continue
        key = (qid, k, top_grade, frozenset(judged.items()))
        if key not in memo:
            memo[key] = _query_pairs(rankings, qid, judged, k, top_grade)
        out.extend(memo[key])
    return out


def _query_pairs(rankings: Rankings, qid: str, judged: Mapping[str, int], k: int, top_grade: int) -> list[Candidate]:
    tops = [top_ranks(ranking.get(qid, ()), k) for ranking in rankings]
    dcgs = judged_dcgs(tops, judged, k)
    by_rank = [list(top) for top in tops]
    seen: set[str] = set()
    out: list[Candidate] = []
    for position in range(k):
        for docs in by_rank:
            if position >= len(docs):
                continue
            doc_id = docs[position]
            if doc_id in seen or doc_id in judged:
                continue
            seen.add(doc_id)
            ranks = tuple(top.get(doc_id) for top in tops)
            out.append(Candidate(qid, doc_id, change_weight(ranks, dcgs, judged.values(), k, top_grade), ranks))
    return out


def _cut(candidates: list[Candidate], budget: int | None) -> list[Candidate]:
    if budget is None:
        return candidates
    if budget < 0:
        raise ValueError(f"budget must be ≥ 0, got {budget}")
    return candidates[:budget]


def next_to_judge(rankings: Rankings, qrels: Mapping[str, Mapping[str, int]], budget: int | None = None,
                  k: int = JUDGE_K, memo: dict | None = None) -> list[Candidate]:
    """The unjudged pairs of the configs' top k, highest `Candidate.priority` first (module
    docstring), at most `budget` of them (None: all); `memo` as in `unjudged_pairs`."""
    pairs = unjudged_pairs(rankings, qrels, k, memo=memo)
    # A stable sort: equal priorities keep the pool order (query, then best rank, then config).
    return _cut(sorted(pairs, key=lambda c: -c.priority), budget)


def depth_pool(rankings: Rankings, qrels: Mapping[str, Mapping[str, int]], budget: int | None = None,
               depth: int = JUDGE_K, memo: dict | None = None) -> list[Candidate]:
    """The depth-`depth` pool's unjudged pairs in pool order (module docstring), at most `budget`;
    weights are `change_weight`s at k = depth; `memo` as in `unjudged_pairs`."""
    return _cut(unjudged_pairs(rankings, qrels, depth, memo=memo), budget)


def random_order(rankings: Rankings, qrels: Mapping[str, Mapping[str, int]], budget: int | None = None,
                 k: int = JUDGE_K, seed: int = 0) -> list[Candidate]:
    """The unjudged pairs of the top k shuffled (`random.Random(seed)`: the same seed, the same
    order), at most `budget`."""
    pairs = unjudged_pairs(rankings, qrels, k)
    random.Random(seed).shuffle(pairs)
    return _cut(pairs, budget)
