"""How far a metric can be trusted when the judgments have holes: unjudged documents in a top k
count as non-relevant in nDCG@k (trec_eval's rule), so a run that finds documents nobody judged
looks worse than it is, and a comparison of two runs can rest on what was never judged.

For a query q with judged documents J(q) (any grade, 0 included), R relevant (grade > 0) and N
judged non-relevant (grade ≤ 0; bpref: grade 0, see below), and a ranking d₁, d₂, …:

    judged@k   = |{d₁ … d_k} ∩ J(q)| / k                         the top k's judged share
    nDCG'@k    = nDCG@k of the condensed list: the ranking with the unjudged documents removed
                 (Sakai 2007), so holes do not count against it
    bpref      = 1/R · Σ over relevant retrieved r (1 − min(n_r, R) / min(R, N)), n_r the judged
                 non-relevant documents ranked above r (Buckley & Voorhees 2004); a term is 1 when
                 n_r = 0 (so with N = 0 bpref is the share of relevant documents retrieved);
                 unjudged documents are ignored, and so are documents with a negative grade: here
                 N counts grade 0 only (trec_eval's m_bpref.c, where a negative grade means
                 "unjudged"; ranx 0.3 counts them as non-relevant and gives NaN for N = 0).

Computed the usual way, every metric stays exactly as it is; these are shown beside it.

Whether holes can change a conclusion (`flip_check`): for configs A and B, complete the
judgments two ways — every unjudged document of either top k relevant (the judgments' highest
grade) where B ranks it above A (or only B has it in its top k) and non-relevant otherwise, which
favours B; and the mirror, which favours A — and compute Δ = mean(B) − mean(A) of the metric
under each. Each completion is a concrete set of judgments someone could give, so when either of
them reverses the sign of today's Δ, judging those documents can change the conclusion. Both are
tried whatever today's sign: a relevant document also raises its query's ideal DCG, so the
completion "favouring" A can help B (and the mirror). (They are
witnesses, not the extreme bounds over every completion.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from retrieval.evaluation.evaluate import Qrels, QrelsEvaluator

TRUST_K = 10


def judged_at(ranking: Sequence[str], judged: Iterable[str], k: int = TRUST_K) -> float:
    """|first k of `ranking` ∩ judged| / k."""
    judged = set(judged)
    return sum(1 for doc_id in ranking[:k] if doc_id in judged) / k


def condensed(ranking: Sequence[str], judged: Iterable[str]) -> list[str]:
    """`ranking` with the unjudged documents removed (order kept)."""
    judged = set(judged)
    return [doc_id for doc_id in ranking if doc_id in judged]


def bpref(ranking: Sequence[str], judgments: Mapping[str, int]) -> float:
    """trec_eval's bpref of one query (see the module docstring); 0 when nothing is relevant."""
    relevant = sum(1 for g in judgments.values() if g > 0)
    nonrelevant = sum(1 for g in judgments.values() if g == 0)
    if not relevant:
        return 0.0
    total, above = 0.0, 0
    for doc_id in dict.fromkeys(ranking):
        grade = judgments.get(doc_id)
        if grade is None or grade < 0:  # trec_eval: a negative grade is unjudged
            continue
        if grade > 0:
            total += 1.0 - min(above, relevant) / min(relevant, nonrelevant) if above else 1.0
        else:
            above += 1
    return total / relevant


def trust_metrics(rankings: Mapping[str, Sequence[str]], qrels: Qrels, k: int = TRUST_K
                  ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Means and per-query values of judged@k, nDCG'@k and bpref over the judged queries of
    `qrels` (a query the ranking left empty: 0)."""
    evaluator = QrelsEvaluator(qrels)
    names = (f"judged@{k}", f"ndcg'@{k}", "bpref")
    condensed_lists = {q: condensed(rankings.get(q, ()), evaluator.judged[q]) for q in evaluator.judged}
    _, ndcg = evaluator.evaluate_rankings(condensed_lists, (f"ndcg@{k}",))
    per_query = {q: {names[0]: judged_at(list(rankings.get(q, ())), evaluator.judged[q], k),
                     names[1]: ndcg[q][f"ndcg@{k}"], names[2]: bpref(rankings.get(q, ()), evaluator.judged[q])}
                 for q in evaluator.judged}
    means = {name: sum(v[name] for v in per_query.values()) / len(per_query) for name in names}
    return means, per_query


def completed(a: Mapping[str, Sequence[str]], b: Mapping[str, Sequence[str]], qrels: Qrels, favour: str,
              k: int = TRUST_K) -> dict[str, dict[str, int]]:
    """`qrels` with every unjudged document of A's or B's top k judged: relevant (the highest
    grade in `qrels`, at least 1) where the favoured run ranks it higher (a document outside a
    top k ranks after it), else 0. `favour` is "a" or "b"."""
    top = max((g for docs in qrels.values() for g in docs.values()), default=1)
    grade = max(top, 1)
    out: dict[str, dict[str, int]] = {}
    for q, judged in qrels.items():
        if not judged:
            continue
        rank_a = {d: i for i, d in enumerate(list(a.get(q, ()))[:k])}
        rank_b = {d: i for i, d in enumerate(list(b.get(q, ()))[:k])}
        favoured, other = (rank_b, rank_a) if favour == "b" else (rank_a, rank_b)
        docs = dict(judged)
        for d in dict.fromkeys([*rank_a, *rank_b]):
            if d not in judged:
                docs[d] = grade if favoured.get(d, k) < other.get(d, k) else 0
        out[q] = docs
    return out


@dataclass(frozen=True)
class FlipCheck:
    metric: str
    delta: float  # mean(B) − mean(A) under today's judgments
    delta_favouring_b: float  # under the completion that favours B
    delta_favouring_a: float  # under the completion that favours A
    unjudged: int  # (query, document) pairs of either top k without a judgment

    @property
    def can_flip(self) -> bool:
        """Whether either completion reverses (or, from a tie, breaks) today's sign of Δ. Both are
        tried whatever Δ's sign: judging relevant a document one run ranks higher also raises the
        query's ideal DCG, which can help the other run, so the completion favouring A can move Δ
        towards B (and the mirror)."""
        completions = (self.delta_favouring_a, self.delta_favouring_b)
        if self.delta > 0:
            return any(d < 0 for d in completions)
        if self.delta < 0:
            return any(d > 0 for d in completions)
        return any(d != 0 for d in completions)

    def sentence(self) -> str:
        """The check for a person (Δ of `metric`)."""
        if not self.unjudged:
            return "Every document in both top 10s is judged: the holes cannot change this comparison."
        if not self.can_flip:
            return (f"{self.unjudged} (query, document) pairs in the two top 10s are unjudged, but neither way of "
                    f"judging them tried reverses the result ({self.metric} Δ stays between "
                    f"{min(self.delta_favouring_a, self.delta_favouring_b):+.4f} and "
                    f"{max(self.delta_favouring_a, self.delta_favouring_b):+.4f}).")
        return (f"Unjudged documents could change this conclusion: {self.unjudged} (query, document) pairs in the "
                f"two top 10s have no judgment; judged in B's favour {self.metric} Δ would be "
                f"{self.delta_favouring_b:+.4f}, in A's favour {self.delta_favouring_a:+.4f}. Judge them before "
                "trusting the difference.")


def flip_check(a: Mapping[str, Sequence[str]], b: Mapping[str, Sequence[str]], qrels: Qrels,
               metric: str = "ndcg@10", k: int = TRUST_K) -> FlipCheck:
    """Today's Δ of `metric` and Δ under the two completions of the module docstring."""
    def delta(judgments: Mapping[str, Mapping[str, int]]) -> float:
        evaluator = QrelsEvaluator(judgments)
        mean_a, _ = evaluator.evaluate_rankings(a, (metric,))
        mean_b, _ = evaluator.evaluate_rankings(b, (metric,))
        return mean_b[metric] - mean_a[metric]

    judged = {q: docs for q, docs in qrels.items() if docs}
    unjudged = sum(1 for q, docs in judged.items()
                   for d in dict.fromkeys([*list(a.get(q, ()))[:k], *list(b.get(q, ()))[:k]]) if d not in docs)
    return FlipCheck(metric, delta(judged), delta(completed(a, b, judged, "b", k)),
                     delta(completed(a, b, judged, "a", k)), unjudged)


def judgment_trust(run_a: Mapping[str, Mapping[str, float]], run_b: Mapping[str, Mapping[str, float]], qrels: Qrels,
                   metric: str = "ndcg@10") -> dict:
    """Beside an A/B result (the Evaluate page's, the MCP server's `compare_configs`): each run's
    judged@10, nDCG'@10 and bpref (`trust_metrics`), and whether judging the unjudged documents of
    the two top 10s could reverse it (`flip_check` on `metric`, or nDCG@10 for a metric not cut at 10).
    Runs are `evaluate.Run`s (doc id -> score, best highest)."""
    a, b = ({q: sorted(docs, key=docs.get, reverse=True) for q, docs in run.items()} for run in (run_a, run_b))
    return {"A": trust_metrics(a, qrels)[0], "B": trust_metrics(b, qrels)[0],
            "flip": flip_check(a, b, qrels, metric if metric.endswith(f"@{TRUST_K}") else "ndcg@10")}
