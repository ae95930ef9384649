"""Query rules measured on judged queries, and proposed from them.

    impact.py   each rule's effect: the set evaluated with each rule left out in turn, per rule its
                Δ with a bootstrap interval, its p and the queries it changes (`rule_impact`)
    suggest.py  rules proposed from the judgments (synonyms from vocabulary the relevant documents
                share and the query lacks; pins for navigational queries), each measured before
                it is accepted (`suggest_rules`)

Entry points: `rule_impact`, `suggest_rules`.
"""

from retrieval.rule_tuning.impact import ImpactReport, RuleImpact, rule_impact
from retrieval.rule_tuning.suggest import Suggestion, held_out, suggest_rules

__all__ = ["ImpactReport", "RuleImpact", "Suggestion", "held_out", "rule_impact", "suggest_rules"]
