"""What to judge next, measured: how many judgments each selection rule needs before the A-vs-B
comparison is right. Run:

    .venv/bin/python benchmarks/bench_judging.py [BEIR_DIR] [--config-a FILE] [--config-b FILE] [--json]

BEIR_DIR defaults to ../shared/eval/nfcorpus beside the repository (ingested once into a cache
collection, `beir_cache.ensure_beir_collection`); A defaults to BM25 alone (weights {bm25: 1}), B
to the default hybrid `SearchConfig()`; a FILE is a `SearchConfig` JSON (`ConfigStore.resolve`,
as `--config FILE` in the CLI). Both configs rank every judged query of the set as the Evaluate
page scores it and the Judge page queues it (`evaluate.fused_rankings`: the config's final
ranking, what `evaluate_collection` reports as "hybrid").

The simulation. The set's qrels are hidden; judging starts from nothing. A rule gives an order
of the (query, document) pairs of the two top 10s (the pool: every rule judges the same pairs,
in its own order); an oracle reveals each pair's grade from the full qrels (0 where the qrels
do not have the pair). After each judgment

    Δ = mean nDCG@10(B) − mean nDCG@10(A)

over the queries judged in the full qrels (n of them; a query with nothing relevant revealed
yet scores 0 in both), with the library's nDCG (ranx, linear gain: grade g ≥ 1 gains g, a lower
grade 0; disc(r) = 1/log2(r + 1); IDCG@10 from the grades sorted, ranx's 1 where it is 0). Each
query's DCG of A and B is kept up to date as its documents are revealed (one query changes per
judgment; no ranx call per step). At the end, with every pool pair revealed, Δ is checked
against the library's own evaluation of the full qrels (`QrelsEvaluator`, to 1e-9).

The normaliser (the first table printed is the revealed-grades one, what the workbench
computes; the held one is an oracle's, for comparison). With partial judgments a query's IDCG
computed from the revealed grades alone
is too small, and since every rule only judges documents of the two top 10s it never reaches the
full-qrels value (relevant documents neither config ranks in its top 10 are never revealed), so
"within 0.01 of the full-qrels Δ" can be out of reach for every rule, for reasons no selection
rule controls. The headline therefore holds each query's normaliser at its full-qrels IDCG@10
(the oracle knows it) and compares the rules on what judging the top 10s can change, the DCG
numerators: judged in full, the pool gives exactly the full-qrels Δ. The partial normaliser
(IDCG from the revealed grades; what a workbench with only these judgments would compute) is
reported too, as a second table; there a rule can end without reaching 0.01 (null).

Counts. `to_sign` is the number of judgments after which the sign of Δ equals the sign of the
full-qrels Δ and stays so for the rest of that rule's order (the first crossing would reward a
rule that is right by luck for a moment; a Δ of exactly 0, nothing relevant found where the
configs differ, is not the right sign); `to_0.01` likewise for |Δ − Δ_full| ≤ 0.01. 0 means
right before any judgment (Δ starts at 0, so a full-qrels |Δ| ≤ 0.01 is within 0.01 at once);
null means never within the pool (then the pool size is the total). Random is the median over
`RANDOM_SEEDS` seeds of `judge_next.random_order`. The query set's order is arbitrary and the
pool's counts depend on it (next's only through ties), so next and pool are also run with the
queries shuffled, the median over the same seeds.

The rules: `next` is `judge_next.next_to_judge`'s priority re-made after every judgment from the
judgments so far (`change_weight` × 1/log2(1 + best rank): how far a grade can move Δ under the
revealed-grades normaliser, see its docstring); `next static (MTC order)` is its order computed
once, from no judgments (the MTC weight, the order before); `pool` is
`judge_next.depth_pool` (depth 10, queries in the query set's order). With `--ablation`,
refinements of `next` that were tried and not kept are run as well
(docs/experiments/judging.md): adaptive ones are re-ranked after every judgment
(only the judged query's pairs change priority, so a heap keeps it cheap).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from retrieval.evaluation.beir_cache import ensure_beir_collection  # noqa: E402
from retrieval.evaluation.evaluate import QrelsEvaluator, fused_rankings  # noqa: E402
from retrieval.judging.judge_next import (  # noqa: E402
    Candidate,
    change_weight,
    depth_pool,
    discount,
    judged_dcgs,
    next_to_judge,
    random_order,
    top_ranks,
)
from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.store import Store  # noqa: E402

K = 10
METRIC = f"ndcg@{K}"
TOLERANCE = 0.01
RANDOM_SEEDS = (0, 1, 2, 3, 4)


def gain(grade: int) -> float:
    """ranx's linear gain at relevance level 1: the grade when ≥ 1, else 0."""
    return float(grade) if grade >= 1 else 0.0


def ideal_dcg(grades: Sequence[int], k: int = K) -> float:
    """IDCG@k of a query's grades, ranx's way (the best k gains in order)."""
    gains = sorted((gain(g) for g in grades if gain(g) > 0), reverse=True)[:k]
    return sum(g * discount(rank, k) for rank, g in enumerate(gains, start=1))


class Oracle:
    """Reveals grades from the full qrels and keeps Δ (B − A) up to date, both normalisers."""

    def __init__(self, rankings_a: Mapping[str, Sequence[str]], rankings_b: Mapping[str, Sequence[str]],
                 qrels: Mapping[str, Mapping[str, int]], k: int = K):
        self.qrels, self.k, self.n = qrels, k, len(qrels)
        self.ranks_a = {q: top_ranks(rankings_a.get(q, ()), k) for q in qrels}
        self.ranks_b = {q: top_ranks(rankings_b.get(q, ()), k) for q in qrels}
        self.full_idcg = {q: ideal_dcg(list(docs.values()), k) or 1.0 for q, docs in qrels.items()}
        self.dcg_diff = dict.fromkeys(qrels, 0.0)  # DCG_B − DCG_A over the revealed documents
        self.revealed: dict[str, dict[str, int]] = {q: {} for q in qrels}
        self.partial_term = dict.fromkeys(qrels, 0.0)  # (DCG_B − DCG_A) / partial IDCG
        self.sum_held = self.sum_partial = 0.0

    def reveal(self, qid: str, doc_id: str) -> int:
        grade = self.qrels[qid].get(doc_id, 0)
        self.revealed[qid][doc_id] = grade
        if gain(grade):
            step = gain(grade) * (discount(self.ranks_b[qid].get(doc_id), self.k)
                                  - discount(self.ranks_a[qid].get(doc_id), self.k))
            self.dcg_diff[qid] += step
            self.sum_held += step / self.full_idcg[qid]
            term = self.dcg_diff[qid] / (ideal_dcg(list(self.revealed[qid].values()), self.k) or 1.0)
            self.sum_partial += term - self.partial_term[qid]
            self.partial_term[qid] = term
        return grade

    def delta(self) -> tuple[float, float]:
        """(Δ with the full-qrels normaliser, Δ with the revealed-grades normaliser)."""
        return self.sum_held / self.n, self.sum_partial / self.n


def settled_at(values: Sequence[float], ok: Callable[[float], bool]) -> int | None:
    """The first step t with ok(values[t′]) for every t′ ≥ t (values[0]: before any judgment);
    None when the last value is not ok."""
    at = None
    for t in range(len(values) - 1, -1, -1):
        if not ok(values[t]):
            break
        at = t
    return at


def counts(trajectory: Sequence[float], delta_full: float) -> dict[str, float | None]:
    """`to_sign`, `to_0.01` (module docstring) and `mean_error`: |Δ − Δ_full| averaged over the
    steps 0 … pool size, a smoother summary of the whole order than two thresholds."""
    sign = (delta_full > 0) - (delta_full < 0)
    return {"to_sign": settled_at(trajectory, lambda d: (d > 0) - (d < 0) == sign),
            "to_0.01": settled_at(trajectory, lambda d: abs(d - delta_full) <= TOLERANCE + 1e-12),
            "mean_error": round(sum(abs(d - delta_full) for d in trajectory) / len(trajectory), 6)}


def simulate(order: Sequence[Candidate], oracle: Oracle) -> tuple[list[float], list[float]]:
    held, partial = [0.0], [0.0]
    for candidate in order:
        oracle.reveal(candidate.query_id, candidate.doc_id)
        d_held, d_partial = oracle.delta()
        held.append(d_held)
        partial.append(d_partial)
    return held, partial


Priority = Callable[[Candidate, Mapping[str, int], "Context"], float]


class Context:
    """What an adaptive rule may know: the judgments revealed so far, nothing of the hidden qrels."""

    def __init__(self, pairs: Sequence[Candidate]) -> None:
        self.top_grade = 1  # the highest grade revealed so far (at least 1)
        self.pairs: dict[str, list[Candidate]] = {}  # each query's pool pairs
        for c in pairs:
            self.pairs.setdefault(c.query_id, []).append(c)


def adaptive_order(pairs: Sequence[Candidate], priority: Priority, oracle: Oracle) -> list[Candidate]:
    """Judge the highest-priority pair, reveal it, re-rank, repeat; ties by pool position (query
    order, then rank), as `next_to_judge`'s stable sort. Priorities depend on the pair and on
    its own query's revealed grades (and `Context`), so only the judged query is re-ranked; a
    new highest grade re-ranks every query."""
    context = Context(pairs)
    by_query: dict[str, list[int]] = {}
    for i, c in enumerate(pairs):
        by_query.setdefault(c.query_id, []).append(i)
    version = dict.fromkeys(by_query, 0)
    heap: list[tuple[float, int, int, str]] = []

    def push(qid: str) -> None:
        version[qid] += 1
        rest = by_query[qid]
        if rest:
            grades = oracle.revealed[qid]
            best = min((-priority(pairs[i], grades, context), i) for i in rest)
            heapq.heappush(heap, (best[0], best[1], version[qid], qid))

    for qid in by_query:
        push(qid)
    order = []
    while heap:
        _, i, v, qid = heapq.heappop(heap)
        if v != version[qid]:
            continue
        by_query[qid].remove(i)
        order.append(pairs[i])
        grade = oracle.reveal(qid, pairs[i].doc_id)
        if grade > context.top_grade:
            context.top_grade = grade
            for other in by_query:
                if other != qid:
                    push(other)
        push(qid)
    return order


# Refinements of the MTC weight tried (--ablation) and not kept; see judge_next's docstring.
def _revealed_idcg(grades: Mapping[str, int]) -> float:
    return max(ideal_dcg(list(grades.values())), 1.0)


def _expected_gain(grades: Mapping[str, int]) -> float:
    return (sum(gain(g) for g in grades.values()) + 1.0) / (len(grades) + 2.0)


def _sign_decided(qid: str, grades: Mapping[str, int], context: Context) -> bool:
    """Whether the query's sign of ΔDCG (B − A) is fixed whatever its unjudged pairs turn out
    (each graded between 0 and the highest grade revealed so far)."""
    low = high = 0.0
    for c in context.pairs[qid]:
        step = discount(c.ranks[1]) - discount(c.ranks[0])
        if c.doc_id in grades:
            low += gain(grades[c.doc_id]) * step
            high += gain(grades[c.doc_id]) * step
        elif step > 0:
            high += context.top_grade * step
        else:
            low += context.top_grade * step
    return low > 0 or high < 0 or low == high


def _decided_factor(c: Candidate, grades: Mapping[str, int], context: Context, factor: float) -> float:
    return factor if _sign_decided(c.query_id, grades, context) else 1.0


# w: the MTC weight (`Candidate.weight`); p: what `next_to_judge` orders by (`Candidate.priority`,
# w × 1/log2(1 + best rank)). Each: (what it is, its priority function).
ABLATION: dict[str, tuple[str, Priority]] = {
    "w alone": ("the MTC weight alone (Carterette et al.), static",
                lambda c, grades, ctx: c.weight),
    "w ÷ revealed IDCG": ("w ÷ max(1, IDCG@10 of the query's revealed grades): a query whose normaliser looks "
                          "small weighs more",
                          lambda c, grades, ctx: c.weight / _revealed_idcg(grades)),
    "w × expected gain": ("w × (Σ revealed gains of the query + 1) / (its revealed judgments + 2): a query whose "
                          "judged documents were relevant weighs more",
                          lambda c, grades, ctx: c.weight * _expected_gain(grades)),
    "w × expected gain ÷ revealed IDCG": ("both of the above",
                                          lambda c, grades, ctx: c.weight * _expected_gain(grades)
                                          / _revealed_idcg(grades)),
    "w, decided queries last": ("w, but 0 once the query's sign of ΔDCG is decided whatever its unjudged pairs turn "
                                "out (each between 0 and the highest grade revealed so far)",
                                lambda c, grades, ctx: c.weight * _decided_factor(c, grades, ctx, 0.0)),
    "w, decided queries × 0.5": ("w, halved once the query's sign of ΔDCG is decided",
                                 lambda c, grades, ctx: c.weight * _decided_factor(c, grades, ctx, 0.5)),
    "p ÷ revealed IDCG": ("the kept priority ÷ max(1, revealed IDCG@10)",
                          lambda c, grades, ctx: c.priority / _revealed_idcg(grades)),
    "p × expected gain": ("the kept priority × the expected gain above",
                          lambda c, grades, ctx: c.priority * _expected_gain(grades)),
    "p, decided queries × 0.5": ("the kept priority, halved once the query's sign of ΔDCG is decided",
                                 lambda c, grades, ctx: c.priority * _decided_factor(c, grades, ctx, 0.5)),
}


def median_or_none(values: Sequence[int | None]) -> float | None:
    """The median, a None counting as larger than any number (None if the median is None)."""
    ordered = sorted(values, key=lambda v: math.inf if v is None else v)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    low, high = ordered[mid - 1], ordered[mid]
    return None if low is None or high is None else (low + high) / 2


def run_rules(rankings_a, rankings_b, qrels, query_ids, ablation: bool) -> tuple[dict, dict, dict, float]:
    """{rule: counts} with the held and the partial normaliser; the pool's size, its pairs of
    weight 0 (both configs rank the document alike) and Δ with the partial normaliser once the
    whole pool is judged; Δ held at the end."""
    both = [{q: rankings_a.get(q, []) for q in query_ids}, {q: rankings_b.get(q, []) for q in query_ids}]
    orders: dict[str, list[Candidate] | list[list[Candidate]]] = {
        "next": next_to_judge(both, {}, k=K),  # from no judgments: the MTC order, static
        "pool": depth_pool(both, {}, depth=K),
        "random": [random_order(both, {}, k=K, seed=s) for s in RANDOM_SEEDS],
    }
    pool_size = len(orders["pool"])
    held: dict[str, dict] = {}
    partial: dict[str, dict] = {}
    ends, partial_ends = [], []
    delta_full = None

    def record(name: str, order: Sequence[Candidate]) -> tuple[dict, dict]:
        nonlocal delta_full
        oracle = Oracle(rankings_a, rankings_b, qrels)
        h, p = simulate(order, oracle)
        assert len(order) == pool_size and {(c.query_id, c.doc_id) for c in order} == pool_pairs, name
        ends.append(h[-1])
        partial_ends.append(p[-1])
        delta_full = h[-1] if delta_full is None else delta_full
        partial_counts = counts(p, delta_full)
        partial_counts["to_0.01_end"] = settled_at(p, lambda d: abs(d - p[-1]) <= TOLERANCE + 1e-12)
        return counts(h, delta_full), partial_counts

    pool_pairs = {(c.query_id, c.doc_id) for c in orders["pool"]}
    tops = {q: [top_ranks(ranking.get(q, ()), K) for ranking in both] for q in query_ids}

    def judged_change(c: Candidate, grades: Mapping[str, int], context: Context) -> float:
        """`next_to_judge`'s priority given the judgments so far (the queue re-made after each)."""
        weight = change_weight(c.ranks, judged_dcgs(tops[c.query_id], grades, K), grades.values(), K,
                               context.top_grade)
        return weight * discount(c.best_rank)

    oracle = Oracle(rankings_a, rankings_b, qrels)
    held["next"], partial["next"] = record("next", adaptive_order(orders["pool"], judged_change, oracle))
    held["next static (MTC order)"], partial["next static (MTC order)"] = record("next static", orders["next"])
    held["pool"], partial["pool"] = record("pool", orders["pool"])

    def median_of(name: str, per_seed: list[tuple[dict, dict]]) -> None:
        for table, index in ((held, 0), (partial, 1)):
            table[name] = {key: median_or_none([seed[index][key] for seed in per_seed])
                           for key in per_seed[0][index]}

    median_of("random", [record(f"random seed {s}", order)
                         for s, order in zip(RANDOM_SEEDS, orders["random"], strict=True)])
    # The query set's order is arbitrary: the pool's counts depend on it, next's only through ties.
    shuffled = []
    for seed in RANDOM_SEEDS:
        ids = list(query_ids)
        random.Random(seed).shuffle(ids)
        shuffled.append([{q: ranking[q] for q in ids} for ranking in both])
    median_of("next, queries shuffled",
              [record("next shuffled", adaptive_order(depth_pool(s, {}, depth=K), judged_change,
                                                      Oracle(rankings_a, rankings_b, qrels))) for s in shuffled])
    median_of("pool, queries shuffled", [record("pool shuffled", depth_pool(s, {}, depth=K)) for s in shuffled])
    if ablation:
        for name, (_, priority) in ABLATION.items():
            oracle = Oracle(rankings_a, rankings_b, qrels)
            order = adaptive_order(orders["pool"], priority, oracle)
            held[name], partial[name] = record(name, order)
    assert max(ends) - min(ends) < 1e-12, "every rule ends with every pool pair judged"
    extra = {"pool_size": pool_size, "zero_weight": sum(1 for c in orders["next"] if c.weight == 0),
             "delta_partial_end": round(partial_ends[0], 6)}
    return held, partial, extra, delta_full


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("beir_dir", nargs="?", type=Path, default=REPO.parent / "shared" / "eval" / "nfcorpus")
    parser.add_argument("--config-a", help="SearchConfig JSON file (default: BM25 alone)")
    parser.add_argument("--config-b", help="SearchConfig JSON file (default: the default hybrid)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--ablation", action="store_true", help="also run the refinements tried and not kept")
    args = parser.parse_args()
    folder = args.beir_dir
    if not folder.is_dir():
        sys.exit(f"{folder} is missing: give a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) as the "
                 "first argument; the default is ../shared/eval/nfcorpus beside the repository")
    started = time.perf_counter()
    workbench = Workbench(Store())
    from retrieval.search.saved_configs import ConfigStore

    configs = ConfigStore(workbench.store)
    config_a = configs.resolve(args.config_a)[0] if args.config_a else SearchConfig(weights={"bm25": 1.0})
    config_b = configs.resolve(args.config_b)[0] if args.config_b else SearchConfig()
    name, corpus = ensure_beir_collection(workbench.store, folder, log=lambda m: print(m, file=sys.stderr))
    # The judged queries with a text, in qrels order: the queries `evaluate_collection` scores.
    query_ids = [q for q in corpus.qrels if corpus.qrels[q] and q in corpus.queries]
    qrels = {q: corpus.qrels[q] for q in query_ids}
    texts = {q: corpus.queries[q] for q in query_ids}
    rankings_a, rankings_b = (fused_rankings(workbench, name, texts, config) for config in (config_a, config_b))
    # The library's own evaluation of the full qrels (ranx), which the simulation must end at.
    evaluator = QrelsEvaluator(qrels)
    means = [evaluator.evaluate_rankings(r, (METRIC,))[0][METRIC] for r in (rankings_a, rankings_b)]
    delta_library = means[1] - means[0]

    ranked = time.perf_counter()
    held, partial, extra, delta_full = run_rules(rankings_a, rankings_b, qrels, query_ids, args.ablation)
    pool_size = extra["pool_size"]
    assert abs(delta_full - delta_library) < 1e-9, (delta_full, delta_library)
    seconds = {"rank": round(ranked - started, 1), "simulate": round(time.perf_counter() - ranked, 1)}

    rules = {"next": "next", "next static (MTC order)": "next_static", "pool": "pool", "random": "random",
             "next, queries shuffled": "next_shuffled",
             "pool, queries shuffled": "pool_shuffled"}  # row: JSON key
    result = {**{key: held[rule] for rule, key in rules.items()}, "delta_full": round(delta_library, 6),
              "ndcg@10": {"a": round(means[0], 6), "b": round(means[1], 6)}, **extra,
              "queries": len(query_ids), "set": folder.name, "random_seeds": list(RANDOM_SEEDS),
              "partial_normaliser": {key: partial[rule] for rule, key in rules.items()}, "seconds": seconds}
    never = [f"{table} {rule} {key}" for table, rows in (("held", held), ("partial", partial))
             for rule, values in rows.items() for key in ("to_sign", "to_0.01") if values[key] is None]
    if never:
        result["note"] = (f"null: never reached within the whole pool ({pool_size} judgments): {', '.join(never)}; "
                          "with the partial normaliser the top 10s' judgments cannot give the full-qrels IDCG")
    if args.ablation:
        result["ablation"] = {rule: {"held": held[rule], "partial": partial[rule]}
                              for rule in held if rule not in rules}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    a_label = args.config_a or "BM25 alone"
    b_label = args.config_b or "default hybrid"
    print(f"judging benchmark: {folder.name}, {len(query_ids)} judged queries; A = {a_label} (nDCG@10 "
          f"{means[0]:.4f}), B = {b_label} ({means[1]:.4f}); full-qrels Δ = {delta_library:+.4f}; pool "
          f"(unjudged pairs of the two top 10s) {pool_size}, of which {extra['zero_weight']} weigh 0 (the same rank "
          f"in both); with the pool judged, Δ with the partial normaliser is {extra['delta_partial_end']:+.4f}")
    for title, table in (("normaliser from the revealed grades only (what the workbench computes)", partial),
                         ("normaliser held at the full-qrels IDCG@10 (an oracle: for comparison only)", held)):
        print(f"\n{title}")
        end = table is partial
        print(f"{'rule':<44} {'to_sign':>9} {'to_0.01':>9} {'of pool':>9} {'mean |Δ − Δ_full|':>18}"
              + (f" {'to 0.01 of the pool end':>24}" if end else ""))
        for rule, values in table.items():
            label = f"{rule} (median of 5 seeds)" if rule in ("random", *(r for r in rules if "," in r)) else rule
            cells = ["never" if values[key] is None else f"{values[key]:g}"
                     for key in ("to_sign", "to_0.01", *(("to_0.01_end",) if end else ()))]
            print(f"{label:<44} {cells[0]:>9} {cells[1]:>9} {pool_size:>9} {values['mean_error']:>18.4f}"
                  + (f" {cells[2]:>24}" if end else ""))
    if args.ablation:
        print("\nnext: p = w × 1/log2(1 + best rank), w the MTC weight |disc_A − disc_B|"
              " (retrieval/judging/judge_next.py)")
        for rule, (what, _) in ABLATION.items():
            print(f"{rule}: {what}")
    print(f"\nranking {seconds['rank']} s, simulation {seconds['simulate']} s")


if __name__ == "__main__":
    main()
