"""Rule impact: what each rule of a set does to a judged query set.

The set is evaluated once whole; then for each rule, the set without it, on the queries the rule
fires on (no other query can change: a rule acts only where its input matches). Per rule:

    Δ(q)  = m(q | the whole set) − m(q | the set without the rule), for each query q it fires on
    Δ     = mean Δ(q) over those queries; the interval is the percentile bootstrap of that mean
            (`evaluation.paired.bootstrap_ci`), p the paired randomization test (`randomization_p`)
    Δ_all = Σ Δ(q) / (all judged queries): what it adds to the set's mean

A rule that fires on no judged query is "dead" (it cannot be measured here); one with Δ < 0 and an
interval wholly below 0 "hurts"; wholly above 0 "helps"; otherwise "unclear" (or "no effect" when it
changes no ranking). Rankings are the lean plan's (`evaluation.evaluate.ranked_lean`) on the
config's evaluation config (top-K = depth), as `evaluate` judges them; candidates are cached, so a
rule that does not rewrite a query (UP, PIN …) is measured without a re-query.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from retrieval.evaluation.evaluate import QrelsEvaluator, ranked_lean
from retrieval.evaluation.paired import bootstrap_ci, randomization_p
from retrieval.search.config import SearchConfig
from retrieval.search.plan import evaluation_config
from retrieval.search.rules import parse_rules, write_rules
from retrieval.types import RetrievalError


@dataclass
class RuleImpact:
    number: int
    input: str  # the rule's input as written ('"notebook"')
    line: int
    instructions: list[str]  # 'SYNONYM: laptop', …
    fires_on: list[str]  # judged query ids it fires on
    changed: list[str]  # of those, the queries whose ranking it changes
    delta: float = 0.0  # mean Δ over `fires_on`
    ci: tuple[float, float] = (0.0, 0.0)
    p: float = 1.0
    delta_all: float = 0.0  # its part of the set's mean over every judged query
    per_query: dict[str, float] = field(default_factory=dict)  # Δ(q) per query it fires on

    @property
    def verdict(self) -> str:
        if not self.fires_on:
            return "dead"
        if not self.changed:
            return "no effect"
        if self.ci[0] > 0:
            return "helps"
        if self.ci[1] < 0:
            return "hurts"
        return "unclear"


@dataclass
class ImpactReport:
    metric: str
    n_queries: int
    with_rules: float  # the metric's mean with the whole set
    without_rules: float  # and with no rules at all
    rules: list[RuleImpact]

    def to_json_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "n_queries": self.n_queries, "with_rules": self.with_rules,
                "without_rules": self.without_rules,
                "rules": [{"rule": r.number, "input": r.input, "line": r.line, "instructions": r.instructions,
                           "fires_on": r.fires_on, "changed": r.changed, "delta": r.delta, "ci": list(r.ci),
                           "p": r.p, "delta_all": r.delta_all, "verdict": r.verdict, "per_query": r.per_query}
                          for r in self.rules]}


def rule_impact(workbench, collection: str, queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]],
                config: SearchConfig, metric: str = "ndcg@10",
                progress: Callable[[int, int], None] | None = None) -> ImpactReport:
    """Each rule of `config.rules` measured on the judged `queries` (see the module docstring)."""
    if not config.rules:
        raise RetrievalError("The config has no rules to measure (give --rules FILE)")
    rules = parse_rules(config.rules)
    judged = [q for q in qrels if qrels[q] and q in queries]
    if not judged:
        raise RetrievalError("None of the judged queries has a query text")
    evaluator = QrelsEvaluator({q: qrels[q] for q in judged})
    base = evaluation_config(config)

    def rankings(cfg: SearchConfig, ids: list[str]) -> dict[str, list[str]]:
        ranked = ranked_lean(workbench, collection, [queries[q] for q in ids], cfg)
        return {q: fused for q, (_, fused) in zip(ids, ranked, strict=True)}

    def per_query(ranked: Mapping[str, list[str]]) -> dict[str, float]:
        return {q: values[metric] for q, values in evaluator.evaluate_rankings(ranked, [metric])[1].items()}

    full = rankings(base, judged)
    full_scores = per_query(full)
    bare = per_query({**full, **rankings(base.replace(rules=""), judged)})
    impacts = []
    for done, rule in enumerate(rules.rules, start=1):
        fires = [q for q in judged if any(m.rule.number == rule.number for m in rules.matches(queries[q]))]
        impact = RuleImpact(rule.number, rule.input_text, rule.line, _instruction_texts(rule), fires, [])
        if fires:
            without = rankings(base.replace(rules=write_rules(rules.without(rule.number))), fires)
            impact.changed = [q for q in fires if without[q] != full[q]]
            scores = per_query({**full, **without})
            deltas = [full_scores[q] - scores[q] for q in fires]
            impact.per_query = dict(zip(fires, deltas, strict=True))
            impact.delta = sum(deltas) / len(deltas)
            impact.delta_all = sum(deltas) / len(judged)
            impact.ci = bootstrap_ci(deltas) if impact.changed else (0.0, 0.0)
            impact.p = randomization_p(deltas)
        impacts.append(impact)
        if progress is not None:
            progress(done, len(rules))
    return ImpactReport(metric, len(judged), sum(full_scores.values()) / len(judged),
                        sum(bare.values()) / len(judged), impacts)


def _instruction_texts(rule) -> list[str]:
    return [f"{i.kind}{f'({i.weight:g})' if i.weight is not None else ''}{': ' + i.text if i.text else ''}"
            for i in rule.instructions]
