"""The ranking metrics, computed for every judged query at once with numpy (trec_eval's definitions).

For a query with graded judgments g(d) (integers) and a ranking d₁, d₂, …, dₙ (best first, no
repeats), a document is relevant when g(d) ≥ 1; R is the number of relevant documents, the gain
of d is g(d) when relevant and 0 otherwise (linear gain), and a cut k looks at the first
n_k = min(k, n) documents (a metric named without '@k' looks at all n):

- ndcg@k = DCG@k / IDCG@k, DCG@k = Σ_{i ≤ n_k} gain(dᵢ) / log₂(i + 1), IDCG@k the same over the
  relevant grades sorted descending (at most k of them); an IDCG of 0 counts as 1, so a query with
  nothing relevant scores 0 (Järvelin & Kekäläinen, "Cumulated gain-based evaluation of IR
  techniques", ACM TOIS 20(4), 2002; the linear-gain form of trec_eval's ndcg_cut);
- mrr@k = 1 / i of the first relevant dᵢ with i ≤ n_k, 0 if none (trec_eval's recip_rank on the
  ranking cut at k; Voorhees, "The TREC-8 question answering track report", 1999);
- recall@k = |relevant among d₁ … d_{n_k}| / R (0 when R = 0) (trec_eval's recall_k);
- precision@k = |relevant among d₁ … d_{n_k}| / k: missing results count as misses (trec_eval's
  P_k); without a cut, / n (0 when n = 0);
- map@k = (1/R) · Σ_{i ≤ n_k, dᵢ relevant} precision@i (0 when R = 0) (trec_eval's map when
  uncut; Buckley & Voorhees, "Evaluating evaluation measure stability", SIGIR 2000).

A judged query with nothing retrieved scores 0 on every metric.

The values equal ranx 0.3's to the bit (its metric functions are what the project used before;
`tests/evaluation/test_metrics.py` checks both on graded random cases), and trec_eval's
(pytrec_eval) to 1e-6 (`tests/evaluation/test_evaluate.py`): each sum is taken left to right as
ranx's compiled loops take it (`np.cumsum`, never numpy's pairwise `sum`), each term the same
quotient. Being numpy alone, a process's first evaluation waits for no import of ranx and
numba and no compilation of numba's typed containers (about a third of a first evaluation of the
bundled sample: docs/experiments/speed.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import suppress

import numpy as np

from retrieval.types import RetrievalError

FAMILIES = ("ndcg", "mrr", "recall", "precision", "map")


def parse_metric(name: str) -> tuple[str, int]:
    """'ndcg@10' → ('ndcg', 10), 'map' → ('map', 0): a metric's family and its cut (0: none)."""
    family, at, cut = name.partition("@")
    if family not in FAMILIES or (at and not (cut.isascii() and cut.isdigit() and int(cut) >= 1)):
        raise RetrievalError(f"Unknown metric {name!r}: one of {', '.join(FAMILIES)}, each with an optional "
                             "cut @k (k ≥ 1), e.g. ndcg@10")
    return family, int(cut) if at else 0


def _discounts(width: int) -> np.ndarray:
    """log₂(i + 1) for ranks i = 1 … width (ranx's expression, so each DCG term is its quotient)."""
    return np.log2(np.arange(1, width + 1) + 1)


class JudgedQueries:
    """The judgments of a fixed list of queries, prepared once to score many rankings (a sweep
    scores 100+): each query's relevant grades, R and its ideal DCG at every cut."""

    def __init__(self, judgments: Sequence[Mapping[str, int]]):
        self.grades = [{doc: int(g) for doc, g in judged.items() if int(g) >= 1} for judged in judgments]
        self.relevant = np.array([len(grades) for grades in self.grades], dtype=np.float64)
        width = max(1, *(len(grades) for grades in self.grades)) if self.grades else 1
        ideal = np.zeros((len(self.grades), width), dtype=np.float64)
        for row, grades in enumerate(self.grades):
            ideal[row, :len(grades)] = sorted(grades.values(), reverse=True)
        self._ideal = np.cumsum(ideal / _discounts(width), axis=1)  # IDCG at cut 1 … width

    def idcg(self, k: int) -> np.ndarray:
        """Each query's IDCG@k (k = 0: uncut); cuts past R add only zeros."""
        width = self._ideal.shape[1]
        return self._ideal[:, min(k, width) - 1 if k else width - 1]

    def gains(self, rankings: Sequence[Sequence[str]], width: int) -> np.ndarray:
        """(queries, width): the gain of each query's document at rank 1 … width (0 past its end)."""
        out = np.zeros((len(self.grades), width), dtype=np.float64)
        for row, (ranking, grades) in enumerate(zip(rankings, self.grades, strict=True)):
            if not grades or not ranking:
                continue
            head = ranking[:width]
            if len(grades) > 8:
                out[row, :len(head)] = [grades.get(doc, 0) for doc in head]
                continue
            for doc, grade in grades.items():  # a few relevant documents: each found by a scan at C speed
                with suppress(ValueError):
                    out[row, head.index(doc)] = grade
        return out

    def score(self, rankings: Sequence[Sequence[str]], metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """metric → each query's value (see the module doc), `rankings` in this object's query
        order, each a list of document ids best first without repeats."""
        parsed = {m: parse_metric(m) for m in metrics}
        lengths = np.array([len(r) for r in rankings], dtype=np.int64)
        longest = int(lengths.max()) if len(lengths) else 0
        width = max(1, min(longest, max((k or longest for _, k in parsed.values()), default=1)))
        rankings = [r if isinstance(r, list) else list(r) for r in rankings]
        gains = self.gains(rankings, width)
        ranks = np.arange(width)
        relevant = self.relevant
        out: dict[str, np.ndarray] = {}
        for name, (family, k) in parsed.items():
            inside = ranks[None, :] < (np.minimum(lengths, k) if k else lengths)[:, None]
            hits = (gains > 0) & inside
            if family == "ndcg":
                dcg = np.cumsum(np.where(inside, gains / _discounts(width), 0.0), axis=1)[:, -1]
                idcg = self.idcg(k)
                out[name] = dcg / np.where(idcg == 0.0, 1.0, idcg)
            elif family == "mrr":
                out[name] = np.where(hits.any(axis=1), 1.0 / (hits.argmax(axis=1) + 1), 0.0)
            elif family == "recall":
                out[name] = _ratio(hits.sum(axis=1), relevant)
            elif family == "precision":
                out[name] = _ratio(hits.sum(axis=1), np.full(len(lengths), k) if k else lengths)
            else:  # map
                precisions = np.where(hits, np.cumsum(hits, axis=1) / (ranks + 1), 0.0)
                out[name] = _ratio(np.cumsum(precisions, axis=1)[:, -1], relevant)
        return out


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0."""
    out = np.zeros(len(numerator), dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out
