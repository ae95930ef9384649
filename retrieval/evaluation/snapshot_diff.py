"""Did search get better between two snapshots, and why: the diff of their per-query metrics.

For a metric m and the queries judged in both snapshots (paired; a query judged in only one is
counted, not compared), δᵢ = m_B(qᵢ) − m_A(qᵢ):

- each side's mean with a 95 % percentile bootstrap interval, and Δ = mean(δ) with its own;
- p-values of the paired randomization test (the headline `p_value`) and of the paired t-test
  (`paired.py`); with more than two snapshots (`diff_many`) each against the first, Holm-adjusted;
- winners (δ > 0, largest first) and losers (δ < 0, largest fall first);
- causes: which of config, corpus (table version), encoder (the backend of the query vectors,
  when both snapshots record it) and judgments differ, and each one's share of Δ:
  Shapley values (`shapley`, below) over the changed factors, so the shares add up to Δ exactly.
  Every mix f(S) — the factors in S taken from B, the others from A — is a run scored with one
  snapshot's judgments. A snapshot keeps its run and its judgments, so mixes of judgments need no
  search; when config and corpus both changed, two runs are searched: B's config on A's table
  version and A's config on B's (time travel, `snapshots.rerun_at`; 2ⁿ ≤ 8 mixes, each run
  cached). Without them (no search allowed, or A's version compacted away) config and corpus share
  one factor, "config+corpus", and the diff's notes say why. A re-run can only use this process's
  encoder, so an encoder change is never split from a config or corpus change (one factor,
  "config+encoder" …). Per query too.

Which change moved a metric (`shapley`): a snapshot pair can differ in several factors at once
(the config, the corpus version, the judgments). Evaluate every mix, f(S) = the metric with the
factors in S taken from the new snapshot and the others from the old one (2ⁿ evaluations, n ≤ 3:
at most 8). Factor i's share is its Shapley value

    φᵢ = Σ_{S ⊆ N∖{i}} |S|! (n − |S| − 1)! / n! · (f(S ∪ {i}) − f(S)),

its marginal effect averaged over every order of switching the factors from old to new. The shares
add up to the whole change: Σᵢ φᵢ = f(N) − f(∅) (efficiency), a factor that changes nothing gets
0, and with one factor φ = f(N) − f(∅).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from math import factorial

import numpy as np

from retrieval.evaluation.compare import rank_changes
from retrieval.evaluation.paired import bootstrap_ci, holm, p_text, randomization_p, t_test_p
from retrieval.evaluation.snapshots import SNAPSHOT_METRICS, Rerun, Snapshot, score_rankings
from retrieval.models.embed import backend_for
from retrieval.types import RetrievalError

JUDGMENTS = "judgments"


ENCODER = "encoder"
RETRIEVAL = ("config", "corpus", ENCODER)  # the factors that change the run (judgments only score it)


def changed_factors(a: Snapshot, b: Snapshot) -> dict[str, bool]:
    return {"config": a.config.to_dict() != b.config.to_dict(), "corpus": a.table_version != b.table_version
            or a.doc_count != b.doc_count,
            ENCODER: a.encoders is not None and b.encoders is not None and a.encoders != b.encoders,
            JUDGMENTS: a.judgments_key != b.judgments_key}


def retrieval_label(changed: dict[str, bool]) -> str | None:
    parts = [f for f in RETRIEVAL if changed[f]]
    return "+".join(parts) or None


def encoders_text(encoders: Mapping[str, str]) -> str:
    return ", ".join(f"{model} on {backend}" for model, backend in sorted(encoders.items())) or "none"


def encoder_notes(a: Snapshot, b: Snapshot) -> list[str]:
    """What the diff says of the query encoders: which backends changed, or that one snapshot does
    not record them while the other's ran on something other than torch (the backend of every
    snapshot taken before they were recorded, unless $WORKBENCH_ENCODER_BACKEND said otherwise)."""
    if a.encoders is not None and b.encoders is not None:
        if a.encoders == b.encoders:
            return []
        return [f"the query vectors came from other encoder backends ({a.name!r}: {encoders_text(a.encoders)}; "
                f"{b.name!r}: {encoders_text(b.encoders)})"]
    known = a if a.encoders is not None else b if b.encoders is not None else None
    unknown = b if known is a else a
    if known is None or set(known.encoders.values()) <= {"torch"}:
        return []
    return [f"{unknown.name!r} does not record its query encoder backend (taken before snapshots did: torch, "
            f"unless $WORKBENCH_ENCODER_BACKEND was set); {known.name!r}'s: {encoders_text(known.encoders)}; "
            "a change of backend would be part of Δ, not told apart"]


def paired_queries(a: Snapshot, b: Snapshot) -> list[str]:
    """The queries judged in both, in A's order; a clear error when the two cannot be paired."""
    if a.collection != b.collection:
        raise RetrievalError(f"Snapshots {a.name!r} and {b.name!r} are of different collections "
                             f"({a.collection!r}, {b.collection!r}); compare snapshots of one collection")
    if a.query_set != b.query_set:
        raise RetrievalError(f"Snapshots {a.name!r} and {b.name!r} evaluated different query sets "
                             f"({a.query_set!r}, {b.query_set!r}); compare snapshots of one query set")
    common = [q for q in a.per_query if q in b.per_query]
    if not common:
        raise RetrievalError(f"Snapshots {a.name!r} and {b.name!r} have no judged query in common")
    return common


def causes_of(a: Snapshot, b: Snapshot, common: list[str], metric: str, deltas: dict[str, float], total: float,
              rerun: Rerun | None = None) -> tuple[dict[str, float], dict[str, dict[str, float]], list[str]]:
    """Each changed factor's share of the mean Δ (`total`) and of each query's δ, and notes (see
    the module docstring). One factor changed: all of it is that factor's. Config and corpus both
    changed: split with `rerun` (A's config on B's version, B's config on A's), else — no `rerun`,
    or A's version compacted away — one "config+corpus" share, and a note says why."""
    changed = changed_factors(a, b)
    notes: list[str] = encoder_notes(a, b)
    retrieval = [f for f in RETRIEVAL if changed[f]]
    # The run of each mix of the retrieval factors taken from B (A's run: none of them).
    reruns: dict[frozenset, Mapping[str, Sequence[str]]] = {frozenset(): a.rankings}
    if retrieval:
        reruns[frozenset(retrieval)] = b.rankings
    if len(retrieval) > 1 and changed[ENCODER]:
        notes.append(f"{' and '.join(retrieval)} not told apart (a re-run can only use this process's encoder)")
        label = retrieval_label(changed)
        retrieval, reruns = [label], {frozenset(): a.rankings, frozenset({label}): b.rankings}
    elif len(retrieval) == 2:
        try:
            if rerun is None:
                raise RetrievalError("no search was allowed")
            # both snapshots' query encoders are the same here; a re-run must use them too
            now = {m: backend_for(m) for m in a.encoders or {}}
            moved = {m: backend for m, backend in now.items() if backend != a.encoders[m]}
            if moved:
                raise RetrievalError(f"this process encodes queries with {encoders_text(moved)}, "
                                     f"the snapshots with {encoders_text(a.encoders)}")
            queries = {q: b.queries.get(q, a.queries.get(q, "")) for q in common}
            reruns[frozenset({"config"})] = rerun(b.config, a.table_version, queries)
            reruns[frozenset({"corpus"})] = rerun(a.config, b.table_version, queries)
        except RetrievalError as exc:
            notes.append(f"config and corpus not told apart (re-running one config on the other version: {exc})")
            label = retrieval_label(changed)
            retrieval, reruns = [label], {frozenset(): a.rankings, frozenset({label}): b.rankings}
    factors = [*retrieval, *([JUDGMENTS] if changed[JUDGMENTS] else [])]
    if len(factors) <= 1:
        return (dict.fromkeys(factors, total), {q: dict.fromkeys(factors, deltas[q]) for q in common}, notes)

    def per_query(mix: frozenset) -> dict[str, float]:
        if not mix:
            return {q: a.per_query[q][metric] for q in common}
        if mix == frozenset(factors):
            return {q: b.per_query[q][metric] for q in common}
        qrels_from = b if JUDGMENTS in mix else a
        rankings = reruns[mix - {JUDGMENTS}]
        values = score_rankings({q: rankings.get(q, ()) for q in common}, {q: qrels_from.qrels[q] for q in common})
        return {q: values[q][metric] for q in common}

    mixes = {mix: per_query(mix) for mix in subsets(factors)}  # 2ⁿ ≤ 8 evaluations, 2 of them searches
    mean = shapley(factors, {s: float(np.mean([v[q] for q in common])) for s, v in mixes.items()})
    return mean, {q: shapley(factors, {s: v[q] for s, v in mixes.items()}) for q in common}, notes


def diff(a: Snapshot, b: Snapshot, metric: str = "ndcg@10", n_permutations: int = 10_000, seed: int = 42,
         top: int = 10, rerun: Rerun | None = None) -> dict:
    """B against A on `metric` (see the module docstring), as plain JSON values. `rerun` (see
    `causes_of`; `snapshots.rerun_at`) lets config and corpus changes be told apart."""
    if metric not in SNAPSHOT_METRICS:
        raise RetrievalError(f"metric must be one of {', '.join(SNAPSHOT_METRICS)}, got {metric!r}")
    a.check_metrics((metric,))
    b.check_metrics((metric,))
    common = paired_queries(a, b)
    va = np.array([a.per_query[q][metric] for q in common])
    vb = np.array([b.per_query[q][metric] for q in common])
    deltas = dict(zip(common, (vb - va).tolist(), strict=True))
    total = float(vb.mean() - va.mean())
    causes, query_causes, notes = causes_of(a, b, common, metric, deltas, total, rerun)

    def entry(q: str) -> dict:
        return {"query_id": q, "query": b.queries.get(q, a.queries.get(q, "")), "a": a.per_query[q][metric],
                "b": b.per_query[q][metric], "delta": deltas[q], "causes": query_causes[q]}

    winners = sorted((q for q in common if deltas[q] > 0), key=lambda q: (-deltas[q], q))
    losers = sorted((q for q in common if deltas[q] < 0), key=lambda q: (deltas[q], q))
    changed = changed_factors(a, b)
    return {
        "metric": metric,
        "a": {"name": a.name, "value": float(va.mean()), "ci95": list(bootstrap_ci(va, seed=seed))},
        "b": {"name": b.name, "value": float(vb.mean()), "ci95": list(bootstrap_ci(vb, seed=seed))},
        "delta": total,
        "delta_ci95": list(bootstrap_ci(vb - va, seed=seed)),
        "p_value": randomization_p(vb - va, n_permutations, seed),
        "t_test_p": t_test_p(va, vb),  # None: not enough queries
        "n_queries": len(common),
        "only_in_a": sum(1 for q in a.per_query if q not in b.per_query),
        "only_in_b": sum(1 for q in b.per_query if q not in a.per_query),
        "wins": len(winners), "losses": len(losers), "ties": len(common) - len(winners) - len(losers),
        "winners": [entry(q) for q in winners[:top]],
        "losers": [entry(q) for q in losers[:top]],
        "changed": [f for f, yes in changed.items() if yes],
        "causes": causes,
        "notes": notes,
    }


def result_lists(a: Snapshot, b: Snapshot, query_id: str, k: int = 10) -> tuple[list[dict], list[dict]]:
    """A query's top `k` in each snapshot, as rows: rank, document, its grade in that snapshot's
    judgments (None: unjudged), and on B's side the move against A (`compare.rank_changes` label:
    ▲ up, ▼ down, = same, new)."""
    a_ids = [doc_id for doc_id, _ in a.run.get(query_id, [])[:k]]
    b_ids = [doc_id for doc_id, _ in b.run.get(query_id, [])[:k]]
    changes = {c.doc_id: c.label for c in rank_changes(a_ids, b_ids)}

    def rows(snap: Snapshot, ids: list[str], with_change: bool) -> list[dict]:
        grades = snap.qrels.get(query_id, {})
        return [{"rank": i, "document": doc_id, "grade": grades.get(doc_id),
                 **({"change": changes[doc_id]} if with_change else {})} for i, doc_id in enumerate(ids, start=1)]

    return rows(a, a_ids, False), rows(b, b_ids, True)


def summary(d: dict) -> str:
    """One line for a person: the values, Δ with its interval, p (and Holm's when several)."""
    holm_p = f", Holm-adjusted {p_text(d['p_holm'])}" if "p_holm" in d else ""
    return (f"{d['metric']}: {d['a']['name']} {d['a']['value']:.4f} → {d['b']['name']} {d['b']['value']:.4f} "
            f"(Δ {d['delta']:+.4f}, 95 % CI {d['delta_ci95'][0]:+.4f} … {d['delta_ci95'][1]:+.4f}, "
            f"{p_text(d['p_value'])}{holm_p}) over {d['n_queries']} queries; {d['wins']} better, {d['losses']} worse")


def diff_many(snapshots: Sequence[Snapshot], metric: str = "ndcg@10", n_permutations: int = 10_000,
              seed: int = 42, rerun: Rerun | None = None) -> list[dict]:
    """Each snapshot after the first against the first (`diff`), with Holm-adjusted p-values
    (`p_holm`) over the comparisons."""
    if len(snapshots) < 2:
        raise RetrievalError("A diff needs at least two snapshots")
    diffs = [diff(snapshots[0], other, metric, n_permutations, seed, rerun=rerun) for other in snapshots[1:]]
    for d, adjusted in zip(diffs, holm([d["p_value"] for d in diffs]), strict=True):
        d["p_holm"] = adjusted
    return diffs


def subsets(factors: Sequence[str]) -> list[frozenset[str]]:
    """Every subset of `factors`, smallest first: the mixes to evaluate."""
    return [frozenset(c) for size in range(len(factors) + 1) for c in combinations(factors, size)]


def shapley(factors: Sequence[str], value: Mapping[frozenset[str], float] | Callable[[frozenset[str]], float]
            ) -> dict[str, float]:
    """φ for each factor (see the module docstring); `value` gives f(S) for every subset S."""
    factors = list(dict.fromkeys(factors))
    if not factors:
        return {}
    f = value if callable(value) else value.__getitem__
    try:
        values = {s: float(f(s)) for s in subsets(factors)}
    except KeyError as exc:
        raise RetrievalError(f"Shapley values need the metric for every mix of {factors}; missing {exc}") from exc
    n = len(factors)
    shares = {}
    for factor in factors:
        others = [x for x in factors if x != factor]
        total = 0.0
        for s in subsets(others):
            weight = factorial(len(s)) * factorial(n - len(s) - 1) / factorial(n)
            total += weight * (values[s | {factor}] - values[s])
        shares[factor] = total
    return shares
